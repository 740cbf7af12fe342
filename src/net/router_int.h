/* Internals of the router (router.c) shared with its paddock-netd part
 * (router_netd.c). */
#pragma once
#include <limits.h>
#include <stdint.h>

#include "net/nft.h"
#include "net/router.h"

#define PD_ROUTER_PROXY_PORT 15001      /* netd's strict Host/SNI proxy */

struct pd_netd_client;
struct pd_rtnl;

struct pd_router {
        char dir[PATH_MAX];
        char instance[PD_INSTANCE_LEN + 1];
        int dirfd, lockfd, nsfd;
        struct pd_nft *nft;
        struct pd_rtnl *rt;
        uint8_t pool[4];
        int pool_prefix;
        struct pd_netd_client *netd;    /* connected lazily */
};

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
