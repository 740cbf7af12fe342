/* paddock-agent: PID 1 inside a sandbox, or `sudo` when called so.
 * Parses the command line, sets up the loop and runs it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"

static void on_listen(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        ag_conn_accept(ag);
}

static int listen_path(struct agent *ag, const char *path);

/* gvisor tier, before `runsc checkpoint` (SIGUSR1): the Sentry cannot save
 * a socket backed by a host socket ("Cannot save endpoint with bound host
 * socket"), and the listener and every connection of ours are (the agent's
 * channel is a host unix socket, docs/gvisor.md). Let go of all of them,
 * then create PATH.quiet: the host knows we are done when it appears.
 * After `runsc restore` (SIGUSR2; the host removed both names): bind
 * again. */
static void host_sockets(struct agent *ag, int signo)
{
        if (!ag->listen_path)
                return;
        if (signo == SIGUSR1) {
                for (struct ag_conn *c = ag->conns; c; c = c->next)
                        ag_conn_kill(ag, c);
                ag_ev_close(ag, &ag->listen_h);
                ag->listen_fd = -1;
                /* the socket's name cannot go (the gofer refuses to unlink
                 * a host socket: EPERM): a file beside it says we are done */
                char quiet[4096];
                snprintf(quiet, sizeof quiet, "%s.quiet", ag->listen_path);
                int fd = open(quiet, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd >= 0)
                        close(fd);
        } else if (signo == SIGUSR2 && ag->listen_fd < 0) {
                if (listen_path(ag, ag->listen_path) < 0)
                        return;
                fcntl(ag->listen_fd, F_SETFL, fcntl(ag->listen_fd, F_GETFL) | O_NONBLOCK);
                if (ag_ev_add(ag, &ag->listen_h, ag->listen_fd, EPOLLIN, on_listen) < 0) {
                        close(ag->listen_fd);
                        ag->listen_fd = -1;
                        unlink(ag->listen_path);
                }
        }
}

static void on_signal(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        struct signalfd_siginfo si;
        while (read(h->fd, &si, sizeof si) == (ssize_t)sizeof si)
                /* from the host (runsc kill: no sender in our pid
                 * namespace), never from the workload, which could
                 * otherwise cut the host off its own sandbox */
                if (si.ssi_pid == 0)
                        host_sockets(ag, (int)si.ssi_signo);
        ag_proc_reap_all(ag);
        if (ag->pid1)
                ag_guest_check(ag);
}

static void on_usr(int sig)
{
        (void)sig;      /* never runs: blocked, read from the signalfd */
}

static int parse_fd(const char *s, int *out)
{
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || *end || end == s || v < 0 || v > 1 << 20)
                return -EINVAL;
        *out = (int)v;
        return 0;
}

static int listen_path(struct agent *ag, const char *path)
{
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (path[0] != '/' || strlen(path) >= sizeof a.sun_path) {
                fprintf(stderr, "paddock-agent: bad --listen-path '%s'\n", path);
                return -1;
        }
        strcpy(a.sun_path, path);
        unlink(path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0) {
                fprintf(stderr, "paddock-agent: listen on '%s': %s\n", path, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        ag->listen_fd = fd;
        return 0;
}

static int parse_args(struct agent *ag, int argc, char **argv)
{
        static const struct option opts[] = {
                { "listen-fd", required_argument, NULL, 'l' },
                { "listen-path", required_argument, NULL, 'L' },
                { "cgroup-fd", required_argument, NULL, 'c' },
                { "ring-size", required_argument, NULL, 'r' },
                { "sudo-socket", required_argument, NULL, 's' },
                { "home", required_argument, NULL, 'H' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        struct pd_error err = { 0 };
        int o, fd;
        while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (o) {
                case 'l':
                        if (parse_fd(optarg, &ag->listen_fd) < 0) {
                                fprintf(stderr, "paddock-agent: bad --listen-fd '%s'\n", optarg);
                                return -1;
                        }
                        break;
                case 'L':
                        /* gvisor tier: no fd crosses into the Sentry; the
                         * agent binds its own socket on a host-backed
                         * directory (runsc --host-uds=create) */
                        if (listen_path(ag, optarg) < 0)
                                return -1;
                        ag->listen_path = optarg;
                        break;
                case 'c': {
                        if (parse_fd(optarg, &fd) < 0) {
                                fprintf(stderr, "paddock-agent: bad --cgroup-fd '%s'\n", optarg);
                                return -1;
                        }
                        int *n = realloc(ag->cgroup_fds, (ag->ncgroup + 1) * sizeof *n);
                        if (!n)
                                return -1;
                        ag->cgroup_fds = n;
                        n[ag->ncgroup++] = fd;
                        break;
                }
                case 'r': {
                        uint64_t v;
                        if (pd_parse_size(optarg, &v, &err) < 0 || v == 0 || v > (1ull << 32)) {
                                fprintf(stderr, "paddock-agent: bad --ring-size '%s'\n", optarg);
                                return -1;
                        }
                        ag->ring_size = (size_t)v;
                        break;
                }
                case 's':
                        ag->sudo_path = optarg;
                        break;
                case 'H':
                        if (optarg[0] != '/' || strlen(optarg) >= 3072) {
                                fprintf(stderr, "paddock-agent: --home must be an absolute path\n");
                                return -1;
                        }
                        ag_home = optarg;
                        break;
                case 'h':
                        printf("usage: paddock-agent --listen-fd N|--listen-path PATH [--cgroup-fd N]... "
                               "[--ring-size BYTES] [--sudo-socket PATH] [--home DIR]\n");
                        exit(0);
                default:
                        fprintf(stderr, "usage: paddock-agent --listen-fd N|--listen-path PATH [--cgroup-fd N]... "
                                "[--ring-size BYTES] [--sudo-socket PATH] [--home DIR]\n");
                        return -1;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "paddock-agent: unexpected argument '%s'\n", argv[optind]);
                return -1;
        }
        if (ag->listen_fd < 0) {
                fprintf(stderr, "paddock-agent: --listen-fd or --listen-path is required\n");
                return -1;
        }
        return 0;
}

static int setup(struct agent *ag, struct pd_error *err)
{
        ag->pid1 = getpid() == 1;
        /* as PID 1 nobody may ptrace or read our memory; harmless elsewhere */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        signal(SIGPIPE, SIG_IGN);
        /* Not PID 1 (process tier): become the reaper of every orphan below
         * us, so double-forked daemons stay our descendants and the host's
         * teardown finds them (we reap them through the SIGCHLD signalfd). */
        if (ag_home && !ag->pid1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
                return pd_error_set(err, errno, "become a child subreaper");
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        if (ag->listen_path) {
                /* let go of / bind again the host sockets (host_sockets).
                 * A handler, though they are blocked and read from the
                 * signalfd: the Sentry drops a signal to init whose action
                 * is the default one, blocked or not */
                struct sigaction sa = { .sa_handler = on_usr };
                sigaction(SIGUSR1, &sa, NULL);
                sigaction(SIGUSR2, &sa, NULL);
                sigaddset(&set, SIGUSR1);
                sigaddset(&set, SIGUSR2);
        }
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return pd_error_set(err, errno, "sigprocmask");
        ag->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        if (ag->sigfd < 0)
                return pd_error_set(err, errno, "signalfd");
        ag->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (ag->epfd < 0)
                return pd_error_set(err, errno, "epoll_create1");
        ag->rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ag->rootfd < 0)
                return pd_error_set(err, errno, "open /");
        /* the listening socket came from the host: make it ours */
        int fl = fcntl(ag->listen_fd, F_GETFL);
        if (fl < 0)
                return pd_error_set(err, errno, "--listen-fd %d", ag->listen_fd);
        fcntl(ag->listen_fd, F_SETFL, fl | O_NONBLOCK);
        fcntl(ag->listen_fd, F_SETFD, FD_CLOEXEC);
        for (size_t i = 0; i < ag->ncgroup; i++)
                if (fcntl(ag->cgroup_fds[i], F_SETFD, FD_CLOEXEC) < 0)
                        return pd_error_set(err, errno, "--cgroup-fd %d", ag->cgroup_fds[i]);
        if (ag_ev_add(ag, &ag->listen_h, ag->listen_fd, EPOLLIN, on_listen) < 0)
                return pd_error_set(err, errno, "epoll listen fd");
        if (ag_ev_add(ag, &ag->sig_h, ag->sigfd, EPOLLIN, on_signal) < 0)
                return pd_error_set(err, errno, "epoll signalfd");
        if (ag->sudo_path && ag_sudod_start(ag, ag->sudo_path, err) < 0)
                return -1;
        return 0;
}

static void run(struct agent *ag)
{
        struct epoll_event ev[64];
        while (!ag->quit) {
                /* a batching stream (proc.c) is due within the next
                 * half millisecond: wait with a finer clock than epoll_wait's */
                int64_t wait_ns = ag_batch_wait_ns(ag);
                int n;
                if (wait_ns < 0) {
                        n = epoll_wait(ag->epfd, ev, PD_ARRAY_SIZE(ev), -1);
                } else {
                        struct timespec ts = { .tv_sec = wait_ns / 1000000000, .tv_nsec = wait_ns % 1000000000 };
                        n = epoll_pwait2(ag->epfd, ev, PD_ARRAY_SIZE(ev), &ts, NULL);
                        if (n < 0 && errno != EINTR)    /* ENOSYS: before Linux 5.11, or gVisor */
                                n = epoll_wait(ag->epfd, ev, PD_ARRAY_SIZE(ev), (int)((wait_ns + 999999) / 1000000));
                }
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                for (int i = 0; i < n; i++) {
                        struct ag_handler *h = ev[i].data.ptr;
                        /* an earlier callback of this batch may have closed it */
                        if (h->fd >= 0)
                                h->fn(ag, h, ev[i].events);
                }
                ag_batch_run(ag);
                ag_procs_collect(ag);
                ag_sudod_reap(ag);
                ag_conns_reap(ag);
                ag_grave_flush(ag);
        }
}

#ifdef PD_AGENT_INPROC
/* Linked into `paddock` (src/agent/inproc.h): the container tier's sandbox
 * child of `paddock run` calls this instead of exec'ing this binary. */
#include "agent/inproc.h"
int pd_agent_inproc_main(int argc, char **argv)
{
        optind = 0;     /* paddock's own getopt ran in this process */
#else
int main(int argc, char **argv)
{
#endif
        char *base = strrchr(argv[0], '/');
        base = base ? base + 1 : argv[0];
        if (strcmp(base, "sudo") == 0)
                return ag_sudo_main(argc, argv);

        /* keep 0-2 taken, so every fd we create is >= 3 (spawn relies on it) */
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
                        return 125;
        struct agent ag = { .epfd = -1, .listen_fd = -1, .sigfd = -1, .rootfd = -1,
                            .ring_size = 4u << 20 };
        ag.listen_h.fd = ag.sig_h.fd = ag.sudo_h.fd = -1;
        struct pd_error err = { 0 };
        /* booted as a microvm guest's /init (src/agent/guest.c) */
        if (getpid() == 1 && strcmp(base, "init") == 0) {
                ag.guest = true;
                if (ag_guest_boot(&ag, &err) < 0) {
                        fprintf(stderr, "paddock-agent: guest boot: %s\n", err.msg);
                        return 125;
                }
        } else if (parse_args(&ag, argc, argv) < 0) {
                return 125;
        }
        if (setup(&ag, &err) < 0) {
                fprintf(stderr, "paddock-agent: %s\n", err.msg);
                return 125;
        }
        run(&ag);
        ag_proc_kill_all(&ag);
        return 0;
}
