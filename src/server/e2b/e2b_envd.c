/* E2B envd (docs/e2b.md): the per-sandbox daemon the E2B SDKs talk to,
 * served by paddock serve itself. The router hands us every request that
 * carries E2b-Sandbox-Id (and GET/POST /files, for signed URLs); we parse
 * the path ourselves:
 *
 *   port 49999                        code interpreter (e2b_ci.c)
 *   GET /health                       204
 *   GET|POST /files                   e2b_fs.c
 *   POST /process.Process/<M>         here: Connect protocol, JSON codec
 *   POST /filesystem.Filesystem/<M>   e2b_fs.c
 *
 * Auth: X-Access-Token = the sandbox's token (e2b_api.c), or for /files a
 * URL signature made with it. The user comes from Authorization: Basic
 * base64("name:"), default "user".
 *
 * Connect: unary calls answer application/json; server-streaming calls
 * (Start, Connect, WatchDir) answer application/connect+json envelopes
 * (flag byte, u32 BE length, JSON), the last flagged 0x02 with {} or
 * {"error": {...}}. */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/e2b/e2b.h"
#include "server/core/metrics.h"
#include "server/core/manager.h"
#include "server/api/procs.h"
#include "server/core/store.h"
#include "lib/spec.h"
#include "lib/base64.h"
#include "lib/util.h"

#define JSON_BODY_MAX (4u << 20)
#define CI_BODY_MAX (16u << 20)
#define KEEPALIVE_DEFAULT_MS 30000

/* ------------------------------------------------------------------ */
/* Connect helpers                                                      */

static unsigned code_status(const char *code)
{
        static const struct { const char *c; unsigned s; } t[] = {
                { "canceled", 499 },        { "unknown", 500 },          { "invalid_argument", 400 },
                { "deadline_exceeded", 504 }, { "not_found", 404 },       { "already_exists", 409 },
                { "permission_denied", 403 }, { "resource_exhausted", 429 }, { "failed_precondition", 400 },
                { "aborted", 409 },         { "out_of_range", 400 },     { "unimplemented", 501 },
                { "internal", 500 },        { "unavailable", 503 },      { "data_loss", 500 },
                { "unauthenticated", 401 },
        };
        for (size_t i = 0; i < PD_ARRAY_SIZE(t); i++)
                if (!strcmp(t[i].c, code))
                        return t[i].s;
        return 500;
}

const char *pd_e2b_connect_code(int neg_errno)
{
        switch (-neg_errno) {
        case ENOENT:
        case ESRCH: return "not_found";
        case EEXIST: return "already_exists";
        case EINVAL:
        case ENAMETOOLONG:
        case ELOOP:
        case EISDIR:
        case ENOTDIR:
        case ENOTTY:
        case EXDEV: return "invalid_argument";
        case EACCES:
        case EPERM: return "permission_denied";
        case ENOSPC:
        case EDQUOT:
        case EFBIG:
        case EMSGSIZE: return "resource_exhausted";
        case ENOTEMPTY:
        case EBUSY: return "failed_precondition";
        case ETIMEDOUT: return "deadline_exceeded";
        case EPIPE:
        case ECONNRESET:
        case ECONNREFUSED:
        case ESHUTDOWN: return "unavailable";
        default: return "internal";
        }
}

enum MHD_Result pd_e2b_connect_error(struct pd_req *r, unsigned status, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        json_t *o = json_pack("{s:s, s:s}", "code", code, "message", msg);
        if (!o)
                o = json_pack("{s:s, s:s}", "code", code, "message", "(message not printable)");
        return pd_reply_json(r, status ? status : code_status(code), o);
}

enum MHD_Result pd_e2b_connect_agent_error(struct pd_req *r, int neg_errno, const char *msg)
{
        const char *code = pd_e2b_connect_code(neg_errno);
        return pd_e2b_connect_error(r, code_status(code), code, "%s", msg && *msg ? msg : strerror(-neg_errno));
}

int pd_e2b_envelope(char **buf, size_t *len, size_t *cap, uint8_t flags, json_t *msg)
{
        char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        json_decref(msg);
        if (!text)
                return -ENOMEM;
        size_t n = strlen(text);
        if (*len + n + 5 > *cap) {
                size_t c = *cap ? *cap : 4096;
                while (c < *len + n + 5)
                        c *= 2;
                char *b = realloc(*buf, c);
                if (!b) {
                        free(text);
                        return -ENOMEM;
                }
                *buf = b;
                *cap = c;
        }
        uint8_t *p = (uint8_t *)*buf + *len;
        p[0] = flags;
        p[1] = (uint8_t)(n >> 24);
        p[2] = (uint8_t)(n >> 16);
        p[3] = (uint8_t)(n >> 8);
        p[4] = (uint8_t)n;
        memcpy(p + 5, text, n);
        *len += n + 5;
        free(text);
        return 0;
}

/* ------------------------------------------------------------------ */
/* streaming responses                                                  */

/* A Connect stream: the core's streaming response (core/stream.h). When
 * its agent connection is lost (the sandbox was killed, timed out, or its
 * agent died) the HTTP connection is dropped without an end envelope, as
 * E2B's does when a sandbox goes away under a request: the SDKs read the
 * dropped connection, check /health (502: gone) and report "the sandbox
 * was killed or reached its end of life". */
static void connect_fail(struct pd_agent_stream *st, int k)
{
        (void)k;
        st->done = st->failed = true;
}

struct pd_agent_stream *pd_e2b_stream_new(struct pd_req *r, struct pd_srv_sandbox *s)
{
        struct pd_agent_stream *st = pd_agent_stream_new(r, s);
        if (st)
                st->on_fail = connect_fail;
        return st;
}

void pd_e2b_stream_msg(struct pd_agent_stream *st, uint8_t flags, json_t *msg)
{
        if (st->pos == st->len)
                st->pos = st->len = 0;
        if (pd_e2b_envelope(&st->buf, &st->len, &st->cap, flags, msg) < 0)
                st->done = true;
        if (flags & 2)
                st->done = true;
}

void pd_e2b_stream_end_error(struct pd_agent_stream *st, const char *code, const char *msg)
{
        json_t *e = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
        if (!e)
                e = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", "error");
        pd_e2b_stream_msg(st, 2, e);
}

enum MHD_Result pd_e2b_stream_error_reply(struct pd_req *r, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        char *buf = NULL;
        size_t len = 0, cap = 0;
        json_t *e = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
        if (!e)
                e = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", "error");
        if (pd_e2b_envelope(&buf, &len, &cap, 2, e) < 0)
                return MHD_NO;
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(buf);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/connect+json");
        return pd_reply_response(r, 200, resp);
}

/* ------------------------------------------------------------------ */
/* the call: headers, auth, body                                        */

static const char *hdr(struct pd_req *r, const char *name)
{
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

bool pd_e2b_call_user(struct pd_e2b_call *c, struct pd_route_user *u)
{
        return pd_spawn_user_parse(&c->img, c->user[0] ? c->user : NULL, u);
}

static void parse_basic_user(struct pd_req *r, struct pd_e2b_call *c)
{
        const char *a = hdr(r, "Authorization");
        if (!a || strncasecmp(a, "Basic ", 6))
                return;
        a += 6;
        while (*a == ' ')
                a++;
        uint8_t *dec = NULL;
        size_t n = 0;
        if (pd_b64_decode_alloc(a, strlen(a), PD_B64_LENIENT, &dec, &n) < 0)
                return;
        size_t ul = 0;
        while (ul < n && dec[ul] != ':')
                ul++;
        if (ul > 0 && ul < sizeof c->user && !memchr(dec, 0, ul)) {
                memcpy(c->user, dec, ul);
                c->user[ul] = '\0';
                c->user_given = true;
        }
        free(dec);
}

/* "v1_" + base64(sha256("path:op:user:token[:exp]")), '=' stripped; both
 * the standard alphabet (what the SDK sends) and the url-safe one. */
static bool signature_ok(const char *sig, const char *path, const char *op, const char *user, const char *token,
                         const char *exp)
{
        char raw[8192];
        int n = exp ? snprintf(raw, sizeof raw, "%s:%s:%s:%s:%s", path, op, user, token, exp)
                    : snprintf(raw, sizeof raw, "%s:%s:%s:%s", path, op, user, token);
        if (n < 0 || (size_t)n >= sizeof raw)
                return false;
        uint8_t md[32];
        unsigned mdlen = 0;
        if (!EVP_Digest(raw, (size_t)n, md, &mdlen, EVP_sha256(), NULL))
                return false;
        char *b = pd_e2b_b64(md, mdlen);
        if (!b)
                return false;
        size_t bl = strlen(b);
        while (bl && b[bl - 1] == '=')
                b[--bl] = '\0';
        char want[80];
        snprintf(want, sizeof want, "v1_%s", b);
        bool ok = pd_e2b_streq(sig, want);
        if (!ok) {
                for (char *p = want; *p; p++)
                        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
                ok = pd_e2b_streq(sig, want);
        }
        free(b);
        return ok;
}

/* A signed /files URL against the token of sandbox id, in envd's order:
 * the signature first (it covers the expiration), then the expiration. */
enum sig_check { SIG_NONE, SIG_BAD, SIG_EXPIRED, SIG_OK };

static enum sig_check signed_url_check(struct pd_req *r, const char *id, bool write)
{
        const char *sig = pd_req_query(r, "signature");
        if (!sig)
                return SIG_NONE;
        const char *path = pd_req_query(r, "path");
        const char *user = pd_req_query(r, "username");
        const char *exp = pd_req_query(r, "signature_expiration");
        char token[PD_E2B_TOKEN_LEN + 1];
        if (pd_e2b_token(r->srv, id, token) < 0)
                return SIG_BAD;
        const char *op = write ? "write" : "read";
        bool ok;
        if (user)
                ok = signature_ok(sig, path ? path : "", op, user, token, exp);
        else    /* the SDK signs an absent user as "undefined" (JavaScript) */
                ok = signature_ok(sig, path ? path : "", op, "undefined", token, exp) ||
                     signature_ok(sig, path ? path : "", op, "", token, exp) ||
                     signature_ok(sig, path ? path : "", op, "user", token, exp);
        if (!ok)
                return SIG_BAD;
        if (exp) {
                char *end;
                errno = 0;
                long long e = strtoll(exp, &end, 10);
                if (errno || *end || end == exp)
                        return SIG_BAD;
                if ((long long)time(NULL) > e)
                        return SIG_EXPIRED;
        }
        return SIG_OK;
}

/* envd's 401 messages for a signed URL that is refused. */
static void sig_fail(struct pd_e2b_call *c, enum sig_check k)
{
        pd_deferred_fail(&c->fail, 401, "unauthenticated", "%s",
                         k == SIG_NONE      ? "missing signature query parameter"
                         : k == SIG_EXPIRED ? "signature is already expired"
                                            : "invalid signature");
}

/* A signed URL without E2b-Sandbox-Id: the sandbox whose token made the
 * signature (expired or not: *why says). */
static struct pd_srv_sandbox *find_by_signature(struct pd_req *r, bool write, enum sig_check *why)
{
        struct pd_srv_sandbox **v = NULL, *found = NULL;
        size_t n = 0;
        *why = pd_req_query(r, "signature") ? SIG_BAD : SIG_NONE;
        if (*why == SIG_NONE || pd_manager_snapshot(r->srv, NULL, &v, &n) < 0)
                return NULL;
        for (size_t i = 0; i < n && !found; i++) {
                enum sig_check k = signed_url_check(r, v[i]->id, write);
                if (k == SIG_OK || k == SIG_EXPIRED) {
                        *why = k;
                        if (k == SIG_OK)
                                found = pd_server_sandbox_get(r->srv, v[i]->id, NULL);
                        break;
                }
        }
        pd_manager_snapshot_free(r->srv, v, n);
        return found;
}

/* Context management on the code interpreter (the kernel bridge's
 * /contexts routes; /health): what the traffic token may reach. Anything
 * else (/execute runs code) needs the access token. The bridge matches
 * exact paths after stripping trailing slashes, and so does this. */
static bool ci_traffic_path(const char *path)
{
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/')
                n--;
        return (n == 9 && !strncmp(path, "/contexts", 9)) || (n > 10 && !strncmp(path, "/contexts/", 10)) ||
               (n == 7 && !strncmp(path, "/health", 7));
}

/* The code interpreter (port 49999): the sandbox's envd token is checked
 * by the caller; here the two other credentials. The code-interpreter SDK
 * sends X-Access-Token with /execute only; with /contexts it sends
 * E2B-Traffic-Access-Token, the trafficAccessToken of the create answer
 * (our port token, e2b_ports.c), which opens context management only: a
 * port token is what a sandbox's owner shares to show a web page, and it
 * must not run code. Other clients may use the owner's API key. */
static bool ci_auth_ok(struct pd_req *r, const char *id, const char *path)
{
        const char *traffic = hdr(r, "E2B-Traffic-Access-Token");
        char token[PD_E2B_TOKEN_LEN + 1];
        if (traffic && ci_traffic_path(path) && pd_ports_token(r->srv, id, token) == 0 &&
            pd_e2b_streq(traffic, token))
                return true;
        const char *a = hdr(r, "Authorization"), *k = NULL;
        if (a && !strncasecmp(a, "Bearer ", 7)) {
                k = a + 7;
                while (*k == ' ')
                        k++;
        }
        if (!k || !*k)
                k = hdr(r, "X-API-Key");
        struct pd_key key;
        if (!k || !*k || pd_store_key_lookup(r->srv->store, k, &key) < 0)
                return false;
        /* only the owner's key: another key's sandbox is as if unknown */
        struct pd_srv_sandbox *s = pd_server_sandbox_get(r->srv, id, &key);
        if (!s)
                return false;
        pd_server_sandbox_put(r->srv, s);
        return true;
}

static void call_free(struct pd_req *r, struct pd_e2b_call *c)
{
        if (!c)
                return;
        pd_e2b_files_free(c);
        if (c->s)
                pd_server_sandbox_put(r->srv, c->s);
        free(c->body);
        pd_template_run_free(&c->img);
        free(c);
        r->route_state = NULL;
}

/* The sandbox's image defaults, and the call's user among its users
 * (user, root, the image's own User): known once the sandbox is. */
static void check_user(struct pd_req *r, struct pd_e2b_call *c)
{
        pd_spawn_image_load(r->srv, c->s, &c->img);
        struct pd_route_user u;
        if (c->user[0] && !pd_e2b_call_user(c, &u))
                pd_deferred_fail(&c->fail, 400, "invalid_argument", "unknown user '%.32s' (user or root%s%.64s)",
                                 c->user, c->img.has_user ? ", or the image's " : "",
                                 c->img.has_user ? c->img.user : "");
}

static struct pd_e2b_call *call_open(struct pd_req *r)
{
        struct pd_e2b_call *c = calloc(1, sizeof *c);
        if (!c)
                return NULL;
        r->route_state = c;
        const char *url = r->url ? r->url : "/";
        snprintf(c->path, sizeof c->path, "%s", url);
        size_t pl = strlen(c->path);
        if (pl > 1 && c->path[pl - 1] == '/')
                c->path[pl - 1] = '\0';
        const char *port = hdr(r, "E2b-Sandbox-Port");
        c->port = port ? (unsigned)strtoul(port, NULL, 10) : PD_E2B_ENVD_PORT;
        parse_basic_user(r, c);
        const char *qu = NULL;
        if (!strcmp(c->path, "/files") && (qu = pd_req_query(r, "username")) && *qu) {
                snprintf(c->user, sizeof c->user, "%s", qu);
                c->user_given = true;
        }
        const char *id = hdr(r, "E2b-Sandbox-Id");
        bool is_files = !strcmp(c->path, "/files") && c->port != PD_E2B_CI_PORT;
        bool write = !strcmp(r->method, "POST");
        if (!id) {
                enum sig_check why = SIG_NONE;
                if (!is_files) {
                        pd_deferred_fail(&c->fail, 401, "unauthenticated", "missing E2b-Sandbox-Id");
                        return c;
                }
                if (!(c->s = find_by_signature(r, write, &why))) {
                        sig_fail(c, why);
                        return c;
                }
                c->signed_ok = true;
                check_user(r, c);
                return c;
        }
        /* Whether the caller may use this id is settled before whether it
         * exists: an unknown id and a live sandbox without the right token
         * answer the same (401), or the difference would tell a prober
         * which ids are live. The tokens are HMACs of the id: they can be
         * checked for any id. */
        char token[PD_E2B_TOKEN_LEN + 1];
        const char *given = hdr(r, "X-Access-Token");
        if (pd_e2b_token(r->srv, id, token) < 0) {
                pd_deferred_fail(&c->fail, 500, "internal", "cannot compute the access token");
                return c;
        }
        enum sig_check sk = SIG_NONE;
        if (given && pd_e2b_streq(given, token)) {
                /* fine */
        } else if (is_files && given && *given) {
                pd_deferred_fail(&c->fail, 401, "unauthenticated", "access token present in header but does not match");
                return c;
        } else if (is_files && (sk = signed_url_check(r, id, write)) == SIG_OK) {
                c->signed_ok = true;
        } else if (is_files) {
                sig_fail(c, sk);
                return c;
        } else if (c->port == PD_E2B_CI_PORT && ci_auth_ok(r, id, c->path)) {
                /* fine */
        } else {
                pd_deferred_fail(&c->fail, 401, "unauthenticated",
                                 c->port == PD_E2B_CI_PORT
                                         ? "missing or wrong X-Access-Token, E2B-Traffic-Access-Token or API key"
                                         : "missing or wrong X-Access-Token");
                return c;
        }
        c->s = pd_server_sandbox_get(r->srv, id, NULL);
        if (!c->s) {
                /* E2B answers an unknown sandbox with 502 from its proxy; the
                 * SDK turns that into "sandbox not found" (isRunning: false). */
                pd_deferred_fail(&c->fail, 502, "unavailable", "The sandbox %.64s was not found", id);
                return c;
        }
        if (pd_sb_is_paused(pd_srv_sandbox_state(c->s)))
                pd_deferred_fail(&c->fail, 502, "unavailable", "sandbox %s is paused; connect to resume it", c->s->id);
        else
                check_user(r, c);
        return c;
}

static void buffer_chunk(struct pd_e2b_call *c, const char *chunk, size_t n)
{
        if (c->too_large || n > c->max - c->len) {
                c->too_large = true;
                return;
        }
        if (c->len + n + 1 > c->cap) {
                size_t cap = c->cap ? c->cap : 4096;
                while (cap < c->len + n + 1)
                        cap *= 2;
                char *b = realloc(c->body, cap);
                if (!b) {
                        c->too_large = true;
                        return;
                }
                c->body = b;
                c->cap = cap;
        }
        memcpy(c->body + c->len, chunk, n);
        c->len += n;
        c->body[c->len] = '\0';
}

/* ------------------------------------------------------------------ */
/* processes                                                            */

struct eproc {
        uint32_t pid;
        bool found, exited, pty;
        uint64_t end_out, end_err;
        json_t *config;         /* {cmd, args, envs, cwd} */
};

/* envd's ProcessConfig of a listed process. */
static json_t *eproc_config(const struct pd_proc *p)
{
        json_t *rest = json_array(), *envs = json_object();
        for (size_t i = 1; i < p->argc; i++) {
                json_t *js = json_string(p->argv[i]);
                if (js)
                        json_array_append_new(rest, js);
        }
        for (size_t i = 0; i < p->envc; i++) {
                const char *eq = strchr(p->env[i], '=');
                json_t *js = eq ? json_string(eq + 1) : NULL;
                if (js) {
                        char *k = strndup(p->env[i], (size_t)(eq - p->env[i]));
                        if (k)
                                json_object_set_new(envs, k, js);
                        else
                                json_decref(js);
                        free(k);
                }
        }
        json_t *cmd = p->argc ? json_string(p->argv[0]) : NULL;
        json_t *c = json_pack("{s:o, s:o, s:o}", "cmd", cmd ? cmd : json_string(""), "args", rest, "envs", envs);
        if (p->cwd)
                json_object_set_new(c, "cwd", json_string(p->cwd));
        return c;
}

/* LIST, then the process named by selector {pid} or {tag}. */
static int find_proc(struct pd_client *conn, json_t *selector, struct eproc *out, json_t **all, struct pd_error *err)
{
        struct pd_proc_list l;
        int k = pd_client_list(conn, &l, err);
        if (k < 0) {
                pd_proc_list_free(&l);
                return k;
        }
        json_t *jpid = json_object_get(selector, "pid"), *jtag = json_object_get(selector, "tag");
        uint32_t want = 0;
        if (json_is_integer(jpid))
                want = (uint32_t)json_integer_value(jpid);
        else if (json_is_string(jpid))
                want = (uint32_t)strtoul(json_string_value(jpid), NULL, 10);
        if (out)
                memset(out, 0, sizeof *out);
        if (all)
                *all = json_array();
        for (size_t i = 0; i < l.n; i++) {
                const struct pd_proc *p = &l.v[i];
                const char *tag = p->tag ? p->tag : "";
                /* envd lists running processes; paddock's own (warm-ups, the
                 * kernel bridge) are not the user's */
                if (all && !p->exited && strncmp(tag, "paddock-", 8)) {
                        json_t *o = json_pack("{s:o, s:i}", "config", eproc_config(p), "pid", (int)p->pid);
                        if (tag[0])
                                json_object_set_new(o, "tag", json_string(tag));
                        json_array_append_new(*all, o);
                }
                bool match = out && !out->found &&
                             ((want && p->pid == want) ||
                              (!want && json_is_string(jtag) && tag[0] && !strcmp(tag, json_string_value(jtag))));
                if (match)
                        *out = (struct eproc){ .pid = p->pid, .found = true, .exited = p->exited, .pty = p->pty,
                                               .end_out = p->end[0], .end_err = p->end[1],
                                               .config = eproc_config(p) };
        }
        pd_proc_list_free(&l);
        return 0;
}

/* The process events of a Start/Connect stream. */
static void proc_frame(struct pd_agent_stream *st, const struct pd_frame_hdr *h, const uint8_t *p)
{
        if (h->id != st->id)
                return;
        uint64_t off;
        const uint8_t *data;
        size_t n;
        if (pd_output_decode(h, p, &off, &data, &n)) {
                char *b = pd_e2b_b64(data, n);
                if (!b)
                        return;
                const char *which = h->aux == PD_STREAM_STDERR ? "stderr" : h->aux == PD_STREAM_PTY ? "pty" : "stdout";
                pd_e2b_stream_msg(st, 0, json_pack("{s:{s:{s:s}}}", "event", "data", which, b));
                free(b);
        } else if (h->type == PD_T_EXIT) {
                struct pd_exit x;
                pd_exit_decode(p, h->len, &x);
                if (!strcmp(x.reason, "timeout")) {
                        /* Connect-Timeout-Ms passed: what a Connect server
                         * answers when the deadline is exceeded. */
                        pd_e2b_stream_end_error(st, "deadline_exceeded", "the command timed out (Connect-Timeout-Ms)");
                        return;
                }
                char status[64];
                json_t *end;
                if (x.has_signal || !x.has_code) {
                        const char *sn = x.has_signal ? sigabbrev_np((int)x.signo) : NULL;
                        snprintf(status, sizeof status, "signal: %s", x.signo == SIGKILL ? "killed" : sn ? sn : "unknown");
                        end = json_pack("{s:i, s:b, s:s}", "exitCode", -1, "exited", false, "status", status);
                        /* envd's EndEvent.error: what the SDKs show as the result's error */
                        uint64_t mb = 0;
                        bool guest_oom = !strcmp(x.reason, "oom");     /* a microvm's agent says so */
                        if (guest_oom)
                                mb = pd_procs_memory_limit_mb(st->srv, st->s);
                        if (guest_oom || pd_procs_oom(st->srv, st->s, x.has_signal && x.signo == SIGKILL, &mb)) {
                                char why[96];
                                snprintf(why, sizeof why, "out of memory: the kernel killed the command (limit %llu MiB)",
                                         (unsigned long long)mb);
                                json_object_set_new(end, "error", json_string(why));
                        }
                } else {
                        snprintf(status, sizeof status, "exit status %u", x.code);
                        end = json_pack("{s:i, s:b, s:s}", "exitCode", (int)x.code, "exited", true, "status", status);
                }
                pd_e2b_stream_msg(st, 0, json_pack("{s:{s:o}}", "event", "end", end));
                pd_e2b_stream_msg(st, 2, json_object());
        }
}

static void proc_idle(struct pd_agent_stream *st)
{
        pd_e2b_stream_msg(st, 0, json_pack("{s:{s:{}}}", "event", "keepalive"));
}

static int keepalive_ms(struct pd_req *r)
{
        const char *k = hdr(r, "Keepalive-Ping-Interval");
        long s = k ? strtol(k, NULL, 10) : 0;
        if (s <= 0 || s > 300)
                return KEEPALIVE_DEFAULT_MS;
        return (int)(s * 1000 / 2 > 1000 ? s * 1000 / 2 : 1000);
}

/* Start's options: envd's ProcessConfig (cmd, args, envs, cwd), pty,
 * stdin, tag and the Connect deadline. The same checks as the native API
 * where envd has the same field, with proto3's reading of an empty value
 * (cwd "", tag "", a pty size of 0: not set). */
struct estart {
        struct pd_spawn_opts o;
        struct pd_strv args, env;
        struct pd_route_user u;
        char cwd[PATH_MAX];
};

static void estart_free(struct estart *x)
{
        pd_strv_free(&x->args);
        pd_strv_free(&x->env);
}

static int refuse(char *why, size_t whysz, int k, const char *msg)
{
        snprintf(why, whysz, "%s", msg);
        return k;
}

static int estart_build(struct pd_req *r, struct pd_e2b_call *c, json_t *body, struct estart *x, char *why,
                        size_t whysz)
{
        struct pd_spawn_opts *o = &x->o;
        json_t *proc = json_object_get(body, "process");
        json_t *cmd = json_object_get(proc, "cmd"), *args = json_object_get(proc, "args");
        if (!pd_json_clean_str(cmd, 4096) || !json_string_length(cmd))
                return refuse(why, whysz, -EINVAL, "process.cmd must be a non-empty string");
        if (!pd_e2b_call_user(c, &x->u))
                return refuse(why, whysz, -EINVAL, "unknown user");
        if (args && !json_is_array(args))
                return refuse(why, whysz, -EINVAL, "process.args must be a list of strings");
        if (pd_strv_add(&x->args, json_string_value(cmd)) < 0)
                return refuse(why, whysz, -ENOMEM, "out of memory");
        size_t i;
        json_t *a;
        json_array_foreach(args, i, a) {
                if (!pd_json_clean_str(a, 1u << 19))
                        return refuse(why, whysz, -EINVAL, "process.args must be strings");
                if (pd_strv_add(&x->args, json_string_value(a)) < 0)
                        return refuse(why, whysz, -ENOMEM, "out of memory");
        }
        json_t *jpty = json_object_get(body, "pty");
        json_t *size = json_object_get(jpty, "size");
        bool pty = json_is_object(jpty);
        uint32_t rows = 24, cols = 80;
        if (json_is_integer(json_object_get(size, "rows")) && json_integer_value(json_object_get(size, "rows")) > 0)
                rows = (uint32_t)json_integer_value(json_object_get(size, "rows"));
        if (json_is_integer(json_object_get(size, "cols")) && json_integer_value(json_object_get(size, "cols")) > 0)
                cols = (uint32_t)json_integer_value(json_object_get(size, "cols"));
        if (rows > 65535 || cols > 65535)
                return refuse(why, whysz, -EINVAL, "pty size out of range");
        if (pty) {
                o->pty_rows = (uint16_t)rows;
                o->pty_cols = (uint16_t)cols;
        }
        /* env: defaults, the sandbox's envVars, the request's envs */
        json_t *env = pd_spawn_env_image(c->s, &x->u, pty, &c->img);
        json_t *envs = json_object_get(proc, "envs");
        int k = 0;
        if (envs && !json_is_null(envs) && !json_is_object(envs)) {
                snprintf(why, whysz, "process.envs must be an object of strings");
                k = -EINVAL;
        }
        if (k == 0 && json_is_object(envs))
                k = pd_spawn_env_merge(env, envs, why, whysz);
        if (k == 0 && pd_spawn_env_list(env, &x->env) < 0) {
                snprintf(why, whysz, "out of memory");
                k = -ENOMEM;
        }
        json_decref(env);
        if (k < 0)
                return k;
        json_t *jcwd = json_object_get(proc, "cwd");
        if (jcwd && !json_is_null(jcwd) && (!pd_json_clean_str(jcwd, PATH_MAX - 1)))
                return refuse(why, whysz, -EINVAL, "process.cwd must be a path without NUL bytes");
        if (json_string_length(jcwd)) {
                const char *cw = json_string_value(jcwd);
                int n = cw[0] == '/' ? snprintf(x->cwd, sizeof x->cwd, "%s", cw)
                                     : snprintf(x->cwd, sizeof x->cwd, "%s/%s", x->u.home, cw);
                if (n < 0 || (size_t)n >= sizeof x->cwd)
                        return refuse(why, whysz, -EINVAL, "process.cwd too long");
        } else {
                snprintf(x->cwd, sizeof x->cwd, "%s", pd_spawn_default_cwd(&c->img, &x->u));
        }
        o->cwd = x->cwd;
        o->uid = x->u.uid;
        o->gid = x->u.gid;
        o->groups = x->u.groups;
        o->n_groups = x->u.n_groups;
        /* envd keeps stdin open unless the request says stdin: false
         * (pd_spawn_opts: the native API's default is the opposite) */
        o->stdin_open = !pty && !json_is_false(json_object_get(body, "stdin"));
        json_t *jtag = json_object_get(body, "tag");
        if (jtag && !json_is_null(jtag) && !pd_json_clean_str(jtag, 255))
                return refuse(why, whysz, -EINVAL, "tag must be a string of at most 255 bytes");
        if (json_string_length(jtag))
                o->tag = json_string_value(jtag);
        const char *tmo = hdr(r, "Connect-Timeout-Ms");
        if (tmo) {
                unsigned long long ms = strtoull(tmo, NULL, 10);
                if (ms > 0)
                        o->timeout_ms = ms;
        }
        /* the Start stream is this connection's output */
        o->follow = true;
        o->argv = (const char *const *)x->args.v;
        o->argc = x->args.n;
        o->env = (const char *const *)x->env.v;
        o->envc = x->env.n;
        if (pd_spawn_check(o) < 0)
                return refuse(why, whysz, -EINVAL, "request too large");
        return 0;
}

static enum MHD_Result proc_start(struct pd_req *r, struct pd_e2b_call *c, json_t *body)
{
        struct estart x = { 0 };
        char why[256];
        int k = estart_build(r, c, body, &x, why, sizeof why);
        if (k < 0) {
                estart_free(&x);
                return k == -ENOMEM ? pd_e2b_connect_error(r, 500, "internal", "%s", why)
                                    : pd_e2b_connect_error(r, 400, "invalid_argument", "%s", why);
        }
        struct pd_agent_stream *st = pd_e2b_stream_new(r, c->s);
        if (!st) {
                estart_free(&x);
                return MHD_NO;
        }
        c->s = NULL;    /* the stream owns the reference now */
        struct pd_error err = { 0 };
        uint32_t pid = 0;
        k = pd_route_agent_spawn(st->s, &st->cl, &x.o, &pid, &err);
        if (k < 0) {
                estart_free(&x);
                enum MHD_Result ret = pd_e2b_stream_error_reply(r, pd_e2b_connect_code(k), "%s", err.msg);
                pd_agent_stream_free(st);
                return ret;
        }
        pd_audit(r->srv, st->s->id, st->s->key_id, "process.start",
                 json_pack("{s:s, s:s, s:s, s:i, s:b, s:s}", "cmd", x.args.v[0], "user", x.u.name, "cwd", x.cwd,
                           "pid", (int)pid, "pty", x.o.pty_rows != 0, "via", "e2b"));
        pd_metrics_command(PD_METRICS_E2B);
        st->id = pid;
        st->pty = x.o.pty_rows != 0;
        estart_free(&x);
        st->on_frame = proc_frame;
        st->on_idle = proc_idle;
        st->idle_ms = keepalive_ms(r);
        pd_e2b_stream_msg(st, 0, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", (int)pid));
        return pd_agent_stream_reply(r, st, 200, "application/connect+json");
}

/* Connect: output from now on (E2B semantics: a new subscriber sees new
 * output; what was printed before is not replayed). */
/* Output that overtakes the second ATTACH's REPLY belongs to the stream. */
static int proc_frame_early(void *ctx, const struct pd_frame_hdr *h, const uint8_t *p, struct pd_error *err)
{
        proc_frame(ctx, h, p);
        return 0;
}

static enum MHD_Result proc_connect(struct pd_req *r, struct pd_e2b_call *c, json_t *body)
{
        struct pd_agent_stream *st = pd_e2b_stream_new(r, c->s);
        if (!st)
                return MHD_NO;
        c->s = NULL;
        struct pd_error err = { 0 };
        struct eproc e = { 0 };
        int k = pd_route_agent(st->s, &st->cl, &err);
        if (k >= 0)
                k = find_proc(&st->cl, json_object_get(body, "process"), &e, NULL, &err);
        if (k >= 0 && !e.found)
                k = pd_error_setx(&err, ESRCH, "process not found");
        json_decref(e.config);
        if (k < 0) {
                enum MHD_Result ret = pd_e2b_stream_error_reply(r, pd_e2b_connect_code(k), "%s", err.msg);
                pd_agent_stream_free(st);
                return ret;
        }
        st->id = e.pid;
        st->pty = e.pty;
        st->on_frame = proc_frame;
        st->on_idle = proc_idle;
        st->idle_ms = keepalive_ms(r);
        /* the start event first: output may come before the last ATTACH's
         * REPLY (a failed ATTACH discards the stream, start event and all) */
        pd_e2b_stream_msg(st, 0, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", (int)e.pid));
        st->cl.on_frame = proc_frame_early;
        st->cl.frame_ctx = st;
        uint32_t streams[2] = { e.pty ? PD_STREAM_PTY : PD_STREAM_STDOUT, PD_STREAM_STDERR };
        uint64_t offs[2] = { e.end_out, e.end_err };
        for (unsigned i = 0; i < (e.pty ? 1u : 2u) && k >= 0; i++)
                k = pd_client_attach(&st->cl, e.pid, streams[i], offs[i], true, NULL, &err);
        st->cl.on_frame = NULL;
        if (k < 0) {
                enum MHD_Result ret = pd_e2b_stream_error_reply(r, pd_e2b_connect_code(k), "%s", err.msg);
                pd_agent_stream_free(st);
                return ret;
        }
        return pd_agent_stream_reply(r, st, 200, "application/connect+json");
}

static int parse_signal(json_t *j)
{
        if (json_is_integer(j))
                return (int)json_integer_value(j);
        const char *s = json_string_value(j);
        if (!s)
                return SIGTERM;
        if (!strncmp(s, "SIGNAL_", 7))
                s += 7;
        if (!strncmp(s, "SIG", 3))
                s += 3;
        static const struct { const char *n; int v; } t[] = {
                { "KILL", SIGKILL }, { "TERM", SIGTERM }, { "INT", SIGINT }, { "HUP", SIGHUP },
                { "QUIT", SIGQUIT }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "STOP", SIGSTOP },
                { "CONT", SIGCONT },
        };
        for (size_t i = 0; i < PD_ARRAY_SIZE(t); i++)
                if (!strcmp(s, t[i].n))
                        return t[i].v;
        return -1;
}

/* Unary process calls over one agent connection. */
static enum MHD_Result proc_unary(struct pd_req *r, struct pd_e2b_call *c, const char *method, json_t *body)
{
        struct pd_client conn;
        struct pd_error err = { 0 };
        int k = pd_route_agent(c->s, &conn, &err);
        if (k < 0) {
                pd_client_close(&conn);
                return pd_e2b_connect_agent_error(r, k, err.msg);
        }
        enum MHD_Result ret;
        if (!strcmp(method, "List")) {
                json_t *all = NULL;
                k = find_proc(&conn, NULL, NULL, &all, &err);
                pd_client_close(&conn);
                if (k < 0)
                        return pd_e2b_connect_agent_error(r, k, err.msg);
                return pd_reply_json(r, 200, json_pack("{s:o}", "processes", all));
        }
        struct eproc e;
        k = find_proc(&conn, json_object_get(body, "process"), &e, NULL, &err);
        if (k >= 0 && (!e.found || e.exited))
                k = pd_error_setx(&err, ESRCH, "process not found");
        json_decref(e.config);
        if (k < 0) {
                /* fall through to the error */
        } else if (!strcmp(method, "SendInput")) {
                json_t *in = json_object_get(body, "input");
                json_t *data = json_object_get(in, "stdin");
                if (!data)
                        data = json_object_get(in, "pty");
                uint8_t *bytes = NULL;
                size_t n = 0;
                if (!json_is_string(data) ||
                    pd_b64_decode_alloc(json_string_value(data), json_string_length(data), PD_B64_LENIENT, &bytes, &n) < 0) {
                        pd_client_close(&conn);
                        return pd_e2b_connect_error(r, 400, "invalid_argument", "input must hold base64 stdin or pty");
                }
                k = pd_client_stdin(&conn, e.pid, bytes, n);
                free(bytes);
                /* a PING after the bytes: its reply means they were taken */
                if (k >= 0)
                        k = pd_client_ping(&conn, NULL, &err);
        } else if (!strcmp(method, "CloseStdin")) {
                k = pd_client_stdin_close(&conn, e.pid, &err);
        } else if (!strcmp(method, "SendSignal")) {
                int sig = parse_signal(json_object_get(body, "signal"));
                if (sig <= 0 || sig >= 65) {
                        pd_client_close(&conn);
                        return pd_e2b_connect_error(r, 400, "invalid_argument", "unknown signal");
                }
                k = pd_client_signal(&conn, e.pid, sig, true, &err);
                if (k == -ESRCH)        /* the group is gone but the leader is not reaped yet */
                        k = pd_client_signal(&conn, e.pid, sig, false, &err);
                if (k >= 0)
                        pd_audit(r->srv, c->s->id, c->s->key_id, "process.signal",
                                 json_pack("{s:i, s:i, s:s}", "pid", (int)e.pid, "signal", sig, "via", "e2b"));
        } else if (!strcmp(method, "Update")) {
                json_t *size = json_object_get(json_object_get(body, "pty"), "size");
                json_t *jr = json_object_get(size, "rows"), *jc = json_object_get(size, "cols");
                if (!json_is_integer(jr) || !json_is_integer(jc) || json_integer_value(jr) < 1 ||
                    json_integer_value(jc) < 1 || json_integer_value(jr) > 65535 || json_integer_value(jc) > 65535) {
                        pd_client_close(&conn);
                        return pd_e2b_connect_error(r, 400, "invalid_argument", "pty.size {cols, rows} required");
                }
                k = pd_client_resize(&conn, e.pid, (uint32_t)json_integer_value(jr), (uint32_t)json_integer_value(jc),
                                     &err);
        } else {
                pd_client_close(&conn);
                return pd_e2b_connect_error(r, 501, "unimplemented", "process.Process/%s is not implemented", method);
        }
        pd_client_close(&conn);
        if (k < 0)
                ret = pd_e2b_connect_agent_error(r, k, err.msg);
        else
                ret = pd_reply_json(r, 200, json_object());
        return ret;
}

/* ------------------------------------------------------------------ */
/* dispatch                                                             */

static json_t *rpc_body(struct pd_req *r, struct pd_e2b_call *c, bool *stream, const char **why)
{
        const char *ct = hdr(r, "Content-Type");
        *stream = ct && !strncasecmp(ct, "application/connect+json", 24);
        const char *p = c->body ? c->body : "";
        size_t n = c->len;
        if (*stream) {
                if (n < 5) {
                        *why = "a streaming request must hold one envelope";
                        return NULL;
                }
                uint32_t l = (uint32_t)(uint8_t)p[1] << 24 | (uint32_t)(uint8_t)p[2] << 16 |
                             (uint32_t)(uint8_t)p[3] << 8 | (uint8_t)p[4];
                if ((uint8_t)p[0] & 1) {
                        *why = "compressed envelopes are not supported";
                        return NULL;
                }
                if (l > n - 5) {
                        *why = "truncated envelope";
                        return NULL;
                }
                p += 5;
                n = l;
        }
        json_error_t je;
        json_t *j = n ? json_loadb(p, n, 0, &je) : json_object();
        if (!json_is_object(j)) {
                json_decref(j);
                *why = "the message must be a JSON object";
                return NULL;
        }
        return j;
}

static enum MHD_Result finish(struct pd_req *r, struct pd_e2b_call *c)
{
        if (c->fail.status) {
                if (!strcmp(c->path, "/files") || c->port == PD_E2B_CI_PORT || !strncmp(c->path, "/health", 7))
                        return pd_reply_json(r, c->fail.status,
                                             json_pack("{s:i, s:s}", "code", (int)c->fail.status, "message", c->fail.msg));
                return pd_e2b_connect_error(r, c->fail.status, c->fail.code, "%s", c->fail.msg);
        }
        if (c->too_large)
                return pd_e2b_connect_error(r, 413, "resource_exhausted", "request body over %zu bytes", c->max);
        if (c->port == PD_E2B_CI_PORT)
                return pd_e2b_ci_forward(r, c);
        if (!strcmp(c->path, "/health")) {
                /* envd answers from inside the sandbox: a sandbox whose
                 * agent does not answer (being killed, failed) is as gone
                 * as E2B's (502), which is what lets the SDKs tell "killed"
                 * from a dropped connection */
                struct pd_client conn;
                struct pd_error err = { 0 };
                int k = pd_route_agent(c->s, &conn, &err);
                pd_client_close(&conn);
                if (k < 0 || pd_srv_sandbox_state(c->s) != PD_SB_RUNNING)
                        return pd_reply_json(r, 502, json_pack("{s:i, s:s}", "code", 502, "message",
                                                               "The sandbox is not running"));
                return pd_reply_empty(r, 204);
        }
        if (!strcmp(c->path, "/files"))
                return pd_e2b_files_finish(r, c);
        if (strcmp(r->method, "POST"))
                return pd_e2b_connect_error(r, 404, "not_found", "no such envd route: %s %s", r->method, c->path);
        bool stream;
        const char *why = NULL;
        const char *svc_proc = "/process.Process/", *svc_fs = "/filesystem.Filesystem/";
        bool is_proc = !strncmp(c->path, svc_proc, strlen(svc_proc));
        bool is_fs = !strncmp(c->path, svc_fs, strlen(svc_fs));
        if (!is_proc && !is_fs)
                return pd_e2b_connect_error(r, 404, "not_found", "no such envd route: %s %s", r->method, c->path);
        json_t *body = rpc_body(r, c, &stream, &why);
        if (!body)
                return pd_e2b_connect_error(r, 400, "invalid_argument", "%s", why);
        const char *method = c->path + strlen(is_proc ? svc_proc : svc_fs);
        enum MHD_Result ret;
        if (is_proc && !strcmp(method, "Start"))
                ret = proc_start(r, c, body);
        else if (is_proc && !strcmp(method, "Connect"))
                ret = proc_connect(r, c, body);
        else if (is_proc)
                ret = proc_unary(r, c, method, body);
        else if (!strcmp(method, "WatchDir"))
                ret = pd_e2b_fs_watch(r, c, body);
        else
                ret = pd_e2b_fs_unary(r, c, method, body);
        json_decref(body);
        return ret;
}

enum MHD_Result pd_e2b_envd_handle(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct pd_e2b_call *c = r->route_state;
        if (!chunk_len) {
                /* the request ended early (client gone): only free */
                call_free(r, c);
                return MHD_YES;
        }
        if (!c && !(c = call_open(r)))
                return MHD_NO;
        if (chunk && *chunk_len) {
                size_t n = *chunk_len;
                *chunk_len = 0;
                if (c->fail.status)
                        return MHD_YES;         /* drop: answered at the end */
                if (!strcmp(c->path, "/files") && c->port != PD_E2B_CI_PORT)
                        return pd_e2b_files_chunk(r, c, chunk, n);
                if (!c->max)
                        c->max = c->port == PD_E2B_CI_PORT ? CI_BODY_MAX : JSON_BODY_MAX;
                buffer_chunk(c, chunk, n);
                return MHD_YES;
        }
        if (!c->max)
                c->max = c->port == PD_E2B_CI_PORT ? CI_BODY_MAX : JSON_BODY_MAX;
        enum MHD_Result ret = finish(r, c);
        call_free(r, c);
        return ret;
}
