/* The host side of the agent protocol: the connection, the one
 * request/reply loop, and the process requests (client.h). */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/agent_check.h"
#include "proto/client_priv.h"
#include "lib/util.h"

#define WATCH_SLICE_MS 500      /* how often a wait looks at watch.gone */

static const struct pd_client_watch no_watch = { .hup_fd = -1, .stop_fd = -1 };

void pd_client_init(struct pd_client *c)
{
        memset(c, 0, sizeof *c);
        c->conn.fd = -1;
        c->watch = no_watch;
        c->timeout_ms = PD_CLIENT_TIMEOUT_MS;
}

static int client_attach_fd(struct pd_client *c, int fd, struct pd_error *err)
{
        pd_client_init(c);
        int r = pd_conn_init(&c->conn, fd);
        if (r < 0) {
                close(fd);
                c->conn.fd = -1;
                return pd_error_set(err, -r, "agent connection");
        }
        return 0;
}

int pd_client_connect(struct pd_client *c, int fd, const char *name, struct pd_error *err)
{
        int r = client_attach_fd(c, fd, err);
        if (r < 0)
                return r;
        r = pd_conn_hello(&c->conn, name, c->agent, sizeof c->agent, err);
        if (r < 0)
                pd_client_close(c);
        return r;
}

int pd_client_connect_pipelined(struct pd_client *c, int fd, const char *name, struct pd_error *err)
{
        int r = client_attach_fd(c, fd, err);
        if (r < 0)
                return r;
        if ((r = pd_conn_queue_hello(&c->conn, name)) < 0) {
                pd_client_close(c);
                return pd_error_set(err, -r, "queue HELLO");
        }
        c->hello_pending = true;
        return 0;
}

/* The HELLO answer of a pipelined connect, when it comes first: 0 taken
 * (not the caller's), -errno refused. */
static int take_hello(struct pd_client *c, const struct pd_frame_hdr *h, const uint8_t *p)
{
        struct pd_error e = { 0 };
        c->hello_pending = false;
        if (pd_conn_hello_answer(h, p, c->agent, sizeof c->agent, &e) < 0) {
                c->refused = true;
                return -(e.code > 0 ? e.code : EPROTO);
        }
        return 0;
}

void pd_client_close(struct pd_client *c)
{
        if (c->conn.fd >= 0)
                pd_conn_close(&c->conn);
        c->conn.fd = -1;
}

int pd_client_next(struct pd_client *c, struct pd_frame_hdr *h, const uint8_t **p, int timeout_ms)
{
        if (c->conn.fd < 0)
                return -ENOTCONN;
        const struct pd_client_watch *w = &c->watch;
        uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : pd_now_ms() + (uint64_t)timeout_ms;
        for (;;) {
                int r = pd_conn_next(&c->conn, h, p);
                if (r > 0 && c->hello_pending) {
                        if ((r = take_hello(c, h, *p)) < 0)
                                return r;
                        continue;
                }
                if (r != 0)
                        return r;
                if (c->conn.eof)
                        return -EPIPE;
                if ((r = pd_conn_flush(&c->conn)) < 0)
                        return r;
                if (w->gone && w->gone(w->gone_ctx))
                        return -ESHUTDOWN;
                uint64_t now = pd_now_ms();
                if (now >= deadline)
                        return -ETIMEDOUT;
                uint64_t left = deadline - now;
                int slice = left > INT_MAX ? INT_MAX : (int)left;
                if (w->gone && slice > WATCH_SLICE_MS)
                        slice = WATCH_SLICE_MS;
                /* Only hang-ups of the watched peer count: a keep-alive HTTP
                 * client may legitimately have sent its next request (POLLIN). */
                struct pollfd pf[3] = {
                        { .fd = c->conn.fd, .events = POLLIN | (pd_conn_pending(&c->conn) ? POLLOUT : 0) },
                        { .fd = w->hup_fd, .events = POLLRDHUP },       /* fd -1: ignored by poll */
                        { .fd = w->stop_fd, .events = POLLIN },
                };
                int n = poll(pf, 3, slice);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0 && (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        return -ECONNABORTED;
                if (n > 0 && pf[2].revents)
                        return -ESHUTDOWN;
                if (n > 0 && pf[0].revents && (r = pd_conn_fill(&c->conn)) < 0)
                        return r;
        }
}

int pd_client_next_nowait(struct pd_client *c, struct pd_frame_hdr *h, const uint8_t **p)
{
        if (c->conn.fd < 0)
                return 0;
        if (c->hello_pending)
                return 0;       /* pd_client_next takes the HELLO answer */
        int r = pd_conn_next(&c->conn, h, p);
        if (r != 0 || c->conn.eof)
                return r;
        /* one receive that does not wait (the socket is non-blocking);
         * its errors are the next blocking call's to report */
        if (pd_conn_fill(&c->conn) < 0)
                return 0;
        return pd_conn_next(&c->conn, h, p);
}

int pd_frame_error(const struct pd_frame_hdr *h, const uint8_t *p, struct pd_error *err)
{
        char msg[256];
        pd_conn_error_text(p, h->len, msg, sizeof msg);
        return pd_error_setx(err, pd_conn_error_errno(h->aux, EIO), "%s", msg);
}

int pd_client_send(struct pd_client *c, uint16_t type, const struct pd_msg *m, uint32_t *id)
{
        if (c->conn.fd < 0)
                return -ENOTCONN;
        *id = pd_conn_new_id(&c->conn);
        return m ? pd_conn_queue_msg(&c->conn, type, *id, m) : pd_conn_queue(&c->conn, type, 0, *id, 0, NULL, 0);
}

int pd_client_wait_for(struct pd_client *c, uint32_t id, const char *what, const uint8_t **p, size_t *len,
                       int timeout_ms, struct pd_error *err)
{
        uint64_t deadline = pd_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : c->timeout_ms);
        c->refused = false;
        for (;;) {
                int64_t left = (int64_t)(deadline - pd_now_ms());
                if (left <= 0)
                        return pd_error_setx(err, ETIMEDOUT, "the agent did not answer %s in time", what);
                struct pd_frame_hdr h;
                const uint8_t *pl;
                int r = pd_client_next(c, &h, &pl, (int)left);
                if (r == -ETIMEDOUT)
                        continue;
                if (r < 0)
                        return pd_error_set(err, -r, "agent connection (%s)", what);
                if (h.id == id && (h.type == PD_T_REPLY || h.type == PD_T_ERROR)) {
                        if (h.type == PD_T_ERROR) {
                                c->refused = true;
                                return pd_frame_error(&h, pl, err);
                        }
                        if (p)
                                *p = pl;
                        if (len)
                                *len = h.len;
                        return 0;
                }
                if (c->on_frame && (r = c->on_frame(c->frame_ctx, &h, pl, err)) < 0)
                        return r;
        }
}

int pd_client_wait_reply(struct pd_client *c, uint32_t id, const uint8_t **p, size_t *len, int timeout_ms,
                         struct pd_error *err)
{
        return pd_client_wait_for(c, id, "the request", p, len, timeout_ms, err);
}

int pd_client_call(struct pd_client *c, uint16_t type, const struct pd_msg *m, const uint8_t **p, size_t *len,
                   struct pd_error *err)
{
        const char *what = pd_frame_type_name(type);
        uint32_t id;
        int r = pd_client_send(c, type, m, &id);
        if (r < 0)
                return pd_error_set(err, -r, "queue %s request", what);
        return pd_client_wait_for(c, id, what, p, len, 0, err);
}

int pd_client_flush(struct pd_client *c, int timeout_ms)
{
        return c->conn.fd < 0 ? -ENOTCONN : pd_conn_flush_all(&c->conn, timeout_ms);
}

/* ------------------------------------------------------------------ */
/* spawn options                                                        */

int pd_strv_add(struct pd_strv *s, const char *str)
{
        if (s->n + 1 >= s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 16;
                char **v = realloc(s->v, cap * sizeof *v);
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        if (!(s->v[s->n] = strdup(str)))
                return -ENOMEM;
        s->v[++s->n] = NULL;
        return 0;
}

int pd_strv_add_kv(struct pd_strv *s, const char *name, const char *value)
{
        char *kv;
        if (asprintf(&kv, "%s=%s", name, value) < 0)
                return -ENOMEM;
        int r = pd_strv_add(s, kv);
        free(kv);
        return r;
}

void pd_strv_free(struct pd_strv *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        memset(s, 0, sizeof *s);
}

int pd_spawn_encode(const struct pd_spawn_opts *o, struct pd_msg *m)
{
        if (o->argc == 0 || !o->argv[0])
                return -EINVAL;
        for (size_t i = 0; i < o->argc; i++)
                pd_msg_put_str(m, PD_A_ARG, o->argv[i]);
        for (size_t i = 0; i < o->envc; i++)
                pd_msg_put_str(m, PD_A_ENV, o->env[i]);
        if (o->cwd)
                pd_msg_put_str(m, PD_A_CWD, o->cwd);
        pd_msg_put_u32(m, PD_A_UID, o->uid);
        pd_msg_put_u32(m, PD_A_GID, o->gid);
        for (size_t i = 0; i < o->n_groups; i++)
                pd_msg_put_u32(m, PD_A_GROUPS, o->groups[i]);
        if (o->pty_rows || o->pty_cols) {
                pd_msg_put_u32(m, PD_A_PTY_ROWS, o->pty_rows);
                pd_msg_put_u32(m, PD_A_PTY_COLS, o->pty_cols);
        }
        if (o->stdin_open)
                pd_msg_put_u32(m, PD_A_STDIN, 1);
        if (o->tag)
                pd_msg_put_str(m, PD_A_TAG, o->tag);
        if (o->timeout_ms)
                pd_msg_put_u64(m, PD_A_TIMEOUT_MS, o->timeout_ms);
        if (o->follow)
                pd_msg_put_u32(m, PD_A_FOLLOW, 1);
        return m->failed;
}

static size_t attr_size(size_t len)
{
        return 8 + ((len + 3) & ~(size_t)3);
}

int pd_spawn_check(const struct pd_spawn_opts *o)
{
        if (o->argc == 0 || !o->argv[0])
                return -EINVAL;
        /* what pd_spawn_encode would put, attribute by attribute */
        size_t n = 0;
        for (size_t i = 0; i < o->argc; i++)
                n += attr_size(strlen(o->argv[i]));
        for (size_t i = 0; i < o->envc; i++)
                n += attr_size(strlen(o->env[i]));
        if (o->cwd)
                n += attr_size(strlen(o->cwd));
        if (o->tag)
                n += attr_size(strlen(o->tag));
        size_t u32s = 2 + o->n_groups + (o->pty_rows || o->pty_cols ? 2 : 0) + o->stdin_open + o->follow;
        n += attr_size(4) * u32s + (o->timeout_ms ? attr_size(8) : 0);
        return n > PD_FRAME_MAX ? -EMSGSIZE : 0;
}

static int spawn_queue(struct pd_client *c, const struct pd_spawn_opts *o, uint32_t *id, struct pd_error *err)
{
        struct pd_msg m;
        pd_msg_init(&m);
        int r = pd_spawn_encode(o, &m);
        if (r == 0)
                r = pd_client_send(c, PD_T_SPAWN, &m, id);
        pd_msg_free(&m);
        if (r == -EMSGSIZE)
                return pd_error_setx(err, EMSGSIZE, "the command is too large for one request");
        if (r == -EINVAL)
                return pd_error_setx(err, EINVAL, "no command to run");
        if (r < 0)
                return pd_error_set(err, -r, "queue SPAWN");
        return r;
}

static int spawn_reply(const uint8_t *p, size_t len, uint32_t *pid, struct pd_error *err)
{
        struct pd_attr a;
        if (!pd_msg_find(p, len, PD_A_PID, &a) || !pd_attr_u32(&a, pid) || *pid == 0 || *pid > INT_MAX)
                return pd_error_setx(err, EPROTO, "agent answered SPAWN without a pid");
        return 0;
}

int pd_client_spawn(struct pd_client *c, const struct pd_spawn_opts *o, uint32_t *pid, struct pd_error *err)
{
        uint32_t id;
        int r = spawn_queue(c, o, &id, err);
        if (r < 0)
                return r;
        const uint8_t *p;
        size_t len;
        r = pd_client_wait_for(c, id, "SPAWN", &p, &len, 0, err);
        return r < 0 ? r : spawn_reply(p, len, pid, err);
}

int pd_client_connect_spawn(struct pd_client *c, int fd, const char *name, const struct pd_spawn_opts *o,
                            uint32_t *pid, bool *refused, struct pd_error *err)
{
        *refused = false;
        int r = client_attach_fd(c, fd, err);
        if (r < 0)
                return r;
        /* Pipeline HELLO and SPAWN: one round trip less. An agent that
         * refuses the HELLO answers only that (then closes). */
        if ((r = pd_conn_queue_hello(&c->conn, name)) < 0)
                return pd_error_set(err, -r, "queue HELLO");
        uint32_t id;
        if ((r = spawn_queue(c, o, &id, err)) < 0)
                return r;
        struct pd_frame_hdr h;
        const uint8_t *p;
        if ((r = pd_client_next(c, &h, &p, c->timeout_ms)) < 0)
                return pd_error_set(err, -r, "agent handshake");
        if ((r = pd_conn_hello_answer(&h, p, c->agent, sizeof c->agent, err)) < 0)
                return r;
        size_t len;
        r = pd_client_wait_for(c, id, "SPAWN", &p, &len, 0, err);
        if (r < 0) {
                *refused = c->refused;
                return r;
        }
        return spawn_reply(p, len, pid, err);
}

/* ------------------------------------------------------------------ */
/* events                                                               */

void pd_exit_decode(const uint8_t *p, size_t len, struct pd_exit *x)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        *x = (struct pd_exit){ .reason = "exit" };
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                switch (a.tag) {
                case PD_A_EXIT_CODE: x->has_code = pd_attr_u32(&a, &x->code); break;
                case PD_A_SIGNO: x->has_signal = pd_attr_u32(&a, &x->signo); break;
                case PD_A_REASON:
                        if (!pd_attr_str(&a, x->reason, sizeof x->reason))
                                snprintf(x->reason, sizeof x->reason, "exit");
                        break;
                case PD_A_END_OUT: pd_attr_u64(&a, &x->end_out); break;
                case PD_A_END_ERR: pd_attr_u64(&a, &x->end_err); break;
                }
        }
}

bool pd_output_decode(const struct pd_frame_hdr *h, const uint8_t *p, uint64_t *offset, const uint8_t **data,
                      size_t *n)
{
        if (h->type != PD_T_OUTPUT || h->len < 8)
                return false;
        uint64_t be;
        memcpy(&be, p, 8);
        *offset = be64toh(be);
        *data = p + 8;
        *n = h->len - 8;
        return true;
}

bool pd_gap_decode(const struct pd_frame_hdr *h, const uint8_t *p, uint64_t *from, uint64_t *to)
{
        if (h->type != PD_T_GAP || h->len < 16)
                return false;
        uint64_t be[2];
        memcpy(be, p, 16);
        *from = be64toh(be[0]);
        *to = be64toh(be[1]);
        return true;
}

/* ------------------------------------------------------------------ */
/* run to the end                                                       */

int pd_client_run(struct pd_client *c, const struct pd_spawn_opts *o, const struct pd_run_io *io, uint32_t *pid,
                  struct pd_exit *x, struct pd_error *err)
{
        *pid = 0;
        *x = (struct pd_exit){ .reason = "exit" };
        /* FOLLOW: the agent attaches this connection to every output stream
         * from offset 0 before the process can write, so no ATTACH round
         * trip and nothing evicted before it is read */
        struct pd_spawn_opts so = *o;
        so.follow = true;
        uint32_t p;
        int r = pd_client_spawn(c, &so, &p, err);
        if (r < 0)
                return r;
        *pid = p;
        if (io->on_spawned)
                io->on_spawned(io->ctx, p);
        if (so.stdin_open && (pd_client_stdin(c, p, io->stdin_data, io->stdin_len) < 0 ||
                              pd_client_stdin_close_nowait(c, p) < 0))
                return pd_error_set(err, ENOMEM, "queue stdin");
        uint64_t deadline = io->timeout_ms < 0 ? UINT64_MAX : pd_now_ms() + (uint64_t)io->timeout_ms;
        for (;;) {
                uint64_t now = pd_now_ms();
                if (now >= deadline)
                        return pd_error_setx(err, ETIMEDOUT, "process %u did not end in time", p);
                uint64_t left = deadline - now;
                struct pd_frame_hdr h;
                const uint8_t *pl;
                r = pd_client_next(c, &h, &pl, left > INT_MAX ? -1 : (int)left);
                if (r == -ETIMEDOUT)
                        continue;
                if (r < 0)
                        return pd_error_set(err, -r, "sandbox agent");
                if (h.id != p)
                        continue;       /* the stdin close's answer, ... */
                uint64_t off;
                const uint8_t *data;
                size_t n;
                if (pd_output_decode(&h, pl, &off, &data, &n)) {
                        if (io->on_output)
                                io->on_output(io->ctx, h.aux, off, data, n);
                } else if (h.type == PD_T_EXIT) {
                        pd_exit_decode(pl, h.len, x);
                        return 0;
                }
        }
}

/* ------------------------------------------------------------------ */
/* the other process requests                                           */

static int pid_msg(struct pd_msg *m, uint32_t pid)
{
        pd_msg_init(m);
        return pd_msg_put_u32(m, PD_A_PID, pid);
}

int pd_client_attach_queue(struct pd_client *c, uint32_t pid, uint32_t stream, uint64_t offset, bool follow,
                           uint32_t *id)
{
        struct pd_msg m;
        pid_msg(&m, pid);
        pd_msg_put_u32(&m, PD_A_STREAM, stream);
        pd_msg_put_u64(&m, PD_A_OFFSET, offset);
        pd_msg_put_u32(&m, PD_A_FOLLOW, follow);
        int r = pd_client_send(c, PD_T_ATTACH, &m, id);
        pd_msg_free(&m);
        return r;
}

int pd_client_attach_wait(struct pd_client *c, uint32_t id, uint64_t *first, struct pd_error *err)
{
        const uint8_t *p;
        size_t len;
        int r = pd_client_wait_for(c, id, "ATTACH", &p, &len, 0, err);
        if (r < 0)
                return r;
        struct pd_attr a;
        if (first && (!pd_msg_find(p, len, PD_A_OFFSET, &a) || !pd_attr_u64(&a, first)))
                *first = 0;
        return 0;
}

int pd_client_attach(struct pd_client *c, uint32_t pid, uint32_t stream, uint64_t offset, bool follow,
                     uint64_t *first, struct pd_error *err)
{
        uint32_t id;
        int r = pd_client_attach_queue(c, pid, stream, offset, follow, &id);
        if (r < 0)
                return pd_error_set(err, -r, "queue ATTACH");
        return pd_client_attach_wait(c, id, first, err);
}

static int signal_msg(struct pd_msg *m, uint32_t pid, int signo, bool group)
{
        pid_msg(m, pid);
        pd_msg_put_u32(m, PD_A_SIGNO, (uint32_t)signo);
        if (group)
                pd_msg_put_u32(m, PD_A_GROUP, 1);
        return m->failed;
}

int pd_client_signal(struct pd_client *c, uint32_t pid, int signo, bool group, struct pd_error *err)
{
        struct pd_msg m;
        signal_msg(&m, pid, signo, group);
        int r = pd_client_call(c, PD_T_SIGNAL, &m, NULL, NULL, err);
        pd_msg_free(&m);
        return r;
}

int pd_client_signal_nowait(struct pd_client *c, uint32_t pid, int signo, bool group)
{
        struct pd_msg m;
        signal_msg(&m, pid, signo, group);
        uint32_t id;
        int r = pd_client_send(c, PD_T_SIGNAL, &m, &id);
        pd_msg_free(&m);
        return r;
}

int pd_client_stdin(struct pd_client *c, uint32_t pid, const void *data, size_t n)
{
        const uint8_t *b = data;
        for (size_t off = 0; off < n; off += PD_DATA_CHUNK) {
                size_t len = n - off < PD_DATA_CHUNK ? n - off : PD_DATA_CHUNK;
                int r = pd_conn_queue(&c->conn, PD_T_STDIN, 0, pid, 0, b + off, len);
                if (r < 0)
                        return r;
        }
        return 0;
}

int pd_client_stdin_from_fd(struct pd_client *c, int fd, uint32_t pid)
{
        return pd_conn_forward_stdin(&c->conn, fd, pid);
}

int pd_client_stdin_close(struct pd_client *c, uint32_t pid, struct pd_error *err)
{
        struct pd_msg m;
        pid_msg(&m, pid);
        int r = pd_client_call(c, PD_T_STDIN_CLOSE, &m, NULL, NULL, err);
        pd_msg_free(&m);
        return r;
}

int pd_client_stdin_close_nowait(struct pd_client *c, uint32_t pid)
{
        struct pd_msg m;
        pid_msg(&m, pid);
        uint32_t id;
        int r = pd_client_send(c, PD_T_STDIN_CLOSE, &m, &id);
        pd_msg_free(&m);
        return r;
}

static void resize_msg(struct pd_msg *m, uint32_t pid, uint32_t rows, uint32_t cols)
{
        pid_msg(m, pid);
        pd_msg_put_u32(m, PD_A_PTY_ROWS, rows);
        pd_msg_put_u32(m, PD_A_PTY_COLS, cols);
}

int pd_client_resize(struct pd_client *c, uint32_t pid, uint32_t rows, uint32_t cols, struct pd_error *err)
{
        struct pd_msg m;
        resize_msg(&m, pid, rows, cols);
        int r = pd_client_call(c, PD_T_RESIZE, &m, NULL, NULL, err);
        pd_msg_free(&m);
        return r;
}

int pd_client_resize_nowait(struct pd_client *c, uint32_t pid, uint32_t rows, uint32_t cols)
{
        struct pd_msg m;
        resize_msg(&m, pid, rows, cols);
        uint32_t id;
        int r = pd_client_send(c, PD_T_RESIZE, &m, &id);
        pd_msg_free(&m);
        return r;
}

int pd_client_ping(struct pd_client *c, uint64_t *time_ns, struct pd_error *err)
{
        const uint8_t *p;
        size_t len;
        int r = pd_client_call(c, PD_T_PING, NULL, &p, &len, err);
        struct pd_attr a;
        if (r == 0 && time_ns && (!pd_msg_find(p, len, PD_A_TIME_NS, &a) || !pd_attr_u64(&a, time_ns)))
                *time_ns = 0;
        return r;
}

int pd_client_shutdown(struct pd_client *c, struct pd_error *err)
{
        return pd_client_call(c, PD_T_SHUTDOWN, NULL, NULL, NULL, err);
}

/* ------------------------------------------------------------------ */
/* tunnels                                                              */

int pd_client_tunnel_open(struct pd_client *c, unsigned port, uint32_t *tid, struct pd_error *err)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_PORT, port);
        int r = pd_client_send(c, PD_T_TUNNEL_OPEN, &m, tid);
        pd_msg_free(&m);
        if (r < 0)
                return pd_error_set(err, -r, "queue TUNNEL_OPEN");
        return pd_client_wait_for(c, *tid, "TUNNEL_OPEN", NULL, NULL, 0, err);
}

int pd_client_tunnel_open_with(struct pd_client *c, unsigned port, const void *data, size_t n, uint32_t *tid,
                               struct pd_error *err)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_PORT, port);
        int r = pd_client_send(c, PD_T_TUNNEL_OPEN, &m, tid);
        pd_msg_free(&m);
        if (r < 0)
                return pd_error_set(err, -r, "queue TUNNEL_OPEN");
        /* the agent keeps DATA for a tunnel still connecting (agent/tunnel.c)
         * and drops it if the connect fails: nothing reaches another port */
        if ((r = pd_client_tunnel_send(c, *tid, data, n)) < 0)
                return pd_error_set(err, -r, "queue the tunnel's first bytes");
        return pd_client_wait_for(c, *tid, "TUNNEL_OPEN", NULL, NULL, 0, err);
}

int pd_client_tunnel_send(struct pd_client *c, uint32_t tid, const void *data, size_t n)
{
        const uint8_t *b = data;
        for (size_t off = 0; off < n; off += PD_DATA_CHUNK) {
                size_t len = n - off < PD_DATA_CHUNK ? n - off : PD_DATA_CHUNK;
                int r = pd_conn_queue(&c->conn, PD_T_DATA, 0, tid, 0, b + off, len);
                if (r < 0)
                        return r;
        }
        return 0;
}

int pd_client_tunnel_close(struct pd_client *c, uint32_t tid)
{
        return pd_conn_queue(&c->conn, PD_T_TUNNEL_CLOSE, 0, tid, 0, NULL, 0);
}
