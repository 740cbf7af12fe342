/* E2B's view of a sandbox's ports (docs/e2b.md, "Ports"; api/ports.c
 * relays them):
 *
 *   create body  network.allowPublicTraffic   default true, as on E2B: the
 *                                             ports answer without a token
 *                autoResume {enabled}          (with autoPause) a request
 *                                             to a port resumes it
 *   answers      domain                        the server's port domain with
 *                                             its port (core/port_host.h),
 *                                             so getHost(port) is a URL
 *                                             that works as it is
 *                trafficAccessToken            the port token, sent by the
 *                                             SDK as E2B-Traffic-Access-Token
 *   info         network.allowPublicTraffic, lifecycle {onTimeout, autoResume}
 *
 * Unlike E2B, trafficAccessToken is given for public sandboxes too: the
 * code-interpreter SDK authenticates its context calls with it and with
 * nothing else (e2b_envd.c), and a sandbox's code-interpreter port is
 * never public. */
#include <stdio.h>
#include <string.h>

#include "server/e2b/e2b.h"
#include "server/core/manager.h"
#include "server/core/port_host.h"

int pd_e2b_ports_opts(json_t *body, struct pd_create_req *cr, char *why, size_t whysz)
{
        cr->ports_public = true;
        json_t *net = json_object_get(body, "network");
        json_t *v = json_is_object(net) ? json_object_get(net, "allowPublicTraffic") : NULL;
        if (v && !json_is_null(v)) {
                if (!json_is_boolean(v)) {
                        snprintf(why, whysz, "network.allowPublicTraffic must be true or false");
                        return -1;
                }
                cr->ports_public = json_is_true(v);
        }
        v = json_object_get(body, "autoResume");
        if (v && !json_is_null(v)) {
                /* the SDK sends {"enabled": bool}; a bare bool is taken too */
                json_t *en = json_is_object(v) ? json_object_get(v, "enabled") : v;
                if (!json_is_boolean(en) || (json_is_object(v) && json_object_size(v) != 1)) {
                        snprintf(why, whysz, "autoResume must be {\"enabled\": true|false}");
                        return -1;
                }
                cr->auto_resume = json_is_true(en);
                if (cr->auto_resume && !cr->auto_pause) {
                        snprintf(why, whysz, "autoResume needs autoPause: true (lifecycle.onTimeout 'pause'): "
                                             "only a sandbox paused at its deadline can be resumed by traffic");
                        return -1;
                }
        }
        return 0;
}

int pd_e2b_ports_answer(struct pd_server *srv, struct pd_srv_sandbox *s, json_t *o)
{
        char traffic[PD_TOKEN_LEN + 1], domain[PD_PORTS_DOMAIN_MAX];
        if (pd_ports_token(srv, s->id, traffic) < 0)
                return -1;
        pd_ports_domain(srv, domain);
        json_object_set_new(o, "domain", json_string(domain));
        json_object_set_new(o, "trafficAccessToken", json_string(traffic));
        return 0;
}

void pd_e2b_ports_info(struct pd_server *srv, struct pd_srv_sandbox *s, const struct pd_sandbox_info *i, json_t *o)
{
        char domain[PD_PORTS_DOMAIN_MAX];
        pd_ports_domain(srv, domain);
        json_object_set_new(o, "domain", json_string(domain));
        json_t *net = json_object_get(o, "network");
        if (!json_is_object(net)) {
                net = json_object();
                json_object_set_new(o, "network", net);
        }
        json_object_set_new(net, "allowPublicTraffic",
                            json_boolean(__atomic_load_n(&s->ports_public, __ATOMIC_RELAXED)));
        json_object_set_new(o, "lifecycle", json_pack("{s:s, s:b}", "onTimeout", i->auto_pause ? "pause" : "kill",
                                                      "autoResume", i->auto_resume));
}
