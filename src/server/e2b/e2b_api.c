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
#include "server/core/manager.h"
#include "server/api/ports.h"
#include "server/core/store.h"
#include "lib/template.h"
#include "lib/util.h"

#define E2B_META_MAX 64
#define E2B_ENV_MAX 256
#define E2B_LIST_MAX 1000
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

/* ---- secrets and tokens ---- */

static pthread_mutex_t secret_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t secret[32];
static bool secret_loaded;

static int load_secret(struct pd_server *srv)
{
        if (secret_loaded)
                return 0;
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/e2b-secret", srv->state.dir);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
                ssize_t n = read(fd, secret, sizeof secret);
                close(fd);
                if (n == (ssize_t)sizeof secret) {
                        secret_loaded = true;
                        return 0;
                }
        }
        if (RAND_bytes(secret, sizeof secret) != 1)
                return -EIO;
        char tmp[PATH_MAX + 48];
        snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        int r = pd_write_all(fd, secret, sizeof secret);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        close(fd);
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                return r;
        }
        secret_loaded = true;
        return 0;
}

int pd_e2b_token(struct pd_server *srv, const char *sandbox_id, char out[PD_E2B_TOKEN_LEN + 1])
{
        pthread_mutex_lock(&secret_lock);
        int r = load_secret(srv);
        uint8_t mac[32];
        unsigned maclen = 0;
        if (r == 0 && !HMAC(EVP_sha256(), secret, sizeof secret, (const unsigned char *)sandbox_id,
                            strlen(sandbox_id), mac, &maclen))
                r = -EIO;
        pthread_mutex_unlock(&secret_lock);
        if (r < 0)
                return r;
        static const char hex[] = "0123456789abcdef";
        for (unsigned i = 0; i < 32; i++) {
                out[2 * i] = hex[mac[i] >> 4];
                out[2 * i + 1] = hex[mac[i] & 15];
        }
        out[PD_E2B_TOKEN_LEN] = '\0';
        return 0;
}

bool pd_e2b_streq(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        unsigned char d = la != lb;
        for (size_t i = 0; i < la && i < lb; i++)
                d |= (unsigned char)(a[i] ^ b[i]);
        return d == 0;
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
        char token[PD_E2B_TOKEN_LEN + 1], traffic[PD_E2B_TOKEN_LEN + 1];
        if (pd_e2b_token(srv, s->id, token) < 0 || pd_ports_token(srv, s->id, traffic) < 0)
                return NULL;
        /* the SDK's getHost(port) is "<port>-<id>.<domain>": our ports, which
         * take the trafficAccessToken (our port token) in
         * E2B-Traffic-Access-Token; the code-interpreter SDK sends it too */
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "sandboxID", s->id, "templateID",
                         s->template_name, "clientID", "paddock", "envdVersion", PD_E2B_ENVD_VERSION,
                         "envdAccessToken", token, "trafficAccessToken", traffic, "domain",
                         srv->cfg.domain ? srv->cfg.domain : "localhost", "alias", s->template_name);
}

static json_t *info_body(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        json_t *n = pd_manager_sandbox_json(srv, s);
        if (!n)
                return NULL;
        json_t *exp = json_object_get(n, "expires_at");
        const char *state = json_string_value(json_object_get(n, "state"));
        double cpus = json_number_value(json_object_get(n, "cpus"));
        /* the network as E2B reports it, and in a note why it reaches
         * nothing when it does not (docs/network.md, "E2B") */
        json_t *net = json_object_get(n, "network");
        const char *mode = json_string_value(json_object_get(net, "mode"));
        const char *why = json_string_value(json_object_get(json_object_get(net, "egress"), "problem"));
        json_t *notes = json_array();
        if (why)
                json_array_append_new(notes, json_sprintf("network: %s", why));
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:O, s:O, s:O, s:i, s:I, s:I, s:s, s:s, s:b, s:o}",
                              "sandboxID", s->id, "templateID", s->template_name, "alias", s->template_name,
                              "clientID", "paddock", "startedAt", json_object_get(n, "created_at"), "endAt",
                              json_is_string(exp) ? exp : json_object_get(n, "created_at"), "metadata",
                              json_object_get(n, "metadata"), "cpuCount", (int)ceil(cpus > 0 ? cpus : 1),
                              "memoryMB", json_integer_value(json_object_get(n, "memory_mb")), "diskSizeMB",
                              json_integer_value(json_object_get(n, "disk_mb")), "envdVersion",
                              PD_E2B_ENVD_VERSION, "state", state && !strcmp(state, "paused") ? "paused" : "running",
                              "allowInternetAccess", mode && !strcmp(mode, "open"), "notes", notes);
        json_decref(n);
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
        case ENOTSUP: return pd_e2b_reply_error(r, 400, "%s", err->msg);
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
        /* the microvm tier: templateID "microvm" (the SDKs pass no other
         * field through), or an "isolation" field from other clients */
        if (!strcmp(tpl, "microvm")) {
                tpl = "base";
                cr.spec.isolation = PD_ISO_MICROVM;
        }
        if ((v = json_object_get(body, "isolation")) && !json_is_null(v) &&
            (!json_is_string(v) || pd_isolation_parse(json_string_value(v), &cr.spec.isolation) < 0))
                return pd_e2b_reply_error(r, 400, "isolation must be one of process, container, supervised, microvm");
        const char *real = e2b_template_for(tpl);
        if (pd_template_name_check(real) < 0 ||
            (strcmp(real, "base") && !pd_store_template_exists(r->srv->store, real)))
                return pd_e2b_reply_error(r, 404, "template '%.64s' not found", tpl);
        snprintf(cr.template_name, sizeof cr.template_name, "%s", real);
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
        /* allow_internet_access and network: paddock's policy (e2b_network.c);
         * secure, mcp...: accepted. */
        char why[256];
        json_t *network = pd_e2b_network_policy(r->srv, body, why, sizeof why);
        if (!network && why[0])
                return pd_e2b_reply_error(r, 400, "%s", why);
        cr.network = network;
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

/* ---- list ---- */

struct list_q {
        char *meta;                     /* "k=v&k2=v2" (decoded once by MHD) */
        char states[128];
};

static enum MHD_Result collect_q(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct list_q *q = cls;
        if (!value)
                return MHD_YES;
        if (!strcmp(key, "state")) {
                size_t l = strlen(q->states);
                snprintf(q->states + l, sizeof q->states - l, "%s%s", l ? "," : "", value);
        } else if (!strcmp(key, "metadata") && !q->meta) {
                q->meta = strdup(value);
        }
        return MHD_YES;
}

static int hexval(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void url_decode(char *s)
{
        char *o = s;
        for (char *p = s; *p; p++) {
                if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
                        *o++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
                        p += 2;
                } else {
                        *o++ = *p == '+' ? ' ' : *p;
                }
        }
        *o = '\0';
}

static bool meta_match(json_t *md, const char *filter)
{
        if (!filter || !*filter)
                return true;
        char *copy = strdup(filter), *save = NULL;
        bool ok = copy != NULL;
        for (char *pair = copy ? strtok_r(copy, "&", &save) : NULL; pair && ok; pair = strtok_r(NULL, "&", &save)) {
                char *eq = strchr(pair, '=');
                if (eq)
                        *eq = '\0';
                url_decode(pair);
                if (eq)
                        url_decode(eq + 1);
                json_t *v = json_object_get(md, pair);
                ok = json_is_string(v) && (!eq || !strcmp(json_string_value(v), eq + 1));
        }
        free(copy);
        return ok;
}

static bool state_match(const char *states, const char *state)
{
        if (!*states)
                return true;
        char copy[128], *save = NULL;
        snprintf(copy, sizeof copy, "%s", states);
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (!strcmp(t, state))
                        return true;
        return false;
}

static enum MHD_Result route_list(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct list_q q = { 0 };
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_q, &q);
        long limit = E2B_LIST_MAX;
        const char *ls = pd_req_query(r, "limit");
        if (ls && *ls) {
                char *end;
                limit = strtol(ls, &end, 10);
                if (*end || limit < 1 || limit > E2B_LIST_MAX) {
                        free(q.meta);
                        return pd_e2b_reply_error(r, 400, "limit must be 1..%d", E2B_LIST_MAX);
                }
        }
        const char *next = pd_req_query(r, "nextToken");
        const char *tplq = pd_req_query(r, "template");
        struct pd_srv_sandbox **v = NULL;
        size_t n = 0;
        if (pd_manager_snapshot(r->srv, &r->key, &v, &n) < 0) {
                free(q.meta);
                return pd_e2b_reply_error(r, 500, "cannot list sandboxes");
        }
        json_t *arr = json_array();
        const char *last = NULL;
        bool more = false;
        for (size_t i = 0; i < n; i++) {
                struct pd_srv_sandbox *s = v[i];
                if (next && *next && strcmp(s->id, next) <= 0)
                        continue;       /* snapshot is sorted by id */
                json_t *info = info_body(r->srv, s);
                if (!info)
                        continue;
                const char *st = json_string_value(json_object_get(info, "state"));
                if (!state_match(q.states, st ? st : "") || !meta_match(json_object_get(info, "metadata"), q.meta) ||
                    (tplq && *tplq && strcmp(tplq, s->template_name))) {
                        json_decref(info);
                        continue;
                }
                if (json_array_size(arr) >= (size_t)limit) {
                        json_decref(info);
                        more = true;
                        break;
                }
                json_array_append_new(arr, info);
                last = s->id;
        }
        char token[PD_ID_LEN + 1] = "";
        if (more && last)
                snprintf(token, sizeof token, "%s", last);
        pd_manager_snapshot_free(r->srv, v, n);
        free(q.meta);
        char *text = json_dumps(arr, JSON_COMPACT);
        json_decref(arr);
        if (!text)
                return MHD_NO;
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        if (*token)
                MHD_add_response_header(resp, "X-Next-Token", token);
        return pd_reply_response(r, 200, resp);
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
        json_t *o = info_body(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        return o ? pd_reply_json(r, 200, o) : pd_e2b_reply_error(r, 500, "no memory");
}

static enum MHD_Result route_metrics(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        json_t *info = info_body(r->srv, s), *st = NULL;
        struct pd_error err = { 0 };
        int rc = pd_manager_stats(r->srv, s, &st, &err);
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
                double cpu_s = json_number_value(json_object_get(st, "cpu_seconds"));
                double pct = age_ms ? 100.0 * cpu_s / ((double)age_ms / 1000.0) / (double)(cpus ? cpus : 1) : 0;
                if (pct > 100)
                        pct = 100;
                json_array_append_new(
                        arr, json_pack("{s:s, s:s, s:I, s:f, s:I, s:I, s:I, s:I}", "timestamp", ts, "sandboxID",
                                       json_string_value(json_object_get(info, "sandboxID")), "cpuCount", cpus,
                                       "cpuUsedPct", pct, "memUsed",
                                       json_integer_value(json_object_get(st, "memory_bytes")), "memTotal",
                                       json_integer_value(json_object_get(st, "memory_limit_bytes")), "diskUsed",
                                       json_integer_value(json_object_get(st, "disk_used_bytes")), "diskTotal",
                                       json_integer_value(json_object_get(st, "disk_limit_bytes"))));
        }
        json_decref(info);
        json_decref(st);
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
        int rc = pd_manager_delete(r->srv, s, "sandbox.delete", &err);
        pd_server_sandbox_put(r->srv, s);
        return rc < 0 ? manager_error(r, rc, &err) : pd_reply_empty(r, 204);
}

static enum MHD_Result route_pause(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = get_sb(r, &ret);
        if (!s)
                return ret;
        struct pd_error err = { 0 };
        int rc = pd_manager_pause(r->srv, s, &err);
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
        if (!strcmp(s->state, "paused")) {
                rc = pd_manager_resume(r->srv, s, &err);
                if (rc == -EBUSY && strcmp(s->state, "paused"))
                        rc = 0; /* resumed by a concurrent connect */
                else if (rc == 0)
                        status = 201;
        }
        if (rc == 0 && secs)
                rc = pd_manager_set_timeout(r->srv, s, secs, &err);
        json_t *o = rc == 0 ? create_body(r->srv, s) : NULL;
        pd_server_sandbox_put(r->srv, s);
        if (rc < 0)
                return manager_error(r, rc, &err);
        return o ? pd_reply_json(r, status, o) : pd_e2b_reply_error(r, 500, "no memory");
}

const struct pd_route pd_routes_e2b[] = {
        { "POST", "/v2/sandboxes", route_create, 0, 0 },
        { "POST", "/sandboxes", route_create, 0, 0 },
        { "GET", "/v2/sandboxes", route_list, 0, 0 },
        { "GET", "/sandboxes", route_list, 0, 0 },
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
