/* /api/v1/snapshots and a sandbox's /snapshots and /fork (docs/api.md
 * "Snapshots and forks"): parse, call the manager (snapshots.c), format. */
#include <errno.h>
#include <string.h>

#include "server/api/api.h"
#include "server/core/store.h"
#include "lib/template.h"

static enum MHD_Result reply_error(struct pd_req *r, int rc, const struct pd_error *err)
{
        if (rc == -ENOTSUP)
                return pd_reply_error(r, 400, "bad_request", "%s", err->msg);
        if (rc == -EAGAIN)
                return pd_reply_error(r, 429, "too_many", "%s", err->msg);
        return pd_reply_errno(r, rc, err->msg);
}

/* The body's only field, a string or an integer. */
static json_t *one_field(struct pd_req *r, const char *name, enum MHD_Result *ret)
{
        if (r->body_len == 0) {
                *ret = pd_reply_error(r, 400, "bad_request", "a JSON body with '%s' is required", name);
                return NULL;
        }
        json_t *body = pd_req_json(r, ret);
        if (!body)
                return NULL;
        const char *k;
        json_t *v;
        json_object_foreach(body, k, v) {
                if (strcmp(k, name)) {
                        *ret = pd_reply_error(r, 400, "bad_request", "unknown field '%.64s' (allowed: %s)", k, name);
                        json_decref(body);
                        return NULL;
                }
        }
        return body;
}

static enum MHD_Result create_snapshot(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *body = one_field(r, "name", &ret);
        if (!body)
                return ret;
        json_t *v = json_object_get(body, "name");
        if (!json_is_string(v)) {
                json_decref(body);
                return pd_reply_error(r, 400, "bad_request", "'name' must be a string ([a-z0-9-]{1,64})");
        }
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s) {
                json_decref(body);
                return pd_reply_error(r, 404, "not_found", "no sandbox '%.64s'", r->params[0]);
        }
        struct pd_error err = { 0 };
        struct pd_snapshot_info si;
        int rc = pd_manager_take_snapshot(r->srv, &r->key, s, json_string_value(v), &si, &err);
        pd_server_sandbox_put(r->srv, s);
        json_decref(body);
        if (rc < 0)
                return reply_error(r, rc, &err);
        return pd_reply_json(r, 201, json_pack("{s:s, s:s, s:s, s:s}", "name", si.name, "source", si.source,
                                               "template", si.template_name, "isolation", si.isolation));
}

static enum MHD_Result fork_sandbox(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        json_int_t count = 1;
        if (r->body_len) {
                enum MHD_Result ret;
                json_t *body = one_field(r, "count", &ret);
                if (!body)
                        return ret;
                json_t *v = json_object_get(body, "count");
                if (v && (!json_is_integer(v) || json_integer_value(v) < 1 ||
                          json_integer_value(v) > PD_FORK_MAX)) {
                        json_decref(body);
                        return pd_reply_error(r, 400, "bad_request", "'count' must be an integer 1..%d",
                                              PD_FORK_MAX);
                }
                if (v)
                        count = json_integer_value(v);
                json_decref(body);
        }
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return pd_reply_error(r, 404, "not_found", "no sandbox '%.64s'", r->params[0]);
        struct pd_error err = { 0 };
        struct pd_srv_sandbox *made[PD_FORK_MAX];
        int rc = pd_manager_fork(r->srv, &r->key, s, (unsigned)count, made, &err);
        pd_server_sandbox_put(r->srv, s);
        if (rc < 0)
                return reply_error(r, rc, &err);
        json_t *arr = json_array();
        for (json_int_t i = 0; i < count; i++) {
                json_array_append_new(arr, pd_api_sandbox_json(r->srv, made[i]));
                pd_server_sandbox_put(r->srv, made[i]);
        }
        return pd_reply_json(r, 201, json_pack("{s:o}", "sandboxes", arr));
}

/* The key's own snapshots (key_id is not shown). */
static enum MHD_Result list_snapshots(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_error err = { 0 };
        json_t *all = NULL, *mine = json_array();
        if (pd_store_snapshot_list(r->srv->store, &all, &err) < 0) {
                json_decref(mine);
                return pd_reply_errno(r, -EIO, err.msg);
        }
        size_t i;
        json_t *o;
        json_array_foreach(all, i, o) {
                if (strcmp(json_string_value(json_object_get(o, "key_id")), r->key.id))
                        continue;
                json_object_del(o, "key_id");
                json_array_append(mine, o);
        }
        json_decref(all);
        return pd_reply_json(r, 200, json_pack("{s:o}", "snapshots", mine));
}

static enum MHD_Result delete_snapshot(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        const char *name = r->params[0];
        char owner[64];
        if (pd_template_name_check(name) < 0)
                return pd_reply_error(r, 400, "bad_request", "invalid snapshot name (names are [a-z0-9-]{1,64})");
        if (!pd_store_snapshot_owner(r->srv->store, name, owner) || strcmp(owner, r->key.id))
                return pd_reply_error(r, 404, "not_found", "no snapshot '%s'", name);
        struct pd_error err = { 0 };
        int rc = pd_snapshot_delete(&r->srv->state, name, &err);
        if (rc == -EBUSY && pd_teardown_drain(r->srv, PD_TEARDOWN_WAIT_MS)) {
                memset(&err, 0, sizeof err);
                rc = pd_snapshot_delete(&r->srv->state, name, &err);
        }
        if (rc < 0 && rc != -ENOENT)
                return reply_error(r, rc, &err);
        if ((rc = pd_store_snapshot_delete(r->srv->store, name, &err)) < 0)
                return pd_reply_errno(r, rc, err.msg);
        pd_audit(r->srv, "", r->key.id, "snapshot.delete", json_pack("{s:s}", "name", name));
        return pd_reply_empty(r, 204);
}

const struct pd_route pd_routes_snapshots[] = {
        { "POST", "/api/v1/sandboxes/{id}/snapshots", create_snapshot, 0, 4096 },
        { "POST", "/api/v1/sandboxes/{id}/fork", fork_sandbox, 0, 4096 },
        { "GET", "/api/v1/snapshots", list_snapshots, 0, 0 },
        { "DELETE", "/api/v1/snapshots/{name}", delete_snapshot, 0, 0 },
        { 0 },
};
