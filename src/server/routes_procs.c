/* /sandboxes/{id}/processes... and /sandboxes/{id}/exec: processes in a
 * sandbox through the agent protocol (proto.h).
 *
 * Every request opens its own agent connection (pd_agentc_connect), does its
 * work and closes it; libmicrohttpd gives each HTTP connection a thread, so
 * handlers block. Output streams are responses built on
 * MHD_create_response_from_callback whose reader blocks on the request's own
 * agent connection, in slices, so that a deleted sandbox or a vanished client
 * ends the stream; the free callback closes the connection and drops the
 * sandbox reference taken for the whole request.
 *
 * The small helpers shared with routes_files.c (pd_route_*) live here too. */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"
#include "spec.h"
#include "util.h"

#define PROCS_CALL_TIMEOUT_MS 30000
#define PROCS_STREAM_BLOCK (128u << 10)
#define EXEC_OUTPUT_CAP (1u << 20)
#define WAIT_SLICE_MS 500
#define CONNECT_RETRY_MS 15000

/* ------------------------------------------------------------------ */
/* shared helpers                                                       */

struct pd_srv_sandbox *pd_route_sandbox(struct pd_req *r, enum MHD_Result *ret)
{
        /* A paused or failed sandbox is refused by pd_agentc_connect (EBUSY,
         * answered 409): no need to take s->lock, which a lifecycle change
         * may hold for a while. */
        const char *id = r->n_params > 0 ? r->params[0] : NULL;
        struct pd_srv_sandbox *s = id ? pd_server_sandbox_get(r->srv, id, &r->key) : NULL;
        if (!s)
                *ret = pd_reply_error(r, 404, "not_found", "no sandbox '%s'", id ? id : "");
        return s;
}

static bool sandbox_gone(const struct pd_srv_sandbox *s)
{
        return __atomic_load_n(&s->deleted, __ATOMIC_RELAXED);
}

int pd_route_agent(struct pd_srv_sandbox *s, struct pd_conn *c, struct pd_error *err)
{
        /* The agent serves a bounded number of connections (AG_MAX_CONNS) and
         * closes the ones beyond it at once: the HELLO then fails with EPIPE
         * or ECONNRESET. Those are worth another try; anything else is not. */
        uint64_t deadline = pd_now_ms() + CONNECT_RETRY_MS;
        for (unsigned attempt = 0;; attempt++) {
                int r = pd_agentc_connect(s, c, err);
                if (r >= 0)
                        return r;
                bool busy = r == -EPIPE || r == -ECONNRESET || r == -EAGAIN;
                if (!busy || sandbox_gone(s) || pd_now_ms() >= deadline)
                        return r;
                unsigned ms = 5u << (attempt < 5 ? attempt : 5);       /* 5 .. 160 ms */
                struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)(ms + (unsigned)rand() % 10u) * 1000000L };
                nanosleep(&ts, NULL);
        }
}

int pd_route_wait(struct pd_server *srv, struct pd_conn *c, struct MHD_Connection *mc,
                  struct pd_srv_sandbox *s, struct pd_frame_hdr *h, const uint8_t **payload, int timeout_ms)
{
        uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : pd_now_ms() + (uint64_t)timeout_ms;
        /* Only hang-ups of the client count: a keep-alive client may
         * legitimately have sent its next request already (POLLIN). */
        int cfd = -1;
        if (mc) {
                const union MHD_ConnectionInfo *ci =
                        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
                if (ci)
                        cfd = ci->connect_fd;
        }
        int stopfd = srv ? pd_server_stop_fd(srv) : -1;
        for (;;) {
                int r = pd_conn_next(c, h, payload);
                if (r != 0)
                        return r;
                if (c->eof)
                        return -EPIPE;
                if ((r = pd_conn_flush(c)) < 0)
                        return r;
                if (s && sandbox_gone(s))
                        return -ESHUTDOWN;
                uint64_t now = pd_now_ms();
                if (now >= deadline)
                        return -ETIMEDOUT;
                int slice = deadline - now < WAIT_SLICE_MS ? (int)(deadline - now) : WAIT_SLICE_MS;
                struct pollfd p[3] = {
                        { .fd = c->fd, .events = POLLIN | (pd_conn_pending(c) ? POLLOUT : 0) },
                        { .fd = cfd, .events = POLLRDHUP },     /* fd -1: ignored by poll */
                        { .fd = stopfd, .events = POLLIN },
                };
                int n = poll(p, 3, slice);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        return -ECONNABORTED;
                if (n > 0 && p[2].revents)
                        return -ESHUTDOWN;      /* the server stops */
                if (n > 0 && p[0].revents && (r = pd_conn_fill(c)) < 0)
                        return r;
        }
}

enum MHD_Result pd_route_reply_agent_error(struct pd_req *r, int neg_errno, const struct pd_error *err)
{
        const char *msg = err && err->code ? err->msg : "agent request failed";
        switch (-neg_errno) {
        case ESRCH:
        case ENOENT:
                return pd_reply_error(r, 404, "not_found", "%s", msg);
        case EINVAL:
        case ENAMETOOLONG:
        case EISDIR:
        case ENOTDIR:
        case ENOTTY:
        case ELOOP:
        case EXDEV:
                return pd_reply_error(r, 400, "bad_request", "%s", msg);
        case EEXIST:
        case ENOTEMPTY:
        case EBUSY:
                return pd_reply_error(r, 409, "conflict", "%s", msg);
        case ENOSPC:
        case EDQUOT:
        case EFBIG:
                return pd_reply_error(r, 507, "no_space", "%s", msg);
        case EPIPE:
        case ECONNRESET:
        case ECONNREFUSED:
        case ESHUTDOWN:
                return pd_reply_error(r, 503, "unavailable", "sandbox agent unreachable: %s", msg);
        default:
                return pd_reply_errno(r, neg_errno, msg);
        }
}

bool pd_route_user_parse(const char *name, struct pd_route_user *u)
{
        if (!name || !strcmp(name, "user")) {
                *u = (struct pd_route_user){ PD_USER_UID, PD_USER_UID, "/home/user", "user",
                                             { PD_USER_UID, 27, 100 }, 3 };
                return true;
        }
        if (!strcmp(name, "root")) {
                *u = (struct pd_route_user){ 0, 0, "/root", "root", { 0 }, 1 };
                return true;
        }
        return false;
}

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

static bool parse_u64(const char *s, uint64_t *out)
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

static bool query_flag(struct pd_req *r, const char *name)
{
        const char *v = pd_req_query(r, name);
        return v && (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !*v);
}

/* JSON text of bytes that may not be UTF-8: invalid sequences become
 * U+FFFD (jansson refuses invalid UTF-8). */
static size_t utf8_seq_len(const unsigned char *p, size_t left)
{
        unsigned char c = p[0];
        size_t n;
        uint32_t cp;
        if (c < 0x80)
                return 1;
        if ((c & 0xe0) == 0xc0) {
                n = 2;
                cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
                n = 3;
                cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
                n = 4;
                cp = c & 0x07;
        } else {
                return 0;
        }
        if (n > left)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

static json_t *text_json(const char *buf, size_t len)
{
        json_t *j = json_stringn(buf ? buf : "", len);
        if (j)
                return j;
        char *out = malloc(len * 3 + 1);
        if (!out)
                return json_string("");
        size_t o = 0;
        const unsigned char *p = (const unsigned char *)buf;
        for (size_t i = 0; i < len;) {
                size_t n = p[i] ? utf8_seq_len(p + i, len - i) : 1;
                if (n == 0) {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                } else {
                        memcpy(out + o, p + i, n);
                        o += n;
                        i += n;
                }
        }
        j = json_stringn_nocheck(out, o);
        free(out);
        return j;
}

static const char *stream_name(uint32_t stream)
{
        return stream == PD_STREAM_STDOUT ? "stdout" : stream == PD_STREAM_STDERR ? "stderr" : "pty";
}

/* ------------------------------------------------------------------ */
/* LIST: the agent's process table                                      */

struct proc_info {
        uint32_t pid;
        bool found, exited, pty, has_code, has_sig;
        uint32_t exit_code, signo, rows, cols;
        uint64_t start[2], end[2];
        char reason[32];
        json_t *obj;            /* API process object */
};

static json_t *proc_object(const uint8_t *p, size_t len, struct proc_info *pi)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        json_t *o = json_object(), *cmd = json_array();
        char *str;
        memset(pi, 0, sizeof *pi);
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                switch (a.tag) {
                case PD_A_PID: pd_attr_u32(&a, &pi->pid); break;
                case PD_A_TAG:
                        if ((str = pd_attr_strdup(&a))) {
                                json_object_set_new(o, "tag", text_json(str, strlen(str)));
                                free(str);
                        }
                        break;
                case PD_A_STATE:
                        if ((str = pd_attr_strdup(&a))) {
                                pi->exited = !strcmp(str, "exited");
                                free(str);
                        }
                        break;
                case PD_A_EXIT_CODE: pi->has_code = pd_attr_u32(&a, &pi->exit_code); break;
                case PD_A_SIGNO: pi->has_sig = pd_attr_u32(&a, &pi->signo); break;
                case PD_A_REASON: pd_attr_str(&a, pi->reason, sizeof pi->reason); break;
                case PD_A_START_OUT: pd_attr_u64(&a, &pi->start[0]); break;
                case PD_A_END_OUT: pd_attr_u64(&a, &pi->end[0]); break;
                case PD_A_START_ERR: pd_attr_u64(&a, &pi->start[1]); break;
                case PD_A_END_ERR: pd_attr_u64(&a, &pi->end[1]); break;
                case PD_A_ARG:
                        if ((str = pd_attr_strdup(&a))) {
                                json_array_append_new(cmd, text_json(str, strlen(str)));
                                free(str);
                        }
                        break;
                case PD_A_CWD:
                        if ((str = pd_attr_strdup(&a))) {
                                json_object_set_new(o, "cwd", text_json(str, strlen(str)));
                                free(str);
                        }
                        break;
                case PD_A_PTY_ROWS: pi->pty = pd_attr_u32(&a, &pi->rows); break;
                case PD_A_PTY_COLS: pd_attr_u32(&a, &pi->cols); break;
                }
        }
        json_object_set_new(o, "pid", json_integer(pi->pid));
        if (!json_object_get(o, "tag"))
                json_object_set_new(o, "tag", json_null());
        json_object_set_new(o, "cmd", cmd);
        json_object_set_new(o, "state", json_string(pi->exited ? "exited" : "running"));
        json_object_set_new(o, "exit_code", pi->exited && pi->has_code ? json_integer(pi->exit_code) : json_null());
        json_object_set_new(o, "signal", pi->exited && pi->has_sig ? json_integer(pi->signo) : json_null());
        if (pi->exited)
                json_object_set_new(o, "reason", json_string(pi->reason[0] ? pi->reason : "exit"));
        json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)pi->end[0]));
        json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)pi->end[1]));
        if (pi->pty)
                json_object_set_new(o, "pty", json_pack("{s:i,s:i}", "rows", (int)pi->rows, "cols", (int)pi->cols));
        else
                json_object_set_new(o, "pty", json_null());
        return o;
}

/* LIST; with want_pid, fill *one about that pid (one->found false if
 * absent); with all, an array of process objects. */
static int agent_list(struct pd_conn *c, uint32_t want_pid, struct proc_info *one, json_t **all,
                      struct pd_error *err)
{
        struct pd_msg m;
        uint8_t *reply = NULL;
        size_t rlen = 0;
        pd_msg_init(&m);
        int k = pd_agentc_call(c, PD_T_LIST, &m, &reply, &rlen, PROCS_CALL_TIMEOUT_MS, err);
        pd_msg_free(&m);
        if (k < 0)
                return k;
        if (one)
                memset(one, 0, sizeof *one);
        if (all)
                *all = json_array();
        struct pd_msg_iter it;
        struct pd_attr a;
        pd_msg_iter_init(&it, reply, rlen);
        while (pd_msg_next(&it, &a)) {
                if (a.tag != PD_A_PROC)
                        continue;
                struct proc_info pi;
                json_t *o = proc_object(a.data, a.len, &pi);
                if (all)
                        json_array_append(*all, o);
                if (one && want_pid && pi.pid == want_pid) {
                        *one = pi;
                        one->found = true;
                        one->obj = json_incref(o);
                }
                json_decref(o);
        }
        free(reply);
        return 0;
}

/* ------------------------------------------------------------------ */
/* SPAWN from the JSON body                                             */

struct spawn_req {
        struct pd_msg msg;
        json_t *argv;           /* for the audit */
        struct pd_route_user user;
        char cwd[PATH_MAX];
        const char *tag;
        bool pty, stdin_open;
};

static void spawn_req_free(struct spawn_req *sr)
{
        pd_msg_free(&sr->msg);
        json_decref(sr->argv);
        sr->argv = NULL;
}

/* Strings from JSON must not carry NUL bytes (jansson keeps them with
 * json_string_length when a client sends \u0000). */
static bool json_clean_str(const json_t *j, size_t max)
{
        if (!json_is_string(j))
                return false;
        size_t len = json_string_length(j);
        return len <= max && strlen(json_string_value(j)) == len;
}

static int env_put(struct pd_msg *m, const char *k, const char *v)
{
        size_t kl = strlen(k), vl = strlen(v);
        char *kv = malloc(kl + vl + 2);
        if (!kv)
                return -ENOMEM;
        memcpy(kv, k, kl);
        kv[kl] = '=';
        memcpy(kv + kl + 1, v, vl + 1);
        int r = pd_msg_put_str(m, PD_A_ENV, kv);
        free(kv);
        return r;
}

static bool env_key_ok(const char *k)
{
        return *k && !strchr(k, '=') && strlen(k) < 4096;
}

/* Build SPAWN; on a bad body, write a message into msg and return -EINVAL. */
static int spawn_build(struct pd_srv_sandbox *s, json_t *body, bool exec, struct spawn_req *sr,
                       char *msg, size_t msgsz)
{
        static const char *const allowed[] = { "cmd", "env", "cwd", "user", "pty", "stdin", "tag", "timeout", NULL };
        memset(sr, 0, sizeof *sr);
        pd_msg_init(&sr->msg);
        const char *key;
        json_t *v;
        json_object_foreach(body, key, v) {
                bool ok = exec && !strcmp(key, "stdin_data");
                for (size_t i = 0; allowed[i] && !ok; i++)
                        ok = !strcmp(key, allowed[i]);
                if (!ok) {
                        snprintf(msg, msgsz, "unknown field '%s'", key);
                        return -EINVAL;
                }
        }
        /* user first: cwd and HOME depend on it */
        json_t *ju = json_object_get(body, "user");
        if (ju && !json_is_null(ju) &&
            (!json_is_string(ju) || !pd_route_user_parse(json_string_value(ju), &sr->user))) {
                snprintf(msg, msgsz, "user must be \"user\" or \"root\"");
                return -EINVAL;
        }
        if (!ju || json_is_null(ju))
                pd_route_user_parse(NULL, &sr->user);

        json_t *cmd = json_object_get(body, "cmd");
        sr->argv = json_array();
        if (json_is_string(cmd)) {
                if (!json_clean_str(cmd, 1u << 19) || !json_string_length(cmd)) {
                        snprintf(msg, msgsz, "cmd must be a non-empty string without NUL bytes");
                        return -EINVAL;
                }
                const char *sh[] = { "/bin/bash", "-l", "-c" };
                for (size_t i = 0; i < PD_ARRAY_SIZE(sh); i++)
                        json_array_append_new(sr->argv, json_string(sh[i]));
                json_array_append(sr->argv, cmd);
        } else if (json_is_array(cmd) && json_array_size(cmd) > 0 && json_array_size(cmd) <= 4096) {
                size_t i;
                json_t *a;
                json_array_foreach(cmd, i, a) {
                        if (!json_clean_str(a, 1u << 19) || (i == 0 && !json_string_length(a))) {
                                snprintf(msg, msgsz, "cmd[%zu] must be a %sstring without NUL bytes", i,
                                         i == 0 ? "non-empty " : "");
                                return -EINVAL;
                        }
                        json_array_append(sr->argv, a);
                }
        } else {
                snprintf(msg, msgsz, "cmd must be an argv list of strings or a shell string");
                return -EINVAL;
        }
        size_t i;
        json_t *a;
        json_array_foreach(sr->argv, i, a)
                pd_msg_put_str(&sr->msg, PD_A_ARG, json_string_value(a));

        json_t *jpty = json_object_get(body, "pty");
        uint32_t rows = 0, cols = 0;
        if (jpty && !json_is_null(jpty) && !json_is_false(jpty)) {
                if (json_is_true(jpty)) {
                        rows = 24;
                        cols = 80;
                } else {
                        json_t *jr = json_object_get(jpty, "rows"), *jc = json_object_get(jpty, "cols");
                        if (!json_is_object(jpty) || !json_is_integer(jr) || !json_is_integer(jc) ||
                            json_integer_value(jr) < 1 || json_integer_value(jr) > 65535 ||
                            json_integer_value(jc) < 1 || json_integer_value(jc) > 65535) {
                                snprintf(msg, msgsz, "pty must be {\"rows\": 1..65535, \"cols\": 1..65535}");
                                return -EINVAL;
                        }
                        rows = (uint32_t)json_integer_value(jr);
                        cols = (uint32_t)json_integer_value(jc);
                }
                sr->pty = true;
        }

        /* env: defaults, then the sandbox's, then the request's (later wins) */
        json_t *jenv = json_object_get(body, "env");
        if (jenv && !json_is_null(jenv) && !json_is_object(jenv)) {
                snprintf(msg, msgsz, "env must be an object of strings");
                return -EINVAL;
        }
        json_t *env = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}",
                                "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                "HOME", sr->user.home, "USER", sr->user.name, "LOGNAME", sr->user.name,
                                "SHELL", "/bin/bash", "LANG", "C.UTF-8", "HOSTNAME", "paddock");
        if (sr->pty)
                json_object_set_new(env, "TERM", json_string("xterm-256color"));
        if (json_is_object(s->env)) {
                json_object_foreach(s->env, key, v)
                        if (json_is_string(v) && env_key_ok(key))
                                json_object_set(env, key, v);
        }
        if (json_is_object(jenv)) {
                json_object_foreach(jenv, key, v) {
                        if (!env_key_ok(key) || !json_clean_str(v, 1u << 17)) {
                                json_decref(env);
                                snprintf(msg, msgsz, "env '%.64s': names must be non-empty without '=', "
                                         "values strings without NUL bytes", key);
                                return -EINVAL;
                        }
                        json_object_set(env, key, v);
                }
        }
        json_object_foreach(env, key, v)
                env_put(&sr->msg, key, json_string_value(v));
        json_decref(env);

        json_t *jcwd = json_object_get(body, "cwd");
        if (jcwd && !json_is_null(jcwd)) {
                if (!json_clean_str(jcwd, PATH_MAX - 1) || !json_string_length(jcwd)) {
                        snprintf(msg, msgsz, "cwd must be a path without NUL bytes");
                        return -EINVAL;
                }
                const char *c = json_string_value(jcwd);
                int n = c[0] == '/' ? snprintf(sr->cwd, sizeof sr->cwd, "%s", c)
                                    : snprintf(sr->cwd, sizeof sr->cwd, "%s/%s", sr->user.home, c);
                if (n < 0 || (size_t)n >= sizeof sr->cwd) {
                        snprintf(msg, msgsz, "cwd too long");
                        return -EINVAL;
                }
        } else {
                snprintf(sr->cwd, sizeof sr->cwd, "%s", sr->user.home);
        }
        pd_msg_put_str(&sr->msg, PD_A_CWD, sr->cwd);
        pd_msg_put_u32(&sr->msg, PD_A_UID, sr->user.uid);
        pd_msg_put_u32(&sr->msg, PD_A_GID, sr->user.gid);
        for (unsigned g = 0; g < sr->user.n_groups; g++)
                pd_msg_put_u32(&sr->msg, PD_A_GROUPS, sr->user.groups[g]);
        if (sr->pty) {
                pd_msg_put_u32(&sr->msg, PD_A_PTY_ROWS, rows);
                pd_msg_put_u32(&sr->msg, PD_A_PTY_COLS, cols);
        }

        json_t *jin = json_object_get(body, "stdin");
        if (jin && !json_is_null(jin) && !json_is_boolean(jin)) {
                snprintf(msg, msgsz, "stdin must be true or false");
                return -EINVAL;
        }
        sr->stdin_open = json_is_true(jin) || (exec && json_object_get(body, "stdin_data") &&
                                               !json_is_null(json_object_get(body, "stdin_data")));
        if (sr->stdin_open)
                pd_msg_put_u32(&sr->msg, PD_A_STDIN, 1);

        json_t *jtag = json_object_get(body, "tag");
        if (jtag && !json_is_null(jtag)) {
                if (!json_clean_str(jtag, 255)) {
                        snprintf(msg, msgsz, "tag must be a string of at most 255 bytes");
                        return -EINVAL;
                }
                sr->tag = json_string_value(jtag);
                pd_msg_put_str(&sr->msg, PD_A_TAG, sr->tag);
        }

        json_t *jto = json_object_get(body, "timeout");
        if (jto && !json_is_null(jto)) {
                double t = json_number_value(jto);
                if (!json_is_number(jto) || t <= 0 || t > 365.0 * 86400) {
                        snprintf(msg, msgsz, "timeout must be a positive number of seconds");
                        return -EINVAL;
                }
                uint64_t ms = (uint64_t)(t * 1000.0);
                pd_msg_put_u64(&sr->msg, PD_A_TIMEOUT_MS, ms ? ms : 1);
        }
        if (sr->msg.failed) {
                snprintf(msg, msgsz, "request too large for one SPAWN");
                return -EINVAL;
        }
        return 0;
}

static enum MHD_Result reply_spawn_error(struct pd_req *r, int k, const struct pd_error *err,
                                         const struct spawn_req *sr)
{
        const char *cmd0 = json_string_value(json_array_get(sr->argv, 0));
        bool exec_fail = !strncmp(err->msg, "cannot execute", 14);
        if (k == -ENOENT && exec_fail)
                return pd_reply_error(r, 400, "bad_request", "command not found: '%s'", cmd0);
        if ((k == -EACCES || k == -ENOEXEC) && exec_fail)
                return pd_reply_error(r, 400, "bad_request", "%s", err->msg);
        if (!strncmp(err->msg, "cannot change directory", 23))
                return pd_reply_error(r, 400, "bad_request", "%s", err->msg);
        if (k == -EINVAL)
                return pd_reply_error(r, 400, "bad_request", "%s", err->msg);
        return pd_route_reply_agent_error(r, k, err);
}

static void audit_start(struct pd_req *r, struct pd_srv_sandbox *s, const struct spawn_req *sr,
                        uint32_t pid, const char *via)
{
        pd_audit(r->srv, s->id, r->key.id, "process.start",
                 json_pack("{s:O,s:s,s:s,s:i,s:b,s:s}", "argv", sr->argv, "user", sr->user.name,
                           "cwd", sr->cwd, "pid", (int)pid, "pty", sr->pty, "via", via));
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
        struct spawn_req sr;
        char msg[256];
        struct pd_error err = { 0 };
        struct pd_conn c = { .fd = -1 };
        uint8_t *reply = NULL;
        size_t rlen = 0;
        int k = spawn_build(s, body, false, &sr, msg, sizeof msg);
        if (k < 0) {
                ret = pd_reply_error(r, 400, "bad_request", "%s", msg);
                goto out;
        }
        if ((k = pd_route_agent(s, &c, &err)) < 0) {
                ret = pd_route_reply_agent_error(r, k, &err);
                goto out;
        }
        k = pd_agentc_call(&c, PD_T_SPAWN, &sr.msg, &reply, &rlen, PROCS_CALL_TIMEOUT_MS, &err);
        if (k < 0) {
                ret = reply_spawn_error(r, k, &err, &sr);
                goto out;
        }
        struct pd_attr a;
        uint32_t pid = 0;
        if (!pd_msg_find(reply, rlen, PD_A_PID, &a) || !pd_attr_u32(&a, &pid)) {
                ret = pd_reply_error(r, 500, "internal", "agent answered SPAWN without a pid");
                goto out;
        }
        audit_start(r, s, &sr, pid, "processes");
        ret = pd_reply_json(r, 201, json_pack("{s:i,s:o}", "pid", (int)pid, "tag",
                                              sr.tag ? json_string(sr.tag) : json_null()));
out:
        free(reply);
        if (c.fd >= 0)
                pd_conn_close(&c);
        spawn_req_free(&sr);
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
        struct pd_conn c = { .fd = -1 };
        json_t *all = NULL;
        int k = pd_route_agent(s, &c, &err);
        if (k >= 0)
                k = agent_list(&c, 0, NULL, &all, &err);
        if (k < 0)
                ret = pd_route_reply_agent_error(r, k, &err);
        else
                ret = pd_reply_json(r, 200, json_pack("{s:o}", "processes", all));
        if (c.fd >= 0)
                pd_conn_close(&c);
        pd_server_sandbox_put(r->srv, s);
        return ret;
}

/* Common prologue of the /processes/{pid}... routes: sandbox, pid, agent
 * connection. Returns false with a reply queued in *ret. */
struct pid_ctx {
        struct pd_srv_sandbox *s;
        uint32_t pid;
        struct pd_conn c;
        struct pd_error err;
};

static bool pid_ctx_open(struct pd_req *r, struct pid_ctx *x, enum MHD_Result *ret)
{
        memset(x, 0, sizeof *x);
        x->c.fd = -1;
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

static void pid_ctx_close(struct pd_req *r, struct pid_ctx *x)
{
        if (x->c.fd >= 0)
                pd_conn_close(&x->c);
        if (x->s)
                pd_server_sandbox_put(r->srv, x->s);
        x->s = NULL;
}

static enum MHD_Result reply_no_process(struct pd_req *r, uint32_t pid)
{
        return pd_reply_error(r, 404, "not_found", "no process %" PRIu32 " in this sandbox", pid);
}

static enum MHD_Result route_get(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pid_ctx x;
        if (!pid_ctx_open(r, &x, &ret))
                return ret;
        struct proc_info pi;
        int k = agent_list(&x.c, x.pid, &pi, NULL, &x.err);
        if (k < 0)
                ret = pd_route_reply_agent_error(r, k, &x.err);
        else if (!pi.found)
                ret = reply_no_process(r, x.pid);
        else
                ret = pd_reply_json(r, 200, pi.obj);
        pid_ctx_close(r, &x);
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
                return parse_u64(s, &v) && v >= 1 && v <= 64 ? (int)v : -1;
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

static enum MHD_Result simple_call(struct pd_req *r, struct pid_ctx *x, uint16_t type, struct pd_msg *m)
{
        uint8_t *reply = NULL;
        size_t rlen = 0;
        int k = pd_agentc_call(&x->c, type, m, &reply, &rlen, PROCS_CALL_TIMEOUT_MS, &x->err);
        free(reply);
        if (k == -ESRCH)
                return reply_no_process(r, x->pid);
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
        struct pid_ctx x;
        if (!pid_ctx_open(r, &x, &ret))
                return ret;
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_PID, x.pid);
        pd_msg_put_u32(&m, PD_A_SIGNO, (uint32_t)signo);
        pd_msg_put_u32(&m, PD_A_GROUP, group);
        ret = simple_call(r, &x, PD_T_SIGNAL, &m);
        pd_msg_free(&m);
        pd_audit(r->srv, x.s->id, r->key.id, "process.signal",
                 json_pack("{s:i,s:i,s:b}", "pid", (int)x.pid, "signal", signo, "group", group));
        pid_ctx_close(r, &x);
        return ret;
}

static enum MHD_Result route_stdin_close(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pid_ctx x;
        if (!pid_ctx_open(r, &x, &ret))
                return ret;
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_PID, x.pid);
        ret = simple_call(r, &x, PD_T_STDIN_CLOSE, &m);
        pd_msg_free(&m);
        pid_ctx_close(r, &x);
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
        struct pid_ctx x;
        if (!pid_ctx_open(r, &x, &ret))
                return ret;
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_PID, x.pid);
        pd_msg_put_u32(&m, PD_A_PTY_ROWS, rows);
        pd_msg_put_u32(&m, PD_A_PTY_COLS, cols);
        ret = simple_call(r, &x, PD_T_RESIZE, &m);
        pd_msg_free(&m);
        pid_ctx_close(r, &x);
        return ret;
}

/* POST .../stdin: a streaming-body route. Each chunk becomes STDIN frames;
 * a PING at the end proves the agent took them all (it reads a connection's
 * frames in order, and holds back while the process's stdin buffer is
 * full), since it drops whatever is unread when the connection closes. */
struct stdin_state {
        struct pid_ctx x;
        int err;                /* 0, or -errno: discard the rest, answer it */
        uint64_t bytes;
        bool opened;
};

static int stdin_open(struct pd_req *r, struct stdin_state *st)
{
        /* the reply to a failure is deferred to the last call; queue nothing now */
        memset(&st->x, 0, sizeof st->x);
        st->x.c.fd = -1;
        st->opened = true;
        if (r->n_params < 2 || !parse_pid(r->params[1], &st->x.pid))
                return st->err = -EINVAL;
        st->x.s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!st->x.s)
                return st->err = -ENODEV;
        int k = pd_route_agent(st->x.s, &st->x.c, &st->x.err);
        if (k < 0)
                return st->err = k;
        struct proc_info pi;
        k = agent_list(&st->x.c, st->x.pid, &pi, NULL, &st->x.err);
        if (k < 0)
                return st->err = k;
        json_decref(pi.obj);
        if (!pi.found)
                return st->err = -ESRCH;
        return 0;
}

static void stdin_state_free(struct pd_req *r, struct stdin_state *st)
{
        pid_ctx_close(r, &st->x);
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
                st->x.c.fd = -1;
                r->route_state = st;
        }
        if (!st->opened)
                stdin_open(r, st);
        if (chunk && chunk_len) {
                size_t len = *chunk_len;
                *chunk_len = 0;
                for (size_t off = 0; off < len && !st->err;) {
                        size_t n = len - off < PD_DATA_CHUNK ? len - off : PD_DATA_CHUNK;
                        int k = pd_conn_queue(&st->x.c, PD_T_STDIN, 0, st->x.pid, 0, chunk + off, n);
                        if (k >= 0)
                                k = pd_conn_flush_all(&st->x.c, PROCS_CALL_TIMEOUT_MS);
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
                struct pd_msg m;
                uint8_t *reply = NULL;
                size_t rlen = 0;
                pd_msg_init(&m);
                int k = pd_agentc_call(&st->x.c, PD_T_PING, &m, &reply, &rlen, PROCS_CALL_TIMEOUT_MS, &st->x.err);
                pd_msg_free(&m);
                free(reply);
                if (k < 0)
                        st->err = k;
        }
        switch (st->err) {
        case 0: ret = pd_reply_empty(r, 204); break;
        case -EINVAL: ret = pd_reply_error(r, 400, "bad_request", "process id must be a decimal pid"); break;
        case -ENODEV: ret = pd_reply_error(r, 404, "not_found", "no sandbox '%s'", r->params[0]); break;
        case -ESRCH: ret = reply_no_process(r, st->x.pid); break;
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

/* ------------------------------------------------------------------ */
/* GET .../output: raw bytes of one stream, or JSON-line frames         */

struct out_stream {
        struct pd_server *srv;
        struct pd_srv_sandbox *s;
        struct MHD_Connection *mc;
        struct pd_conn c;
        uint32_t pid;
        bool follow, frames, done, exit_seen, want_exit;
        unsigned n;                     /* streams: 1 or 2 */
        uint32_t stream[2];
        uint64_t next[2], target[2];    /* target: non-follow end */
        /* raw: bytes of the current OUTPUT frame not yet handed over; they
         * live in c's receive buffer until the next pd_conn_next */
        const uint8_t *pend;
        size_t pend_len;
        /* frames: the current JSON line */
        char *line;
        size_t line_len, line_pos;
        /* frames that arrived while we waited for an ATTACH's REPLY (output
         * of an earlier ATTACH), replayed first; cur: the one being served */
        struct stashed *stash, **stash_tail, *cur;
};

struct stashed {
        struct stashed *next;
        struct pd_frame_hdr h;
        uint8_t p[];
};

static void stash_free(struct stashed *x)
{
        while (x) {
                struct stashed *n = x->next;
                free(x);
                x = n;
        }
}

static int stream_slot(const struct out_stream *o, uint32_t stream)
{
        for (unsigned i = 0; i < o->n; i++)
                if (o->stream[i] == stream)
                        return (int)i;
        return -1;
}

static bool out_finished(const struct out_stream *o)
{
        if (o->done)
                return true;
        if (o->follow)
                return false;
        for (unsigned i = 0; i < o->n; i++)
                if (o->next[i] < o->target[i])
                        return false;
        return !o->want_exit || o->exit_seen;
}

static void out_set_line(struct out_stream *o, json_t *j)
{
        free(o->line);
        o->line = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        o->line_pos = 0;
        o->line_len = o->line ? strlen(o->line) : 0;
        if (o->line)
                o->line[o->line_len++] = '\n';  /* replaces the NUL */
}

static json_t *exit_json(const uint8_t *p, size_t len)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        uint32_t code = 0, sig = 0;
        bool has_code = false, has_sig = false;
        char reason[32] = "exit";
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                if (a.tag == PD_A_EXIT_CODE)
                        has_code = pd_attr_u32(&a, &code);
                else if (a.tag == PD_A_SIGNO)
                        has_sig = pd_attr_u32(&a, &sig);
                else if (a.tag == PD_A_REASON)
                        pd_attr_str(&a, reason, sizeof reason);
        }
        return json_pack("{s:o,s:o,s:s}", "exit_code", has_code ? json_integer(code) : json_null(),
                         "signal", has_sig ? json_integer(sig) : json_null(), "reason", reason);
}

/* One agent frame into the stream's state. */
static void out_frame(struct out_stream *o, const struct pd_frame_hdr *h, const uint8_t *p)
{
        switch (h->type) {
        case PD_T_OUTPUT: {
                int i = stream_slot(o, h->aux);
                if (h->id != o->pid || i < 0 || h->len < 8)
                        return;
                uint64_t off;
                memcpy(&off, p, 8);
                off = be64toh(off);
                const uint8_t *data = p + 8;
                size_t n = h->len - 8;
                if (off < o->next[i]) {         /* never hand out a byte twice */
                        uint64_t skip = o->next[i] - off;
                        if (skip >= n)
                                return;
                        data += skip;
                        n -= (size_t)skip;
                        off = o->next[i];
                }
                if (!o->follow) {
                        if (off >= o->target[i])
                                return;
                        if (off + n > o->target[i])
                                n = (size_t)(o->target[i] - off);
                }
                o->next[i] = off + n;
                if (!o->frames) {
                        o->pend = data;
                        o->pend_len = n;
                        return;
                }
                size_t b64len = 4 * ((n + 2) / 3);
                char *b64 = malloc(b64len + 1);
                if (!b64) {
                        o->done = true;
                        return;
                }
                EVP_EncodeBlock((unsigned char *)b64, data, (int)n);
                out_set_line(o, json_pack("{s:s,s:I,s:s%}", "stream", stream_name(h->aux), "offset",
                                          (json_int_t)off, "data_b64", b64, b64len));
                free(b64);
                return;
        }
        case PD_T_GAP: {
                int i = stream_slot(o, h->aux);
                if (h->id != o->pid || i < 0 || h->len < 16)
                        return;
                uint64_t be[2];
                memcpy(be, p, 16);
                uint64_t from = be64toh(be[0]), to = be64toh(be[1]);
                if (to > o->next[i])
                        o->next[i] = to;
                if (o->frames)
                        out_set_line(o, json_pack("{s:{s:s,s:I,s:I}}", "gap", "stream", stream_name(h->aux),
                                                  "from", (json_int_t)from, "to", (json_int_t)to));
                return;
        }
        case PD_T_EXIT:
                if (h->id != o->pid)
                        return;
                o->exit_seen = true;
                if (o->follow)
                        o->done = true;
                if (o->frames)
                        out_set_line(o, json_pack("{s:o}", "exit", exit_json(p, h->len)));
                return;
        case PD_T_ERROR:
                o->done = true;         /* an attachment failed late: nothing more will come */
                return;
        default:
                return;
        }
}

static ssize_t out_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct out_stream *o = cls;
        for (;;) {
                if (o->pend_len) {
                        size_t n = o->pend_len < max ? o->pend_len : max;
                        memcpy(buf, o->pend, n);
                        o->pend += n;
                        o->pend_len -= n;
                        return (ssize_t)n;
                }
                if (o->line && o->line_pos < o->line_len) {
                        size_t n = o->line_len - o->line_pos < max ? o->line_len - o->line_pos : max;
                        memcpy(buf, o->line + o->line_pos, n);
                        o->line_pos += n;
                        return (ssize_t)n;
                }
                if (out_finished(o))
                        return MHD_CONTENT_READER_END_OF_STREAM;
                free(o->cur);
                o->cur = NULL;
                if (o->stash) {
                        o->cur = o->stash;
                        if (!(o->stash = o->cur->next))
                                o->stash_tail = &o->stash;
                        out_frame(o, &o->cur->h, o->cur->p);
                        continue;
                }
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k = pd_route_wait(o->srv, &o->c, o->mc, o->s, &h, &p, -1);
                if (k == -ECONNABORTED)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (k < 0)
                        return MHD_CONTENT_READER_END_OF_STREAM;       /* sandbox gone: end cleanly */
                out_frame(o, &h, p);
        }
}

static void out_free(void *cls)
{
        struct out_stream *o = cls;
        if (o->c.fd >= 0)
                pd_conn_close(&o->c);
        free(o->line);
        free(o->cur);
        stash_free(o->stash);
        if (o->s)
                pd_server_sandbox_put(o->srv, o->s);
        free(o);
}

static int attach_queue(struct pd_conn *c, uint32_t pid, uint32_t stream, uint64_t off, bool follow,
                        uint32_t *id)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_PID, pid);
        pd_msg_put_u32(&m, PD_A_STREAM, stream);
        pd_msg_put_u64(&m, PD_A_OFFSET, off);
        pd_msg_put_u32(&m, PD_A_FOLLOW, follow);
        *id = pd_conn_new_id(c);
        int k = pd_conn_queue_msg(c, PD_T_ATTACH, *id, &m);
        pd_msg_free(&m);
        return k;
}

/* Wait for the REPLY (or ERROR) of request id; frames for other ids are
 * fed to o (they are output that raced ahead). */
static int out_wait_reply(struct out_stream *o, uint32_t id, uint64_t *first, struct pd_error *err)
{
        for (;;) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k = pd_route_wait(o->srv, &o->c, o->mc, o->s, &h, &p, PROCS_CALL_TIMEOUT_MS);
                if (k < 0)
                        return pd_error_set(err, -k, "agent");
                if ((h.type == PD_T_REPLY || h.type == PD_T_ERROR) && h.id == id) {
                        if (h.type == PD_T_ERROR) {
                                char msg[256];
                                pd_conn_error_text(p, h.len, msg, sizeof msg);
                                return pd_error_setx(err, h.aux ? (int)h.aux : EIO, "%s", msg);
                        }
                        struct pd_attr a;
                        if (first && (!pd_msg_find(p, h.len, PD_A_OFFSET, &a) || !pd_attr_u64(&a, first)))
                                *first = 0;
                        return 0;
                }
                if (h.type == PD_T_OUTPUT || h.type == PD_T_GAP || h.type == PD_T_EXIT) {
                        /* output of an earlier ATTACH may overtake this REPLY */
                        struct stashed *x = malloc(sizeof *x + h.len);
                        if (!x)
                                return pd_error_set(err, ENOMEM, "stash a frame");
                        x->next = NULL;
                        x->h = h;
                        memcpy(x->p, p, h.len);
                        *o->stash_tail = x;
                        o->stash_tail = &x->next;
                }
        }
}

static enum MHD_Result route_output(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        const char *qs = pd_req_query(r, "stream"), *qfrom = pd_req_query(r, "from");
        const char *qfmt = pd_req_query(r, "format");
        bool frames = qfmt && !strcmp(qfmt, "frames");
        if (qfmt && !frames && strcmp(qfmt, "raw"))
                return pd_reply_error(r, 400, "bad_request", "format must be raw or frames");
        uint64_t from = 0;
        if (qfrom && !parse_u64(qfrom, &from))
                return pd_reply_error(r, 400, "bad_request", "from must be a byte offset");
        uint32_t want_stream = 0;
        if (qs && !frames) {
                if (!strcmp(qs, "stdout"))
                        want_stream = PD_STREAM_STDOUT;
                else if (!strcmp(qs, "stderr"))
                        want_stream = PD_STREAM_STDERR;
                else if (!strcmp(qs, "pty"))
                        want_stream = PD_STREAM_PTY;
                else
                        return pd_reply_error(r, 400, "bad_request", "stream must be stdout, stderr or pty");
        }
        struct pid_ctx x;
        if (!pid_ctx_open(r, &x, &ret))
                return ret;
        struct out_stream *o = calloc(1, sizeof *o);
        if (!o) {
                pid_ctx_close(r, &x);
                return pd_reply_error(r, 500, "internal", "out of memory");
        }
        o->srv = r->srv;
        o->s = PD_TAKE_PTR(x.s);
        o->c = x.c;
        x.c.fd = -1;
        o->mc = r->conn;
        o->stash_tail = &o->stash;
        o->pid = x.pid;
        o->frames = frames;
        o->follow = query_flag(r, "follow");

        /* LIST first: is there such a process, has it a pty, and where does
         * its output end now (a non-follow read stops there) */
        struct proc_info pi;
        struct pd_error err = { 0 };
        int k = agent_list(&o->c, o->pid, &pi, NULL, &err);
        if (k < 0) {
                ret = pd_route_reply_agent_error(r, k, &err);
                goto fail;
        }
        json_decref(pi.obj);
        if (!pi.found) {
                ret = reply_no_process(r, o->pid);
                goto fail;
        }
        if (frames) {
                if (pi.pty) {
                        o->stream[o->n++] = PD_STREAM_PTY;
                } else {
                        o->stream[o->n++] = PD_STREAM_STDOUT;
                        o->stream[o->n++] = PD_STREAM_STDERR;
                }
        } else {
                if (!want_stream)
                        want_stream = pi.pty ? PD_STREAM_PTY : PD_STREAM_STDOUT;
                if (pi.pty != (want_stream == PD_STREAM_PTY)) {
                        ret = pd_reply_error(r, 400, "bad_request", "process %" PRIu32 " %s", o->pid,
                                             pi.pty ? "runs on a pty: its only stream is pty"
                                                    : "has no pty: use stdout or stderr");
                        goto fail;
                }
                o->stream[o->n++] = want_stream;
        }
        o->want_exit = pi.exited;
        uint32_t ids[2];
        uint64_t first[2] = { 0, 0 };
        for (unsigned i = 0; i < o->n; i++) {
                uint64_t f = from;
                if (frames) {
                        const char *q = pd_req_query(r, o->stream[i] == PD_STREAM_STDERR ? "from_stderr" : "from_stdout");
                        if (q && !parse_u64(q, &f)) {
                                ret = pd_reply_error(r, 400, "bad_request", "from_%s must be a byte offset",
                                                     stream_name(o->stream[i]));
                                goto fail;
                        }
                        if (!q)
                                f = 0;
                }
                int slot = o->stream[i] == PD_STREAM_STDERR ? 1 : 0;
                o->target[i] = pi.end[slot];
                o->next[i] = f;
                attach_queue(&o->c, o->pid, o->stream[i], f, o->follow, &ids[i]);
        }
        for (unsigned i = 0; i < o->n; i++) {
                if ((k = out_wait_reply(o, ids[i], &first[i], &err)) < 0) {
                        ret = k == -ESRCH ? reply_no_process(r, o->pid) : pd_route_reply_agent_error(r, k, &err);
                        goto fail;
                }
                o->next[i] = first[i];  /* later than asked: evicted (gap) or past the end */
        }
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, PROCS_STREAM_BLOCK,
                                                                      out_reader, o, out_free);
        if (!resp) {
                ret = pd_reply_error(r, 500, "internal", "cannot create a response");
                goto fail;
        }
        char hv[64];
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                frames ? "application/x-ndjson" : "application/octet-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (!frames) {
                snprintf(hv, sizeof hv, "%" PRIu64, first[0]);
                MHD_add_response_header(resp, "X-Paddock-Offset", hv);
                if (first[0] > from) {
                        snprintf(hv, sizeof hv, "%" PRIu64 "-%" PRIu64, from, first[0]);
                        MHD_add_response_header(resp, "X-Paddock-Gap", hv);
                }
        }
        /* the response owns o from here: out_free runs when it is destroyed */
        return pd_reply_response(r, 200, resp);
fail:
        out_free(o);
        return ret;
}

/* ------------------------------------------------------------------ */
/* POST /sandboxes/{id}/exec: spawn, collect both streams, wait          */

struct exec_buf {
        char *data;
        size_t len;
        uint64_t total;
};

static void exec_append(struct exec_buf *b, const uint8_t *p, size_t n)
{
        b->total += n;
        if (b->len >= EXEC_OUTPUT_CAP)
                return;
        size_t take = EXEC_OUTPUT_CAP - b->len < n ? EXEC_OUTPUT_CAP - b->len : n;
        if (!b->data && !(b->data = malloc(EXEC_OUTPUT_CAP)))
                return;
        memcpy(b->data + b->len, p, take);
        b->len += take;
}

static int b64_decode(const char *in, size_t inlen, uint8_t **out, size_t *outlen)
{
        if (inlen % 4 || inlen > (size_t)INT32_MAX)
                return -EINVAL;
        uint8_t *buf = malloc(inlen / 4 * 3 + 1);
        if (!buf)
                return -ENOMEM;
        int n = inlen ? EVP_DecodeBlock(buf, (const unsigned char *)in, (int)inlen) : 0;
        if (n < 0) {
                free(buf);
                return -EINVAL;
        }
        /* EVP_DecodeBlock counts padding as zero bytes */
        if (inlen && in[inlen - 1] == '=')
                n--;
        if (inlen > 1 && in[inlen - 2] == '=')
                n--;
        *out = buf;
        *outlen = (size_t)n;
        return 0;
}

static enum MHD_Result route_exec(struct pd_req *r, const char *chunk, size_t *chunk_len)
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
        struct spawn_req sr;
        char msg[256];
        struct pd_error err = { 0 };
        struct pd_conn c = { .fd = -1 };
        struct exec_buf out = { 0 }, errb = { 0 };
        uint8_t *in = NULL;
        size_t inlen = 0;
        json_t *exitj = NULL;
        int k = spawn_build(s, body, true, &sr, msg, sizeof msg);
        if (k < 0) {
                ret = pd_reply_error(r, 400, "bad_request", "%s", msg);
                goto out;
        }
        json_t *jin = json_object_get(body, "stdin_data");
        if (jin && !json_is_null(jin) &&
            (!json_is_string(jin) || b64_decode(json_string_value(jin), json_string_length(jin), &in, &inlen) < 0)) {
                ret = pd_reply_error(r, 400, "bad_request", "stdin_data must be base64");
                goto out;
        }
        if ((k = pd_route_agent(s, &c, &err)) < 0) {
                ret = pd_route_reply_agent_error(r, k, &err);
                goto out;
        }
        /* SPAWN with FOLLOW: the agent attaches this connection to every
         * output stream from offset 0 before the process can write, so no
         * ATTACH round trip and nothing evicted before we read it */
        pd_msg_put_u32(&sr.msg, PD_A_FOLLOW, 1);
        uint32_t spawn_id = pd_conn_new_id(&c), pid = 0;
        struct pd_frame_hdr h;
        const uint8_t *p;
        if ((k = pd_conn_queue_msg(&c, PD_T_SPAWN, spawn_id, &sr.msg)) < 0) {
                ret = pd_reply_errno(r, k, "queue SPAWN");
                goto out;
        }
        for (;;) {
                k = pd_route_wait(r->srv, &c, r->conn, s, &h, &p, PROCS_CALL_TIMEOUT_MS);
                if (k < 0) {
                        pd_error_set(&err, -k, "agent");
                        ret = pd_route_reply_agent_error(r, k, &err);
                        goto out;
                }
                if (h.id == spawn_id && (h.type == PD_T_REPLY || h.type == PD_T_ERROR))
                        break;
        }
        if (h.type == PD_T_ERROR) {
                char m[PD_ERROR_MSG_MAX];
                pd_conn_error_text(p, h.len, m, sizeof m);
                pd_error_setx(&err, h.aux ? (int)h.aux : EIO, "%s", m);
                ret = reply_spawn_error(r, -err.code, &err, &sr);
                goto out;
        }
        struct pd_attr a;
        if (!pd_msg_find(p, h.len, PD_A_PID, &a) || !pd_attr_u32(&a, &pid)) {
                ret = pd_reply_error(r, 500, "internal", "agent answered SPAWN without a pid");
                goto out;
        }
        audit_start(r, s, &sr, pid, "exec");
        if (sr.stdin_open) {
                for (size_t off = 0; off < inlen;) {
                        size_t n = inlen - off < PD_DATA_CHUNK ? inlen - off : PD_DATA_CHUNK;
                        pd_conn_queue(&c, PD_T_STDIN, 0, pid, 0, in + off, n);
                        off += n;
                }
                struct pd_msg m;
                pd_msg_init(&m);
                pd_msg_put_u32(&m, PD_A_PID, pid);
                pd_conn_queue_msg(&c, PD_T_STDIN_CLOSE, pd_conn_new_id(&c), &m);
                pd_msg_free(&m);
        }
        for (;;) {
                k = pd_route_wait(r->srv, &c, r->conn, s, &h, &p, -1);
                if (k < 0)
                        break;
                if (h.type == PD_T_OUTPUT && h.id == pid && h.len >= 8)
                        exec_append(h.aux == PD_STREAM_STDERR ? &errb : &out, p + 8, h.len - 8);
                else if (h.type == PD_T_EXIT && h.id == pid) {
                        exitj = exit_json(p, h.len);
                        break;
                }
        }
        if (!exitj) {
                if (k == -ECONNABORTED) {
                        /* nobody wants the answer any more: do not leave the command behind */
                        struct pd_msg m;
                        pd_msg_init(&m);
                        pd_msg_put_u32(&m, PD_A_PID, pid);
                        pd_msg_put_u32(&m, PD_A_SIGNO, SIGKILL);
                        pd_msg_put_u32(&m, PD_A_GROUP, 1);
                        pd_conn_queue_msg(&c, PD_T_SIGNAL, pd_conn_new_id(&c), &m);
                        pd_msg_free(&m);
                        pd_conn_flush_all(&c, 1000);
                        ret = MHD_NO;
                } else {
                        if (!err.code)
                                pd_error_set(&err, -k, "sandbox agent");
                        ret = pd_route_reply_agent_error(r, k, &err);
                }
                goto out;
        }
        pd_audit(r->srv, s->id, r->key.id, "process.exit",
                 json_pack("{s:i,s:O,s:O,s:O}", "pid", (int)pid, "exit_code", json_object_get(exitj, "exit_code"),
                           "signal", json_object_get(exitj, "signal"), "reason", json_object_get(exitj, "reason")));
        json_t *res = json_pack("{s:i,s:O,s:O,s:O,s:o,s:o}", "pid", (int)pid,
                                "exit_code", json_object_get(exitj, "exit_code"),
                                "signal", json_object_get(exitj, "signal"),
                                "reason", json_object_get(exitj, "reason"),
                                "stdout", text_json(out.data, out.len), "stderr", text_json(errb.data, errb.len));
        if (out.total > out.len) {
                json_object_set_new(res, "stdout_truncated", json_true());
                json_object_set_new(res, "stdout_bytes", json_integer((json_int_t)out.total));
        }
        if (errb.total > errb.len) {
                json_object_set_new(res, "stderr_truncated", json_true());
                json_object_set_new(res, "stderr_bytes", json_integer((json_int_t)errb.total));
        }
        ret = pd_reply_json(r, 200, res);
out:
        json_decref(exitj);
        free(out.data);
        free(errb.data);
        free(in);
        if (c.fd >= 0)
                pd_conn_close(&c);
        spawn_req_free(&sr);
        json_decref(body);
        pd_server_sandbox_put(r->srv, s);
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
        { "GET", "/api/v1/sandboxes/{id}/processes/{pid}/output", route_output, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/exec", route_exec, 0, 0 },
        { NULL, NULL, NULL, 0, 0 },
};
