/* paddock exec and paddock logs: start a process on the server, follow its
 * output (GET .../output?format=frames&follow=1) to our stdout and stderr,
 * forward our stdin and signals, exit with its status.
 *
 * The follower keeps the next offset of each stream; if the connection
 * drops it reconnects with from_stdout/from_stderr at those offsets and
 * skips bytes already written, so nothing is lost or written twice. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "lib/base64.h"
#include "lib/util.h"

#define LINE_MAX_BYTES (16u << 20)
#define RECONNECT_TRIES 8
#define STDIN_CHUNK 65536
#define MAX_ENV 256

struct follower {
        const struct pd_rc *rc;
        const char *id;
        uint32_t pid;
        bool follow;
        uint64_t next[3];       /* stdout, stderr, pty */
        char *line;
        size_t len, cap;
        bool exited;
        json_t *exit;           /* {"exit_code","signal","reason"} */
        bool progressed;
};

static int slot_of(const char *stream)
{
        if (!strcmp(stream, "stdout"))
                return 0;
        if (!strcmp(stream, "stderr"))
                return 1;
        if (!strcmp(stream, "pty"))
                return 2;
        return -1;
}

static int frame_line(struct follower *f, const char *line, size_t n)
{
        json_t *j = json_loadb(line, n, 0, NULL);
        if (!j)
                return 0;       /* not ours to judge: skip */
        json_t *v;
        int ret = 0;
        if ((v = json_object_get(j, "stream"))) {
                int slot = slot_of(json_string_value(v) ? json_string_value(v) : "");
                const char *b64 = json_string_value(json_object_get(j, "data_b64"));
                json_int_t off = json_integer_value(json_object_get(j, "offset"));
                if (slot < 0 || !b64 || off < 0)
                        goto out;
                size_t bl = strlen(b64);
                unsigned char *buf = malloc(pd_b64_decoded_max(bl));
                ssize_t dn = buf ? pd_b64_decode(b64, bl, buf, PD_B64_STRICT) : -1;
                if (dn < 0) {
                        free(buf);
                        pd_cli_error("process %" PRIu32 ": undecodable output frame", f->pid);
                        ret = -PD_RC_INTERNAL;
                        goto out;
                }
                uint64_t o = (uint64_t)off, nx = f->next[slot];
                size_t skip = 0;
                if (o + (uint64_t)dn <= nx) {
                        free(buf);
                        goto out;       /* a replay after a reconnect */
                }
                if (o < nx)
                        skip = (size_t)(nx - o);
                int fd = slot == 1 ? STDERR_FILENO : STDOUT_FILENO;
                if (pd_write_all(fd, buf + skip, (size_t)dn - skip) < 0 && errno != EPIPE) {
                        free(buf);
                        ret = -PD_RC_INTERNAL;
                        goto out;
                }
                free(buf);
                f->next[slot] = o + (uint64_t)dn;
        } else if ((v = json_object_get(j, "gap"))) {
                int slot = slot_of(json_string_value(json_object_get(v, "stream")) ?: "stdout");
                json_int_t from = json_integer_value(json_object_get(v, "from"));
                json_int_t to = json_integer_value(json_object_get(v, "to"));
                if (slot >= 0 && (uint64_t)to > f->next[slot])
                        f->next[slot] = (uint64_t)to;
                fprintf(stderr, "paddock: process %" PRIu32 ": %lld bytes of %s were dropped (ring buffer)\n",
                        f->pid, (long long)(to - from), json_string_value(json_object_get(v, "stream")) ?: "output");
        } else if ((v = json_object_get(j, "exit"))) {
                f->exited = true;
                json_decref(f->exit);
                f->exit = json_incref(v);
        }
out:
        json_decref(j);
        return ret;
}

static int frames_sink(void *ctx, const char *data, size_t n)
{
        struct follower *f = ctx;
        f->progressed = true;
        while (n) {
                const char *nl = memchr(data, '\n', n);
                size_t take = nl ? (size_t)(nl - data) : n;
                if (f->len + take > LINE_MAX_BYTES) {
                        pd_cli_error("process %" PRIu32 ": output frame too long", f->pid);
                        return -PD_RC_INTERNAL;
                }
                if (f->len + take + 1 > f->cap) {
                        size_t cap = f->cap ? f->cap : 65536;
                        while (cap < f->len + take + 1)
                                cap *= 2;
                        char *b = realloc(f->line, cap);
                        if (!b)
                                return -PD_RC_INTERNAL;
                        f->line = b;
                        f->cap = cap;
                }
                memcpy(f->line + f->len, data, take);
                f->len += take;
                data += take;
                n -= take;
                if (nl) {
                        int k = frame_line(f, f->line, f->len);
                        f->len = 0;
                        data++;
                        n--;
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

/* Follow until the exit record (follow) or the end of what there is.
 * 0, or an exit status after a message. */
static int follow_output(struct follower *f)
{
        int failures = 0;
        for (;;) {
                char path[256];
                snprintf(path, sizeof path,
                         "/sandboxes/%s/processes/%" PRIu32 "/output?format=frames%s&from_stdout=%" PRIu64
                         "&from_stderr=%" PRIu64,
                         f->id, f->pid, f->follow ? "&follow=1" : "", f->next[2] ? f->next[2] : f->next[0],
                         f->next[1]);
                f->progressed = false;
                f->len = 0;
                struct pd_rc_stream s = { .path = path, .sink = frames_sink, .ctx = f };
                int k = pd_rc_stream(f->rc, &s);
                if (f->exited)
                        return 0;
                if (k == 0 && !f->follow)
                        return 0;
                if (k != 0 && k != PD_RC_UNREACHABLE)
                        return k;       /* the server said no (message printed) */
                if (k == PD_RC_UNREACHABLE && !s.status && !failures && !f->progressed) {
                        /* never connected at all: no point retrying */
                        return pd_rc_net_error(f->rc, &s);
                }
                failures = f->progressed ? 0 : failures + 1;
                if (failures >= RECONNECT_TRIES) {
                        if (k == PD_RC_UNREACHABLE)
                                return pd_rc_net_error(f->rc, &s);
                        pd_cli_error("process %" PRIu32 ": output stream ended before the process did", f->pid);
                        return PD_RC_INTERNAL;
                }
                usleep((useconds_t)(50000u << (failures < 5 ? failures : 5)));
        }
}

/* ---- exec ---- */

struct exec_ctx {
        const struct pd_rc *rc;
        const char *id;
        uint32_t pid;
        bool tty;
        sigset_t sigs;
};

static struct termios saved_tio;
static bool tio_saved;

static void restore_tty(void)
{
        if (tio_saved) {
                tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
                tio_saved = false;
        }
}

static int proc_post(const struct exec_ctx *x, const char *what, const void *body, size_t len, const char *ctype)
{
        char path[160];
        snprintf(path, sizeof path, "/sandboxes/%s/processes/%" PRIu32 "/%s", x->id, x->pid, what);
        struct pd_rc_stream s = { .method = "POST", .path = path, .body = body ? body : "", .body_len = len,
                                  .content_type = ctype, .quiet = true, .timeout_s = 120 };
        return pd_rc_stream(x->rc, &s);
}

static void send_resize(const struct exec_ctx *x)
{
        struct winsize ws;
        if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
                return;
        char body[64];
        int n = snprintf(body, sizeof body, "{\"rows\":%u,\"cols\":%u}", ws.ws_row, ws.ws_col);
        proc_post(x, "resize", body, (size_t)n, "application/json");
}

static void *stdin_thread(void *arg)
{
        struct exec_ctx *x = arg;
        char *buf = malloc(STDIN_CHUNK);
        if (!buf)
                return NULL;
        for (;;) {
                ssize_t n = read(STDIN_FILENO, buf, STDIN_CHUNK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                if (proc_post(x, "stdin", buf, (size_t)n, "application/octet-stream"))
                        goto out;       /* the process is gone or stopped reading */
        }
        proc_post(x, "stdin/close", NULL, 0, NULL);
out:
        free(buf);
        return NULL;
}

/* SIGINT, SIGTERM, SIGHUP go to the process; SIGWINCH resizes its pty. */
static void *signal_thread(void *arg)
{
        struct exec_ctx *x = arg;
        unsigned interrupts = 0;
        for (;;) {
                int sig;
                if (sigwait(&x->sigs, &sig))
                        continue;
                if (sig == SIGWINCH) {
                        if (x->tty)
                                send_resize(x);
                        continue;
                }
                if (++interrupts >= 3) {
                        restore_tty();
                        pd_cli_error("interrupted three times: leaving process %" PRIu32 " running", x->pid);
                        _exit(128 + sig);
                }
                char body[32];
                int n = snprintf(body, sizeof body, "{\"signal\":%d}", sig);
                proc_post(x, "signal", body, (size_t)n, "application/json");
        }
        return NULL;
}

static void exec_usage(FILE *f)
{
        fprintf(f, "usage: paddock exec [OPTIONS] ID [--] CMD [ARGS...]\n"
                   "Run CMD in a sandbox: stream its output, forward stdin and signals, exit with\n"
                   "its status (128+N if signal N killed it).\n\n"
                   "  -t, --tty          give the command a terminal (raw mode here)\n"
                   "  -e, --env K=V      environment variable (K alone: take it from here)\n"
                   "  -w, --workdir DIR  working directory (default the user's home)\n"
                   "  -u, --user USER    user (default, uid 1000) or root\n"
                   "  --timeout DURATION the server kills the command after this long (exit 124)\n"
                   "  --no-stdin         do not forward stdin (the command reads EOF)\n"
                   "  --detach           print the pid and return at once (see paddock logs)\n");
}

int pd_remote_exec(const struct pd_rc *rc, int argc, char **argv)
{
        enum { O_NOSTDIN = 256, O_TIMEOUT, O_DETACH };
        static const struct option opts[] = {
                { "tty", no_argument, NULL, 't' },          { "env", required_argument, NULL, 'e' },
                { "workdir", required_argument, NULL, 'w' }, { "user", required_argument, NULL, 'u' },
                { "no-stdin", no_argument, NULL, O_NOSTDIN }, { "timeout", required_argument, NULL, O_TIMEOUT },
                { "detach", no_argument, NULL, O_DETACH },    { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        bool tty = false, no_stdin = false, detach = false;
        const char *workdir = NULL, *user = NULL;
        uint64_t timeout_ms = 0;
        struct pd_error err = { 0 };
        json_t *env = json_object();
        int c, ret = PD_RC_USAGE;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+te:w:u:h", opts, NULL)) != -1) {
                switch (c) {
                case 't': tty = true; break;
                case 'e': {
                        const char *eq = strchr(optarg, '=');
                        if (eq == optarg || !*optarg) {
                                pd_remote_usage_error("exec", "invalid -e '%s'", optarg);
                                goto out;
                        }
                        if (eq) {
                                json_object_set_new(env, strndupa(optarg, (size_t)(eq - optarg)), json_string(eq + 1));
                        } else if (getenv(optarg)) {
                                json_object_set_new(env, optarg, json_string(getenv(optarg)));
                        }
                        break;
                }
                case 'w': workdir = optarg; break;
                case 'u': user = optarg; break;
                case O_NOSTDIN: no_stdin = true; break;
                case O_DETACH: detach = true; break;
                case O_TIMEOUT:
                        if (pd_parse_duration_ms(optarg, &timeout_ms, &err) < 0) {
                                pd_remote_usage_error("exec", "--timeout: %s", err.msg);
                                goto out;
                        }
                        break;
                case 'h': exec_usage(stdout); ret = 0; goto out;
                default:
                        ret = optopt ? pd_remote_usage_error("exec", "unknown option '-%c' or missing value", optopt)
                                     : pd_remote_usage_error("exec", "unknown option '%s' or missing value",
                                                             argv[optind - 1]);
                        goto out;
                }
        }
        if (optind >= argc) {
                pd_remote_usage_error("exec", "missing sandbox id");
                goto out;
        }
        const char *id = argv[optind++];
        if (pd_remote_check_id("exec", id))
                goto out;
        if (optind < argc && !strcmp(argv[optind], "--"))
                optind++;
        if (optind >= argc) {
                pd_remote_usage_error("exec", "no command given (paddock exec ID -- CMD [ARGS...])");
                goto out;
        }
        json_t *cmd = json_array();
        for (int i = optind; i < argc; i++)
                json_array_append_new(cmd, json_string(argv[i]));
        json_t *body = json_pack("{s:o,s:b}", "cmd", cmd, "stdin", !no_stdin && !detach);
        if (json_object_size(env))
                json_object_set(body, "env", env);
        if (workdir)
                json_object_set_new(body, "cwd", json_string(workdir));
        if (user)
                json_object_set_new(body, "user", json_string(user));
        if (timeout_ms)
                json_object_set_new(body, "timeout", json_real((double)timeout_ms / 1000.0));
        tty = tty && isatty(STDIN_FILENO);
        if (tty) {
                struct winsize ws = { .ws_row = 24, .ws_col = 80 };
                if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
                        ws = (struct winsize){ .ws_row = 24, .ws_col = 80 };
                json_object_set_new(body, "pty", json_pack("{s:i,s:i}", "rows", ws.ws_row, "cols", ws.ws_col));
        }
        char path[128];
        snprintf(path, sizeof path, "/sandboxes/%s/processes", id);
        json_t *started = NULL;
        ret = pd_rc_json(rc, "POST", path, body, &started);
        json_decref(body);
        if (ret)
                goto out;
        json_int_t pid = json_integer_value(json_object_get(started, "pid"));
        json_decref(started);
        if (pid <= 0) {
                pd_cli_error("exec: the server answered without a pid");
                ret = PD_RC_INTERNAL;
                goto out;
        }
        if (detach) {
                printf("%lld\n", (long long)pid);
                ret = 0;
                goto out;
        }

        static struct exec_ctx x;       /* the forwarders outlive this frame until exit */
        x = (struct exec_ctx){ .rc = rc, .id = id, .pid = (uint32_t)pid, .tty = tty };
        sigemptyset(&x.sigs);
        sigaddset(&x.sigs, SIGINT);
        sigaddset(&x.sigs, SIGTERM);
        sigaddset(&x.sigs, SIGHUP);
        sigaddset(&x.sigs, SIGWINCH);
        pthread_sigmask(SIG_BLOCK, &x.sigs, NULL);      /* before any thread: they inherit it */
        signal(SIGPIPE, SIG_IGN);
        if (tty && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
                struct termios raw = saved_tio;
                cfmakeraw(&raw);
                tio_saved = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
                atexit(restore_tty);
        }
        pthread_t t;
        if (pthread_create(&t, NULL, signal_thread, &x) == 0)
                pthread_detach(t);
        if (!no_stdin && pthread_create(&t, NULL, stdin_thread, &x) == 0)
                pthread_detach(t);

        struct follower f = { .rc = rc, .id = id, .pid = (uint32_t)pid, .follow = true };
        ret = follow_output(&f);
        restore_tty();
        if (!ret) {
                json_t *ec = json_object_get(f.exit, "exit_code"), *sg = json_object_get(f.exit, "signal");
                const char *reason = json_string_value(json_object_get(f.exit, "reason"));
                if (reason && !strcmp(reason, "timeout"))
                        ret = PD_EXIT_TIMEOUT;
                else if (json_is_integer(ec))
                        ret = (int)json_integer_value(ec);
                else if (json_is_integer(sg))
                        ret = 128 + (int)json_integer_value(sg);
                else
                        ret = PD_RC_INTERNAL;
        }
        json_decref(f.exit);
        free(f.line);
out:
        json_decref(env);
        return ret;
}

/* ---- logs ---- */

struct raw_ctx {
        uint64_t got;
};

static int raw_sink(void *ctx, const char *data, size_t n)
{
        struct raw_ctx *r = ctx;
        if (pd_write_all(STDOUT_FILENO, data, n) < 0)
                return -PD_RC_INTERNAL;
        r->got += n;
        return 0;
}

int pd_remote_logs(const struct pd_rc *rc, int argc, char **argv)
{
        enum { O_FROM = 256, O_STREAM };
        static const struct option opts[] = {
                { "follow", no_argument, NULL, 'f' }, { "from", required_argument, NULL, O_FROM },
                { "stream", required_argument, NULL, O_STREAM }, { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        bool follow = false;
        uint64_t from = 0;
        const char *stream = NULL;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+fh", opts, NULL)) != -1) {
                switch (c) {
                case 'f': follow = true; break;
                case O_FROM: {
                        char *end;
                        errno = 0;
                        unsigned long long v = strtoull(optarg, &end, 10);
                        if (errno || *end || end == optarg || optarg[0] == '-')
                                return pd_remote_usage_error("logs", "--from: '%s' is not a byte offset", optarg);
                        from = v;
                        break;
                }
                case O_STREAM:
                        if (strcmp(optarg, "stdout") && strcmp(optarg, "stderr") && strcmp(optarg, "pty"))
                                return pd_remote_usage_error("logs", "--stream must be stdout, stderr or pty");
                        stream = optarg;
                        break;
                case 'h':
                        printf("usage: paddock logs [-f] [--from N] [--stream S] ID PID\n"
                               "Print a process's output: stdout here to stdout, stderr to stderr.\n\n"
                               "  -f, --follow     keep printing until the process exits\n"
                               "  --from N         start at byte N of each stream\n"
                               "  --stream S       only stdout, stderr or pty, raw, to stdout\n");
                        return 0;
                default:
                        return optopt ? pd_remote_usage_error("logs", "unknown option '-%c' or missing value", optopt)
                                      : pd_remote_usage_error("logs", "unknown option '%s' or missing value",
                                                              argv[optind - 1]);
                }
        }
        if (argc - optind != 2)
                return pd_remote_usage_error("logs", "expected ID PID");
        const char *id = argv[optind];
        if (pd_remote_check_id("logs", id))
                return PD_RC_USAGE;
        char *end;
        errno = 0;
        unsigned long pid = strtoul(argv[optind + 1], &end, 10);
        if (errno || *end || end == argv[optind + 1] || !pid || pid > UINT32_MAX)
                return pd_remote_usage_error("logs", "'%s' is not a process id", argv[optind + 1]);
        signal(SIGPIPE, SIG_IGN);
        if (!stream) {
                struct follower f = { .rc = rc, .id = id, .pid = (uint32_t)pid, .follow = follow,
                                      .next = { from, from, from } };
                int k = follow_output(&f);
                json_decref(f.exit);
                free(f.line);
                return k;
        }
        /* one raw stream, resumed at from + bytes received after a drop */
        struct raw_ctx r = { 0 };
        int failures = 0;
        for (;;) {
                char path[256];
                uint64_t before = r.got;
                snprintf(path, sizeof path, "/sandboxes/%s/processes/%lu/output?stream=%s&from=%" PRIu64 "%s", id,
                         pid, stream, from + r.got, follow ? "&follow=1" : "");
                struct pd_rc_stream s = { .path = path, .sink = raw_sink, .ctx = &r };
                int k = pd_rc_stream(rc, &s);
                if (k != PD_RC_UNREACHABLE)
                        return k;
                if (!s.status && r.got == 0 && !failures)
                        return pd_rc_net_error(rc, &s);
                failures = r.got > before ? 0 : failures + 1;
                if (failures >= RECONNECT_TRIES)
                        return pd_rc_net_error(rc, &s);
                usleep(100000);
        }
}
