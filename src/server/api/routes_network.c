/* /api/v1/sandboxes/{id}/network: the egress policy a sandbox runs with
 * (GET) and a live change of it (PUT; new connections follow it at once,
 * established ones stay). The policy lives with the router (src/net), so
 * it survives a server restart like the rules in the kernel do. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/manager.h"
#include "net/policy.h"
#include "net/router.h"
#include "net/sbnet.h"
#include "server/core/server.h"

/* What egress can do for this sandbox (docs/network.md, "The default
 * uplink"): the uplink, the resolvers, and in one line why the sandbox
 * reaches nothing when it does not. */
static void add_egress(struct pd_server *srv, json_t *o)
{
        struct pd_router_egress eg;
        if (pd_router_egress(&srv->state, &eg) < 0)
                return;
        json_object_set_new(o, "egress", json_pack("{s:s, s:s, s:b, s:s?}", "uplink", eg.uplink, "resolvers",
                                                   eg.resolvers, "ok", !eg.problem[0], "problem",
                                                   eg.problem[0] ? eg.problem : NULL));
}

json_t *pd_manager_network_json(struct pd_server *srv, const char *id)
{
        char *text = NULL;
        if (pd_router_policy_json(&srv->state, id, &text) < 0)
                return json_pack("{s:s}", "mode", "none");
        json_t *o = json_loads(text, 0, NULL);
        free(text);
        if (!o)
                return json_pack("{s:s}", "mode", "none");
        add_egress(srv, o);
        return o;
}

static enum MHD_Result get_network(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return pd_reply_error(r, 404, "not_found", "no sandbox '%.64s'", r->params[0]);
        json_t *o = pd_manager_network_json(r->srv, s->id);
        /* what the kernel dropped so far (counted, for audit) */
        uint64_t pk = 0, by = 0;
        struct pd_error err = { 0 };
        if (o && pd_router_dropped(&r->srv->state, s->id, &pk, &by, &err) == 0) {
                json_object_set_new(o, "dropped_packets", json_integer((json_int_t)pk));
                json_object_set_new(o, "dropped_bytes", json_integer((json_int_t)by));
        }
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

static enum MHD_Result put_network(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return pd_reply_error(r, 404, "not_found", "no sandbox '%.64s'", r->params[0]);
        json_t *body = pd_req_json(r, &ret);
        if (!body) {
                pd_server_sandbox_put(r->srv, s);
                return ret;
        }
        struct pd_netpol pol = { 0 };
        struct pd_error err = { 0 };
        int rc = pd_netpol_from_json(body, &pol, &err);
        json_decref(body);
        if (rc < 0) {
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_error(r, 400, "bad_request", "network: %s", err.msg);
        }
        char *old = NULL;
        if (pd_router_policy_json(&r->srv->state, s->id, &old) < 0) {
                pd_netpol_free(&pol);
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_error(r, 409, "conflict",
                                      "sandbox '%s' was created without a network (mode none); a network is "
                                      "chosen at create time", s->id);
        }
        free(old);
        if (pol.mode == PD_NETPOL_NONE) {
                pd_netpol_free(&pol);
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_error(r, 409, "conflict",
                                      "a running sandbox's network cannot change to none; use policy with no rules");
        }
        pthread_mutex_lock(&s->lock);
        rc = pd_sbnet_update(&r->srv->state, s->id, &pol, &err);
        pthread_mutex_unlock(&s->lock);
        char *text = rc >= 0 ? pd_netpol_to_json_str(&pol) : NULL;
        pd_netpol_free(&pol);
        if (rc < 0) {
                pd_log("warn", "sandbox network change failed sandbox=%s error=\"%s\"", s->id, err.msg);
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_error(r, rc == -ENOENT ? 409 : 500, rc == -ENOENT ? "conflict" : "internal",
                                      "%s", err.msg);
        }
        pd_audit(r->srv, s->id, r->key.id, "sandbox.network", text ? json_loads(text, 0, NULL) : json_object());
        free(text);
        json_t *o = pd_manager_network_json(r->srv, s->id);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

const struct pd_route pd_routes_network[] = {
        { "GET", "/api/v1/sandboxes/{id}/network", get_network, 0, 0 },
        { "PUT", "/api/v1/sandboxes/{id}/network", put_network, 0, 0 },
        { 0 },
};
