/* The host-side agent client (src/proto/client.h) against a scripted
 * agent on a socketpair: SPAWN's encoding, the request/reply loop (reply
 * matched by id, frames in between handed to on_frame, ERROR as -errno,
 * the deadline, the watch), run-to-exit, and a hostile LIST. TAP. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/client.h"
#include "proto/msg.h"
#include "proto/proto.h"
#include "tap.h"


/* ---- the scripted agent: a thread on the other end ---- */

enum script { S_SPAWN, S_ERROR, S_SILENT, S_RUN, S_HOSTILE_LIST, S_CLOSE, S_REFUSE, S_DROP, S_TUNNEL,
              S_TUNNEL_REFUSED };

struct agent {
        int fd;
        enum script script;
        pthread_t th;
        uint8_t spawn[PD_FRAME_MAX];    /* the SPAWN payload received */
        size_t spawn_len;
        /* S_TUNNEL*: what came before the agent answered anything */
        uint32_t tunnel_port, tunnel_id;
        char tunnel_data[256];
        size_t tunnel_len;
        bool stalled;                   /* the client waited for an answer first */
};

static void send_frame(int fd, uint16_t type, uint16_t flags, uint32_t id, uint32_t aux, const void *p, size_t n)
{
        uint8_t hdr[PD_FRAME_HDR_LEN];
        struct pd_frame_hdr h = { .len = (uint32_t)n, .type = type, .flags = flags, .id = id, .aux = aux };
        pd_frame_hdr_encode(&h, hdr);
        if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr || (n && write(fd, p, n) != (ssize_t)n))
                abort();
}

static void send_msg(int fd, uint16_t type, uint32_t id, uint32_t aux, struct pd_msg *m)
{
        send_frame(fd, type, 0, id, aux, m->buf, m->len);
        pd_msg_reset(m);
}

/* The next frame from the client (blocking); false at its end. */
static bool read_frame(int fd, struct pd_frame_hdr *h, uint8_t *p)
{
        uint8_t hdr[PD_FRAME_HDR_LEN];
        size_t got = 0;
        while (got < sizeof hdr) {
                ssize_t n = read(fd, hdr + got, sizeof hdr - got);
                if (n <= 0)
                        return false;
                got += (size_t)n;
        }
        pd_frame_hdr_decode(hdr, h);
        for (got = 0; got < h->len;) {
                ssize_t n = read(fd, p + got, h->len - got);
                if (n <= 0)
                        return false;
                got += (size_t)n;
        }
        return true;
}

/* S_TUNNEL: an agent that answers nothing until it has the HELLO, the
 * TUNNEL_OPEN and the tunnel's first bytes ("GET / ..."), which a client
 * sends in one go only if it does not wait for an answer in between. A
 * client that waits gets its answers after 5 s (a.stalled) instead of
 * hanging the test. */
static void tunnel_agent(struct agent *a)
{
        static uint8_t p[PD_FRAME_MAX];
        struct pd_frame_hdr h;
        struct pd_msg m;
        pd_msg_init(&m);
        bool hello = false, open = false;
        while (!(hello && open && a->tunnel_len >= 5)) {
                struct pollfd pf = { .fd = a->fd, .events = POLLIN };
                if (poll(&pf, 1, 5000) == 0) {
                        a->stalled = true;
                        break;
                }
                if (!read_frame(a->fd, &h, p))
                        goto out;
                if (h.type == PD_T_HELLO) {
                        hello = true;
                } else if (h.type == PD_T_TUNNEL_OPEN) {
                        struct pd_attr at;
                        open = true;
                        a->tunnel_id = h.id;
                        if (pd_msg_find(p, h.len, PD_A_PORT, &at))
                                pd_attr_u32(&at, &a->tunnel_port);
                } else if (h.type == PD_T_DATA && h.id == a->tunnel_id &&
                           a->tunnel_len + h.len < sizeof a->tunnel_data) {
                        memcpy(a->tunnel_data + a->tunnel_len, p, h.len);
                        a->tunnel_len += h.len;
                }
        }
        pd_msg_put_u32(&m, PD_A_VERSION, PD_PROTO_VERSION);
        pd_msg_put_str(&m, PD_A_AGENT, "scripted");
        send_msg(a->fd, PD_T_HELLO, 0, 0, &m);
        /* a stalled client sends its TUNNEL_OPEN only now */
        while (!open && read_frame(a->fd, &h, p))
                if (h.type == PD_T_TUNNEL_OPEN) {
                        open = true;
                        a->tunnel_id = h.id;
                }
        if (a->script == S_TUNNEL_REFUSED) {
                pd_msg_put_str(&m, PD_A_MESSAGE, "connect to 127.0.0.1:8000");
                send_msg(a->fd, PD_T_ERROR, a->tunnel_id, ECONNREFUSED, &m);
        } else {
                send_msg(a->fd, PD_T_REPLY, a->tunnel_id, 0, &m);
        }
        while (read_frame(a->fd, &h, p))
                ;
out:
        pd_msg_free(&m);
}

static void *agent_main(void *arg)
{
        struct agent *a = arg;
        static uint8_t p[PD_FRAME_MAX];
        struct pd_frame_hdr h;
        struct pd_msg m;
        pd_msg_init(&m);
        if (a->script == S_TUNNEL || a->script == S_TUNNEL_REFUSED) {
                tunnel_agent(a);
                pd_msg_free(&m);
                return NULL;
        }
        if (a->script == S_DROP) {     /* an agent past its connection limit */
                shutdown(a->fd, SHUT_RDWR);
                pd_msg_free(&m);
                return NULL;
        }
        while (read_frame(a->fd, &h, p)) {
                if (h.type == PD_T_HELLO && a->script == S_REFUSE) {
                        pd_msg_put_str(&m, PD_A_MESSAGE, "protocol version 9 not supported");
                        send_msg(a->fd, PD_T_ERROR, 0, EPROTONOSUPPORT, &m);
                        shutdown(a->fd, SHUT_RDWR);
                        break;
                }
                if (h.type == PD_T_HELLO) {
                        pd_msg_put_u32(&m, PD_A_VERSION, PD_PROTO_VERSION);
                        pd_msg_put_str(&m, PD_A_AGENT, "scripted");
                        send_msg(a->fd, PD_T_HELLO, 0, 0, &m);
                        if (a->script == S_CLOSE) {
                                shutdown(a->fd, SHUT_RDWR);
                                break;
                        }
                        continue;
                }
                if (a->script == S_SILENT)
                        continue;
                if (h.type == PD_T_SPAWN) {
                        memcpy(a->spawn, p, h.len);
                        a->spawn_len = h.len;
                        if (a->script == S_ERROR) {
                                pd_msg_put_str(&m, PD_A_MESSAGE, "cannot execute 'nope': No such file or directory");
                                pd_msg_put_u32(&m, PD_A_EXEC_ERRNO, ENOENT);
                                send_msg(a->fd, PD_T_ERROR, h.id, ENOENT, &m);
                                continue;
                        }
                        /* output of another process, and an answer to another
                         * request, before ours: the loop must skip to our id */
                        uint8_t out[8 + 3] = { 0, 0, 0, 0, 0, 0, 0, 0, 'o', 'l', 'd' };
                        send_frame(a->fd, PD_T_OUTPUT, 0, 99, PD_STREAM_STDOUT, out, sizeof out);
                        send_msg(a->fd, PD_T_REPLY, h.id + 1000, 0, &m);
                        pd_msg_put_u32(&m, PD_A_PID, 42);
                        send_msg(a->fd, PD_T_REPLY, h.id, 0, &m);
                        if (a->script == S_RUN) {
                                uint8_t o1[8 + 5] = { 0, 0, 0, 0, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o' };
                                uint8_t o2[8 + 3] = { 0, 0, 0, 0, 0, 0, 0, 0, 'e', 'r', 'r' };
                                send_frame(a->fd, PD_T_OUTPUT, 0, 42, PD_STREAM_STDOUT, o1, sizeof o1);
                                send_frame(a->fd, PD_T_OUTPUT, 0, 42, PD_STREAM_STDERR, o2, sizeof o2);
                                pd_msg_put_u32(&m, PD_A_PID, 42);
                                pd_msg_put_u32(&m, PD_A_EXIT_CODE, 3);
                                pd_msg_put_str(&m, PD_A_REASON, "exit");
                                pd_msg_put_u64(&m, PD_A_END_OUT, 5);
                                pd_msg_put_u64(&m, PD_A_END_ERR, 3);
                                send_msg(a->fd, PD_T_EXIT, 42, 0, &m);
                        }
                        continue;
                }
                if (h.type == PD_T_LIST) {
                        for (int i = 0; i < 2; i++) {   /* one pid twice */
                                size_t mark = pd_msg_nest_begin(&m, PD_A_PROC);
                                pd_msg_put_u32(&m, PD_A_PID, 7);
                                pd_msg_put_str(&m, PD_A_STATE, "running");
                                pd_msg_nest_end(&m, mark);
                        }
                        send_msg(a->fd, PD_T_REPLY, h.id, 0, &m);
                        continue;
                }
                if (h.type == PD_T_PING || h.type == PD_T_STDIN_CLOSE)
                        send_msg(a->fd, PD_T_REPLY, h.id, 0, &m);
        }
        pd_msg_free(&m);
        return NULL;
}

static int start(struct agent *a, enum script s, struct pd_client *c, struct pd_error *err)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        memset(a, 0, sizeof *a);
        a->fd = sv[1];
        a->script = s;
        pthread_create(&a->th, NULL, agent_main, a);
        return pd_client_connect(c, sv[0], "test-client", err);
}

static int start_pipelined(struct agent *a, enum script s, struct pd_client *c, struct pd_error *err)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        memset(a, 0, sizeof *a);
        a->fd = sv[1];
        a->script = s;
        pthread_create(&a->th, NULL, agent_main, a);
        return pd_client_connect_pipelined(c, sv[0], "test-client", err);
}

static void stop(struct agent *a, struct pd_client *c)
{
        pd_client_close(c);
        pthread_join(a->th, NULL);
        close(a->fd);
}

/* ---- the tests ---- */

static int frames_seen;

static int count_frame(void *ctx, const struct pd_frame_hdr *h, const uint8_t *p, struct pd_error *err)
{
        frames_seen++;
        return 0;
}

static void test_spawn(void)
{
        struct agent a;
        struct pd_client c;
        struct pd_error err = { 0 };
        ok(start(&a, S_SPAWN, &c, &err) == 0 && !strcmp(c.agent, "scripted"), "HELLO: the agent's build");

        static const char *const argv[] = { "/bin/echo", "hi" };
        static const char *const env[] = { "A=1", "B=2" };
        static const uint32_t groups[] = { 1000, 27 };
        const struct pd_spawn_opts o = { .argv = argv, .argc = 2, .env = env, .envc = 2, .cwd = "/tmp",
                                         .uid = 1000, .gid = 1000, .groups = groups, .n_groups = 2,
                                         .pty_rows = 30, .pty_cols = 100, .tag = "job", .timeout_ms = 5000 };
        uint32_t pid = 0;
        c.on_frame = count_frame;
        frames_seen = 0;
        int r = pd_client_spawn(&c, &o, &pid, &err);
        ok(r == 0 && pid == 42, "SPAWN: the pid of the REPLY with our id");
        ok(frames_seen == 2, "the frames before it (other ids) went to on_frame");

        /* what the agent received */
        struct pd_msg_iter it;
        struct pd_attr at;
        unsigned args = 0, envs = 0, grps = 0, follow = 0, stdin_open = 0;
        uint32_t v, rows = 0;
        uint64_t tmo = 0;
        char cwd[64] = "", tag[64] = "";
        pd_msg_iter_init(&it, a.spawn, a.spawn_len);
        while (pd_msg_next(&it, &at)) {
                switch (at.tag) {
                case PD_A_ARG: args++; break;
                case PD_A_ENV: envs++; break;
                case PD_A_GROUPS: grps++; break;
                case PD_A_CWD: pd_attr_str(&at, cwd, sizeof cwd); break;
                case PD_A_TAG: pd_attr_str(&at, tag, sizeof tag); break;
                case PD_A_PTY_ROWS: pd_attr_u32(&at, &rows); break;
                case PD_A_TIMEOUT_MS: pd_attr_u64(&at, &tmo); break;
                case PD_A_FOLLOW: follow += pd_attr_u32(&at, &v) && v; break;
                case PD_A_STDIN: stdin_open += pd_attr_u32(&at, &v) && v; break;
                }
        }
        ok(args == 2 && envs == 2 && grps == 2 && !strcmp(cwd, "/tmp") && !strcmp(tag, "job") && rows == 30 &&
           tmo == 5000 && !follow && !stdin_open, "SPAWN carries exactly the options");
        stop(&a, &c);

        ok(start(&a, S_ERROR, &c, &err) == 0, "connect");
        r = pd_client_spawn(&c, &o, &pid, &err);
        ok(r == -ENOENT && c.refused && !strncmp(err.msg, "cannot execute", 14),
           "an ERROR: its errno, the agent's message, refused");
        stop(&a, &c);
}

static void test_encode_limits(void)
{
        /* pd_spawn_check says what pd_spawn_encode does, at the frame's edge */
        size_t big = PD_FRAME_MAX - 200;
        char *s = malloc(big + 1);
        memset(s, 'x', big);
        s[big] = '\0';
        const char *argv[] = { "/bin/true" };
        const char *env[] = { s };
        struct pd_spawn_opts o = { .argv = argv, .argc = 1, .env = env, .envc = 1, .cwd = "/" };
        int agree = 1;
        for (size_t cut = 0; cut < 200; cut += 4) {
                s[big - cut] = '\0';
                for (int t = 0; t < 2; t++) {
                        o.timeout_ms = (uint64_t)t * 1000;
                        o.follow = t;
                        struct pd_msg m;
                        pd_msg_init(&m);
                        int e = pd_spawn_encode(&o, &m);
                        pd_msg_free(&m);
                        agree &= e == pd_spawn_check(&o);
                }
                s[big - cut] = 'x';
        }
        ok(agree, "pd_spawn_check agrees with pd_spawn_encode around PD_FRAME_MAX");
        s[0] = 'x';
        struct pd_msg m;
        pd_msg_init(&m);
        o.timeout_ms = 0;
        s[big] = '\0';
        char *huge = malloc(PD_FRAME_MAX + 1);
        memset(huge, 'y', PD_FRAME_MAX);
        huge[PD_FRAME_MAX] = '\0';
        env[0] = huge;
        ok(pd_spawn_encode(&o, &m) == -EMSGSIZE && pd_spawn_check(&o) == -EMSGSIZE, "over one frame: -EMSGSIZE");
        pd_msg_free(&m);
        o.argc = 0;
        ok(pd_spawn_check(&o) == -EINVAL, "no command: -EINVAL");
        free(huge);
        free(s);
}

struct got {
        char out[32], err[32];
        size_t nout, nerr;
        uint32_t spawned;
};

static void on_spawned(void *ctx, uint32_t pid)
{
        ((struct got *)ctx)->spawned = pid;
}

static void on_output(void *ctx, uint32_t stream, uint64_t off, const uint8_t *data, size_t n)
{
        struct got *g = ctx;
        char *b = stream == PD_STREAM_STDERR ? g->err : g->out;
        size_t *len = stream == PD_STREAM_STDERR ? &g->nerr : &g->nout;
        memcpy(b + *len, data, n);
        *len += n;
}

static void test_run(void)
{
        struct agent a;
        struct pd_client c;
        struct pd_error err = { 0 };
        start(&a, S_RUN, &c, &err);
        static const char *const argv[] = { "/bin/sh", "-c", "x" };
        const struct pd_spawn_opts o = { .argv = argv, .argc = 3 };
        struct got g = { 0 };
        const struct pd_run_io io = { .on_spawned = on_spawned, .on_output = on_output, .ctx = &g, .timeout_ms = 5000 };
        uint32_t pid;
        struct pd_exit x;
        int r = pd_client_run(&c, &o, &io, &pid, &x, &err);
        ok(r == 0 && pid == 42 && g.spawned == 42, "run: spawned");
        ok(g.nout == 5 && !memcmp(g.out, "hello", 5) && g.nerr == 3 && !memcmp(g.err, "err", 3),
           "run: its output only (not another pid's), by stream");
        ok(x.has_code && x.code == 3 && !x.has_signal && !strcmp(x.reason, "exit") && x.end_out == 5 &&
           x.end_err == 3, "run: the exit, typed");
        uint32_t follow = 0;
        struct pd_attr at;
        ok(pd_msg_find(a.spawn, a.spawn_len, PD_A_FOLLOW, &at) && pd_attr_u32(&at, &follow) && follow,
           "run: SPAWN with FOLLOW");
        stop(&a, &c);
}

static void test_pipelined(void)
{
        struct agent a;
        struct pd_client c;
        struct pd_error err = { 0 };
        static const char *const argv[] = { "/bin/sh", "-c", "x" };
        const struct pd_spawn_opts o = { .argv = argv, .argc = 3 };
        struct got g = { 0 };
        const struct pd_run_io io = { .on_spawned = on_spawned, .on_output = on_output, .ctx = &g, .timeout_ms = 5000 };
        uint32_t pid;
        struct pd_exit x;

        ok(start_pipelined(&a, S_RUN, &c, &err) == 0 && c.hello_pending && !c.agent[0],
           "pipelined: connected without waiting for the HELLO answer");
        int r = pd_client_run(&c, &o, &io, &pid, &x, &err);
        ok(r == 0 && pid == 42 && g.nout == 5 && x.has_code && x.code == 3, "pipelined: HELLO and SPAWN in one go, run");
        ok(!c.hello_pending && !strcmp(c.agent, "scripted"), "pipelined: the HELLO answer taken, not the caller's");
        stop(&a, &c);

        start_pipelined(&a, S_REFUSE, &c, &err);
        r = pd_client_spawn(&c, &o, &pid, &err);
        ok(r == -EPROTONOSUPPORT && c.refused && !c.hello_pending,
           "pipelined: a refused HELLO fails the first call, as an answer (not retried)");
        stop(&a, &c);

        err = (struct pd_error){ 0 };
        start_pipelined(&a, S_DROP, &c, &err);
        r = pd_client_spawn(&c, &o, &pid, &err);
        ok((r == -EPIPE || r == -ECONNRESET) && c.hello_pending,
           "pipelined: an agent that closes at once answered nothing (hello_pending stays)");
        stop(&a, &c);
}

static void test_tunnel_open_with(void)
{
        struct agent a;
        struct pd_client c;
        struct pd_error err = { 0 };
        static const char req[] = "GET / HTTP/1.0\r\n\r\n";
        uint32_t tid = 0;

        start_pipelined(&a, S_TUNNEL, &c, &err);
        int r = pd_client_tunnel_open_with(&c, 8000, req, sizeof req - 1, &tid, &err);
        ok(r == 0 && !c.hello_pending && !strcmp(c.agent, "scripted"), "tunnel_open_with: open, HELLO answered");
        stop(&a, &c);
        ok(!a.stalled, "tunnel_open_with: HELLO, TUNNEL_OPEN and the first bytes before any answer");
        ok(a.tunnel_port == 8000 && a.tunnel_id == tid, "tunnel_open_with: the port, the tunnel id");
        ok(a.tunnel_len == sizeof req - 1 && !memcmp(a.tunnel_data, req, a.tunnel_len),
           "tunnel_open_with: the first bytes as DATA of that tunnel");

        err = (struct pd_error){ 0 };
        start_pipelined(&a, S_TUNNEL_REFUSED, &c, &err);
        r = pd_client_tunnel_open_with(&c, 8000, req, sizeof req - 1, &tid, &err);
        ok(r == -ECONNREFUSED && c.refused, "tunnel_open_with: nobody listens: -ECONNREFUSED");
        stop(&a, &c);

        err = (struct pd_error){ 0 };
        start_pipelined(&a, S_DROP, &c, &err);
        r = pd_client_tunnel_open_with(&c, 8000, req, sizeof req - 1, &tid, &err);
        ok((r == -EPIPE || r == -ECONNRESET) && c.hello_pending,
           "tunnel_open_with: an agent that closes at once answered nothing (retry is safe)");
        stop(&a, &c);
}

static bool gone_now(void *ctx)
{
        return true;
}

static void test_waits(void)
{
        struct agent a;
        struct pd_client c;
        struct pd_error err = { 0 };
        start(&a, S_SILENT, &c, &err);
        c.timeout_ms = 200;
        int r = pd_client_ping(&c, NULL, &err);
        ok(r == -ETIMEDOUT && strstr(err.msg, "PING"), "no answer: -ETIMEDOUT after c->timeout_ms");

        c.watch.gone = gone_now;
        c.timeout_ms = 10000;
        r = pd_client_ping(&c, NULL, &err);
        ok(r == -ESHUTDOWN, "watch.gone: the wait ends (-ESHUTDOWN)");
        c.watch.gone = NULL;

        int hup[2];
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, hup);
        close(hup[1]);
        c.watch.hup_fd = hup[0];
        r = pd_client_ping(&c, NULL, &err);
        ok(r == -ECONNABORTED, "watch.hup_fd hung up: the wait ends (-ECONNABORTED)");
        close(hup[0]);
        stop(&a, &c);

        start(&a, S_CLOSE, &c, &err);
        r = pd_client_ping(&c, NULL, &err);
        ok(r == -EPIPE, "the agent closes: -EPIPE");
        stop(&a, &c);
}

static void test_hostile_list(void)
{
        struct agent a;
        struct pd_client c;
        struct pd_error err = { 0 };
        start(&a, S_HOSTILE_LIST, &c, &err);
        struct pd_proc_list l;
        int r = pd_client_list(&c, &l, &err);
        ok(r == -EPROTO && l.n == 0 && strstr(err.msg, "listed twice"), "LIST with a pid twice: -EPROTO, empty");
        pd_proc_list_free(&l);
        stop(&a, &c);
}

static void test_decoders(void)
{
        struct pd_frame_hdr h = { .type = PD_T_OUTPUT, .len = 7 };
        uint8_t p[16] = { 0, 0, 0, 0, 0, 0, 1, 0, 'a' };
        uint64_t off, from, to;
        const uint8_t *data;
        size_t n;
        ok(!pd_output_decode(&h, p, &off, &data, &n), "OUTPUT shorter than its offset: refused");
        h.len = 9;
        ok(pd_output_decode(&h, p, &off, &data, &n) && off == 256 && n == 1 && data[0] == 'a', "OUTPUT decoded");
        h.type = PD_T_GAP;
        ok(!pd_gap_decode(&h, p, &from, &to), "GAP shorter than 16 bytes: refused");
        struct pd_exit x;
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_SIGNO, 9);
        pd_msg_put(&m, PD_A_REASON, "kil\0led", 7);
        pd_exit_decode(m.buf, m.len, &x);
        ok(x.has_signal && x.signo == 9 && !x.has_code && !strcmp(x.reason, "exit"),
           "EXIT: a reason with a NUL byte is not taken");
        pd_msg_free(&m);
}

int main(void)
{
        signal(SIGPIPE, SIG_IGN);
        test_spawn();
        test_encode_limits();
        test_run();
        test_pipelined();
        test_tunnel_open_with();
        test_waits();
        test_hostile_list();
        test_decoders();
        return tap_done();
}
