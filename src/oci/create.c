/* create and run: the runtime side. Clones the container's init (init.c)
 * into its new namespaces, writes its id maps, cgroup and oomScoreAdj, runs
 * createRuntime hooks, lets it build the container and waits until it
 * blocks on exec.fifo; then writes the pid file and state and exits. A
 * failure at any step removes everything made so far. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "jail/helper_proc.h"
#include "oci/init.h"
#include "lib/state.h"
#include "oci/oci.h"
#include "lib/util.h"
#include "oci/ocivm.h"

extern const char *oci_rootfs_cgroup;

struct create_opts {
        const char *bundle, *pid_file, *console_socket, *id;
        bool detach, keep;
        int preserve_fds;
};

static int parse_create(int argc, char **argv, bool run, struct create_opts *o, struct pd_error *err)
{
        static const struct option opts[] = {
                { "bundle", required_argument, NULL, 'b' },   { "pid-file", required_argument, NULL, 'p' },
                { "console-socket", required_argument, NULL, 'c' }, { "preserve-fds", required_argument, NULL, 'f' },
                { "detach", no_argument, NULL, 'd' },         { "keep", no_argument, NULL, 'k' },
                { "no-pivot", no_argument, NULL, 'n' },       { "no-new-keyring", no_argument, NULL, 'N' },
                { "no-subreaper", no_argument, NULL, 'S' },   { "notify-socket", required_argument, NULL, 'T' },
                { NULL, 0, NULL, 0 },
        };
        *o = (struct create_opts){ .bundle = "." };
        int c;
        while ((c = getopt_long_only(argc, argv, "b:d", opts, NULL)) != -1) {
                switch (c) {
                case 'b': o->bundle = optarg; break;
                case 'p': o->pid_file = optarg; break;
                case 'c': o->console_socket = optarg; break;
                case 'f': o->preserve_fds = atoi(optarg); break;
                case 'd': o->detach = true; break;
                case 'k': o->keep = true; break;
                case 'n': case 'N': case 'S': case 'T': break;
                default: return pd_error_setx(err, EINVAL, "usage: %s [options] ID", run ? "run" : "create");
                }
        }
        if (optind != argc - 1)
                return pd_error_setx(err, EINVAL, "%s: exactly one container id expected", run ? "run" : "create");
        o->id = argv[optind];
        if (o->preserve_fds < 0 || o->preserve_fds > 1000)
                return pd_error_setx(err, EINVAL, "--preserve-fds out of range");
        return oci_id_check(o->id, err);
}

static int write_map(pid_t pid, const char *file, const char *map, struct pd_error *err)
{
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
        return pd_write_file_at(AT_FDCWD, path, map, err);
}

static pid_t clone_init(unsigned long flags)
{
        /* Raw clone, fork-like (no new stack): one call creates the user
         * namespace first and every other namespace owned by it. The child
         * must not rely on glibc's cached thread id (no raise/abort). */
        return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
}

/* Everything below the state dir is undone by oci_delete; this is for a
 * create that failed half-way. */
static void undo_create(const char *dir, pid_t pid, const char *cgroup)
{
        if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
        }
        if (cgroup && *cgroup)
                oci_cgroup_destroy(cgroup, NULL);
        pd_rm_rf(dir, NULL);
}

int oci_create(const struct oci_global *g, const char *id, const struct create_opts_pub *po, struct oci_config *cfg,
               pid_t *out_pid, struct pd_error *err)
{
        if (strcmp(cfg->isolation, "microvm") == 0)
                return oci_vm_create(g, id, po, cfg, out_pid, err);
        struct oci_state st = { 0 };
        int r = oci_state_dir(g, id, st.dir, sizeof st.dir, err);
        if (r < 0)
                return r;
        snprintf(st.id, sizeof st.id, "%s", id);
        snprintf(st.bundle, sizeof st.bundle, "%s", cfg->bundle);
        snprintf(st.rootfs, sizeof st.rootfs, "%s", cfg->rootfs);
        oci_now_rfc3339(st.created, sizeof st.created);
        st.annotations = cfg->annotations;
        if (oci_ns_flag(cfg, CLONE_NEWNS) < 0)
                return pd_error_setx(err, EINVAL, "config.json: paddock-oci needs a mount namespace");
        if ((r = oci_cgroup_path(g, cfg, id, st.cgroup, sizeof st.cgroup, err)) < 0)
                return r;
        if (cfg->proc.terminal && !po->console_socket && !po->relay_master)
                return pd_error_setx(err, EINVAL, "process.terminal is true: --console-socket is required");
        if ((r = pd_mkdir_p(g->root, 0700, err)) < 0)
                return r;
        if (mkdir(st.dir, 0700) < 0) {
                if (errno == EEXIST)
                        return pd_error_setx(err, EEXIST, "container '%s' already exists", id);
                return pd_error_set(err, errno, "mkdir '%s'", st.dir);
        }
        pid_t pid = -1;
        struct oci_init_args a = { .cfg = cfg, .st = &st, .sync = -1, .console = -1, .fifo = -1,
                                   .preserve_fds = po->preserve_fds };
        struct pd_bpf bpf = { 0 }, notify_bpf = { 0 };
        int sv[2] = { -1, -1 }, own_pidns = -1, relay_sock = -1;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/config.json", st.dir);
        if (json_dump_file(cfg->json, path, JSON_COMPACT) < 0) {
                r = pd_error_set(err, errno ? errno : EIO, "write '%s'", path);
                goto fail;
        }
        snprintf(path, sizeof path, "%s/exec.fifo", st.dir);
        /* 0622: the init may have switched to an unprivileged uid by the time
         * it opens the fifo for writing; a supervised init reads it too
         * (0666). The 0700 state dir keeps everyone else away. */
        mode_t old = umask(0);
        r = mkfifo(path, strcmp(cfg->isolation, "supervised") == 0 ? 0666 : 0622);
        umask(old);
        if (r < 0) {
                r = pd_error_set(err, errno, "mkfifo '%s'", path);
                goto fail;
        }
        a.fifo = open(path, O_PATH | O_CLOEXEC);
        if (a.fifo < 0) {
                r = pd_error_set(err, errno, "open '%s'", path);
                goto fail;
        }
        if (cfg->proc.terminal && po->console_socket &&
            (a.console = r = oci_console_connect(po->console_socket, err)) < 0)
                goto fail;
        if (cfg->proc.terminal && !po->console_socket) {
                /* Our own console socket: a socketpair whose other end we
                 * read the master from once the init is ready. */
                int cp[2];
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cp) < 0) {
                        r = pd_error_set(err, errno, "socketpair");
                        goto fail;
                }
                a.console = cp[1];
                relay_sock = cp[0];
        }
        for (size_t i = 0; i < cfg->n_ns; i++) {
                a.nsfd[i] = -1;
                if (!cfg->ns[i].path)
                        continue;
                a.nsfd[i] = open(cfg->ns[i].path, O_RDONLY | O_CLOEXEC);
                if (a.nsfd[i] < 0) {
                        r = pd_error_set(err, errno, "namespace %s: open '%s'", oci_ns_name(cfg->ns[i].flag),
                                         cfg->ns[i].path);
                        goto fail;
                }
        }
        unsigned long flags = 0;
        int user = oci_ns_flag(cfg, CLONE_NEWUSER);
        for (size_t i = 0; i < cfg->n_ns; i++) {
                if (cfg->ns[i].path) {
                        if (cfg->ns[i].flag == CLONE_NEWPID &&
                            (own_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC)) < 0) {
                                r = pd_error_set(err, errno, "open /proc/self/ns/pid");
                                goto fail;
                        }
                        if (cfg->ns[i].flag == CLONE_NEWPID && setns(a.nsfd[i], CLONE_NEWPID) < 0) {
                                r = pd_error_set(err, errno, "join pid namespace '%s'", cfg->ns[i].path);
                                goto fail;
                        }
                        continue;
                }
                if (cfg->ns[i].flag == CLONE_NEWTIME) {
                        oci_warn("time namespace: not created (unsupported by paddock-oci); the host's clocks are used");
                        continue;
                }
                /* Joining a user namespace: the init creates the others after
                 * setns so that they belong to it (pid excepted: only a clone
                 * makes a new one for the init itself). */
                if (user >= 0 && cfg->ns[user].path && cfg->ns[i].flag != CLONE_NEWPID)
                        continue;
                flags |= (unsigned long)cfg->ns[i].flag;
        }
        a.unshare_flags = 0;
        if (user >= 0 && cfg->ns[user].path)
                for (size_t i = 0; i < cfg->n_ns; i++)
                        if (!cfg->ns[i].path && cfg->ns[i].flag != CLONE_NEWPID && cfg->ns[i].flag != CLONE_NEWTIME)
                                a.unshare_flags |= cfg->ns[i].flag;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = pd_error_set(err, errno, "socketpair");
                goto fail;
        }
        /* Built (or read from the cache) here: libseccomp takes
         * milliseconds, and the init only installs the result. */
        bool supervised = strcmp(cfg->isolation, "supervised") == 0;
        /* supervised without a profile: the notifying filter is paddock's
         * allowlist already; no second copy of it. */
        if (!cfg->seccomp)
                oci_info("container '%s': config.json has no linux.seccomp; paddock's default filter applies "
                         "(stricter than none)", id);
        if (!(supervised && !cfg->seccomp)) {
                if ((r = oci_seccomp_prepare(cfg->seccomp, g->root, &bpf, err)) < 0)
                        goto fail;
                a.seccomp = &bpf;
        }
        if (supervised) {
                struct pd_seccomp_opts so = { .notify = true };
                if ((r = pd_seccomp_load(NULL, &so, &notify_bpf, err)) < 0)
                        goto fail;
                a.notify = &notify_bpf;
        }
        oci_rootfs_cgroup = st.cgroup;
        pid = clone_init(flags);
        if (pid < 0) {
                r = pd_error_set(err, errno, "clone the container's init (namespaces 0x%lx)", flags);
                goto fail;
        }
        if (pid == 0) {
                close(sv[0]);
                a.sync = sv[1];
                oci_init_main(&a);      /* never returns */
        }
        close(sv[1]);
        sv[1] = -1;
        st.pid = pid;
        /* Joined a pid namespace for the init only: hooks and the
         * supervisor run in ours (they read /proc by pid). */
        if (own_pidns >= 0 && setns(own_pidns, CLONE_NEWPID) < 0) {
                r = pd_error_set(err, errno, "return to the runtime's pid namespace");
                goto fail;
        }
        if (cfg->uid_map && (r = write_map(pid, "uid_map", cfg->uid_map, err)) < 0)
                goto fail;
        if (cfg->gid_map && (r = write_map(pid, "gid_map", cfg->gid_map, err)) < 0)
                goto fail;
        if ((r = oci_cgroup_setup(st.cgroup, &cfg->res.lim, pid, err)) < 0)
                goto fail;
        if (cfg->proc.has_oom_score_adj) {
                char p[64], v[16];
                snprintf(p, sizeof p, "/proc/%d/oom_score_adj", (int)pid);
                snprintf(v, sizeof v, "%d", cfg->proc.oom_score_adj);
                if (pd_write_file_at(AT_FDCWD, p, v, err) < 0)
                        oci_warn("process.oomScoreAdj %d not applied (lowering it needs CAP_SYS_RESOURCE): %s",
                                 cfg->proc.oom_score_adj, err->msg);
        }
        st.pid_start = pd_proc_starttime(pid);
        if ((r = oci_hooks_run_create(cfg->hooks, &st, err)) < 0)
                goto fail;
        struct oci_sync_msg m = { .kind = 'G', .pid = pid };
        if (send(sv[0], &m, sizeof m, MSG_NOSIGNAL) < 0) {
                r = pd_error_set(err, errno, "signal the init");
                goto fail;
        }
        ssize_t n;
        int lfd = -1;
        while ((n = oci_recv_msg(sv[0], &m, &lfd)) > 0 && m.kind == 'L') {
                r = oci_supervisor_start(&st, cfg->uid_map, lfd, &st.supervisor, &st.supervisor_start, err);
                lfd = -1;
                if (r < 0)
                        goto fail;
                m = (struct oci_sync_msg){ .kind = 'G', .pid = pid };
                if (send(sv[0], &m, sizeof m, MSG_NOSIGNAL) < 0) {
                        r = pd_error_set(err, errno, "signal the init");
                        goto fail;
                }
        }
        if (n <= 0) {
                r = pd_error_setx(err, EIO, "the container's init died during setup");
                goto fail;
        }
        if (m.kind != 'R') {
                m.msg[sizeof m.msg - 1] = '\0';
                r = pd_error_setx(err, m.code > 0 ? m.code : EIO, "%s", m.msg);
                goto fail;
        }
        if ((r = oci_state_save(&st, err)) < 0)
                goto fail;
        if (po->pid_file && (r = oci_write_pid_file(po->pid_file, pid, err)) < 0)
                goto fail;
        if (relay_sock >= 0) {
                int master = -1;
                /* The init sent the master (with the pty's name) before 'R'. */
                char cbuf[CMSG_SPACE(sizeof(int))];
                char name[64];
                struct iovec iov = { .iov_base = name, .iov_len = sizeof name };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
                if (recvmsg(relay_sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) > 0 && CMSG_FIRSTHDR(&mh) &&
                    CMSG_FIRSTHDR(&mh)->cmsg_type == SCM_RIGHTS)
                        memcpy(&master, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
                close(relay_sock);
                relay_sock = -1;
                if (master < 0) {
                        r = pd_error_setx(err, EIO, "the init sent no pty master");
                        goto fail;
                }
                *po->relay_master = master;
        }
        close(sv[0]);
        close(a.fifo);
        if (a.console >= 0)
                close(a.console);
        for (size_t i = 0; i < cfg->n_ns; i++)
                if (a.nsfd[i] >= 0)
                        close(a.nsfd[i]);
        pd_bpf_free(&bpf);
        pd_bpf_free(&notify_bpf);
        if (own_pidns >= 0)
                close(own_pidns);
        *out_pid = pid;
        return 0;
fail:
        if (own_pidns >= 0)
                close(own_pidns);
        if (relay_sock >= 0)
                close(relay_sock);
        pd_bpf_free(&bpf);
        pd_bpf_free(&notify_bpf);
        if (st.supervisor > 0)
                pd_helper_stop(st.supervisor, st.supervisor_start, SIGTERM, 1000, 2000);
        if (sv[0] >= 0)
                close(sv[0]);
        if (sv[1] >= 0)
                close(sv[1]);
        undo_create(st.dir, pid, pid > 0 ? st.cgroup : NULL);
        return r;
}

/* run in the foreground with a terminal: our stdin to the pty, the pty to
 * our stdout, until the workload's side closes; our own terminal (if any)
 * raw meanwhile, its size copied. */
static void oci_relay_pty(int master, pid_t pid)
{
        struct termios saved;
        bool raw = isatty(0) && tcgetattr(0, &saved) == 0;
        if (raw) {
                struct termios t = saved;
                cfmakeraw(&t);
                tcsetattr(0, TCSANOW, &t);
                struct winsize ws;
                if (ioctl(0, TIOCGWINSZ, &ws) == 0)
                        ioctl(master, TIOCSWINSZ, &ws);
        }
        struct pollfd p[2] = { { .fd = 0, .events = POLLIN }, { .fd = master, .events = POLLIN } };
        char buf[8192];
        for (;;) {
                int n = poll(p, 2, -1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        break;
                if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t k = read(master, buf, sizeof buf);
                        if (k <= 0)
                                break;  /* EIO: every holder of the slave is gone */
                        if (pd_write_all(1, buf, (size_t)k) < 0)
                                break;
                }
                if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t k = read(0, buf, sizeof buf);
                        if (k <= 0)
                                p[0].fd = -1;   /* stdin done; keep reading output */
                        else
                                pd_write_all(master, buf, (size_t)k);
                }
        }
        if (raw)
                tcsetattr(0, TCSANOW, &saved);
        close(master);
        (void)pid;
}

static pid_t forward_to;
static void forward_signal(int sig)
{
        if (forward_to > 0)
                kill(forward_to, sig);
}

int oci_cmd_create(const struct oci_global *g, int argc, char **argv, bool run)
{
        struct pd_error err = { 0 };
        struct create_opts o;
        struct oci_config cfg;
        if (parse_create(argc, argv, run, &o, &err) < 0) {
                oci_fail(&err);
                return 1;
        }
        if (oci_config_load(o.bundle, &cfg, &err) < 0) {
                oci_fail(&err);
                oci_config_free(&cfg);
                return 1;
        }
        pid_t pid;
        int master = -1;
        struct create_opts_pub po = { .pid_file = o.pid_file, .console_socket = o.console_socket,
                                      .preserve_fds = o.preserve_fds,
                                      .relay_master = run && !o.detach && !o.console_socket ? &master : NULL };
        int r = oci_create(g, o.id, &po, &cfg, &pid, &err);
        oci_config_free(&cfg);
        if (r < 0) {
                oci_fail(&err);
                return 1;
        }
        if (!run)
                return 0;
        /* run: forward the usual signals to the init while it runs. */
        forward_to = pid;
        struct sigaction sa = { .sa_handler = forward_signal, .sa_flags = SA_RESTART };
        int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
                sigaction(sigs[i], &sa, NULL);
        if (oci_start(g, o.id, &err) < 0) {
                oci_fail(&err);
                oci_delete(g, o.id, true, NULL);
                return 1;
        }
        if (o.detach)
                return 0;
        if (master >= 0)
                oci_relay_pty(master, pid);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (!o.keep && oci_delete(g, o.id, true, &err) < 0)
                oci_fail(&err);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
