/* The router network namespace of one paddock instance (state dir): every
 * sandbox with a network gets a veth pair whose router end lives here, and
 * the router reaches the uplink a setting names. Nothing host-wide changes:
 * forwarding is switched on in the router netns only, and nftables rules
 * live in its own `inet paddock` table (nft.h).
 *
 * Files, under <runtime dir>/net/ (tmpfs, like the agent sockets):
 *   lock          flock: creation, attach and detach are serialized
 *   router        the netns, pinned by a bind mount of its nsfs file
 *   config        key=value: uplink, resolvers, pool (a router is made
 *                 once; a later caller with other settings gets EEXIST)
 *   slots/<n>     slot n (a /30 of the pool) is taken by the sandbox id
 *                 written in it
 *   sb/<id>       the slot of sandbox id
 *   policy/<id>   the policy it runs with (JSON; GET .../network)
 *   netd.sock, netd.pid   paddock-netd, the resolver and strict proxy
 * A slot n: sandbox-side veth `eth0` = pool + 4n + 2, router side `pd<n
 * in hex>` = pool + 4n + 1 (the sandbox's gateway and DNS server). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"
#include "net/policy.h"
#include "lib/state.h"

#define PD_NET_DEFAULT_POOL "10.201.0.0/16"
#define PD_NET_TRANSIT_POOL "10.200.0.0/16"  /* default transits: a /30 per instance */
/* IPv6 (behind a default uplink on a host whose IPv6 works): each /30 of
 * the pool and of the transit has the /126 of these prefixes that ends in
 * its IPv4 address. Unique local addresses: on the never list (fc00::/7) */
#define PD_NET_POOL6 "fd70:6164:646f:1::"
#define PD_NET_TRANSIT6 "fd70:6164:646f:ffff::"

struct pd_router_cfg {
        /* NULL, "" or "auto": the default user-mode uplink (uplink.h:
         * slirp4netns, else pasta, else none); "pasta", "slirp4netns";
         * "none" (sandboxes reach only the router); "netns:PATH" (a veth
         * to a netns someone else made; router side transit .2, other
         * side .1, NAT out of it); "IFACE:ADDR/PREFIX:GW" (a macvlan on
         * the caller's interface IFACE, in the router, with the router's
         * address on that network and its gateway; NAT out of it) */
        const char *uplink;
        const char *resolvers;          /* "IP[,IP]", upstream for netd; NULL =
                                           the host's (hostnet.h) */
        const char *pool;               /* NULL = PD_NET_DEFAULT_POOL */
        /* the netns uplink's /30; NULL = one of PD_NET_TRANSIT_POOL chosen
         * by the instance id, so routers of several state dirs can share
         * one uplink netns */
        const char *transit;
};

struct pd_router;

/* Open the instance's router, creating it (netns, uplink, nftables,
 * paddock-netd) when it does not exist. */
int pd_router_open(const struct pd_state *st, const struct pd_router_cfg *cfg,
                   struct pd_router **out, struct pd_error *err);
void pd_router_close(struct pd_router *r);

struct pd_router_slot {
        unsigned n;
        char ifname[16];                /* router side */
        uint8_t sb_addr[4], gw_addr[4];
        int prefix;                     /* 30 */
        /* set by the tier before attach: the largest MTU its sandbox's
         * interface takes (a microvm guest's NIC: 1500); 0 = any */
        unsigned mtu_max;
        bool no_ipv6;                   /* the tier configures IPv4 only (microvm) */
};

/* Take a slot for sandbox id (before its netns exists: its resolv.conf
 * needs the router's address). */
int pd_router_reserve(struct pd_router *r, const char *id, struct pd_router_slot *out,
                      struct pd_error *err);
/* Wire the sandbox's netns: veth, addresses, default route, nftables from
 * the policy, paddock-netd. One netlink batch per netns. audit_path: where
 * netd appends the sandbox's decisions (JSON lines). */
int pd_router_attach(struct pd_router *r, const char *id, const struct pd_router_slot *slot,
                     int netns_fd, const struct pd_netpol *pol, const char *audit_path,
                     struct pd_error *err);
/* Live policy change (new connections follow it). */
int pd_router_update(struct pd_router *r, const char *id, const struct pd_netpol *pol,
                     struct pd_error *err);
/* Undo attach and reserve. A sandbox that is not attached is not an error. */
int pd_router_detach(struct pd_router *r, const char *id, struct pd_error *err);

/* The instance's router if it exists (-ENOENT if not); never creates. */
int pd_router_open_existing(const struct pd_state *st, struct pd_router **out, struct pd_error *err);
/* Detach sandbox id from the instance's router if there is one. */
int pd_router_release(const struct pd_state *st, const char *id, struct pd_error *err);

/* Detach every sandbox for which alive(id) is false, and tear the router
 * down (netd, netns pin, files) when no sandbox is left. Does not create a
 * router; no router is not an error. */
int pd_router_gc(const struct pd_state *st, bool (*alive)(const char *id, void *ctx), void *ctx,
                 struct pd_error *err);

/* The policy a sandbox runs with now (JSON, policy.h form; malloc'd), or
 * -ENOENT when it has no network in this instance's router. */
int pd_router_policy_json(const struct pd_state *st, const char *id, char **out);

/* What egress can do in an instance: the uplink ("pasta", "slirp4netns",
 * "netns", "macvlan", "none"), the upstream resolvers, and in one line why
 * sandboxes cannot reach the internet ("" when they should). -ENOENT when
 * the instance has no router yet (router_setup.c). */
struct pd_router_egress {
        char uplink[32];
        char resolvers[256];
        char problem[384];
};
int pd_router_egress(const struct pd_state *st, struct pd_router_egress *out);

/* Packets and bytes the kernel dropped for sandbox id (nft.h). */
int pd_router_dropped(const struct pd_state *st, const char *id, uint64_t *packets, uint64_t *bytes,
                      struct pd_error *err);

/* The /30 of PD_NET_TRANSIT_POOL an instance uses by default. */
void pd_router_default_transit(const char *instance, char *buf, size_t size);

/* "IP/PREFIX" (IPv4) into addr and prefix. */
int pd_router_parse_cidr4(const char *s, uint8_t addr[4], int *prefix, struct pd_error *err);
