/* /sandboxes/{id}/processes... and /sandboxes/{id}/exec: processes in a
 * sandbox through the agent protocol (proto.h). This file holds the route
 * table and the small handlers; procs.h lists the others.
 *
 * Every request opens its own agent connection (pd_route_agent), does its
 * work and closes it; libmicrohttpd gives each HTTP connection a thread, so
 * handlers block. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/metrics.h"
#include "server/api/procs.h"
#include "lib/util.h"

/* ------------------------------------------------------------------ */
/* small local helpers                                                  */

static bool parse_pid(const char *s, uint32_t *out)
{
        if (!s || !*s || strlen(s) > 10)
                return false;
        uint64_t v = 0;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return false;
                v = v * 10 + (uint64_t)(*p - '0');
        }
        if (v == 0 || v > INT32_MAX)
                return false;
        *out = (uint32_t)v;
        return true;
}

bool pd_procs_parse_u64(const char *s, uint64_t *out)
{
        if (!s || !*s || strlen(s) > 20)
                return false;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end || s[0] == '-')
                return false;
        *out = v;
        return true;
}

/* ------------------------------------------------------------------ */
/* POST /sandboxes/{id}/processes                                       */

static enum MHD_Result route_start(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        struct pd_srv_sandbox *s = pd_route_sandbox(r, &ret);
        if (!s) {
                json_decref(body);
                return ret;
        }
        struct pd_spawn_req sr;
        char msg[256];
        struct pd_error err = { 0 };
        struct pd_client c;
        pd_client_init(&c);
        uint32_t pid = 0;
        int k = pd_spawn_build(r->srv, s, body, false, &sr, msg, sizeof msg);
        if (k < 0) {
                ret = k == -ENOMEM ? pd_reply_error(r, 500, "internal", "%s", msg)
                                   : pd_reply_error(r, 400, "bad_request", "%s", msg);
                goto out;
        }
        if ((k = pd_route_agent(s, &c, &err)) < 0) {
                ret = pd_route_reply_agent_error(r, k, &err);
                goto out;
        }
        if ((k = pd_client_spawn(&c, &sr.opts, &pid, &err)) < 0) {
                ret = pd_spawn_reply_error(r, k, &err, &sr);
                goto out;
        }
        pd_spawn_audit(r, s, &sr, pid, "processes");
        pd_metrics_command(PD_METRICS_PROCESS);
        ret = pd_reply_json(r, 201, json_pack("{s:i,s:o}", "pid", (int)pid, "tag",
                                              sr.tag ? json_string(sr.tag) : json_null()));
out:
        pd_client_close(&c);
        pd_spawn_req_free(&sr);
        json_decref(body);
        pd_server_sandbox_put(r->srv, s);
        return ret;
}

/* ------------------------------------------------------------------ */
/* GET /processes, GET /processes/{pid}                                 */

static enum MHD_Result route_list(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = pd_route_sandbox(r, &ret);
        if (!s)
                return ret;
        struct pd_error err = { 0 };
        struct pd_client c;
        json_t *all = NULL;
        int k = pd_route_agent(s, &c, &err);
        if (k >= 0)
                k = pd_procs_list(&c, 0, NULL, &all, &err);
        if (k < 0)
                ret = pd_route_reply_agent_error(r, k, &err);
        else {
                pd_procs_oom_mark_all(r->srv, s, all, json_array_size(all));
                ret = pd_reply_json(r, 200, json_pack("{s:o}", "processes", all));
        }
        pd_client_close(&c);
        pd_server_sandbox_put(r->srv, s);
        return ret;
}


bool pd_pid_ctx_open(struct pd_req *r, struct pd_pid_ctx *x, enum MHD_Result *ret)
{
        memset(x, 0, sizeof *x);
        pd_client_init(&x->c);
        if (r->n_params < 2 || !parse_pid(r->params[1], &x->pid)) {
                *ret = pd_reply_error(r, 400, "bad_request", "process id must be a decimal pid");
                return false;
        }
        if (!(x->s = pd_route_sandbox(r, ret)))
                return false;
        int k = pd_route_agent(x->s, &x->c, &x->err);
        if (k < 0) {
                *ret = pd_route_reply_agent_error(r, k, &x->err);
                pd_server_sandbox_put(r->srv, x->s);
                x->s = NULL;
                return false;
        }
        return true;
}

void pd_pid_ctx_close(struct pd_req *r, struct pd_pid_ctx *x)
{
        pd_client_close(&x->c);
        if (x->s)
                pd_server_sandbox_put(r->srv, x->s);
        x->s = NULL;
}

enum MHD_Result pd_procs_reply_no_process(struct pd_req *r, uint32_t pid)
{
        return pd_reply_error(r, 404, "not_found", "no process %" PRIu32 " in this sandbox", pid);
}

static enum MHD_Result route_get(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_pid_ctx x;
        if (!pd_pid_ctx_open(r, &x, &ret))
                return ret;
        struct pd_proc_info pi;
        int k = pd_procs_list(&x.c, x.pid, &pi, NULL, &x.err);
        if (k < 0)
                ret = pd_route_reply_agent_error(r, k, &x.err);
        else if (!pi.found)
                ret = pd_procs_reply_no_process(r, x.pid);
        else {
                pd_procs_oom_mark(r->srv, x.s, pi.obj);
                ret = pd_reply_json(r, 200, pi.obj);
        }
        pd_pid_ctx_close(r, &x);
        return ret;
}

/* ------------------------------------------------------------------ */
/* signal, stdin/close, resize                                          */

static int parse_signal(json_t *j)
{
        if (json_is_integer(j)) {
                json_int_t v = json_integer_value(j);
                return v >= 1 && v <= 64 ? (int)v : -1;
        }
        if (!json_is_string(j))
                return -1;
        const char *s = json_string_value(j);
        if (s[0] >= '0' && s[0] <= '9') {
                uint64_t v;
                return pd_procs_parse_u64(s, &v) && v >= 1 && v <= 64 ? (int)v : -1;
        }
        if (!strncasecmp(s, "SIG", 3))
                s += 3;
        for (int n = 1; n < 32; n++) {
                const char *abbrev = sigabbrev_np(n);
                if (abbrev && !strcasecmp(s, abbrev))
                        return n;
        }
        return -1;
}

/* The answer to a signal, stdin close or resize. */
static enum MHD_Result simple_reply(struct pd_req *r, struct pd_pid_ctx *x, int k)
{
        if (k == -ESRCH)
                return pd_procs_reply_no_process(r, x->pid);
        if (k < 0)
                return pd_route_reply_agent_error(r, k, &x->err);
        return pd_reply_empty(r, 204);
}

static enum MHD_Result route_signal(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        int signo = parse_signal(json_object_get(body, "signal"));
        json_t *jg = json_object_get(body, "group");
        bool group = !json_is_false(jg);
        json_decref(body);
        if (signo < 0)
                return pd_reply_error(r, 400, "bad_request",
                                      "signal must be a name (\"SIGTERM\", \"TERM\") or a number 1..64");
        struct pd_pid_ctx x;
        if (!pd_pid_ctx_open(r, &x, &ret))
                return ret;
        ret = simple_reply(r, &x, pd_client_signal(&x.c, x.pid, signo, group, &x.err));
        pd_audit(r->srv, x.s->id, r->key.id, "process.signal",
                 json_pack("{s:i,s:i,s:b}", "pid", (int)x.pid, "signal", signo, "group", group));
        pd_pid_ctx_close(r, &x);
        return ret;
}

static enum MHD_Result route_stdin_close(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_pid_ctx x;
        if (!pd_pid_ctx_open(r, &x, &ret))
                return ret;
        ret = simple_reply(r, &x, pd_client_stdin_close(&x.c, x.pid, &x.err));
        pd_pid_ctx_close(r, &x);
        return ret;
}

static enum MHD_Result route_resize(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        json_t *jr = json_object_get(body, "rows"), *jc = json_object_get(body, "cols");
        bool ok = json_is_integer(jr) && json_is_integer(jc) && json_integer_value(jr) >= 1 &&
                  json_integer_value(jr) <= 65535 && json_integer_value(jc) >= 1 &&
                  json_integer_value(jc) <= 65535;
        uint32_t rows = ok ? (uint32_t)json_integer_value(jr) : 0, cols = ok ? (uint32_t)json_integer_value(jc) : 0;
        json_decref(body);
        if (!ok)
                return pd_reply_error(r, 400, "bad_request", "body must be {\"rows\": 1..65535, \"cols\": 1..65535}");
        struct pd_pid_ctx x;
        if (!pd_pid_ctx_open(r, &x, &ret))
                return ret;
        ret = simple_reply(r, &x, pd_client_resize(&x.c, x.pid, rows, cols, &x.err));
        pd_pid_ctx_close(r, &x);
        return ret;
}

/* POST .../stdin: a streaming-body route. Each chunk becomes STDIN frames;
 * a PING at the end proves the agent took them all (it reads a connection's
 * frames in order, and holds back while the process's stdin buffer is
 * full), since it drops whatever is unread when the connection closes. */
struct stdin_state {
        struct pd_pid_ctx x;
        int err;                /* 0, or -errno: discard the rest, answer it */
        uint64_t bytes;
        bool opened;
};

static int stdin_open(struct pd_req *r, struct stdin_state *st)
{
        /* the reply to a failure is deferred to the last call; queue nothing now */
        memset(&st->x, 0, sizeof st->x);
        pd_client_init(&st->x.c);
        st->opened = true;
        if (r->n_params < 2 || !parse_pid(r->params[1], &st->x.pid))
                return st->err = -EINVAL;
        st->x.s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!st->x.s)
                return st->err = -ENODEV;
        int k = pd_route_agent(st->x.s, &st->x.c, &st->x.err);
        if (k < 0)
                return st->err = k;
        struct pd_proc_info pi;
        k = pd_procs_list(&st->x.c, st->x.pid, &pi, NULL, &st->x.err);
        if (k < 0)
                return st->err = k;
        json_decref(pi.obj);
        if (!pi.found)
                return st->err = -ESRCH;
        /* Bytes nobody can read are an error, not a silent drop. */
        if (pi.exited)
                return st->err = -EALREADY;
        if (!pi.stdin_open)
                return st->err = -EPIPE;
        return 0;
}

static void stdin_state_free(struct pd_req *r, struct stdin_state *st)
{
        pd_pid_ctx_close(r, &st->x);
        free(st);
        r->route_state = NULL;
}

static enum MHD_Result route_stdin(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct stdin_state *st = r->route_state;
        if (!chunk && !chunk_len) {
                /* the request ended before its last call (client gone) */
                if (st)
                        stdin_state_free(r, st);
                return MHD_NO;
        }
        if (!st) {
                st = calloc(1, sizeof *st);
                if (!st)
                        return MHD_NO;
                pd_client_init(&st->x.c);
                r->route_state = st;
        }
        if (!st->opened)
                stdin_open(r, st);
        if (chunk && chunk_len) {
                size_t len = *chunk_len;
                *chunk_len = 0;
                for (size_t off = 0; off < len && !st->err;) {
                        size_t n = len - off < PD_DATA_CHUNK ? len - off : PD_DATA_CHUNK;
                        int k = pd_client_stdin(&st->x.c, st->x.pid, chunk + off, n);
                        if (k >= 0)
                                k = pd_client_flush(&st->x.c, PROCS_CALL_TIMEOUT_MS);
                        if (k < 0)
                                st->err = k;
                        off += n;
                        st->bytes += n;
                }
                return MHD_YES;
        }
        /* the last call: answer */
        enum MHD_Result ret;
        if (!st->err) {
                int k = pd_client_ping(&st->x.c, NULL, &st->x.err);
                if (k < 0)
                        st->err = k;
        }
        switch (st->err) {
        case 0: ret = pd_reply_empty(r, 204); break;
        case -EINVAL: ret = pd_reply_error(r, 400, "bad_request", "process id must be a decimal pid"); break;
        case -ENODEV: ret = pd_reply_error(r, 404, "not_found", "no sandbox '%s'", r->params[0]); break;
        case -ESRCH: ret = pd_procs_reply_no_process(r, st->x.pid); break;
        case -EALREADY:
                ret = pd_reply_error(r, 409, "conflict", "process %" PRIu32 " has already exited", st->x.pid);
                break;
        case -EPIPE:
                ret = pd_reply_error(r, 409, "conflict",
                                     "process %" PRIu32 " has no stdin to write (start it with \"stdin\": true; "
                                     "or its stdin was closed)", st->x.pid);
                break;
        case -ETIMEDOUT:
                ret = pd_reply_error(r, 504, "timeout", "process %" PRIu32 " is not reading its stdin", st->x.pid);
                break;
        default: ret = pd_route_reply_agent_error(r, st->err, &st->x.err); break;
        }
        if (st->x.s && st->bytes)
                pd_audit(r->srv, st->x.s->id, r->key.id, "process.stdin",
                         json_pack("{s:i,s:I}", "pid", (int)st->x.pid, "bytes", (json_int_t)st->bytes));
        stdin_state_free(r, st);
        return ret;
}

const struct pd_route pd_routes_procs[] = {
        { "POST", "/api/v1/sandboxes/{id}/processes", route_start, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/processes", route_list, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/processes/{pid}", route_get, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/processes/{pid}/signal", route_signal, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/processes/{pid}/stdin", route_stdin, PD_ROUTE_STREAM_BODY, 0 },
        { "POST", "/api/v1/sandboxes/{id}/processes/{pid}/stdin/close", route_stdin_close, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/processes/{pid}/resize", route_resize, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/processes/{pid}/output", pd_procs_route_output, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/exec", pd_procs_route_exec, 0, 0 },
        { NULL, NULL, NULL, 0, 0 },
};
