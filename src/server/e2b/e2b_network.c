/* E2B's network fields on create, mapped onto paddock's policy
 * (docs/network.md, "E2B"):
 *   allow_internet_access  bool; absent = true (E2B's default), unless
 *                          the server caps E2B at none (--e2b-network
 *                          none: every E2B sandbox has no network, and a
 *                          create asking for one is refused)
 *   network.allowOut       addresses, CIDRs, domains (E2B: these win over
 *                          denyOut)
 *   network.denyOut        same; "0.0.0.0/0" = deny everything else
 * Result: internet on + denyOut has 0.0.0.0/0 -> policy mode with the
 * allowOut rules; internet on otherwise -> open with denyOut as deny rules
 * and allowOut as allow rules (which, in open, only lift the never list for
 * CIDRs inside it); internet off -> policy with allowOut, or none when
 * allowOut is empty. */
#include <string.h>

#include "server/e2b/e2b.h"
#include "net/policy.h"
#include "server/core/manager.h"
#include "server/core/server.h"

#define E2B_NET_MAX 4096        /* entries per list */

static int list_ok(json_t *v, const char *name, char *why, size_t whysz)
{
        if (!v || json_is_null(v))
                return 0;
        size_t i;
        json_t *x;
        if (!json_is_array(v) || json_array_size(v) > E2B_NET_MAX) {
                snprintf(why, whysz, "network.%s must be a list of at most %d addresses, CIDRs or domains",
                         name, E2B_NET_MAX);
                return -1;
        }
        json_array_foreach(v, i, x) {
                if (!json_is_string(x) || !json_string_length(x)) {
                        snprintf(why, whysz, "network.%s[%zu] must be a non-empty string", name, i);
                        return -1;
                }
        }
        return 0;
}

static bool has_all(json_t *list)
{
        size_t i;
        json_t *x;
        json_array_foreach(list, i, x)
                if (!strcmp(json_string_value(x), "0.0.0.0/0"))
                        return true;
        return false;
}

json_t *pd_e2b_network_policy(struct pd_server *srv, json_t *body, char *why, size_t whysz)
{
        why[0] = 0;
        json_t *inet = json_object_get(body, "allow_internet_access");
        json_t *net = json_object_get(body, "network");
        if (inet && !json_is_null(inet) && !json_is_boolean(inet)) {
                snprintf(why, whysz, "allow_internet_access must be true or false");
                return NULL;
        }
        if (net && !json_is_null(net) && !json_is_object(net)) {
                snprintf(why, whysz, "network must be an object {allowOut, denyOut}");
                return NULL;
        }
        json_t *allow = net ? json_object_get(net, "allowOut") : NULL;
        json_t *deny = net ? json_object_get(net, "denyOut") : NULL;
        if (net && json_is_object(net)) {
                const char *k;
                json_t *v;
                json_object_foreach(net, k, v)
                        if (strcmp(k, "allowOut") && strcmp(k, "denyOut") && strcmp(k, "allowPublicTraffic") &&
                            strcmp(k, "maskRequestHost")) {
                                snprintf(why, whysz, "network: unknown field '%.64s' (allowOut, denyOut)", k);
                                return NULL;
                        }
        }
        if (list_ok(allow, "allowOut", why, whysz) < 0 || list_ok(deny, "denyOut", why, whysz) < 0)
                return NULL;
        size_t n_allow = allow && json_is_array(allow) ? json_array_size(allow) : 0;
        /* E2B's SDKs leave allow_internet_access out unless the caller sets
         * it, and E2B then gives the internet: so does paddock, unless the
         * operator caps E2B sandboxes at none (--e2b-network none). A
         * create that asks for a network on a capped server is refused
         * rather than quietly given less than it asked for. */
        if (srv->cfg.e2b_network && !strcmp(srv->cfg.e2b_network, "none")) {
                if ((inet && json_is_true(inet)) || n_allow)
                        snprintf(why, whysz, "this server gives E2B sandboxes no network (paddock serve "
                                             "--e2b-network none): leave out allow_internet_access and "
                                             "network.allowOut, or set allow_internet_access to false");
                return NULL;
        }
        bool on = inet && json_is_boolean(inet) ? json_is_true(inet) : true;
        json_t *pol = json_object();
        if (!on || (deny && json_is_array(deny) && has_all(deny))) {
                if (!n_allow) {
                        json_decref(pol);
                        return NULL;    /* none */
                }
                json_object_set_new(pol, "mode", json_string("policy"));
                json_object_set(pol, "allow", allow);
        } else {
                json_object_set_new(pol, "mode", json_string("open"));
                if (n_allow)
                        json_object_set(pol, "allow", allow);
                if (deny && json_is_array(deny) && json_array_size(deny))
                        json_object_set(pol, "deny", deny);
        }
        /* the policy's own checks (syntax, limits) give the message */
        struct pd_netpol p = { 0 };
        struct pd_error err = { 0 };
        if (pd_netpol_from_json(pol, &p, &err) < 0) {
                snprintf(why, whysz, "network: %s", err.msg);
                json_decref(pol);
                return NULL;
        }
        pd_netpol_free(&p);
        return pol;
}

json_t *pd_e2b_build_network(struct pd_server *srv)
{
        /* E2B's builder has the internet; this server's E2B sandboxes have
         * what --e2b-network gives them (open by default) */
        if (srv->cfg.e2b_network && !strcmp(srv->cfg.e2b_network, "none"))
                return NULL;
        return json_pack("{s:s}", "mode", "open");
}

/* PUT /sandboxes/{id}/network (the SDKs' updateNetwork): {allowOut,
 * denyOut, allow_internet_access} replace the sandbox's whole egress
 * policy, mapped as on create; new connections follow at once. A sandbox
 * made without a network keeps none (409), as on the native API; an update
 * that maps to "no network" becomes a policy without rules (nothing goes
 * out). Header rules (`rules`, transforms) are not supported (400). */
enum MHD_Result pd_e2b_route_network(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        json_error_t je;
        _pd_cleanup_json_ json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, &je) : json_object();
        if (!json_is_object(body))
                return pd_e2b_reply_error(r, 400, "the body must be a JSON object");
        _pd_cleanup_json_ json_t *as_create = json_object();
        _pd_cleanup_json_ json_t *net = json_object();
        const char *k;
        json_t *v;
        json_object_foreach(body, k, v) {
                if (!strcmp(k, "allow_internet_access"))
                        json_object_set(as_create, k, v);
                else if (!strcmp(k, "allowOut") || !strcmp(k, "denyOut"))
                        json_object_set(net, k, v);
                else if (!strcmp(k, "rules") && (json_is_null(v) || (json_is_object(v) && !json_object_size(v))))
                        continue;
                else if (!strcmp(k, "rules"))
                        return pd_e2b_reply_error(r, 400, "network rules (header injection, transforms) are not "
                                                          "supported by paddock");
                else
                        return pd_e2b_reply_error(r, 400, "unknown field '%.64s' (allowOut, denyOut, "
                                                          "allow_internet_access)", k);
        }
        json_object_set(as_create, "network", net);
        char why[256];
        _pd_cleanup_json_ json_t *pol_json = pd_e2b_network_policy(r->srv, as_create, why, sizeof why);
        if (!pol_json && why[0])
                return pd_e2b_reply_error(r, 400, "%s", why);
        if (!pol_json)
                pol_json = json_pack("{s:s}", "mode", "policy");
        struct pd_netpol pol = { 0 };
        struct pd_error err = { 0 };
        if (!pol_json || pd_netpol_from_json(pol_json, &pol, &err) < 0)
                return pd_e2b_reply_error(r, 400, "network: %s", err.msg);
        struct pd_srv_sandbox *s = r->n_params ? pd_server_sandbox_get(r->srv, r->params[0], &r->key) : NULL;
        if (!s) {
                pd_netpol_free(&pol);
                return pd_e2b_reply_error(r, 404, "sandbox '%.64s' not found", r->n_params ? r->params[0] : "");
        }
        struct pd_net_info ni;
        int rc = pd_manager_net_info(r->srv, s, &ni, NULL);
        pd_net_info_clear(&ni);
        if (rc < 0) {
                pd_netpol_free(&pol);
                pd_server_sandbox_put(r->srv, s);
                return pd_e2b_reply_error(r, 409, "sandbox '%s' was created without a network; a network is chosen "
                                                  "at create time (allow_internet_access or network)", s->id);
        }
        rc = pd_manager_net_update(r->srv, s, &r->key, &pol, &err);
        pd_netpol_free(&pol);
        pd_server_sandbox_put(r->srv, s);
        if (rc < 0)
                return pd_e2b_reply_error(r, rc == -ENOENT ? 409 : 500, "%s", err.msg);
        return pd_reply_empty(r, 204);
}
