/* paddock run [OPTIONS] -- CMD [ARGS...]: the one-shot path. No daemon:
 * create a sandbox, run CMD in it through the agent protocol, stream its
 * output, exit with its status (DESIGN §8), destroy the sandbox. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run_teardown.h"
#include "proto/client.h"
#include "net/policy.h"
#include "net/router.h"
#include "lib/sandbox.h"
#include "lib/template.h"
#include "lib/trace.h"
#include "lib/util.h"
#include "lib/volume.h"
#if defined(PD_LEAN) && !defined(__SANITIZE_ADDRESS__)
#include "agent/inproc.h"
#endif

#define MAX_ENV 256
#define STDIN_QUEUE_MAX (1u << 20)

struct run_opts {
        struct pd_spec spec;
        const char *state_dir;
        const char *env[MAX_ENV];
        unsigned n_env;
        const char *workdir;
        const char *user;
        bool tty;
        bool json;
        uint64_t timeout_ms;
        char **argv;
        struct pd_netpol netpol;        /* --net open|policy, --allow, --deny */
        /* an image template's Env, WorkingDir, User and command */
        struct pd_template_run img;
};

struct run_result {
        int status;             /* exit status of paddock run */
        const char *reason;     /* exit, signal, timeout, oom, not-found, cannot-execute, error */
        int exit_code, signo;
        char message[PD_ERROR_MSG_MAX];
};

static void usage(FILE *f)
{
        fprintf(f,
                "usage: paddock run [OPTIONS] [--] CMD [ARGS...]\n"
                "Run CMD in a fresh sandbox, stream its output, exit with its status.\n\n"
                "  --isolation TIER   container (default) or process (no namespaces: Landlock,\n"
                "                     seccomp, a uid and cgroup of its own; docs/security.md),\n"
                "                     supervised, gvisor (gVisor's runsc: docs/gvisor.md) or\n"
                "                     microvm (a QEMU guest: docs/microvm.md)\n"
                "  --allow-weaker     process tier: run even if Landlock lacks a right\n"
                "  --policy FILE      supervised tier: path and connect rules (JSON;\n"
                "                     docs/security.md)\n"
                "  --template NAME|DIR  registered template name (default base) or a directory\n"
                "  --memory SIZE      memory limit (default 512M)\n"
                "  --pids N           process limit (default 512)\n"
                "  --cpus N           CPU limit, fractions allowed (default 1)\n"
                "  --disk SIZE        writable layer size (default 1G; tmpfs, capped below\n"
                "                     --memory)\n"
                "  --timeout DURATION kill the sandbox after this long (exit 124)\n"
                "  -e, --env K=V      set an environment variable (K alone: take it from here)\n"
                "  -w, --workdir DIR  working directory inside (default: the image's WorkingDir,\n"
                "                     else the user's home)\n"
                "  -u, --user USER    user or root (default: the image's User, else user,\n"
                "                     uid 1000)\n"
                "  -v, --volume HOST:SANDBOX[:OPTIONS]  bind a host path into the sandbox\n"
                "                     (container, supervised); OPTIONS, comma-separated: ro,\n"
                "                     rw (default), uid=N, gid=N (host ids `user` writes as;\n"
                "                     default: the path's owner, never root), map=sandbox\n"
                "                     with ro (no host account: every id is the sandbox's\n"
                "                     own); docs/security.md\n"
                "  -t, --tty          give the command a terminal\n"
                "  --net MODE         none (default: loopback only), open (the public internet,\n"
                "                     never metadata, LAN or host) or policy (only what --allow\n"
                "                     names); container and supervised tiers (docs/network.md)\n"
                "  --allow RULE       TARGET[:PORTS[/PROTO]]: CIDR, address, domain, *.domain\n"
                "  --deny RULE        same form; deny wins over allow (docs/network.md)\n"
                "  --net-conns-per-sec N   new connections per second (kernel-enforced)\n"
                "  --net-bytes-per-sec SIZE  bandwidth each way (kernel-enforced)\n"
                "  --net-uplink UPLINK where the router's traffic leaves ($PADDOCK_NET_UPLINK):\n"
                "                     auto (default: relay, else pasta, as the host's\n"
                "                     sockets), relay (TCP relayed, the rest through\n"
                "                     slirp4netns), slirp4netns, pasta, none, netns:PATH\n"
                "                     or IFACE:ADDR/PREFIX:GW (docs/network.md)\n"
                "  --net-resolver IP[,IP]   upstream DNS resolvers ($PADDOCK_NET_RESOLVER;\n"
                "                     default: the host's, from /etc/resolv.conf)\n"
                "  --state-dir DIR    state directory (default %s)\n"
                "  --json             print a final JSON result on stderr\n\n"
                "Exit status: the command's own; 128+N if signal N ended it; 124 timeout;\n"
                "125 paddock's own error; 126 cannot execute or no such -w directory;\n"
                "127 not found; 137 with reason oom after an out-of-memory kill.\n",
                PD_DEFAULT_STATE_DIR);
}

static int parse_volume(char *arg, struct pd_spec *spec)
{
        struct pd_error err = { 0 };
        if (spec->n_volumes >= PD_MAX_VOLUMES) {
                pd_cli_error("too many volumes (at most %d)", PD_MAX_VOLUMES);
                return -1;
        }
        if (pd_volume_parse(arg, &spec->volumes[spec->n_volumes], &err) < 0) {
                pd_cli_error("-v: %s", err.msg);
                return -1;
        }
        spec->n_volumes++;
        return 0;
}

static int parse(int argc, char **argv, struct run_opts *o)
{
        enum { O_ISO = 256, O_TEMPLATE, O_MEMORY, O_PIDS, O_CPUS, O_DISK, O_TIMEOUT, O_NET, O_STATE, O_JSON,
               O_WEAKER, O_POLICY, O_ALLOW, O_DENY, O_UPLINK, O_RESOLVER, O_CONNS, O_BYTES };
        static const struct option opts[] = {
                { "isolation", required_argument, NULL, O_ISO },
                { "template", required_argument, NULL, O_TEMPLATE },
                { "memory", required_argument, NULL, O_MEMORY },
                { "pids", required_argument, NULL, O_PIDS },
                { "cpus", required_argument, NULL, O_CPUS },
                { "disk", required_argument, NULL, O_DISK },
                { "timeout", required_argument, NULL, O_TIMEOUT },
                { "env", required_argument, NULL, 'e' },
                { "workdir", required_argument, NULL, 'w' },
                { "user", required_argument, NULL, 'u' },
                { "volume", required_argument, NULL, 'v' },
                { "tty", no_argument, NULL, 't' },
                { "net", required_argument, NULL, O_NET },
                { "allow", required_argument, NULL, O_ALLOW },
                { "deny", required_argument, NULL, O_DENY },
                { "net-uplink", required_argument, NULL, O_UPLINK },
                { "net-resolver", required_argument, NULL, O_RESOLVER },
                { "net-conns-per-sec", required_argument, NULL, O_CONNS },
                { "net-bytes-per-sec", required_argument, NULL, O_BYTES },
                { "state-dir", required_argument, NULL, O_STATE },
                { "json", no_argument, NULL, O_JSON },
                { "allow-weaker", no_argument, NULL, O_WEAKER },
                { "policy", required_argument, NULL, O_POLICY },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        struct pd_error err = { 0 };
        int c;
        uint64_t v;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+e:w:u:v:th", opts, NULL)) != -1) {
                switch (c) {
                case O_ISO:
                        if (pd_isolation_parse(optarg, &o->spec.isolation) < 0) {
                                pd_cli_error("unknown isolation '%s' (%s)", optarg, pd_isolation_names());
                                return -1;
                        }
                        break;
                case O_TEMPLATE:
                        if (strchr(optarg, '/') || !strcmp(optarg, ".") || !strcmp(optarg, "..")) {
                                o->spec.template_dir = optarg;
                                o->spec.template_name = NULL;
                        } else {
                                o->spec.template_name = optarg;
                        }
                        break;
                case O_MEMORY:
                        if (pd_parse_size(optarg, &v, &err) < 0 || v < (16u << 20)) {
                                pd_cli_error("--memory: %s", err.code ? err.msg : "at least 16M");
                                return -1;
                        }
                        o->spec.memory_bytes = v;
                        break;
                case O_DISK:
                        if (pd_parse_size(optarg, &v, &err) < 0 || v < (1u << 20)) {
                                pd_cli_error("--disk: %s", err.code ? err.msg : "at least 1M");
                                return -1;
                        }
                        o->spec.disk_bytes = v;
                        break;
                case O_PIDS: {
                        char *end;
                        errno = 0;
                        unsigned long n = strtoul(optarg, &end, 10);
                        if (errno || *end || end == optarg || n < 1 || n > 4194304) {
                                pd_cli_error("--pids: invalid count '%s' (1 to 4194304)", optarg);
                                return -1;
                        }
                        o->spec.pids = (uint32_t)n;
                        break;
                }
                case O_CPUS:
                        if (pd_parse_cpus(optarg, &v, &err) < 0) {
                                pd_cli_error("--cpus: %s", err.msg);
                                return -1;
                        }
                        o->spec.millicpus = (uint32_t)v;
                        break;
                case O_TIMEOUT:
                        if (pd_parse_duration_ms(optarg, &o->timeout_ms, &err) < 0) {
                                pd_cli_error("--timeout: %s", err.msg);
                                return -1;
                        }
                        break;
                case 'e':
                        if (o->n_env >= MAX_ENV || !*optarg || *optarg == '=') {
                                pd_cli_error("-e: invalid or too many variables ('%s')", optarg);
                                return -1;
                        }
                        o->env[o->n_env++] = optarg;
                        break;
                case 'w':
                        if (optarg[0] != '/') {
                                pd_cli_error("-w: '%s' is not an absolute path", optarg);
                                return -1;
                        }
                        o->workdir = optarg;
                        break;
                case 'u': o->user = optarg; break;
                case 'v':
                        if (parse_volume(optarg, &o->spec) < 0)
                                return -1;
                        break;
                case 't': o->tty = true; break;
                case O_NET: {
                        enum pd_netpol_mode m;
                        if (pd_netpol_mode_parse(optarg, &m, &err) < 0) {
                                pd_cli_error("--net: %s", err.msg);
                                return -1;
                        }
                        o->netpol.mode = m;
                        o->spec.net = m == PD_NETPOL_OPEN ? PD_NET_OPEN : m == PD_NETPOL_POLICY ? PD_NET_POLICY
                                                                                              : PD_NET_NONE;
                        break;
                }
                case O_ALLOW:
                case O_DENY: {
                        char text[PD_NETPOL_RULE_TEXT_MAX + 8];
                        struct pd_netpol_rule rule;
                        snprintf(text, sizeof text, "%s:%s", c == O_ALLOW ? "allow" : "deny", optarg);
                        if (pd_netpol_rule_parse(text, &rule, &err) < 0 ||
                            pd_netpol_add_rule(&o->netpol, &rule, &err) < 0) {
                                pd_cli_error("--%s '%s': %s", c == O_ALLOW ? "allow" : "deny", optarg, err.msg);
                                return -1;
                        }
                        break;
                }
                case O_UPLINK: o->spec.net_uplink = optarg; break;
                case O_RESOLVER: o->spec.net_resolver = optarg; break;
                case O_CONNS:
                case O_BYTES:
                        if (pd_parse_size(optarg, &v, &err) < 0 || v == 0 || (c == O_CONNS && v > 1000000)) {
                                pd_cli_error("--%s: invalid value '%s'", c == O_CONNS ? "net-conns-per-sec"
                                                                                      : "net-bytes-per-sec", optarg);
                                return -1;
                        }
                        if (c == O_CONNS)
                                o->netpol.conn_per_sec = (uint32_t)v;
                        else
                                o->netpol.bytes_per_sec = v;
                        break;
                case O_STATE: o->state_dir = optarg; break;
                case O_JSON: o->json = true; break;
                case O_WEAKER: o->spec.allow_weaker = true; break;
                case O_POLICY: o->spec.policy_file = optarg; break;
                case 'h': usage(stdout); exit(0);
                case '?':
                default:
                        if (optopt)
                                pd_cli_error("run: unknown option '-%c' or missing value (see paddock run --help)", optopt);
                        else
                                pd_cli_error("run: unknown option '%s' or missing value (see paddock run --help)",
                                             argv[optind - 1]);
                        return -1;
                }
        }
        /* no command: an image template's own, checked once it is known */
        o->argv = optind < argc ? argv + optind : NULL;
        /* rules need a mode that takes them (pd_netpol_finish says so) */
        if (o->netpol.mode == PD_NETPOL_NONE && (o->netpol.conn_per_sec || o->netpol.bytes_per_sec)) {
                pd_cli_error("--net-conns-per-sec and --net-bytes-per-sec need --net open or policy");
                return -1;
        }
        if (pd_netpol_finish(&o->netpol, &err) < 0) {
                pd_cli_error("--net %s: %s", pd_netpol_mode_name(o->netpol.mode), err.msg);
                return -1;
        }
        if (o->spec.net != PD_NET_NONE) {
                o->spec.netpol = &o->netpol;
                if (!o->spec.net_uplink)
                        o->spec.net_uplink = getenv("PADDOCK_NET_UPLINK");
                if (!o->spec.net_resolver)
                        o->spec.net_resolver = getenv("PADDOCK_NET_RESOLVER");
        }
        return 0;
}

/* uid, gid, home and groups of -u. */
struct run_user {
        uint32_t uid, gid;
        const char *home;
        const char *name;
        uint32_t groups[4];
        unsigned n_groups;
};

static int resolve_user(const char *u, const struct pd_template_run *img, struct run_user *out)
{
        /* an image template's User (docs/templates.md "Users") */
        if (img && img->has_user && (!u || !strcmp(u, img->user))) {
                *out = (struct run_user){ img->uid, img->gid, img->home, img->user, { img->gid }, 1 };
                return 0;
        }
        if (!u || !strcmp(u, "user")) {
                *out = (struct run_user){ PD_USER_UID, PD_USER_UID, "/home/user", "user", { PD_USER_UID, 27, 100 }, 3 };
                return 0;
        }
        if (!strcmp(u, "root") || !strcmp(u, "0")) {
                *out = (struct run_user){ 0, 0, "/root", "root", { 0 }, 1 };
                return 0;
        }
        pd_cli_error("-u: unknown user '%s' (user or root%s%s)", u, img && img->has_user ? ", or the image's " : "",
                     img && img->has_user ? img->user : "");
        return -1;
}

/* The command's environment: the defaults a login would give (each unless
 * -e or the image's Env names it), the image's Env (unless -e names it),
 * then every -e: K=V, or K alone taken from here. */
static int build_env(const struct run_opts *o, const struct run_user *u, struct pd_strv *env)
{
        const struct pd_template_run *img = &o->img;
        const char *defaults[][2] = {
                { "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
                { "HOME", u->home }, { "USER", u->name }, { "LOGNAME", u->name },
                { "SHELL", "/bin/bash" }, { "LANG", "C.UTF-8" }, { "HOSTNAME", "paddock" },
                { "TERM", o->tty ? (getenv("TERM") ? getenv("TERM") : "xterm") : NULL },
        };
        for (size_t i = 0; i < PD_ARRAY_SIZE(defaults); i++) {
                if (!defaults[i][1])
                        continue;
                bool overridden = false;
                size_t kl = strlen(defaults[i][0]);
                for (unsigned j = 0; j < o->n_env; j++)
                        if (!strncmp(o->env[j], defaults[i][0], kl) && (o->env[j][kl] == '=' || !o->env[j][kl]))
                                overridden = true;
                for (unsigned j = 0; j < img->n_env; j++)
                        if (!strncmp(img->env[j], defaults[i][0], kl) && img->env[j][kl] == '=')
                                overridden = true;
                if (!overridden && pd_strv_add_kv(env, defaults[i][0], defaults[i][1]) < 0)
                        return -ENOMEM;
        }
        /* the image's Env, unless -e names the variable */
        for (unsigned j = 0; j < img->n_env; j++) {
                const char *eq = strchr(img->env[j], '=');
                size_t kl = eq ? (size_t)(eq - img->env[j]) : 0;
                bool overridden = !eq;
                for (unsigned k = 0; eq && k < o->n_env; k++)
                        if (!strncmp(o->env[k], img->env[j], kl) && (o->env[k][kl] == '=' || !o->env[k][kl]))
                                overridden = true;
                if (!overridden && pd_strv_add(env, img->env[j]) < 0)
                        return -ENOMEM;
        }
        for (unsigned j = 0; j < o->n_env; j++) {
                int r = 0;
                if (strchr(o->env[j], '='))
                        r = pd_strv_add(env, o->env[j]);
                else if (getenv(o->env[j]))
                        r = pd_strv_add_kv(env, o->env[j], getenv(o->env[j]));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The live part: stdin -> agent, agent output -> stdout/stderr. */
struct session {
        struct pd_client cl;
        uint32_t pid;
        int stdin_fd;           /* -1 once closed */
        int sig_fd, timer_fd, agent_fd;
        bool tty;
        bool exited;
        struct run_result *res;
};

static void send_signal(struct session *s, int signo)
{
        (void)pd_client_signal_nowait(&s->cl, s->pid, signo, true);
}

static void on_exit_frame(struct session *s, const uint8_t *p, size_t len)
{
        struct pd_exit x;
        pd_exit_decode(p, len, &x);
        s->res->exit_code = x.has_code ? (int)x.code : -1;
        s->res->signo = x.has_signal ? (int)x.signo : 0;
        if (s->res->signo) {
                s->res->status = 128 + s->res->signo;
                /* a microvm guest's agent tells an OOM kill itself */
                s->res->reason = !strcmp(x.reason, "oom") ? "oom" : "signal";
        } else {
                s->res->status = s->res->exit_code & 0xff;
                s->res->reason = "exit";
        }
        s->exited = true;
}

/* Handle one frame from the agent. Returns -1 on a fatal protocol error. */
static int on_frame(struct session *s, const struct pd_frame_hdr *h, const uint8_t *p)
{
        switch (h->type) {
        case PD_T_OUTPUT: {
                uint64_t off;
                const uint8_t *data;
                size_t n;
                if (h->id != s->pid || !pd_output_decode(h, p, &off, &data, &n))
                        return 0;
                (void)pd_write_all(h->aux == PD_STREAM_STDERR ? 2 : 1, data, n);
                return 0;
        }
        case PD_T_GAP:
                pd_cli_error("warning: output was lost (ring buffer overrun)");
                return 0;
        case PD_T_EXIT:
                if (h->id == s->pid)
                        on_exit_frame(s, p, h->len);
                return 0;
        case PD_T_ERROR: {
                struct pd_error err = { 0 };
                int k = pd_frame_error(h, p, &err);
                /* stdin writes racing the process's exit are harmless */
                if (k == -ESRCH || k == -EPIPE)
                        return 0;
                snprintf(s->res->message, sizeof s->res->message, "agent: %s", err.msg);
                return -1;
        }
        default:
                return 0;
        }
}

static void forward_stdin(struct session *s)
{
        if (pd_client_stdin_from_fd(&s->cl, s->stdin_fd, s->pid))
                s->stdin_fd = -1;
}

static void on_signal(struct session *s)
{
        struct signalfd_siginfo si;
        while (read(s->sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGWINCH) {
                        struct winsize ws;
                        if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
                                (void)pd_client_resize_nowait(&s->cl, s->pid, ws.ws_row, ws.ws_col);
                } else {
                        send_signal(s, (int)si.ssi_signo);
                }
        }
}

/* Returns 0 when the process exited, 1 on timeout, -1 on error. */
/* Handle every complete frame already buffered. -1 on a fatal error. */
static int drain_frames(struct session *s)
{
        struct pd_frame_hdr h;
        const uint8_t *payload;
        int r;
        while ((r = pd_conn_next(&s->cl.conn, &h, &payload)) > 0)
                if (on_frame(s, &h, payload) < 0)
                        return -1;
        if (r < 0) {
                snprintf(s->res->message, sizeof s->res->message,
                         "connection to the sandbox agent failed: %s", strerror(-r));
                return -1;
        }
        return 0;
}

static int session_loop(struct session *s)
{
        /* start_command may have read past the SPAWN reply: output or even
         * the EXIT frame can already sit in the buffer, and poll() would
         * never report them. */
        if (drain_frames(s) < 0)
                return -1;
        while (!s->exited) {
                struct pollfd p[5];
                int n = 0;
                bool want_stdin = s->stdin_fd >= 0 && pd_conn_pending(&s->cl.conn) < STDIN_QUEUE_MAX;
                p[n++] = (struct pollfd){ .fd = s->cl.conn.fd,
                                          .events = POLLIN | (pd_conn_pending(&s->cl.conn) ? POLLOUT : 0) };
                p[n++] = (struct pollfd){ .fd = s->sig_fd, .events = POLLIN };
                p[n++] = (struct pollfd){ .fd = s->timer_fd, .events = POLLIN };
                p[n++] = (struct pollfd){ .fd = s->agent_fd, .events = POLLIN };
                p[n++] = (struct pollfd){ .fd = want_stdin ? s->stdin_fd : -1, .events = POLLIN };
                if (poll(p, (nfds_t)n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        snprintf(s->res->message, sizeof s->res->message, "poll: %s", strerror(errno));
                        return -1;
                }
                if (p[2].revents)
                        return 1;
                if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        int r = pd_conn_fill(&s->cl.conn);
                        if (r < 0) {
                                snprintf(s->res->message, sizeof s->res->message,
                                         "connection to the sandbox agent failed: %s", strerror(-r));
                                return -1;
                        }
                        if (drain_frames(s) < 0)
                                return -1;
                        if (s->cl.conn.eof && !s->exited) {
                                snprintf(s->res->message, sizeof s->res->message,
                                         "the sandbox agent closed the connection");
                                return -1;
                        }
                }
                if (s->exited)
                        break;
                if (p[1].revents)
                        on_signal(s);
                if (p[4].revents)
                        forward_stdin(s);
                if (p[3].revents) {
                        /* the agent died: drain what it already sent, then fail */
                        (void)pd_conn_fill(&s->cl.conn);
                        struct pd_frame_hdr h;
                        const uint8_t *payload;
                        while (pd_conn_next(&s->cl.conn, &h, &payload) > 0)
                                on_frame(s, &h, payload);
                        if (!s->exited) {
                                snprintf(s->res->message, sizeof s->res->message, "the sandbox agent died");
                                return -1;
                        }
                }
                if (pd_conn_pending(&s->cl.conn) && pd_conn_flush(&s->cl.conn) < 0 && !s->exited) {
                        snprintf(s->res->message, sizeof s->res->message, "write to the sandbox agent failed");
                        return -1;
                }
        }
        return 0;
}

static struct termios saved_tio;
static bool tio_saved;

static void restore_tty(void)
{
        if (tio_saved)
                tcsetattr(0, TCSADRAIN, &saved_tio);
        tio_saved = false;
}

/* Connect, spawn, attach. Fills s->pid or res with the spawn error. */
static int start_command(struct pd_sandbox *sb, const struct run_opts *o, struct session *s,
                         struct pd_error *err)
{
        struct run_user u;
        if (resolve_user(o->user, &o->img, &u) < 0)
                return pd_error_setx(err, EINVAL, "bad user");
        struct winsize ws = { .ws_row = 24, .ws_col = 80 };
        /* A terminal that reports no size (script(1), some CI ptys) gets 24x80. */
        if (o->tty && (ioctl(0, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)) {
                ws.ws_row = 24;
                ws.ws_col = 80;
        }
        struct pd_strv env = { 0 };
        if (build_env(o, &u, &env) < 0) {
                pd_strv_free(&env);
                return pd_error_set(err, ENOMEM, "environment");
        }
        size_t argc = 0;
        while (o->argv[argc])
                argc++;
        /* stdin: always ours to relay; follow: its output comes on this
         * connection from offset 0, no ATTACH round trip */
        const struct pd_spawn_opts so = {
                .argv = (const char *const *)o->argv, .argc = argc,
                .env = (const char *const *)env.v, .envc = env.n,
                .cwd = o->workdir ? o->workdir : o->img.workdir ? o->img.workdir : u.home,
                .uid = u.uid, .gid = u.gid, .groups = u.groups, .n_groups = u.n_groups,
                .pty_rows = o->tty ? ws.ws_row : 0, .pty_cols = o->tty ? ws.ws_col : 0,
                .stdin_open = true, .follow = true,
        };
        int fd = pd_sandbox_connect(sb, err);
        if (fd < 0) {
                pd_strv_free(&env);
                return fd;
        }
        uint32_t pid;
        bool refused;
        /* HELLO and SPAWN pipelined: one round trip less */
        int r = pd_client_connect_spawn(&s->cl, fd, "paddock-run " PD_VERSION, &so, &pid, &refused, err);
        pd_strv_free(&env);
        if (r < 0 && !refused) {
                if (r == -EMSGSIZE)
                        pd_error_setx(err, EMSGSIZE, "command too large for one request");
                return r;
        }
        if (r < 0) {
                s->res->exit_code = -1;
                /* the same words as the server's refusal (paddock exec) */
                if (!strncmp(err->msg, "cannot change directory", 23)) {
                        s->res->status = PD_EXIT_CANNOT_EXEC;
                        s->res->reason = "no-workdir";
                        if (r == -ENOENT) {
                                snprintf(s->res->message, sizeof s->res->message,
                                         "working directory '%s' does not exist in the sandbox", so.cwd);
                                return 1;
                        }
                } else if (r == -ENOENT) {
                        s->res->status = PD_EXIT_NOT_FOUND;
                        s->res->reason = "not-found";
                        snprintf(s->res->message, sizeof s->res->message, "command not found: '%s'", o->argv[0]);
                        return 1;
                } else if (r == -EACCES || r == -ENOEXEC || r == -EISDIR || r == -EPERM) {
                        s->res->status = PD_EXIT_CANNOT_EXEC;
                        s->res->reason = "cannot-execute";
                } else {
                        s->res->status = PD_EXIT_PADDOCK;
                        s->res->reason = "error";
                }
                snprintf(s->res->message, sizeof s->res->message, "%s", err->msg);
                return 1;
        }
        s->pid = pid;   /* SPAWN's FOLLOW already attached us to its output */
        return 0;
}

static void print_json(const struct run_opts *o, const struct run_result *res, uint64_t wall_ns,
                       const struct pd_sandbox_stats *st, const char *id)
{
        (void)o;
        fprintf(stderr,
                "{\"status\":%d,\"reason\":\"%s\",\"exit_code\":%d,\"signal\":%d,\"wall_ms\":%.3f,"
                "\"peak_memory_bytes\":%" PRIu64 ",\"cpu_ms\":%.3f,\"oom_kills\":%" PRIu64
                ",\"pids_limit_hits\":%" PRIu64 ",\"sandbox\":\"%s\"}\n",
                res->status, res->reason, res->exit_code, res->signo, (double)wall_ns / 1e6, st->memory_peak,
                (double)st->cpu_ns / 1e6, st->oom_kills, st->pids_max_events, id);
}

int pd_cmd_run(int argc, char **argv)
{
        uint64_t t0 = pd_now_ns();
        pd_trace("paddock started");
        struct run_opts o = { .state_dir = pd_state_dir_default() };
        pd_spec_defaults(&o.spec);
        if (parse(argc, argv, &o) < 0)
                return PD_EXIT_PADDOCK;
        if (o.spec.policy_file && !(pd_tier_caps(o.spec.isolation) & PD_TIER_POLICY_FILE)) {
                pd_cli_error("--policy applies to --isolation supervised only");
                return PD_EXIT_PADDOCK;
        }
        if (pd_run_teardown_check_env() < 0)
                return PD_EXIT_PADDOCK;
        if (o.tty && !isatty(0)) {
                pd_cli_error("-t: standard input is not a terminal");
                return PD_EXIT_PADDOCK;
        }

        /* Signals arrive on a signalfd; block them before the sandbox exists
         * so none is lost in between. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGQUIT);
        sigaddset(&mask, SIGWINCH);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        sigdelset(&mask, SIGCHLD);

        struct pd_error err = { 0 };
        struct pd_state st;
        if (pd_state_open(o.state_dir, &st, &err) < 0) {
                pd_cli_error("%s", err.msg);
                return PD_EXIT_PADDOCK;
        }
        /* an image template's defaults (none for others) */
        if (pd_template_run_defaults(&st, o.spec.template_dir ? NULL : o.spec.template_name, &o.img, &err) < 0) {
                pd_cli_error("%s", err.msg);
                pd_state_close(&st);
                return PD_EXIT_PADDOCK;
        }
        struct run_user u;
        if (resolve_user(o.user, &o.img, &u) < 0) {
                pd_state_close(&st);
                return PD_EXIT_PADDOCK;
        }
        if (!o.argv) {
                if (!o.img.argv) {
                        pd_cli_error("run: no command given (usage: paddock run [OPTIONS] -- CMD [ARGS...])");
                        pd_state_close(&st);
                        return PD_EXIT_PADDOCK;
                }
                o.argv = o.img.argv;
        }
        struct pd_sandbox *sb = NULL;
        if (pd_sandbox_new(&st, &o.spec, &sb, &err) < 0) {
                pd_cli_error("%s", err.msg);
                pd_state_close(&st);
                return PD_EXIT_PADDOCK;
        }
        sb->die_with_parent = true;
#if defined(PD_LEAN) && !defined(__SANITIZE_ADDRESS__)
        /* container tier: the sandbox child runs the agent linked into
         * this binary instead of exec'ing paddock-agent (src/agent/inproc.h);
         * PADDOCK_AGENT_EXEC=1 keeps the exec (bench/README.md). Not in an
         * ASan build: PID 1 would carry ASan's runtime, which the static
         * agent never does (src/agent/meson.build). */
        const char *ax = getenv("PADDOCK_AGENT_EXEC");
        if (!ax || strcmp(ax, "1") != 0)
                sb->agent_inproc = pd_agent_inproc_main;
#endif
        pd_trace("state dir + options");
        if (pd_sandbox_create(sb, &err) < 0) {
                pd_cli_error("%s", err.msg);
                pd_sandbox_free(sb);
                pd_state_close(&st);
                return PD_EXIT_PADDOCK;
        }

        if (o.spec.net != PD_NET_NONE) {
                /* the sandbox exists either way; say in one line why its
                 * network reaches nothing (docs/network.md) */
                struct pd_router_egress eg;
                if (pd_router_egress(&st, &eg) == 0 && eg.problem[0])
                        pd_cli_error("warning: --net %s: %s", o.spec.net == PD_NET_OPEN ? "open" : "policy",
                                     eg.problem);
        }

        struct run_result res = { .status = PD_EXIT_PADDOCK, .reason = "error", .exit_code = -1 };
        struct session s = { .stdin_fd = 0, .sig_fd = -1, .timer_fd = -1, .res = &res, .tty = o.tty };
        pd_client_init(&s.cl);
        s.agent_fd = sb->agent_pidfd;
        s.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        s.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (o.timeout_ms && s.timer_fd >= 0) {
                struct itimerspec its = { .it_value = { (time_t)(o.timeout_ms / 1000),
                                                        (long)(o.timeout_ms % 1000) * 1000000 } };
                timerfd_settime(s.timer_fd, 0, &its, NULL);
        }
        pd_trace("sandbox created");
        int r = start_command(sb, &o, &s, &err);
        pd_trace("spawned");
        if (r < 0) {
                snprintf(res.message, sizeof res.message, "%s", err.msg);
        } else if (r == 0) {
                if (o.tty && tcgetattr(0, &saved_tio) == 0) {
                        struct termios raw = saved_tio;
                        cfmakeraw(&raw);
                        tio_saved = tcsetattr(0, TCSADRAIN, &raw) == 0;
                }
                r = session_loop(&s);
                restore_tty();
                if (r == 1) {
                        res.status = PD_EXIT_TIMEOUT;
                        res.reason = "timeout";
                        snprintf(res.message, sizeof res.message, "timeout: killed after %.3gs",
                                 (double)o.timeout_ms / 1000.0);
                } else if (r < 0) {
                        res.status = PD_EXIT_PADDOCK;
                        res.reason = "error";
                }
        }
        pd_trace("command done");
        struct pd_sandbox_stats stats = { 0 };
        (void)pd_sandbox_stats(sb, &stats, NULL);
        /* gvisor: an overrun OOM-kills the Sentry, and with it the whole
         * sandbox and its agent (docs/gvisor.md): an OOM all the same;
         * microvm: the guest's agent says "oom" itself */
        bool died = !strcmp(res.reason, "error") && res.exit_code < 0;
        if ((((!strcmp(res.reason, "signal") && res.signo == SIGKILL) || died) && stats.oom_kills > 0) ||
            !strcmp(res.reason, "oom")) {
                res.status = 128 + SIGKILL;     /* DESIGN §8: an OOM kill is 137 */
                res.reason = "oom";
                snprintf(res.message, sizeof res.message,
                         "out of memory: the kernel killed the command (limit %" PRIu64 " MiB)",
                         o.spec.memory_bytes >> 20);
        }
        if (res.message[0])
                pd_cli_error("%s", res.message);
        if (stats.pids_max_events > 0)
                pd_cli_error("note: the pids limit (%u) refused %" PRIu64 " fork%s", o.spec.pids,
                             stats.pids_max_events, stats.pids_max_events == 1 ? "" : "s");
        char id[PD_ID_LEN + 1];
        snprintf(id, sizeof id, "%s", sb->id);
        pd_client_close(&s.cl);
        /* The result first when the teardown goes on after we exit
         * (cli/run_teardown.h): wall_ms then ends here. */
        bool bg = pd_run_teardown_in_background(sb);
        if (bg && o.json)
                print_json(&o, &res, pd_now_ns() - t0, &stats, id);
        pd_trace("result reported");
        if (!bg || pd_run_teardown_handoff(sb, &st, res.status) < 0) {
                if (pd_sandbox_destroy(sb, &err) < 0)
                        pd_cli_error("teardown: %s", err.msg);
                pd_trace("destroyed");
                if (!bg && o.json)
                        print_json(&o, &res, pd_now_ns() - t0, &stats, id);
        }
        pd_state_close(&st);
        return res.status;
}
