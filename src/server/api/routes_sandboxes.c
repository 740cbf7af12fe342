/* /api/v1/sandboxes (lifecycle), /templates, /health and /metrics: parse
 * and validate, call the manager, format (docs/api.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/api/api.h"
#include "server/core/metrics.h"
#include "lib/state.h"
#include "server/api/templates.h"
#include "image/start.h"
#include "server/core/store.h"
#include "net/policy.h"
#include "lib/template.h"
#include "lib/util.h"

#define META_MAX_ENTRIES 64
#define META_KEY_MAX 128
#define META_VALUE_MAX 1024
#define ENV_MAX_ENTRIES 256
#define ENV_VALUE_MAX 32768

static enum MHD_Result not_found(struct pd_req *r, const char *id)
{
        return pd_reply_error(r, 404, "not_found", "no sandbox '%.64s'", id);
}

static enum MHD_Result reply_manager_error(struct pd_req *r, int rc, const struct pd_error *err)
{
        switch (-rc) {
        case EAGAIN: return pd_reply_error(r, 429, "too_many", "%s", err->msg);
        case ESHUTDOWN: return pd_reply_error(r, 503, "unavailable", "%s", err->msg);
        case ENOTSUP: return pd_reply_error(r, 400, "bad_request", "%s", err->msg);
        /* the template's start command failed: its fault, its output */
        case PD_E_START_FAILED: return pd_reply_error(r, 422, "start_command_failed", "%s", err->msg);
        default: return pd_reply_errno(r, rc, err->msg);
        }
}

/* ---- create ---- */

static bool env_name_ok(const char *k)
{
        if (!*k || strlen(k) > 255)
                return false;
        for (const char *p = k; *p; p++)
                if (*p == '=')
                        return false;
        return true;
}

/* An object of string values within the caps. NULL if fine, else why. */
static const char *check_string_map(json_t *o, size_t max_entries, size_t key_max, size_t value_max,
                                    bool env_names)
{
        if (!json_is_object(o))
                return "must be an object of strings";
        if (json_object_size(o) > max_entries)
                return "has too many entries";
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
                if (!json_is_string(v))
                        return "values must be strings";
                if (!*k || strlen(k) > key_max)
                        return "has an empty or over-long key";
                if (env_names && !env_name_ok(k))
                        return "has an invalid variable name";
                if (json_string_length(v) > value_max)
                        return "has an over-long value";
        }
        return NULL;
}

static bool template_known(struct pd_server *srv, const char *name, const char *key_id)
{
        char owner[64];
        if (!strcmp(name, "base"))
                return true;
        /* another key's template is not there for this one (templates.h) */
        char tpl_owner[40];
        if (!pd_tpl_visible(srv, name, key_id, tpl_owner))
                return false;
        /* A snapshot starts sandboxes for the key that took it only. */
        if (pd_store_snapshot_owner(srv->store, name, owner))
                return !strcmp(owner, key_id) && pd_snapshot_is(&srv->state, name);
        if (!pd_store_template_exists(srv->store, name))
                return false;
        char path[PATH_MAX + 128];
        struct stat st;
        snprintf(path, sizeof path, "%s/templates/%s/rootfs", srv->state.dir, name);
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int int_field(json_t *v, const char *name, json_int_t lo, json_int_t hi, json_int_t *out, char *why,
                     size_t whysz)
{
        if (!json_is_integer(v)) {
                snprintf(why, whysz, "'%s' must be an integer", name);
                return -1;
        }
        json_int_t x = json_integer_value(v);
        if (x < lo || x > hi) {
                snprintf(why, whysz, "'%s' must be between %lld and %lld", name, (long long)lo, (long long)hi);
                return -1;
        }
        *out = x;
        return 0;
}

/* The tier snapshot name (a checked template name) was taken on, when its
 * snapshots carry memory: a saved guest starts on that tier only. false
 * for a template or a filesystem snapshot, which any tier can start. */
static bool snapshot_tier(struct pd_server *srv, const char *name, enum pd_isolation *iso)
{
        char dir[96], word[32] = "";
        snprintf(dir, sizeof dir, "templates/%s", name);
        if (!strcmp(name, "base") || !pd_snapshot_is(&srv->state, name))
                return false;
        int d = openat(srv->state.dirfd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct pd_record rec;
        bool own = d >= 0 && pd_record_read(d, "snapshot", &rec, NULL) == 0 &&
                   pd_record_get(&rec, "isolation", word, sizeof word) >= 0 && pd_isolation_parse(word, iso) == 0 &&
                   (pd_tier_caps(*iso) & PD_TIER_SNAPSHOT_MEMORY);
        if (d >= 0)
                close(d);
        return own;
}

static int parse_create(struct pd_server *srv, const char *key_id, json_t *body, struct pd_create_req *cr,
                        char *why, size_t whysz)
{
        static const char *const allowed[] = { "template", "isolation", "memory_mb", "cpus", "pids",
                                               "disk_mb", "env", "metadata", "timeout", "auto_pause",
                                               "network" };
        const char *k;
        json_t *v;
        json_object_foreach(body, k, v) {
                bool ok = false;
                for (size_t i = 0; i < PD_ARRAY_SIZE(allowed) && !ok; i++)
                        ok = !strcmp(k, allowed[i]);
                if (!ok) {
                        snprintf(why, whysz, "unknown field '%.64s' (allowed: template, isolation, memory_mb, "
                                             "cpus, pids, disk_mb, env, metadata, timeout, auto_pause, network)", k);
                        return -1;
                }
        }
        pd_spec_defaults(&cr->spec);
        snprintf(cr->template_name, sizeof cr->template_name, "base");
        cr->timeout_s = srv->cfg.default_timeout_s;
        json_int_t x;
        if ((v = json_object_get(body, "template"))) {
                if (!json_is_string(v) || pd_template_name_check(json_string_value(v)) < 0) {
                        snprintf(why, whysz, "'template' must be a registered template name ([a-z0-9-]{1,64}), "
                                             "never a path");
                        return -1;
                }
                if (!template_known(srv, json_string_value(v), key_id)) {
                        snprintf(why, whysz, "unknown template '%s' (GET /api/v1/templates lists them)",
                                 json_string_value(v));
                        return -1;
                }
                snprintf(cr->template_name, sizeof cr->template_name, "%s", json_string_value(v));
        }
        if ((v = json_object_get(body, "network")) && !json_is_null(v)) {
                /* the egress policy (docs/network.md); checked here for a
                 * 400, parsed again by the manager */
                struct pd_netpol pol = { 0 };
                struct pd_error perr = { 0 };
                if (pd_netpol_from_json(v, &pol, &perr) < 0) {
                        snprintf(why, whysz, "network: %s", perr.msg);
                        return -1;
                }
                pd_netpol_free(&pol);
                cr->network = v;
        }
        if ((v = json_object_get(body, "isolation"))) {
                if (!json_is_string(v) || pd_isolation_parse(json_string_value(v), &cr->spec.isolation) < 0) {
                        snprintf(why, whysz, "'isolation' must be one of %s", pd_isolation_names());
                        return -1;
                }
        }
        /* a snapshot that carries memory (a microvm's) is a saved guest: it
         * starts on its own tier only */
        enum pd_isolation own;
        if (snapshot_tier(srv, cr->template_name, &own)) {
                if (v && cr->spec.isolation != own) {
                        snprintf(why, whysz, "snapshot '%s' is a %s guest: it starts with isolation %s only",
                                 cr->template_name, pd_isolation_name(own), pd_isolation_name(own));
                        return -1;
                }
                cr->spec.isolation = own;
        } else if ((pd_tier_caps(cr->spec.isolation) & PD_TIER_OWN_TEMPLATES) && strcmp(cr->template_name, "base") &&
                   !pd_template_is_image(&srv->state, cr->template_name)) {
                snprintf(why, whysz, "the %s tier starts from its base template, an image template or a %s snapshot, not '%s'",
                         pd_isolation_name(cr->spec.isolation), pd_isolation_name(cr->spec.isolation),
                         cr->template_name);
                return -1;
        }
        if ((v = json_object_get(body, "memory_mb"))) {
                if (int_field(v, "memory_mb", 16, 65536, &x, why, whysz) < 0)
                        return -1;
                cr->spec.memory_bytes = (uint64_t)x << 20;
        }
        if ((v = json_object_get(body, "pids"))) {
                if (int_field(v, "pids", 1, 65536, &x, why, whysz) < 0)
                        return -1;
                cr->spec.pids = (uint32_t)x;
        }
        if ((v = json_object_get(body, "disk_mb"))) {
                if (int_field(v, "disk_mb", 1, 1048576, &x, why, whysz) < 0)
                        return -1;
                cr->spec.disk_bytes = (uint64_t)x << 20;
                cr->disk_requested = true;
        }
        if ((v = json_object_get(body, "timeout"))) {
                if (int_field(v, "timeout", 1, 86400, &x, why, whysz) < 0)
                        return -1;
                cr->timeout_s = (uint32_t)x;
        }
        if ((v = json_object_get(body, "auto_pause"))) {
                if (!json_is_boolean(v)) {
                        snprintf(why, whysz, "'auto_pause' must be true or false");
                        return -1;
                }
                cr->auto_pause = json_is_true(v);
        }
        if ((v = json_object_get(body, "cpus"))) {
                double c = json_number_value(v);
                if (!json_is_number(v) || !isfinite(c) || c < 0.1 || c > 64) {
                        snprintf(why, whysz, "'cpus' must be a number between 0.1 and 64");
                        return -1;
                }
                cr->spec.millicpus = (uint32_t)(c * 1000.0 + 0.5);
        }
        const char *bad;
        if ((v = json_object_get(body, "env"))) {
                if ((bad = check_string_map(v, ENV_MAX_ENTRIES, 255, ENV_VALUE_MAX, true))) {
                        snprintf(why, whysz, "'env' %s", bad);
                        return -1;
                }
                cr->env = v;
        }
        if ((v = json_object_get(body, "metadata"))) {
                if ((bad = check_string_map(v, META_MAX_ENTRIES, META_KEY_MAX, META_VALUE_MAX, false))) {
                        snprintf(why, whysz, "'metadata' %s", bad);
                        return -1;
                }
                cr->metadata = v;
        }
        /* a guest that cannot boot in that much is refused now, not after a
         * start that times out */
        struct pd_error me = { 0 };
        if (pd_tier_check_memory(cr->spec.isolation, cr->spec.memory_bytes, &me) < 0) {
                snprintf(why, whysz, "'memory_mb': %s", me.msg);
                return -1;
        }
        return 0;
}

static enum MHD_Result create_sandbox(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *body;
        if (r->body_len == 0) {
                body = json_object();   /* every field is optional */
        } else if (!(body = pd_req_json(r, &ret))) {
                return ret;
        }
        struct pd_create_req cr = { 0 };
        char why[256];
        if (parse_create(r->srv, r->key.id, body, &cr, why, sizeof why) < 0) {
                json_decref(body);
                return pd_reply_error(r, 400, "bad_request", "%s", why);
        }
        struct pd_error err = { 0 };
        struct pd_srv_sandbox *s = NULL;
        int rc = pd_manager_create(r->srv, &r->key, &cr, &s, &err);
        json_decref(body);
        if (rc < 0) {
                pd_log("warn", "sandbox create failed key=%s error=\"%s\"", r->key.id, err.msg);
                return reply_manager_error(r, rc, &err);
        }
        json_t *o = pd_api_sandbox_json(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 201, o);
}

/* ---- list ---- */

struct list_filter {
        char *meta[16];
        unsigned n_meta;
        bool too_many;
};

static enum MHD_Result collect_meta(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct list_filter *f = cls;
        if (strcmp(key, "metadata"))
                return MHD_YES;
        if (f->n_meta >= PD_ARRAY_SIZE(f->meta)) {
                f->too_many = true;
                return MHD_NO;
        }
        f->meta[f->n_meta++] = strdup(value ? value : "");
        return MHD_YES;
}

static bool meta_matches(json_t *metadata, char *const *pairs, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                const char *eq = strchr(pairs[i], '=');
                char key[META_KEY_MAX + 1];
                size_t kl = eq ? (size_t)(eq - pairs[i]) : strlen(pairs[i]);
                if (kl > META_KEY_MAX)
                        return false;
                memcpy(key, pairs[i], kl);
                key[kl] = '\0';
                json_t *v = json_object_get(metadata, key);
                if (!json_is_string(v))
                        return false;
                if (eq && strcmp(json_string_value(v), eq + 1))
                        return false;
        }
        return true;
}

static bool state_wanted(const char *filter, const char *state)
{
        if (!filter)
                return true;
        size_t sl = strlen(state);
        for (const char *p = filter; *p;) {
                const char *e = strchrnul(p, ',');
                if ((size_t)(e - p) == sl && !memcmp(p, state, sl))
                        return true;
                p = *e ? e + 1 : e;
        }
        return false;
}

static bool state_filter_ok(const char *filter)
{
        for (const char *p = filter; *p;) {
                const char *e = strchrnul(p, ',');
                size_t l = (size_t)(e - p);
                if (!((l == 7 && !memcmp(p, "running", 7)) || (l == 6 && !memcmp(p, "paused", 6)) ||
                      (l == 6 && !memcmp(p, "failed", 6))))
                        return false;
                p = *e ? e + 1 : e;
        }
        return *filter != '\0';
}

static enum MHD_Result list_sandboxes(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        const char *state = pd_req_query(r, "state");
        const char *lim = pd_req_query(r, "limit");
        const char *cursor = pd_req_query(r, "cursor");
        if (state && !state_filter_ok(state))
                return pd_reply_error(r, 400, "bad_request", "'state' must be a comma list of running, paused, failed");
        long limit = 100;
        if (lim) {
                char *end;
                errno = 0;
                limit = strtol(lim, &end, 10);
                if (errno || end == lim || *end || limit < 1 || limit > 1000)
                        return pd_reply_error(r, 400, "bad_request", "'limit' must be between 1 and 1000");
        }
        if (cursor && *cursor && pd_id_check(cursor) < 0)
                return pd_reply_error(r, 400, "bad_request", "invalid cursor");
        struct list_filter f = { 0 };
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_meta, &f);
        enum MHD_Result ret;
        if (f.too_many) {
                ret = pd_reply_error(r, 400, "bad_request", "at most 16 metadata filters");
                goto out;
        }
        struct pd_srv_sandbox **v;
        size_t n;
        if (pd_manager_snapshot(r->srv, &r->key, &v, &n) < 0) {
                ret = pd_reply_errno(r, -ENOMEM, "list");
                goto out;
        }
        json_t *arr = json_array();
        const char *next = NULL;
        for (size_t i = 0; i < n; i++) {
                struct pd_srv_sandbox *s = v[i];
                if (cursor && *cursor && strcmp(s->id, cursor) <= 0)
                        continue;
                json_t *o = pd_api_sandbox_json(r->srv, s);
                if (!o)
                        continue;
                const char *st = json_string_value(json_object_get(o, "state"));
                if (!state_wanted(state, st ? st : "") ||
                    !meta_matches(json_object_get(o, "metadata"), f.meta, f.n_meta)) {
                        json_decref(o);
                        continue;
                }
                if (json_array_size(arr) == (size_t)limit) {
                        json_decref(o);
                        size_t last = json_array_size(arr) - 1;
                        next = json_string_value(json_object_get(json_array_get(arr, last), "id"));
                        break;
                }
                json_array_append_new(arr, o);
        }
        json_t *res = json_pack("{s:o, s:o}", "sandboxes", arr, "next_cursor", next ? json_string(next) : json_null());
        pd_manager_snapshot_free(r->srv, v, n);
        ret = pd_reply_json(r, 200, res);
out:
        for (unsigned i = 0; i < f.n_meta; i++)
                free(f.meta[i]);
        return ret;
}

/* ---- one sandbox ---- */

static enum MHD_Result get_sandbox(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return not_found(r, r->params[0]);
        json_t *o = pd_api_sandbox_json(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

static enum MHD_Result delete_sandbox(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return not_found(r, r->params[0]);
        struct pd_error err = { 0 };
        int rc = pd_manager_delete(r->srv, s, &err);
        pd_server_sandbox_put(r->srv, s);
        if (rc < 0)
                return rc == -ENOENT ? not_found(r, r->params[0]) : reply_manager_error(r, rc, &err);
        return pd_reply_empty(r, 204);
}

static enum MHD_Result set_timeout(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return not_found(r, r->params[0]);
        json_t *body = pd_req_json(r, &ret);
        if (!body) {
                pd_server_sandbox_put(r->srv, s);
                return ret;
        }
        char why[256] = "";
        json_int_t t = 0;
        const char *k;
        json_t *v;
        json_object_foreach(body, k, v) {
                if (strcmp(k, "timeout")) {
                        snprintf(why, sizeof why, "unknown field '%.64s' (expected {\"timeout\": seconds})", k);
                        break;
                }
        }
        if (!why[0] && !json_object_get(body, "timeout"))
                snprintf(why, sizeof why, "missing 'timeout' (seconds from now)");
        if (!why[0])
                (void)int_field(json_object_get(body, "timeout"), "timeout", 1, 86400, &t, why, sizeof why);
        json_decref(body);
        if (why[0]) {
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_error(r, 400, "bad_request", "%s", why);
        }
        struct pd_error err = { 0 };
        int rc = pd_manager_set_timeout(r->srv, s, (uint32_t)t, &err);
        if (rc < 0) {
                pd_server_sandbox_put(r->srv, s);
                return reply_manager_error(r, rc, &err);
        }
        json_t *o = pd_api_sandbox_json(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

/* pause's optional body {"mode": "memory"|"disk"|"files"}; without it the
 * tier chooses (to disk where it can). "files": the filesystem only, resume
 * is a fresh boot. 0, or -1 with why set. */
static int pause_mode_of(struct pd_req *r, enum pd_pause_mode *mode, char *why, size_t whysz)
{
        *mode = PD_PAUSE_DEFAULT;
        if (!r->body_len)
                return 0;
        json_error_t je;
        json_t *body = json_loadb(r->body, r->body_len, 0, &je);
        const char *k;
        json_t *v;
        int ret = 0;
        if (!json_is_object(body)) {
                snprintf(why, whysz, "the body must be a JSON object {\"mode\": \"memory\"|\"disk\"|\"files\"}");
                ret = -1;
        } else {
                json_object_foreach(body, k, v) {
                        if (strcmp(k, "mode")) {
                                snprintf(why, whysz, "unknown field '%.64s' (allowed: mode)", k);
                                ret = -1;
                                break;
                        }
                        if (json_is_string(v) && !strcmp(json_string_value(v), "memory")) {
                                *mode = PD_PAUSE_MEMORY;
                        } else if (json_is_string(v) && !strcmp(json_string_value(v), "disk")) {
                                *mode = PD_PAUSE_DISK;
                        } else if (json_is_string(v) && !strcmp(json_string_value(v), "files")) {
                                *mode = PD_PAUSE_FILES;
                        } else {
                                snprintf(why, whysz, "'mode' must be \"memory\", \"disk\" or \"files\"");
                                ret = -1;
                        }
                }
        }
        json_decref(body);
        return ret;
}

static enum MHD_Result pause_resume(struct pd_req *r, bool pause)
{
        enum pd_pause_mode mode = PD_PAUSE_DEFAULT;
        char why[160] = "";
        if (pause && pause_mode_of(r, &mode, why, sizeof why) < 0)
                return pd_reply_error(r, 400, "bad_request", "%s", why);
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return not_found(r, r->params[0]);
        struct pd_error err = { 0 };
        int rc = pause ? pd_manager_pause_mode(r->srv, s, mode, &err) : pd_manager_resume(r->srv, s, &err);
        if (rc < 0) {
                pd_server_sandbox_put(r->srv, s);
                return reply_manager_error(r, rc, &err);
        }
        json_t *o = pd_api_sandbox_json(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

static enum MHD_Result pause_sandbox(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        return pause_resume(r, true);
}

static enum MHD_Result resume_sandbox(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        return pause_resume(r, false);
}

static enum MHD_Result sandbox_metrics(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!s)
                return not_found(r, r->params[0]);
        struct pd_error err = { 0 };
        struct pd_sandbox_metrics m;
        int rc = pd_manager_stats(r->srv, s, &m, &err);
        pd_server_sandbox_put(r->srv, s);
        if (rc < 0)
                return rc == -ESRCH ? pd_reply_error(r, 409, "conflict", "%s", err.msg)
                                    : pd_reply_errno(r, rc, err.msg);
        return pd_reply_json(r, 200, pd_api_metrics_json(&m));
}

static enum MHD_Result sandbox_audit(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        enum MHD_Result ret = pd_audit_reply(r, r->params[0], s);
        pd_server_sandbox_put(r->srv, s);
        return ret;
}

/* ---- health, metrics (templates: routes_templates.c) ---- */

static enum MHD_Result health(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_manager_counts c;
        pd_manager_counts(r->srv, &c);
        /* teardowns_pending: deleted sandboxes whose kernel objects are
         * still being removed (after the delete answered); 0 = none left */
        return pd_reply_json(r, 200, json_pack("{s:s, s:s, s:I, s:I}", "status", "ok", "version", PD_VERSION,
                                               "sandboxes", (json_int_t)(c.running + c.paused + c.failed),
                                               "teardowns_pending", (json_int_t)c.teardowns_pending));
}

static void appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
        for (;;) {
                va_list ap;
                va_start(ap, fmt);
                int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
                va_end(ap);
                if (n < 0)
                        return;
                if (*buf && *len + (size_t)n < *cap) {
                        *len += (size_t)n;
                        return;
                }
                size_t ncap = *cap ? *cap * 2 : 4096;
                while (ncap < *len + (size_t)n + 1)
                        ncap *= 2;
                char *b = realloc(*buf, ncap);
                if (!b)
                        return;
                *buf = b;
                *cap = ncap;
        }
}

static enum MHD_Result prom_metrics(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_server *srv = r->srv;
        struct pd_manager_counts c;
        pd_manager_counts(srv, &c);
        char *b = NULL;
        size_t len = 0, cap = 0;
        appendf(&b, &len, &cap, "# HELP paddock_sandboxes Sandboxes by state.\n# TYPE paddock_sandboxes gauge\n");
        appendf(&b, &len, &cap, "paddock_sandboxes{state=\"running\"} %zu\n", c.running);
        appendf(&b, &len, &cap, "paddock_sandboxes{state=\"paused\"} %zu\n", c.paused);
        appendf(&b, &len, &cap, "paddock_sandboxes{state=\"failed\"} %zu\n", c.failed);
        appendf(&b, &len, &cap,
                "# HELP paddock_sandbox_creates_total Sandboxes created since start.\n"
                "# TYPE paddock_sandbox_creates_total counter\npaddock_sandbox_creates_total %" PRIu64 "\n",
                c.creates_total);
        appendf(&b, &len, &cap,
                "# HELP paddock_teardowns_pending Deleted sandboxes whose mounts, network, cgroups and directory "
                "are still being removed (the delete answered once their processes were dead).\n"
                "# TYPE paddock_teardowns_pending gauge\npaddock_teardowns_pending %" PRIu64 "\n"
                "# HELP paddock_teardowns_total Deleted sandboxes torn down after the answer since start.\n"
                "# TYPE paddock_teardowns_total counter\npaddock_teardowns_total %" PRIu64 "\n",
                c.teardowns_pending, c.teardowns_total);
        appendf(&b, &len, &cap, "# HELP paddock_pool_ready Warm sandboxes ready, by template.\n"
                                "# TYPE paddock_pool_ready gauge\n");
        struct pd_pool_count pools[PD_POOL_CLASSES_MAX];
        size_t np = pd_manager_pool_ready(srv, pools, PD_ARRAY_SIZE(pools));
        for (size_t i = 0; i < np; i++) {
                bool seen = false;      /* one line per template, its classes summed */
                for (size_t j = 0; j < i && !seen; j++)
                        seen = !strcmp(pools[j].template_name, pools[i].template_name);
                if (seen)
                        continue;
                long long sum = 0;
                for (size_t j = i; j < np; j++)
                        if (!strcmp(pools[j].template_name, pools[i].template_name))
                                sum += pools[j].ready;
                appendf(&b, &len, &cap, "paddock_pool_ready{template=\"%s\"} %lld\n", pools[i].template_name, sum);
        }
        appendf(&b, &len, &cap, "# HELP paddock_pool_ready_isolation Warm sandboxes ready, by template and "
                                "isolation tier.\n# TYPE paddock_pool_ready_isolation gauge\n");
        for (size_t i = 0; i < np; i++) {
                bool seen = false;      /* classes of one template and tier differ in limits only */
                for (size_t j = 0; j < i && !seen; j++)
                        seen = !strcmp(pools[j].template_name, pools[i].template_name) &&
                               !strcmp(pools[j].isolation, pools[i].isolation);
                if (seen)
                        continue;
                long long sum = 0;
                for (size_t j = i; j < np; j++)
                        if (!strcmp(pools[j].template_name, pools[i].template_name) &&
                            !strcmp(pools[j].isolation, pools[i].isolation))
                                sum += pools[j].ready;
                appendf(&b, &len, &cap, "paddock_pool_ready_isolation{template=\"%s\",isolation=\"%s\"} %lld\n",
                        pools[i].template_name, pools[i].isolation, sum);
        }
        appendf(&b, &len, &cap, "# HELP paddock_http_requests_total HTTP responses by status class.\n"
                                "# TYPE paddock_http_requests_total counter\n");
        static const char *const cls[] = { "1xx", "2xx", "3xx", "4xx", "5xx", "other" };
        for (size_t i = 0; i < 6; i++)
                appendf(&b, &len, &cap, "paddock_http_requests_total{code=\"%s\"} %" PRIu64 "\n", cls[i],
                        __atomic_load_n(&srv->http_requests[i], __ATOMIC_RELAXED));
        /* request latency, exec, pool hits (core/metrics.c); per sandbox and
         * the pool's memory (metrics_sandboxes.c) */
        char *more = NULL;
        size_t more_len = 0;
        FILE *mf = open_memstream(&more, &more_len);
        if (mf) {
                pd_metrics_write(mf);
                pd_api_prom_sandboxes(srv, mf);
                if (fclose(mf) == 0 && more)
                        appendf(&b, &len, &cap, "%s", more);
        }
        free(more);
        appendf(&b, &len, &cap, "# HELP paddock_build_info Build information.\n# TYPE paddock_build_info gauge\n"
                                "paddock_build_info{version=\"%s\"} 1\n", PD_VERSION);
        if (!b)
                return MHD_NO;
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, b, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(b);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
        return pd_reply_response(r, 200, resp);
}

const struct pd_route pd_routes_sandboxes[] = {
        { "POST", "/api/v1/sandboxes", create_sandbox, 0, 0 },
        { "GET", "/api/v1/sandboxes", list_sandboxes, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}", get_sandbox, 0, 0 },
        { "DELETE", "/api/v1/sandboxes/{id}", delete_sandbox, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/timeout", set_timeout, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/pause", pause_sandbox, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/resume", resume_sandbox, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/metrics", sandbox_metrics, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/audit", sandbox_audit, 0, 0 },
        { "GET", "/api/v1/health", health, PD_ROUTE_PUBLIC, 0 },
        { "GET", "/healthz", health, PD_ROUTE_PUBLIC, 0 },     /* the usual probe path */
        { "GET", "/metrics", prom_metrics, PD_ROUTE_PUBLIC, 0 },
        { 0 },
};
