/* Internals of the router (router.c) shared with its paddock-netd part
 * (router_netd.c). */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/nft.h"
#include "net/router.h"

#define PD_ROUTER_PROXY_PORT 15001      /* netd's strict Host/SNI proxy */

struct pd_netd_client;
struct pd_rtnl;

#define PD_ROUTER_UPLINK_IF "up0"
#define PD_ROUTER_INDEX_BASE 4096       /* router side of slot n: base + n; uplink: base - 1 */

struct pd_router {
        char dir[PATH_MAX];
        char instance[PD_INSTANCE_LEN + 1];
        int dirfd, lockfd, nsfd;
        struct pd_nft *nft;
        struct pd_rtnl *rt;
        uint8_t pool[4];
        int pool_prefix;
        struct pd_netd_client *netd;    /* connected lazily */
        /* what the router was made with (the file "egress", router_setup.c) */
        unsigned sb_mtu;                /* sandbox veths; 0 = the kernel's default */
        bool ipv6;                      /* sandboxes get IPv6 (the host's works) */
        char resolvers[256];            /* netd's upstreams, as used */
        char never[2048];               /* netd's --never: CIDRs the router adds */
};

static inline uint32_t pd_v4(const uint8_t a[4])
{
        return (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
}

/* The IPv6 address paired with an IPv4 one of the pool or the transit:
 * prefix (router.h) and the IPv4 address in the low 32 bits, so the /126s
 * line up with the /30s. */
void pd_router_addr6(const char *prefix, const uint8_t v4[4], uint8_t out[16]);

static inline void pd_v4_put(uint8_t a[4], uint32_t x)
{
        a[0] = (uint8_t)(x >> 24);
        a[1] = (uint8_t)(x >> 16);
        a[2] = (uint8_t)(x >> 8);
        a[3] = (uint8_t)x;
}

/* Small files of the router's dir (router.c): write (truncating) or read
 * (trailing newlines cut; returns the length or -errno). */
int pd_router_file_write(struct pd_router *r, const char *name, const char *text, struct pd_error *err);
int pd_router_file_read(struct pd_router *r, const char *name, char *buf, size_t size);
/* An fd on a pinned network namespace (an nsfs file), or -errno. */
int pd_router_pin_open(const char *path);

/* Build a new router's links, uplink and nftables (router_setup.c); the
 * egress it can offer goes to the file "egress". Lock held. */
int pd_router_setup(struct pd_router *r, const struct pd_router_cfg *cfg, struct pd_error *err);
/* Load what pd_router_setup recorded (an existing router). */
void pd_router_load_egress(struct pd_router *r);

void pd_router_teardown(struct pd_router *r);
void pd_router_policy_to_nft(const struct pd_netpol *pol, struct pd_nft_rules *out,
                             struct pd_nft_cidr *allow, struct pd_nft_cidr *deny,
                             struct pd_nft_cidr *never);

/* paddock-netd: started in the router netns when the router is made (if
 * the binary is there), told about each sandbox, stopped at teardown. */
int pd_router_netd_start(struct pd_router *r, const struct pd_router_cfg *cfg, struct pd_error *err);
void pd_router_netd_stop(struct pd_router *r);
void pd_router_netd_disconnect(struct pd_router *r);
int pd_router_netd_add(struct pd_router *r, const char *id, const struct pd_router_slot *s,
                       const struct pd_netpol *pol, const char *audit_path, struct pd_error *err);
int pd_router_netd_update(struct pd_router *r, const char *id, const struct pd_netpol *pol,
                          struct pd_error *err);
int pd_router_netd_remove(struct pd_router *r, const char *id, struct pd_error *err);
/* netd should run but is gone (crashed, killed): start it again and tell it
 * every attached sandbox. Lock held. */
int pd_router_netd_revive(struct pd_router *r, const struct pd_router_cfg *cfg, struct pd_error *err);
/* What the router recorded about an attached sandbox (router.c). */
int pd_router_sandbox_info(struct pd_router *r, const char *id, struct pd_router_slot *slot,
                           struct pd_netpol *pol, char *audit_path, size_t audit_size);
