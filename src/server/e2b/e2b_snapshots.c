/* E2B's snapshots API (docs/e2b.md) on paddock's snapshots (core/
 * snapshots.c, the same ones /api/v1/snapshots shows):
 *
 *   POST   /sandboxes/{id}/snapshots {name?}   201 {snapshotID, names}
 *   GET    /snapshots?sandboxID=&name=&limit=  200 [{snapshotID, names}]
 *   DELETE /templates/{id}                     204; 404 unless it is one of
 *                                              the key's snapshots
 *
 * A snapshot's id is its name ([a-z0-9-]{1,64}); without a name one is
 * made ("snap-" and 16 hex digits). Sandbox.create(snapshotID) starts from
 * it (e2b_api.c), for the key that took it only. Templates registered on
 * the host are never deleted here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "server/e2b/e2b.h"
#include "server/core/manager.h"
#include "server/core/store.h"
#include "lib/template.h"

#define LIST_MAX 1000

static json_t *snapshot_json(const char *name)
{
        return json_pack("{s:s, s:[s]}", "snapshotID", name, "names", name);
}

static enum MHD_Result route_create(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        json_error_t je;
        _pd_cleanup_json_ json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, &je) : json_object();
        if (!json_is_object(body))
                return pd_e2b_reply_error(r, 400, "the body must be a JSON object");
        char name[65];
        json_t *v = json_object_get(body, "name");
        if (v && !json_is_null(v)) {
                if (!json_is_string(v) || pd_template_name_check(json_string_value(v)) < 0)
                        return pd_e2b_reply_error(r, 400, "name must be [a-z0-9-]{1,64}");
                snprintf(name, sizeof name, "%s", json_string_value(v));
        } else {
                unsigned char rnd[8];
                if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
                        return pd_e2b_reply_error(r, 500, "no random bytes for a snapshot name");
                int n = snprintf(name, sizeof name, "snap-");
                for (size_t i = 0; i < sizeof rnd; i++)
                        n += snprintf(name + n, sizeof name - (size_t)n, "%02x", rnd[i]);
        }
        struct pd_srv_sandbox *s = r->n_params ? pd_server_sandbox_get(r->srv, r->params[0], &r->key) : NULL;
        if (!s)
                return pd_e2b_reply_error(r, 404, "sandbox '%.64s' not found", r->n_params ? r->params[0] : "");
        struct pd_error err = { 0 };
        struct pd_snapshot_info si;
        int rc = pd_manager_take_snapshot(r->srv, &r->key, s, name, &si, &err);
        pd_server_sandbox_put(r->srv, s);
        if (rc < 0) {
                unsigned st = rc == -EEXIST ? 409 : rc == -EINVAL || rc == -ENOTSUP ? 400 : rc == -EBUSY ? 409
                              : rc == -ENOENT ? 404 : 500;
                return pd_e2b_reply_error(r, st, "%s", err.msg);
        }
        return pd_reply_json(r, 201, snapshot_json(si.name));
}

static enum MHD_Result route_list(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        long limit = LIST_MAX;
        const char *ls = pd_req_query(r, "limit");
        if (ls && *ls) {
                char *end;
                limit = strtol(ls, &end, 10);
                if (*end || limit < 1 || limit > LIST_MAX)
                        return pd_e2b_reply_error(r, 400, "limit must be 1..%d", LIST_MAX);
        }
        const char *sid = pd_req_query(r, "sandboxID"), *nameq = pd_req_query(r, "name");
        struct pd_error err = { 0 };
        json_t *all = NULL;
        if (pd_store_snapshot_list(r->srv->store, &all, &err) < 0)
                return pd_e2b_reply_error(r, 500, "%s", err.msg);
        json_t *out = json_array();
        size_t i;
        json_t *o;
        json_array_foreach(all, i, o) {
                const char *name = json_string_value(json_object_get(o, "name"));
                const char *owner = json_string_value(json_object_get(o, "key_id"));
                const char *source = json_string_value(json_object_get(o, "source"));
                if (!name || !owner || strcmp(owner, r->key.id) || (sid && *sid && (!source || strcmp(source, sid))) ||
                    (nameq && *nameq && strcmp(nameq, name)))
                        continue;
                if (json_array_size(out) >= (size_t)limit)
                        break;
                json_array_append_new(out, snapshot_json(name));
        }
        json_decref(all);
        return pd_reply_json(r, 200, out);
}

static enum MHD_Result route_delete(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        return pd_e2b_snapshot_delete(r, r->n_params ? r->params[0] : "");
}

enum MHD_Result pd_e2b_snapshot_delete(struct pd_req *r, const char *name)
{
        char owner[64];
        /* only the key's own snapshots: a registered template, another key's
         * snapshot and an unknown name all answer 404 */
        if (pd_template_name_check(name) < 0 || !pd_store_snapshot_owner(r->srv->store, name, owner) ||
            strcmp(owner, r->key.id))
                return pd_e2b_reply_error(r, 404, "template '%.64s' not found", name);
        struct pd_error err = { 0 };
        int rc = pd_snapshot_delete(&r->srv->state, name, &err);
        if (rc == -EBUSY && pd_teardown_drain(r->srv, PD_TEARDOWN_WAIT_MS)) {
                memset(&err, 0, sizeof err);
                rc = pd_snapshot_delete(&r->srv->state, name, &err);
        }
        if (rc < 0 && rc != -ENOENT)
                return pd_e2b_reply_error(r, rc == -EBUSY ? 409 : 500, "%s", err.msg);
        if ((rc = pd_store_snapshot_delete(r->srv->store, name, &err)) < 0)
                return pd_e2b_reply_error(r, 500, "%s", err.msg);
        pd_audit(r->srv, "", r->key.id, "snapshot.delete", json_pack("{s:s, s:s}", "name", name, "via", "e2b"));
        return pd_reply_empty(r, 204);
}

bool pd_e2b_own_snapshot(struct pd_server *srv, const struct pd_key *key, const char *name)
{
        char owner[64];
        return pd_template_name_check(name) == 0 && pd_store_snapshot_owner(srv->store, name, owner) &&
               !strcmp(owner, key->id) && pd_snapshot_is(&srv->state, name);
}

const struct pd_route pd_routes_e2b_snapshots[] = {
        { "POST", "/sandboxes/{id}/snapshots", route_create, 0, 4096 },
        { "GET", "/snapshots", route_list, 0, 0 },
        { "DELETE", "/templates/{id}", route_delete, 0, 0 },
        { NULL, NULL, NULL, 0, 0 },
};
