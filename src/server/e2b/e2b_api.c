/* E2B control plane (docs/e2b.md): the REST API the E2B SDKs call with
 * X-API-KEY, mapped onto the sandbox manager. Sandboxes made here are
 * ordinary paddock sandboxes: same table, same key scoping.
 *
 *   POST /v2/sandboxes, POST /sandboxes            create
 *   GET  /v2/sandboxes, GET /sandboxes             list (metadata, state, limit, nextToken)
 *   GET  /sandboxes/{id}                           info
 *   GET  /sandboxes/{id}/metrics                   [metric]
 *   POST /sandboxes/{id}/timeout                   204
 *   DELETE /sandboxes/{id}                         204 / 404
 *   POST /sandboxes/{id}/pause                     204 / 409
 *   POST /sandboxes/{id}/fork                      201 [{sandbox} | {error}]
 *   PUT  /sandboxes/{id}/network                   204 (e2b_network.c)
 *   POST /sandboxes/{id}/resume, .../connect,
 *        /v2/sandboxes/{id}/connect                200 running / 201 resumed
 *
 * Errors are E2B's {"code": status, "message": "..."}. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/e2b/e2b.h"
#include "server/e2b/e2b_pool.h"
#include "server/api/templates.h"
#include "image/start.h"
#include "server/core/manager.h"
#include "server/core/store.h"
#include "lib/template.h"
#include "lib/util.h"

#define E2B_META_MAX 64
#define E2B_ENV_MAX 256
#define E2B_TIMEOUT_MAX 86400

enum MHD_Result pd_e2b_reply_error(struct pd_req *r, unsigned status, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        json_t *o = json_pack("{s:i, s:s}", "code", (int)status, "message", msg);
        if (!o)
                o = json_pack("{s:i, s:s}", "code", (int)status, "message", "(message not printable)");
        return pd_reply_json(r, status, o);
}

/* ---- tokens (core/tokens.h) ---- */

int pd_e2b_token(struct pd_server *srv, const char *sandbox_id, char out[PD_E2B_TOKEN_LEN + 1])
{
        return pd_token(srv, sandbox_id, out);
}

bool pd_e2b_streq(const char *a, const char *b)
{
        return pd_streq_ct(a, b);
}

char *pd_e2b_b64(const void *data, size_t len)
{
        char *out = malloc(4 * ((len + 2) / 3) + 1);
        if (!out)
                return NULL;
        EVP_EncodeBlock((unsigned char *)out, data, (int)len);
        return out;
}

/* ---- formatting ---- */

static const char *e2b_template_for(const char *name)
{
        /* The E2B code interpreter's template: our base plus the kernel
         * bridge the server installs on first use (docs/e2b.md). */
        if (!strcmp(name, "code-interpreter-v1") || !strcmp(name, "code-interpreter") ||
            !strcmp(name, "code-interpreter-beta"))
                return "base";
        return name;
}

static json_t *create_body(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        char token[PD_E2B_TOKEN_LEN + 1];
        if (pd_e2b_token(srv, s->id, token) < 0)
                return NULL;
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "sandboxID", s->id, "templateID", s->template_name,
                              "clientID", "paddock", "envdVersion", PD_E2B_ENVD_VERSION, "envdAccessToken", token,
                              "alias", s->template_name);
        /* domain and trafficAccessToken: the SDK's getHost(port) (e2b_ports.c) */
        if (o && pd_e2b_ports_answer(srv, s, o) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* The network as E2B reports it: allowInternetAccess (the policy's mode
 * is open) into *internet, and the notes: in one line why the network
 * reaches nothing when it does not (docs/network.md, "E2B"). */
static json_t *e2b_network_notes(struct pd_server *srv, struct pd_srv_sandbox *s, bool *internet)
{
        json_t *notes = json_array();
        struct pd_net_info ni;
        *internet = false;
        if (pd_manager_net_info(srv, s, &ni, NULL) == 0) {
                json_t *pol = ni.policy_json ? json_loads(ni.policy_json, 0, NULL) : NULL;
                const char *mode = json_string_value(json_object_get(pol, "mode"));
                *internet = mode && !strcmp(mode, "open");
                if (notes && ni.have_egress && ni.egress_problem[0])
                        json_array_append_new(notes, json_sprintf("network: %s", ni.egress_problem));
                json_decref(pol);
        }
        pd_net_info_clear(&ni);
        return notes ? notes : json_array();
}

/* E2B's view of a state (lifecycle.h): it knows running and paused; a
 * failed sandbox shows as running (its calls fail). */
static const char *e2b_state(enum pd_sb_state s)
{
        return pd_sb_is_paused(s) ? "paused" : "running";
}

json_t *pd_e2b_info_json(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        struct pd_sandbox_info i;
        pd_manager_sandbox_info(srv, s, &i);
        char started[32], end[32];
        pd_rfc3339_ms(i.created_ms, started);
        pd_rfc3339_ms(i.expires_ms ? i.expires_ms : i.created_ms, end);
        double cpus = i.millicpus / 1000.0;
        bool internet = false;
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:i, s:I, s:I, s:s, s:s, s:o}",
                              "sandboxID", i.id, "templateID", i.template_name, "alias", i.template_name,
                              "clientID", "paddock", "startedAt", started, "endAt", end, "metadata", i.metadata,
                              "cpuCount", (int)ceil(cpus > 0 ? cpus : 1), "memoryMB", (json_int_t)(i.memory_bytes >> 20),
                              "diskSizeMB", (json_int_t)(i.disk_bytes >> 20), "envdVersion", PD_E2B_ENVD_VERSION,
                              "state", e2b_state(i.state), "notes", e2b_network_notes(srv, s, &internet));
        if (o)
                json_object_set_new(o, "allowInternetAccess", json_boolean(internet));
        if (o)
                pd_e2b_ports_info(srv, s, &i, o);
        pd_sandbox_info_clear(&i);
        return o;
}

static bool string_map_ok(json_t *o, size_t max)
{
        if (!json_is_object(o) || json_object_size(o) > max)
                return false;
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
                if (!json_is_string(v) || !*k || strlen(k) > 1024 || json_string_length(v) > 32768 ||
                    strlen(json_string_value(v)) != json_string_length(v))
                        return false;
        }
        return true;
}

static enum MHD_Result manager_error(struct pd_req *r, int rc, const struct pd_error *err)
{
        switch (-rc) {
        case EAGAIN: return pd_e2b_reply_error(r, 429, "%s", err->msg);
        case ESHUTDOWN: return pd_e2b_reply_error(r, 503, "%s", err->msg);
        case ENOENT:
        case ESRCH: return pd_e2b_reply_error(r, 404, "%s", err->msg);
        case EBUSY: return pd_e2b_reply_error(r, 409, "%s", err->msg);
        case EINVAL:
        case ENOTSUP:
        /* the template's start command failed (its output in the
         * message): 400, the 4xx E2B's spec lists for a create */
        case PD_E_START_FAILED: return pd_e2b_reply_error(r, 400, "%s", err->msg);
        default: return pd_e2b_reply_error(r, 500, "%s", err->msg);
        }
}

/* ---- create ---- */

static enum MHD_Result route_create(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        json_error_t je;
        /* released at return, after the error message quoting the template
         * or an envVars name (strings the body owns) is formatted */
        _pd_cleanup_json_ json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, &je) : json_object();
        if (!json_is_object(body))
                return pd_e2b_reply_error(r, 400, "the body must be a JSON object");
        struct pd_create_req cr = { 0 };
        pd_spec_defaults(&cr.spec);
        cr.timeout_s = 300;
        const char *tpl = "base";
        json_t *v;
        if ((v = json_object_get(body, "templateID")) && !json_is_null(v)) {
                if (!json_is_string(v))
                        return pd_e2b_reply_error(r, 400, "templateID must be a string");
                tpl = json_string_value(v);
        }
        /* another tier: a templateID that names it ("microvm": the SDKs
         * pass no other field through; its base template), or an
         * "isolation" field from other clients */
        if (pd_isolation_parse(tpl, &cr.spec.isolation) == 0)
                tpl = "base";
        if ((v = json_object_get(body, "isolation")) && !json_is_null(v) &&
            (!json_is_string(v) || pd_isolation_parse(json_string_value(v), &cr.spec.isolation) < 0))
                return pd_e2b_reply_error(r, 400, "isolation must be one of %s", pd_isolation_names());
        /* "NAME:TAG": a tag of the key's own template names its build
         * (e2b_tags.c; paddock keeps one, the template's) */
        char tagged[80];
        if (strchr(tpl, ':')) {
                if (pd_e2b_tag_resolve(r->srv, r->key.id, tpl, tagged, sizeof tagged) < 0)
                        return pd_e2b_reply_error(r, 404, "template '%.140s' not found", tpl);
                tpl = tagged;
        }
        const char *real = e2b_template_for(tpl);
        char tpl_owner[40];
        if (pd_template_name_check(real) < 0 ||
            (strcmp(real, "base") &&
             !((pd_store_template_exists(r->srv->store, real) && pd_tpl_visible(r->srv, real, r->key.id, tpl_owner)) ||
               pd_e2b_own_snapshot(r->srv, &r->key, real))))
                return pd_e2b_reply_error(r, 404, "template '%.64s' not found", tpl);
        snprintf(cr.template_name, sizeof cr.template_name, "%s", real);
        /* the code interpreter's sandboxes: a pool of their own, each with
         * a running kernel (e2b_ci.c) */
        if (real != tpl)
                cr.pool_prep = &pd_e2b_ci_prep;
        if ((v = json_object_get(body, "timeout")) && !json_is_null(v)) {
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > E2B_TIMEOUT_MAX)
                        return pd_e2b_reply_error(r, 400, "timeout must be 0..%d seconds", E2B_TIMEOUT_MAX);
                cr.timeout_s = json_integer_value(v) ? (uint32_t)json_integer_value(v) : 1;
        }
        if ((v = json_object_get(body, "metadata")) && !json_is_null(v)) {
                if (!string_map_ok(v, E2B_META_MAX))
                        return pd_e2b_reply_error(r, 400, "metadata must be an object of strings");
                cr.metadata = v;
        }
        if ((v = json_object_get(body, "envVars")) && !json_is_null(v)) {
                if (!string_map_ok(v, E2B_ENV_MAX))
                        return pd_e2b_reply_error(r, 400, "envVars must be an object of strings");
                const char *k;
                json_t *x;
                json_object_foreach(v, k, x) {
                        if (strchr(k, '='))
                                return pd_e2b_reply_error(r, 400, "envVars: invalid name '%.64s'", k);
                }
                cr.env = v;
        }
        /* autoPause: pause at the deadline instead of killing (connect resumes). */
        if ((v = json_object_get(body, "autoPause")) && !json_is_null(v)) {
                if (!json_is_boolean(v))
                        return pd_e2b_reply_error(r, 400, "autoPause must be true or false");
                cr.auto_pause = json_is_true(v);
        }
        /* autoPauseMemory: false: that pause keeps the filesystem only */
        if ((v = json_object_get(body, "autoPauseMemory")) && !json_is_null(v)) {
                if (!json_is_boolean(v))
                        return pd_e2b_reply_error(r, 400, "autoPauseMemory must be true or false");
                cr.auto_pause_files = cr.auto_pause && json_is_false(v);
        }
        /* network.allowPublicTraffic and autoResume (e2b_ports.c) */
        char pwhy[256];
        if (pd_e2b_ports_opts(body, &cr, pwhy, sizeof pwhy) < 0)
                return pd_e2b_reply_error(r, 400, "%s", pwhy);
        if (cr.auto_resume && cr.auto_pause_files)
                return pd_e2b_reply_error(r, 400, "autoResume cannot be combined with autoPauseMemory: false (a "
                                                  "filesystem-only pause is resumed by connect only)");
        /* allow_internet_access and network: paddock's policy (e2b_network.c);
         * secure, mcp...: accepted. */
        char why[256];
        json_t *network = pd_e2b_network_policy(r->srv, body, why, sizeof why);
        if (!network && why[0])
                return pd_e2b_reply_error(r, 400, "%s", why);
        cr.network = network;
        /* E2B's default is a network: a warm pool class of its own
         * (e2b_pool.c), as the plain pool holds no sandbox with one */
        if (network && !cr.pool_prep)
                cr.pool_prep = &pd_e2b_net_prep;
        struct pd_error err = { 0 };
        struct pd_srv_sandbox *s = NULL;
        int rc = pd_manager_create(r->srv, &r->key, &cr, &s, &err);
        json_decref(network);
        if (rc < 0) {
                pd_log("warn", "e2b sandbox create failed key=%s error=\"%s\"", r->key.id, err.msg);
                return manager_error(r, rc, &err);
        }
        json_t *o = create_body(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        if (!o)
                return pd_e2b_reply_error(r, 500, "cannot make the access token");
        return pd_reply_json(r, 201, o);
}

/* ---- one sandbox ---- */

static struct pd_srv_sandbox *get_sb(struct pd_req *r, enum MHD_Result *ret)
{
        struct pd_srv_sandbox *s = r->n_params ? pd_server_sandbox_get(r->srv, r->params[0], &r->key) : NULL;
        if (!s)
                *ret = pd_e2b_reply_error(r, 404, "sandbox '%.64s' not found", r->n_params ? r->params[0] : "");
        return s;
}

static enum MHD_Result route_info(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        json_t *o = pd_e2b_info_json(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        return o ? pd_reply_json(r, 200, o) : pd_e2b_reply_error(r, 500, "no memory");
}

/* start / end of GET .../metrics: unix seconds; absent: unbounded. */
static bool metrics_bound(struct pd_req *r, const char *name, int64_t *out)
{
        const char *v = pd_req_query(r, name);
        if (!v || !*v)
                return true;
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || *end || x < 0)
                return false;
        *out = x;
        return true;
}

static enum MHD_Result route_metrics(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        /* paddock keeps no history: the one sample, taken now, is in the
         * answer when now is inside [start, end] (docs/e2b.md) */
        int64_t from = 0, to = INT64_MAX;
        if (!metrics_bound(r, "start", &from) || !metrics_bound(r, "end", &to) || from > to)
                return pd_e2b_reply_error(r, 400, "start and end must be unix seconds, start <= end");
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                /* end is whole seconds: the sample of this second is in it */
                if ((int64_t)now.tv_sec < from || (int64_t)now.tv_sec > to) {
                        pd_server_sandbox_put(r->srv, s);
                        return pd_reply_json(r, 200, json_array());
                }
        }
        json_t *info = pd_e2b_info_json(r->srv, s);
        struct pd_error err = { 0 };
        struct pd_sandbox_metrics m;
        int rc = pd_manager_stats(r->srv, s, &m, &err);
        uint64_t age_ms = 0;
        {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
                age_ms = now > s->created_ms ? now - s->created_ms : 1;
        }
        pd_server_sandbox_put(r->srv, s);
        json_t *arr = json_array();
        if (rc == 0 && info) {
                char ts[32];
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                pd_rfc3339_ms((uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u, ts);
                json_int_t cpus = json_integer_value(json_object_get(info, "cpuCount"));
                double cpu_s = (double)m.st.cpu_ns / 1e9;
                double pct = age_ms ? 100.0 * cpu_s / ((double)age_ms / 1000.0) / (double)(cpus ? cpus : 1) : 0;
                if (pct > 100)
                        pct = 100;
                json_array_append_new(
                        arr, json_pack("{s:s, s:s, s:I, s:f, s:I, s:I, s:I, s:I}", "timestamp", ts, "sandboxID",
                                       json_string_value(json_object_get(info, "sandboxID")), "cpuCount", cpus,
                                       "cpuUsedPct", pct, "memUsed",
                                       (json_int_t)m.st.memory_current, "memTotal", (json_int_t)m.memory_limit,
                                       "diskUsed", (json_int_t)m.st.disk_used, "diskTotal",
                                       (json_int_t)m.disk_limit));
        }
        json_decref(info);
        return pd_reply_json(r, 200, arr);
}

static enum MHD_Result route_timeout(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        json_error_t je;
        json_t *body = json_loadb(r->body ? r->body : "", r->body_len, 0, &je);
        json_t *t = json_object_get(body, "timeout");
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > E2B_TIMEOUT_MAX) {
                json_decref(body);
                return pd_e2b_reply_error(r, 400, "timeout must be an integer 0..%d (seconds)", E2B_TIMEOUT_MAX);
        }
        uint32_t secs = json_integer_value(t) ? (uint32_t)json_integer_value(t) : 1;
        json_decref(body);
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        struct pd_error err = { 0 };
        int rc = pd_manager_set_timeout(r->srv, s, secs, &err);
        pd_server_sandbox_put(r->srv, s);
        return rc < 0 ? manager_error(r, rc, &err) : pd_reply_empty(r, 204);
}

static enum MHD_Result route_delete(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        struct pd_error err = { 0 };
        int rc = pd_manager_delete(r->srv, s, &err);
        pd_server_sandbox_put(r->srv, s);
        return rc < 0 ? manager_error(r, rc, &err) : pd_reply_empty(r, 204);
}

static enum MHD_Result route_pause(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        /* {memory: false} (the SDK's keepMemory: false): the filesystem
         * only; resume is a fresh boot of it */
        json_error_t je;
        _pd_cleanup_json_ json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, &je) : json_object();
        json_t *mem = json_object_get(body, "memory");
        if (!json_is_object(body) || (mem && !json_is_null(mem) && !json_is_boolean(mem)))
                return pd_e2b_reply_error(r, 400, "the body must be a JSON object {memory: true|false}");
        enum pd_pause_mode mode = json_is_false(mem) ? PD_PAUSE_FILES : PD_PAUSE_DEFAULT;
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        struct pd_error err = { 0 };
        int rc = pd_manager_pause_mode(r->srv, s, mode, &err);
        pd_server_sandbox_put(r->srv, s);
        return rc < 0 ? manager_error(r, rc, &err) : pd_reply_empty(r, 204);
}

/* connect / resume: resume a paused sandbox (201), or just answer (200);
 * {timeout} (seconds) moves the deadline either way. */
static enum MHD_Result route_connect(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        json_error_t je;
        json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, &je) : json_object();
        json_t *t = json_object_get(body, "timeout");
        if (t && !json_is_null(t) &&
            (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > E2B_TIMEOUT_MAX)) {
                json_decref(body);
                return pd_e2b_reply_error(r, 400, "timeout must be an integer 0..%d (seconds)", E2B_TIMEOUT_MAX);
        }
        uint32_t secs = json_is_integer(t) && json_integer_value(t) ? (uint32_t)json_integer_value(t) : 0;
        json_decref(body);
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        struct pd_error err = { 0 };
        unsigned status = 200;
        int rc = 0;
        if (pd_sb_is_paused(pd_srv_sandbox_state(s))) {
                rc = pd_manager_resume(r->srv, s, &err);
                if (rc == -EBUSY && !pd_sb_is_paused(pd_srv_sandbox_state(s)))
                        rc = 0; /* resumed by a concurrent connect */
                else if (rc == 0)
                        status = 201;
        }
        /* A resumed sandbox runs for the timeout asked; a running one is
         * only ever extended (E2B: connecting must not cut short what
         * another client set). */
        if (rc == 0 && secs && status == 200) {
                struct pd_sandbox_info i;
                pd_manager_sandbox_info(r->srv, s, &i);
                pd_sandbox_info_clear(&i);
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                uint64_t want = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u + (uint64_t)secs * 1000u;
                if (i.expires_ms && i.expires_ms >= want)
                        secs = 0;
        }
        if (rc == 0 && secs)
                rc = pd_manager_set_timeout(r->srv, s, secs, &err);
        json_t *o = rc == 0 ? create_body(r->srv, s) : NULL;
        pd_server_sandbox_put(r->srv, s);
        if (rc < 0)
                return manager_error(r, rc, &err);
        return o ? pd_reply_json(r, status, o) : pd_e2b_reply_error(r, 500, "no memory");
}

/* fork: {count, timeout} -> [{sandbox: <create answer>} | {error: {code, message}}].
 * paddock forks all or none: a refusal after the source was found is each
 * entry's error, as E2B reports forks that did not start. */
static enum MHD_Result route_fork(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        json_error_t je;
        _pd_cleanup_json_ json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, &je) : json_object();
        if (!json_is_object(body))
                return pd_e2b_reply_error(r, 400, "the body must be a JSON object");
        json_t *c = json_object_get(body, "count"), *t = json_object_get(body, "timeout");
        if (c && !json_is_null(c) && (!json_is_integer(c) || json_integer_value(c) < 1 || json_integer_value(c) > PD_FORK_MAX))
                return pd_e2b_reply_error(r, 400, "count must be 1..%d", PD_FORK_MAX);
        if (t && !json_is_null(t) && (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > E2B_TIMEOUT_MAX))
                return pd_e2b_reply_error(r, 400, "timeout must be 0..%d seconds", E2B_TIMEOUT_MAX);
        unsigned count = json_is_integer(c) ? (unsigned)json_integer_value(c) : 1;
        uint32_t secs = json_is_integer(t) ? (json_integer_value(t) ? (uint32_t)json_integer_value(t) : 1) : 300;
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        struct pd_error err = { 0 };
        struct pd_srv_sandbox *made[PD_FORK_MAX];
        int rc = pd_manager_fork(r->srv, &r->key, s, count, made, &err);
        pd_server_sandbox_put(r->srv, s);
        json_t *arr = json_array();
        for (unsigned i = 0; i < count; i++) {
                json_t *one = NULL;
                if (rc == 0) {
                        struct pd_error e2 = { 0 };
                        if (pd_manager_set_timeout(r->srv, made[i], secs, &e2) == 0)
                                one = create_body(r->srv, made[i]);
                        pd_server_sandbox_put(r->srv, made[i]);
                        one = one ? json_pack("{s:o}", "sandbox", one)
                                  : json_pack("{s:{s:i, s:s}}", "error", "code", 500, "message", "fork started, then failed");
                } else {
                        int st = rc == -EAGAIN ? 429 : rc == -EINVAL || rc == -ENOTSUP ? 400 : rc == -EBUSY ? 409 : 500;
                        one = json_pack("{s:{s:i, s:s}}", "error", "code", st, "message", err.msg);
                }
                if (one)
                        json_array_append_new(arr, one);
        }
        if (rc < 0)
                pd_log("warn", "e2b fork failed key=%s error=\"%s\"", r->key.id, err.msg);
        return pd_reply_json(r, 201, arr);
}

const struct pd_route pd_routes_e2b[] = {
        { "POST", "/sandboxes/{id}/fork", route_fork, 0, 0 },
        { "PUT", "/sandboxes/{id}/network", pd_e2b_route_network, 0, 0 },
        { "POST", "/v2/sandboxes", route_create, 0, 0 },
        { "POST", "/sandboxes", route_create, 0, 0 },
        { "GET", "/v2/sandboxes", pd_e2b_route_list, 0, 0 },
        { "GET", "/sandboxes", pd_e2b_route_list, 0, 0 },
        { "GET", "/sandboxes/{id}", route_info, 0, 0 },
        { "GET", "/v2/sandboxes/{id}", route_info, 0, 0 },
        { "GET", "/sandboxes/{id}/metrics", route_metrics, 0, 0 },
        { "POST", "/sandboxes/{id}/timeout", route_timeout, 0, 0 },
        { "DELETE", "/sandboxes/{id}", route_delete, 0, 0 },
        { "POST", "/sandboxes/{id}/pause", route_pause, 0, 0 },
        { "POST", "/sandboxes/{id}/resume", route_connect, 0, 0 },
        { "POST", "/sandboxes/{id}/connect", route_connect, 0, 0 },
        { "POST", "/v2/sandboxes/{id}/connect", route_connect, 0, 0 },
        /* Signed download/upload URLs carry no E2b-Sandbox-Id header when
         * the SDK runs with E2B_SANDBOX_URL: the handler finds the sandbox
         * whose token signed the URL. */
        { "GET", "/files", pd_e2b_envd_handle, PD_ROUTE_PUBLIC | PD_ROUTE_STREAM_BODY, 0 },
        { "POST", "/files", pd_e2b_envd_handle, PD_ROUTE_PUBLIC | PD_ROUTE_STREAM_BODY, 0 },
        { NULL, NULL, NULL, 0, 0 },
};

static bool envd_match(struct pd_server *srv, struct MHD_Connection *conn, const char *path)
{
        return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "E2b-Sandbox-Id") != NULL;
}

/* E2B's envd and code interpreter share our address: the SDK names the
 * sandbox in a header, whatever the path, and authenticates with that
 * sandbox's own access token. */
const struct pd_route_matcher pd_e2b_envd_matcher = {
        .name = "e2b-envd",
        .group = "e2b",
        .match = envd_match,
        .route = { "*", "*", pd_e2b_envd_handle, PD_ROUTE_PUBLIC | PD_ROUTE_STREAM_BODY, 0 },
};
