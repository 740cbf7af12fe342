/* The client side of paddock-netd's control socket (used by router.c).
 *
 * paddock-netd is one daemon per router network namespace, started inside
 * it by router.c:
 *
 *   paddock-netd --control PATH          unix socket to create (mode 0600)
 *                [--upstream IP[:PORT][,IP[:PORT]...]]  resolvers to forward to
 *                                        (none: allowed names get SERVFAIL)
 *                [--dns-port 53]         where sandboxes query (tcp and udp)
 *                [--proxy-port 15001]    strict Host/SNI proxy (tcp)
 *                [--ready-fd N]          write "1" to fd N once listening
 *                [--never CIDR[,CIDR]]   extra never-pin ranges (the
 *                                        server's own addresses, the uplink)
 *                [--max-pins N]          live pinned addresses per sandbox
 *                                        (default 8192; past it, SERVFAIL)
 *
 * It listens on the wildcard address of the router netns: nft's input chain
 * (nft.c) admits only the DNS and proxy ports from sandbox veths. It tells
 * sandboxes apart by source address, so nft must drop packets from a veth
 * whose source is not that sandbox's address (anti-spoofing). The strict
 * proxy's upstream connections leave from the router netns itself (output
 * path), so the uplink masquerade must cover locally generated traffic.
 *
 * Wire format: each message is a 4-byte big-endian length then that many
 * bytes of JSON (max PD_NETD_MSG_MAX). Requests:
 *   {"op":"ping"}
 *   {"op":"add","id":ID,"iface":IFNAME,"addrs":["10.201.0.2","fd..::2"],
 *    "audit":PATH,"policy":{...policy.h JSON...}}
 *   {"op":"update","id":ID,"policy":{...}}
 *   {"op":"remove","id":ID}
 * Replies: {"ok":true} or {"ok":false,"error":"..."}.
 * `add` also programs nothing in nft: router.c calls pd_nft_sandbox_add
 * first; netd only pins (pd_nft_pin, key = ID) and unpins on remove/update.
 * Audit: netd appends JSON lines to PATH (O_APPEND, O_NOFOLLOW):
 *   {"ts":..., "sandbox":ID, "kind":"dns"|"connect"|"pin", "decision":
 *    "allow"|"deny", "name":..., "addr":..., "port":..., "proto":...,
 *    "rule":"allow:*.pypi.org:443/tcp"|null, "reason":...}
 */
#pragma once
#include <stddef.h>

#include "lib/error.h"
#include "net/policy.h"

#define PD_NETD_MSG_MAX (4u << 20)      /* 16384 rules fit */
#define PD_NETD_DEFAULT_DNS_PORT 53
#define PD_NETD_DEFAULT_PROXY_PORT 15001
#define PD_NETD_MAX_ADDRS 4

struct pd_netd_client;  /* one connection to a netd control socket */

struct pd_netd_sandbox {
        const char *id;                 /* = nft key: [a-z0-9]{1,64} */
        const char *iface;              /* router-side veth name */
        const char *addrs[PD_NETD_MAX_ADDRS]; /* sandbox-side addresses
                                                 (text), NULL-terminated */
        const char *audit_path;         /* JSON lines appended here */
        const struct pd_netpol *policy;
};

/* Connect, retrying until timeout_ms while the socket does not exist yet
 * (netd just started). */
int pd_netd_connect(const char *path, int timeout_ms, struct pd_netd_client **out,
                    struct pd_error *err);
void pd_netd_close(struct pd_netd_client *c);

int pd_netd_ping(struct pd_netd_client *c, struct pd_error *err);
int pd_netd_add(struct pd_netd_client *c, const struct pd_netd_sandbox *sb,
                struct pd_error *err);
/* Live policy change: new DNS answers and new proxy connections follow it;
 * pins granted by rules that no longer allow are dropped (pd_nft_unpin_all
 * then re-pin on the next query). */
int pd_netd_update(struct pd_netd_client *c, const char *id, const struct pd_netpol *p,
                   struct pd_error *err);
/* Missing id is not an error. */
int pd_netd_remove(struct pd_netd_client *c, const char *id, struct pd_error *err);
