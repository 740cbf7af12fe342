/* The network of a recipe's RUN steps (docs/templates.md "Network of RUN
 * steps"). A build has one policy (pd_image_opts.run_net): none by
 * default, or open/policy, given by the operator on the CLI or by a key
 * over HTTP. Each RUN sandbox then gets it as any sandbox does: a veth to
 * the instance's router, whose nftables and paddock-netd apply the never
 * list, the rules and the audit. The policy's canonical JSON joins each
 * RUN step's cache key: the same command with another network is another
 * step (its output may differ). */
#include <stdio.h>
#include <stdlib.h>

#include "image/image.h"
#include "lib/sandbox.h"
#include "net/policy.h"
#include "net/router.h"

static bool has_net(const struct pd_image_opts *o)
{
        return o && o->run_net && o->run_net->mode != PD_NETPOL_NONE;
}

void pd_image_run_net(const struct pd_image_opts *o, struct pd_spec *spec)
{
        if (!has_net(o))
                return;
        spec->net = o->run_net->mode == PD_NETPOL_OPEN ? PD_NET_OPEN : PD_NET_POLICY;
        spec->netpol = o->run_net;
        spec->net_uplink = o->net_uplink;
        spec->net_resolver = o->net_resolver;
}

char *pd_image_run_net_key(const struct pd_image_opts *o)
{
        return has_net(o) ? pd_netpol_to_json_str(o->run_net) : NULL;
}

void pd_image_run_net_said(const struct pd_image_opts *o, const struct pd_sandbox *sb)
{
        if (!has_net(o))
                return;
        /* where its egress decisions are: the sandbox's audit (the
         * server's state dir keeps it after the step: audit/<id>.jsonl) */
        char line[256];
        snprintf(line, sizeof line, "network %s: sandbox %s (its egress decisions are in its audit log)",
                 pd_netpol_mode_name(o->run_net->mode), sb->id);
        pd_image_emit(o, PD_IMAGE_EV_STEP, line, NULL, 0, 0);
        struct pd_router_egress eg;
        if (pd_router_egress(sb->state, &eg) == 0 && eg.problem[0]) {
                snprintf(line, sizeof line, "warning: the network reaches nothing: %.200s", eg.problem);
                pd_image_emit(o, PD_IMAGE_EV_LINE, line, NULL, 0, 0);
        }
}
