/* nftables inside a router network namespace, programmed over netlink with
 * libmnl + libnftnl (no `nft` binary). Everything lives in one table,
 * `inet paddock`, of the ROUTER netns only: nothing here touches the host's
 * rule set or any other table.
 *
 * Layout (per router):
 *   chain forward     hook forward, policy drop:
 *                     iifname vmap @sbmap (jump to the sandbox's chain),
 *                     oifname vmap @sbmap_in (download limit),
 *                     ct state established,related accept, counted drop
 *   chain input       hook input: from a sandbox veth only DNS (53) and the
 *                     strict proxy port reach the router; rest counted drop
 *   chain prerouting  nat: iifname vmap @natmap (strict-mode redirect)
 *   chain postrouting nat: oifname <uplink> masquerade
 *   sets open_deny4 / open_deny6: what `open` never reaches (metadata,
 *                     loopback, link-local, RFC1918, CGNAT, ULA, the
 *                     server's own addresses)
 *   sets hard4 / hard6: what no rule opens (the host's own addresses
 *                     behind a user-mode uplink), dropped in forward
 *                     before any sandbox chain
 * Per sandbox (key = sandbox id):
 *   chain guard       hook prerouting (filter, -300): a packet from a
 *                     sandbox veth must carry that sandbox's address
 *                     (set src4ok: ifname . ipv4_addr); IPv6 from a
 *                     sandbox is dropped (no IPv6 on sandbox veths yet)
 *   chain sb_<key>    bandwidth limit, established accept, new-connection
 *                     limit, then: @pin accept, @deny drop, @lift accept,
 *                     @open_deny drop, (open: DNS 53/853 drop, accept),
 *                     @allow accept, counted drop
 *   sets  pin4_/pin6_<key>   addr . proto . port, interval + timeout:
 *                            addresses the resolver answered (pd_nft_pin)
 *         a4_/a6_<key>, d4_/d6_<key>  addr . proto . port intervals
 *                            from allow and deny CIDR rules; l4_/l6_<key>
 *                            the allow CIDRs that lie inside an open_deny
 *                            range (only those lift it: allow 0.0.0.0/0
 *                            does not open metadata or the LAN)
 * Order of verdicts: a pinned address (a domain the policy allows, which the
 * resolver decided may be pinned) wins over a deny CIDR; deny CIDRs win over
 * allow CIDRs; an allow CIDR inside an open_deny range wins over it; the
 * open_deny ranges apply in every mode.
 * The resolver (paddock-netd) must therefore only pin what the policy allows
 * after applying deny rules (policy.h decides; nft only enforces). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "lib/error.h"

#define PD_NFT_TABLE "paddock"
#define PD_NFT_KEY_MAX 64               /* sandbox key (id) length */
#define PD_NFT_MAX_ENTRIES 100000       /* CIDR entries per sandbox */
#define PD_NFT_OPEN_DENY_MAX 256

enum pd_nft_mode {
        PD_NFT_MODE_POLICY = 0,         /* only what rules allow */
        PD_NFT_MODE_OPEN = 1,           /* public internet minus open_deny */
};

/* One CIDR rule, already split per protocol by the caller's policy code.
 * proto: IPPROTO_TCP, IPPROTO_UDP, or 0 = both (two set elements). */
struct pd_nft_cidr {
        int family;                     /* AF_INET or AF_INET6 */
        uint8_t addr[16];               /* network byte order; v4 in [0..3] */
        uint8_t prefix;                 /* 0..32 or 0..128 */
        uint8_t proto;
        uint16_t port_lo, port_hi;      /* host order; 0..65535 = any */
};

/* What a sandbox may reach, applied atomically by pd_nft_sandbox_apply. */
struct pd_nft_rules {
        enum pd_nft_mode mode;
        const struct pd_nft_cidr *allow;
        size_t n_allow;
        const struct pd_nft_cidr *deny;
        size_t n_deny;
        /* strict mode: tcp 80 and 443 from the sandbox are redirected to
         * this port of the router (paddock-netd's Host/SNI proxy); 0 = off */
        uint16_t strict_port;
        uint32_t conn_per_sec;          /* new connections/s, 0 = no limit */
        uint64_t bytes_per_sec;         /* each direction, 0 = no limit */
        /* the open_deny list (same as the router's): an allow CIDR inside
         * one of these goes to the lift set */
        const struct pd_nft_cidr *never;
        size_t n_never;
};

/* An address the resolver answered for an allowed name, reachable for
 * ttl_s seconds (clamped to [1, 86400]). Same fields as a CIDR rule with a
 * full-length prefix. */
struct pd_nft_pin {
        int family;
        uint8_t addr[16];
        uint8_t proto;                  /* 0 = tcp and udp */
        uint16_t port_lo, port_hi;
        uint32_t ttl_s;
};

/* Router-wide settings for pd_nft_router_init. */
struct pd_nft_router_cfg {
        const char *uplink_ifname;      /* masquerade out of it; NULL = none */
        /* what no sandbox reaches unless an allow CIDR inside it says so:
         * the built-in list (policy.h) plus the server's own addresses and
         * the uplink's gateway; at most PD_NFT_OPEN_DENY_MAX */
        const struct pd_nft_cidr *open_deny;
        size_t n_open_deny;
        /* what no sandbox reaches even with an allow rule for it: the
         * host's own addresses behind a user-mode uplink (whose sockets
         * would reach the host's services); at most PD_NFT_OPEN_DENY_MAX */
        const struct pd_nft_cidr *hard_deny;
        size_t n_hard_deny;
        uint16_t dns_port;              /* router port sandboxes may query (53) */
        uint16_t proxy_port;            /* strict proxy port, 0 = none */
        /* the socket-level TCP relay (relay.h, nft_relay.c): new TCP
         * connections are judged in prerouting, held in this NFQUEUE
         * queue until the relay's own connect answers, then redirected to
         * this port of the router; 0 = off (TCP takes the packet path) */
        uint16_t relay_port, relay_queue;
};

struct pd_nft;  /* a NETLINK_NETFILTER socket bound to one netns */

/* Open a socket in the netns of netns_fd (-1 = the caller's current netns;
 * paddock-netd runs inside the router netns and passes -1). Thread-safe:
 * only the calling thread enters the netns, and returns before this does. */
int pd_nft_open(int netns_fd, struct pd_nft **out, struct pd_error *err);
void pd_nft_close(struct pd_nft *n);

/* Create (or re-create from scratch) table inet paddock with the base
 * chains, maps and open_deny sets. One batch. */
int pd_nft_router_init(struct pd_nft *n, const struct pd_nft_router_cfg *cfg,
                       struct pd_error *err);
/* The table of a user-mode uplink's netns (nft_uplink.c): segments from
 * the router's veth there (rt_ifname) of TCP connections it does not know
 * get a reset; for pasta, retransmitted SYNs are dropped and its resets
 * (from tap_ifname) get their ACK flag; for slirp4netns, a masquerade out
 * of the tap. */
int pd_nft_uplink_init(struct pd_nft *n, const char *rt_ifname, const char *tap_ifname, bool pasta,
                       struct pd_error *err);
/* Delete the whole table (router teardown). Missing table is not an error. */
int pd_nft_router_fini(struct pd_nft *n, struct pd_error *err);

/* Add a sandbox whose veth peer in the router is ifname, with its rules.
 * One batch: chains, sets, elements, map entries; all or nothing. */
int pd_nft_sandbox_add(struct pd_nft *n, const char *key, const char *ifname,
                       const uint8_t src4[4], const struct pd_nft_rules *rules,
                       struct pd_error *err);
/* Replace a sandbox's rules atomically (live policy change). Pins are kept
 * unless flush_pins; new connections see the new rules, established ones
 * stay. */
int pd_nft_sandbox_apply(struct pd_nft *n, const char *key, const char *ifname,
                         const struct pd_nft_rules *rules, bool flush_pins,
                         struct pd_error *err);
/* The sandbox behind ifname speaks IPv6 from src6 (add) or no longer
 * (remove; missing is not an error): the guard's src6ok set. */
int pd_nft_sandbox_src6(struct pd_nft *n, const char *ifname, const uint8_t src6[16], bool add,
                        struct pd_error *err);
/* Remove a sandbox's chains, sets and map entries. Missing is not an error. */
int pd_nft_sandbox_del(struct pd_nft *n, const char *key, const char *ifname,
                       const uint8_t src4[4], struct pd_error *err);

/* Add pinned addresses (called by paddock-netd for each A/AAAA answer).
 * Re-pinning an address refreshes its timeout. One batch for all pins. */
int pd_nft_pin(struct pd_nft *n, const char *key, const struct pd_nft_pin *pins,
               size_t n_pins, struct pd_error *err);
/* Remove all pins of a sandbox. */
int pd_nft_unpin_all(struct pd_nft *n, const char *key, struct pd_error *err);

/* What the kernel dropped for a sandbox so far (the counters of the drop
 * rules of its chain: denies, never list, limits, everything else). */
int pd_nft_dropped(struct pd_nft *n, const char *key, uint64_t *packets, uint64_t *bytes,
                   struct pd_error *err);

/* Kernel drops of a sandbox reach paddock-netd's audit through
 * nfnetlink_log: each drop rule jumps to a chain lg<n>_<key> that logs to
 * this group with the prefix "pd:<key>:<kind>" while under
 * PD_NFT_LOG_RATE packets/s (burst PD_NFT_LOG_BURST, per sandbox and
 * kind), then drops; past the limit it only drops (counted). Kinds:
 * "rate" (new connections over the limit), "deny" (a deny rule), "never"
 * (the never list), "resolver" (DNS to another resolver, open mode),
 * "default" (nothing allowed it, policy mode). Router-wide drops of what
 * came in on a sandbox veth log with the key "-" (netd finds the sandbox
 * by the input interface), one limit for all sandboxes: "spoof" (a source
 * address not the sandbox's), "peer" (to another sandbox), "router" (to a
 * router port other than DNS and the proxy), "never" (the hard set). */
#define PD_NFT_LOG_GROUP 6
#define PD_NFT_LOG_RATE 10
#define PD_NFT_LOG_BURST 20
#define PD_NFT_LOG_SNAPLEN 64           /* IPv6 header + ports */
#define PD_NFT_LOG_PREFIX "pd:"

/* 0 if key is a valid sandbox key ([a-z0-9], 1..PD_NFT_KEY_MAX). */
int pd_nft_key_check(const char *key);
