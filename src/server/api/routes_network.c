/* /api/v1/sandboxes/{id}/network: the egress policy a sandbox runs with
 * (GET) and a live change of it (PUT; new connections follow it at once,
 * established ones stay), through the sandbox's tier (core/network.c); its
 * router keeps the policy, so it survives a server restart like the rules
 * in the kernel do. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/policy.h"
#include "server/api/api.h"

static enum MHD_Result get_network(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return pd_reply_error(r, 404, "not_found", "no sandbox '%.64s'", r->params[0]);
        json_t *o = pd_api_network_json(r->srv, s, true);
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
        struct pd_net_info ni;
        rc = pd_manager_net_info(r->srv, s, &ni, NULL);
        pd_net_info_clear(&ni);
        if (rc < 0) {
                pd_netpol_free(&pol);
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_error(r, 409, "conflict",
                                      "sandbox '%s' was created without a network (mode none); a network is "
                                      "chosen at create time", s->id);
        }
        if (pol.mode == PD_NETPOL_NONE) {
                pd_netpol_free(&pol);
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_error(r, 409, "conflict",
                                      "a running sandbox's network cannot change to none; use policy with no rules");
        }
        rc = pd_manager_net_update(r->srv, s, &r->key, &pol, &err);
        pd_netpol_free(&pol);
        if (rc < 0) {
                pd_log("warn", "sandbox network change failed sandbox=%s error=\"%s\"", s->id, err.msg);
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_error(r, rc == -ENOENT ? 409 : 500, rc == -ENOENT ? "conflict" : "internal",
                                      "%s", err.msg);
        }
        json_t *o = pd_api_network_json(r->srv, s, false);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

const struct pd_route pd_routes_network[] = {
        { "GET", "/api/v1/sandboxes/{id}/network", get_network, 0, 0 },
        { "PUT", "/api/v1/sandboxes/{id}/network", put_network, 0, 0 },
        { 0 },
};
