/* The network side of the tiers whose sandboxes hang off the instance's
 * router (container, supervised, microvm; docs/network.md): the router
 * keeps each sandbox's policy, so it survives a server restart like the
 * rules in the kernel do. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "net/router.h"
#include "net/sbnet.h"
#include "tiers/host.h"

int pd_host_net_info(struct pd_sandbox *sb, struct pd_net_info *out, struct pd_error *err)
{
        *out = (struct pd_net_info){ 0 };
        if (pd_router_policy_json(sb->state, sb->id, &out->policy_json) < 0)
                return pd_error_setx(err, ENOENT, "sandbox %s has no network (mode none)", sb->id);
        /* what the kernel dropped so far (counted, for audit) */
        struct pd_error e2 = { 0 };
        if (pd_router_dropped(sb->state, sb->id, &out->dropped_packets, &out->dropped_bytes, &e2) == 0)
                out->have_drops = true;
        struct pd_router_egress eg;
        if (pd_router_egress(sb->state, &eg) == 0) {
                out->have_egress = true;
                snprintf(out->egress_uplink, sizeof out->egress_uplink, "%s", eg.uplink);
                snprintf(out->egress_resolvers, sizeof out->egress_resolvers, "%s", eg.resolvers);
                snprintf(out->egress_problem, sizeof out->egress_problem, "%s", eg.problem);
        }
        return 0;
}

int pd_host_net_update(struct pd_sandbox *sb, const struct pd_netpol *pol, struct pd_error *err)
{
        return pd_sbnet_update(sb->state, sb->id, pol, err);
}
