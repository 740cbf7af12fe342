/* SPAWN: start a process in its own session, in the workload cgroup, with
 * its output captured. clone(CLONE_VM|CLONE_VFORK) keeps the cost
 * independent of the agent's memory size: the child borrows our memory
 * until it execs, so everything it needs is prepared here first and the
 * child makes only raw system calls. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/login_fast.h"
#include "lib/util.h"

int ag_proc_watch_streams(struct agent *ag, struct ag_proc *p);
int ag_proc_watch_stdin(struct agent *ag, struct ag_proc *p, int fd);

enum stage { ST_STDIO = 1, ST_CGROUP, ST_CREDS, ST_CHDIR, ST_EXEC };

struct child_args {
        char *const *argv, *const *envp;
        const char *exec_path;          /* the login fast path's program, or NULL */
        const char *path_env;           /* PATH from envp, or default */
        const char *cwd;
        int fd_in, fd_out, fd_err;      /* become 0, 1, 2 */
        bool pty;
        const int *cgroup_fds;
        size_t ncgroup;
        bool do_groups, do_gid, do_uid;
        gid_t *groups;
        size_t ngroups;
        uid_t uid;
        gid_t gid;
        int errfd;
};

struct child_err {
        int stage, err;
};

static _Noreturn void child_fail(const struct child_args *a, int stage, int err)
{
        struct child_err ce = { stage, err };
        (void)!write(a->errfd, &ce, sizeof ce);
        _exit(127);
}

static int child_main(void *arg)
{
        const struct child_args *a = arg;
        /* every fd we dup is >= 3 (main() keeps 0-2 open), so dup2 always
         * yields a fresh fd without CLOEXEC */
        if (syscall(SYS_setsid) < 0)
                child_fail(a, ST_STDIO, errno);
        if (a->pty && syscall(SYS_ioctl, a->fd_out, TIOCSCTTY, 0) < 0)
                child_fail(a, ST_STDIO, errno);
        if (dup2(a->fd_in, 0) < 0 || dup2(a->fd_out, 1) < 0 || dup2(a->fd_err, 2) < 0)
                child_fail(a, ST_STDIO, errno);
        /* Only 0-2 may reach the command, whatever the agent inherited:
         * everything else closes at exec (the error pipe stays until then). */
        if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
                /* gVisor (the gvisor tier's Sentry) predates the CLOEXEC
                 * flag: close them now instead, all but the error pipe
                 * (CLOEXEC already; this child has its own fd table); it
                 * reads the bound as a signed int, hence INT_MAX, not ~0U */
                if (errno != EINVAL ||
                    (a->errfd > 3 && syscall(SYS_close_range, 3, (unsigned)a->errfd - 1, 0) < 0) ||
                    syscall(SYS_close_range, (unsigned)a->errfd + 1, (unsigned)INT_MAX, 0) < 0)
                        child_fail(a, ST_STDIO, errno);
        }
        for (size_t i = 0; i < a->ncgroup; i++)
                if (write(a->cgroup_fds[i], "0", 1) != 1)
                        child_fail(a, ST_CGROUP, errno);
        if (a->do_groups && syscall(SYS_setgroups, a->ngroups, a->groups) < 0)
                child_fail(a, ST_CREDS, errno);
        if (a->do_gid && syscall(SYS_setgid, a->gid) < 0)
                child_fail(a, ST_CREDS, errno);
        if (a->do_uid && syscall(SYS_setuid, a->uid) < 0)
                child_fail(a, ST_CREDS, errno);
        if (chdir(a->cwd) < 0)
                child_fail(a, ST_CHDIR, errno);
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        for (int s = 1; s < NSIG; s++)
                sigaction(s, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);

        const char *file = a->argv[0];
        if (a->exec_path) {
                execve(a->exec_path, a->argv, a->envp);
                child_fail(a, ST_EXEC, errno);
        }
        if (strchr(file, '/')) {
                execve(file, a->argv, a->envp);
                child_fail(a, ST_EXEC, errno);
        }
        /* execvp's search, but over the PATH of the new environment */
        char buf[PATH_MAX];
        size_t flen = strlen(file);
        int saved = ENOENT;
        for (const char *p = a->path_env;;) {
                const char *colon = strchr(p, ':');
                size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
                if (dlen + 1 + flen + 1 <= sizeof buf) {
                        size_t o = 0;
                        if (dlen == 0) {
                                buf[o++] = '.';
                        } else {
                                memcpy(buf, p, dlen);
                                o = dlen;
                        }
                        buf[o++] = '/';
                        memcpy(buf + o, file, flen + 1);
                        execve(buf, a->argv, a->envp);
                        switch (errno) {
                        case EACCES:
                                saved = EACCES;
                                break;
                        case ENOENT: case ENOTDIR: case ESTALE: case ENODEV: case ETIMEDOUT:
                                break;
                        default:
                                child_fail(a, ST_EXEC, errno);
                        }
                }
                if (!colon)
                        break;
                p = colon + 1;
        }
        child_fail(a, ST_EXEC, saved);
}

int ag_home_of(uid_t uid, char *buf, size_t size, gid_t *gid)
{
        FILE *f = fopen("/etc/passwd", "re");
        if (!f)
                return -ENOENT;
        struct passwd *pw;
        int r = -ENOENT;
        while ((pw = fgetpwent(f))) {
                if (pw->pw_uid == uid) {
                        if (gid)
                                *gid = pw->pw_gid;
                        if (pw->pw_dir && strlen(pw->pw_dir) < size) {
                                strcpy(buf, pw->pw_dir);
                                r = 0;
                        }
                        break;
                }
        }
        fclose(f);
        return r;
}

static void on_timer(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        struct ag_proc *p = ag_container_of(h, struct ag_proc, timer);
        if (!p->reaped) {
                p->timed_out = true;
                kill(-p->pid, SIGKILL);
                kill(p->pid, SIGKILL);
        }
        ag_ev_close(ag, &p->timer);
}

static int open_pty(int *master, int *slave, uint32_t rows, uint32_t cols, struct pd_error *err)
{
        _pd_cleanup_close_ int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (m < 0)
                return pd_error_set(err, errno, "open /dev/ptmx");
        int zero = 0;
        if (ioctl(m, TIOCSPTLCK, &zero) < 0)
                return pd_error_set(err, errno, "unlock pty");
        int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (s < 0) {
                unsigned n;
                char path[64];
                if (ioctl(m, TIOCGPTN, &n) < 0)
                        return pd_error_set(err, errno, "pty number");
                snprintf(path, sizeof path, "/dev/pts/%u", n);
                s = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
                if (s < 0)
                        return pd_error_set(err, errno, "open %s", path);
        }
        struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
        ioctl(s, TIOCSWINSZ, &ws);
        *slave = s;
        *master = PD_TAKE_FD(m);
        return 0;
}

static char **dup_strv(char *const *v)
{
        size_t n = 0;
        while (v[n])
                n++;
        char **out = calloc(n + 1, sizeof *out);
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(out[i] = strdup(v[i]))) {
                        while (i--)
                                free(out[i]);
                        free(out);
                        return NULL;
                }
        return out;
}

static void close_all(int *fds, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

/* 64 KiB is plenty: the child's deepest frame is execve with a PATH_MAX buffer */
static uint8_t child_stack[64u << 10] __attribute__((aligned(16)));

int ag_spawn(struct agent *ag, const struct ag_spawn *s, struct ag_proc **out, struct pd_error *err)
{
        uid_t euid = geteuid();
        gid_t egid = getegid();
        uid_t tuid = s->has_uid ? s->uid : euid;
        gid_t pwgid = (gid_t)-1;
        char home[PATH_MAX] = "/";
        if (ag_home)
                snprintf(home, sizeof home, "%s", ag_home);
        else if (ag_home_of(tuid, home, sizeof home, &pwgid) < 0)
                strcpy(home, "/");
        struct child_args a = {
                .argv = s->argv, .envp = s->envp, .cwd = s->cwd ? s->cwd : home,
                .pty = s->pty, .cgroup_fds = ag->cgroup_fds, .ncgroup = ag->ncgroup,
                .uid = tuid, .errfd = -1,
        };
        a.path_env = "/usr/local/bin:/usr/bin:/bin";
        for (char *const *e = s->envp; *e; e++)
                if (strncmp(*e, "PATH=", 5) == 0)
                        a.path_env = *e + 5;
        a.do_uid = s->has_uid && s->uid != euid;
        a.gid = s->has_gid ? s->gid : pwgid;
        a.do_gid = (s->has_gid && s->gid != egid) ||
                   (!s->has_gid && a.do_uid && pwgid != (gid_t)-1 && pwgid != egid);
        gid_t groups[64];
        if (euid == 0 && (s->has_groups || a.do_uid)) {
                a.do_groups = true;
                if (s->has_groups) {
                        if (s->ngroups > PD_ARRAY_SIZE(groups))
                                return pd_error_setx(err, EINVAL, "too many groups (%zu)", s->ngroups);
                        for (size_t i = 0; i < s->ngroups; i++)
                                groups[i] = s->groups[i];
                        a.ngroups = s->ngroups;
                } else if (a.gid != (gid_t)-1) {
                        groups[0] = a.gid;
                        a.ngroups = 1;
                }
                a.groups = groups;
        }

        /* fds: [0] stdin child end, [1] stdout child, [2] stderr child,
         * [3] stdin ours, [4] stdout ours, [5] stderr ours, [6] err pipe r, [7] w */
        int fds[8] = { -1, -1, -1, -1, -1, -1, -1, -1 };
        int p2[2];
        int r;
        if (s->stdio[0] >= 0) {
                a.fd_in = s->stdio[0];
                a.fd_out = s->stdio[1];
                a.fd_err = s->stdio[2];
        } else if (s->pty) {
                r = open_pty(&fds[4], &fds[1], s->rows, s->cols, err);
                if (r < 0)
                        return r;
                fds[3] = fcntl(fds[4], F_DUPFD_CLOEXEC, 3);
                if (fds[3] < 0) {
                        r = pd_error_set(err, errno, "dup pty");
                        goto fail;
                }
                a.fd_in = a.fd_out = a.fd_err = fds[1];
        } else {
                if (s->stdin_pipe) {
                        if (pipe2(p2, O_CLOEXEC) < 0)
                                goto fail_errno;
                        fds[0] = p2[0];
                        fds[3] = p2[1];
                        fcntl(fds[3], F_SETFL, O_NONBLOCK);
                } else if ((fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
                        goto fail_errno;
                }
                for (int i = 1; i <= 2; i++) {
                        if (pipe2(p2, O_CLOEXEC) < 0)
                                goto fail_errno;
                        fds[3 + i] = p2[0];
                        fds[i] = p2[1];
                        fcntl(fds[3 + i], F_SETFL, O_NONBLOCK);
                }
                a.fd_in = fds[0];
                a.fd_out = fds[1];
                a.fd_err = fds[2];
        }
        if (pipe2(p2, O_CLOEXEC) < 0)
                goto fail_errno;
        fds[6] = p2[0];
        fds[7] = a.errfd = p2[1];

        /* `/bin/bash -l -c CMD` that the agent can run without bash
         * (login_fast.c); if its exec fails, real bash runs instead */
        struct ag_login_fast lf;
        bool fast = ag_login_fast_plan(s->argv, s->envp, s->pty, a.cwd, a.uid, a.do_gid ? a.gid : egid,
                                       a.do_groups ? a.groups : NULL,
                                       a.do_groups ? a.ngroups : 0, &lf) == 1;
        if (fast) {
                a.argv = lf.argv;
                a.envp = lf.envp;
                a.exec_path = lf.path;
        }
        pid_t pid;
        struct child_err ce;
        ssize_t n;
again:
        pid = clone(child_main, child_stack + sizeof child_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
        if (pid < 0) {
                if (fast)
                        ag_login_fast_free(&lf);
                goto fail_errno;
        }
        /* the child has exec'd or died */
        close_all(&fds[7], 1);
        n = read(fds[6], &ce, sizeof ce);
        close_all(&fds[6], 1);
        if (n == (ssize_t)sizeof ce && ce.stage == ST_EXEC && fast) {
                waitpid(pid, NULL, 0);
                ag_login_fast_free(&lf);
                fast = false;
                a.argv = s->argv;
                a.envp = s->envp;
                a.exec_path = NULL;
                if (pipe2(p2, O_CLOEXEC) < 0)
                        goto fail_errno;
                fds[6] = p2[0];
                fds[7] = a.errfd = p2[1];
                goto again;
        }
        if (fast)
                ag_login_fast_free(&lf);
        /* its ends go */
        close_all(fds, 3);
        if (n == (ssize_t)sizeof ce) {
                waitpid(pid, NULL, 0);
                switch (ce.stage) {
                case ST_EXEC:
                        r = pd_error_set(err, ce.err, "cannot execute '%s'", s->argv[0]);
                        break;
                case ST_CGROUP:
                        r = pd_error_set(err, ce.err, "cannot join the workload cgroup");
                        break;
                case ST_CREDS:
                        r = pd_error_set(err, ce.err, "cannot switch to uid %u gid %d",
                                         (unsigned)a.uid, (int)a.gid);
                        break;
                case ST_CHDIR:
                        r = pd_error_set(err, ce.err, "cannot change directory to '%s'", a.cwd);
                        break;
                default:
                        r = pd_error_set(err, ce.err, "cannot set up the terminal");
                }
                goto fail;
        }

        struct ag_proc *p = calloc(1, sizeof *p);
        if (!p) {
                /* it runs already: better kill it than lose track of it */
                kill(-pid, SIGKILL);
                r = pd_error_set(err, ENOMEM, "spawn");
                goto fail;
        }
        p->pid = pid;
        if (ag->guest)
                p->oom_at_start = ag_guest_oom_kills();
        p->pty = s->pty;
        p->rows = s->rows;
        p->cols = s->cols;
        p->argv = dup_strv(s->argv);
        p->envp = dup_strv(s->envp);
        p->cwd = strdup(a.cwd);
        p->timer.fd = -1;
        p->out[0].h.fd = fds[4];
        p->out[1].h.fd = fds[5];
        fds[4] = fds[5] = -1;
        int in_fd = fds[3];
        fds[3] = -1;
        p->next = ag->procs;
        ag->procs = p;
        ag_proc_watch_streams(ag, p);
        ag_proc_watch_stdin(ag, p, in_fd);
        *out = p;
        return 0;

fail_errno:
        r = pd_error_set(err, errno, "spawn '%s'", s->argv[0]);
fail:
        close_all(fds, PD_ARRAY_SIZE(fds));
        return r;
}

int ag_proc_set_timeout(struct agent *ag, struct ag_proc *p, uint64_t ms);
int ag_proc_set_timeout(struct agent *ag, struct ag_proc *p, uint64_t ms)
{
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct itimerspec its = { .it_value = { .tv_sec = (time_t)(ms / 1000),
                                                .tv_nsec = (long)(ms % 1000) * 1000000 } };
        if (ms == 0)
                its.it_value.tv_nsec = 1;
        if (timerfd_settime(fd, 0, &its, NULL) < 0 || ag_ev_add(ag, &p->timer, fd, EPOLLIN, on_timer) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return 0;
}

static void free_strv(char **v)
{
        for (char **x = v; x && *x; x++)
                free(*x);
        free(v);
}

static int collect_strs(const struct ag_req *r, uint16_t tag, char ***out, struct pd_error *err)
{
        size_t n = 0;
        struct pd_msg_iter it;
        struct pd_attr at;
        pd_msg_iter_init(&it, r->payload, r->h->len);
        while (pd_msg_next(&it, &at))
                n += at.tag == tag;
        char **v = calloc(n + 1, sizeof *v);
        if (!v)
                return pd_error_set(err, ENOMEM, "spawn");
        size_t i = 0;
        pd_msg_iter_init(&it, r->payload, r->h->len);
        while (pd_msg_next(&it, &at)) {
                if (at.tag != tag)
                        continue;
                if (!(v[i] = pd_attr_strdup(&at))) {
                        free_strv(v);
                        return pd_error_setx(err, EINVAL, "%s contains a NUL byte",
                                             tag == PD_A_ARG ? "ARG" : "ENV");
                }
                i++;
        }
        *out = v;
        return (int)n;
}

/* --home: HOME, TMPDIR and PWD that name /home/user or /root (or below)
 * name the workspace instead, and TMPDIR defaults to <home>/.tmp: there is
 * no mount namespace to put those paths in (docs/protocol.md). */
static int home_env(char ***envp, struct pd_error *err)
{
        static const char *const keys[] = { "HOME=", "TMPDIR=", "PWD=" };
        bool has_tmpdir = false;
        size_t n = 0;
        for (char **e = *envp; *e; e++, n++) {
                for (size_t i = 0; i < PD_ARRAY_SIZE(keys); i++) {
                        size_t kl = strlen(keys[i]);
                        if (strncmp(*e, keys[i], kl))
                                continue;
                        if (i == 1)
                                has_tmpdir = true;
                        char val[PATH_MAX];
                        if (ag_map_home(*e + kl, val, sizeof val) < 0 || !strcmp(val, *e + kl))
                                break;
                        char *nv = malloc(kl + strlen(val) + 1);
                        if (!nv)
                                return pd_error_set(err, ENOMEM, "spawn");
                        memcpy(nv, keys[i], kl);
                        strcpy(nv + kl, val);
                        free(*e);
                        *e = nv;
                        break;
                }
        }
        if (has_tmpdir)
                return 0;
        char **nv = realloc(*envp, (n + 2) * sizeof *nv);
        if (!nv)
                return pd_error_set(err, ENOMEM, "spawn");
        *envp = nv;
        if (asprintf(&nv[n], "TMPDIR=%s/.tmp", ag_home) < 0)
                return nv[n] = NULL, pd_error_set(err, ENOMEM, "spawn");
        nv[n + 1] = NULL;
        return 0;
}

int ag_req_spawn(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        struct ag_spawn s = { .stdio = { -1, -1, -1 } };
        char cwd[PATH_MAX], tag[256];
        uint32_t groups[64], v;
        uint64_t timeout = 0;
        int k, n;
        _pd_cleanup_free_ char **argv = NULL;
        _pd_cleanup_free_ char **envp = NULL;
        bool has_rows, has_cols, has_tag;

        if ((k = ag_get_u32(r, PD_A_UID, &s.uid)) < 0)
                return k;
        s.has_uid = k;
        s.uid = ag_map_uid(s.uid);
        if ((k = ag_get_u32(r, PD_A_GID, &s.gid)) < 0)
                return k;
        s.has_gid = k;
        s.gid = ag_map_gid(s.gid);
        if ((k = ag_get_u32(r, PD_A_PTY_ROWS, &s.rows)) < 0)
                return k;
        has_rows = k;
        if ((k = ag_get_u32(r, PD_A_PTY_COLS, &s.cols)) < 0)
                return k;
        has_cols = k;
        if (has_rows != has_cols)
                return pd_error_setx(r->err, EINVAL, "PTY_ROWS and PTY_COLS go together");
        s.pty = has_rows;
        if (s.pty && (s.rows == 0 || s.cols == 0 || s.rows > 65535 || s.cols > 65535))
                return pd_error_setx(r->err, EINVAL, "bad pty size %ux%u", s.rows, s.cols);
        if ((k = ag_get_u32(r, PD_A_STDIN, &v)) < 0)
                return k;
        s.stdin_pipe = k && v;
        if ((k = ag_get_u64(r, PD_A_TIMEOUT_MS, &timeout)) < 0)
                return k;
        bool has_timeout = k;
        if ((k = ag_get_str(r, PD_A_CWD, cwd, sizeof cwd)) < 0)
                return k;
        if (k && cwd[0] == '\0')
                return pd_error_setx(r->err, EINVAL, "empty CWD");
        char mapped_cwd[PATH_MAX];
        if (k && ag_map_home(cwd, mapped_cwd, sizeof mapped_cwd) < 0)
                return pd_error_setx(r->err, ENAMETOOLONG, "CWD too long");
        s.cwd = k ? mapped_cwd : NULL;
        if ((k = ag_get_str(r, PD_A_TAG, tag, sizeof tag)) < 0)
                return k;
        has_tag = k;
        struct pd_msg_iter it;
        struct pd_attr at;
        pd_msg_iter_init(&it, r->payload, r->h->len);
        while (pd_msg_next(&it, &at)) {
                if (at.tag != PD_A_GROUPS)
                        continue;
                if (s.ngroups >= PD_ARRAY_SIZE(groups))
                        return pd_error_setx(r->err, EINVAL, "more than %zu GROUPS", PD_ARRAY_SIZE(groups));
                if (!pd_attr_u32(&at, &groups[s.ngroups++]))
                        return pd_error_setx(r->err, EINVAL, "GROUPS must be 4 bytes");
                s.has_groups = true;
        }
        s.groups = groups;

        if ((n = collect_strs(r, PD_A_ARG, &argv, r->err)) < 0)
                return n;
        if (n == 0) {
                free(argv);
                argv = NULL;
                return ag_missing(r->err, "ARG");
        }
        if (argv[0][0] == '\0') {
                free_strv(PD_TAKE_PTR(argv));
                return pd_error_setx(r->err, EINVAL, "empty command name");
        }
        if ((n = collect_strs(r, PD_A_ENV, &envp, r->err)) < 0) {
                free_strv(PD_TAKE_PTR(argv));
                return n;
        }
        if (ag_home && (k = home_env(&envp, r->err)) < 0) {
                free_strv(PD_TAKE_PTR(argv));
                free_strv(PD_TAKE_PTR(envp));
                return k;
        }
        s.argv = argv;
        s.envp = envp;
        struct ag_proc *p;
        k = ag_spawn(ag, &s, &p, r->err);
        free_strv(PD_TAKE_PTR(argv));
        free_strv(PD_TAKE_PTR(envp));
        if (k < 0) {
                /* ERROR with EXEC_ERRNO so the host can map it to 126/127 */
                struct pd_msg m;
                pd_msg_init(&m);
                pd_msg_put_str(&m, PD_A_MESSAGE, r->err->msg);
                if (strncmp(r->err->msg, "cannot execute", 14) == 0)
                        pd_msg_put_u32(&m, PD_A_EXEC_ERRNO, (uint32_t)r->err->code);
                ag_conn_send(ag, c, PD_T_ERROR, 0, r->h->id, (uint32_t)r->err->code, m.buf, m.len);
                pd_msg_free(&m);
                return AG_DONE;
        }
        if (has_tag)
                p->tag = strdup(tag);
        if (has_timeout && ag_proc_set_timeout(ag, p, timeout) < 0) {
                kill(-p->pid, SIGKILL);
                return pd_error_set(r->err, errno, "timer");
        }
        pd_msg_put_u32(r->reply, PD_A_PID, (uint32_t)p->pid);
        /* FOLLOW on SPAWN attaches this connection to every output stream
         * from offset 0: a one-shot client needs no second round trip. */
        if ((k = ag_get_u32(r, PD_A_FOLLOW, &v)) < 0)
                return k;
        if (k && v) {
                int nstreams = p->pty ? 1 : 2;
                for (int idx = 0; idx < nstreams; idx++)
                        if (ag_attach_add(ag, c, p, idx, 0, true, NULL) < 0)
                                return pd_error_set(r->err, ENOMEM, "attach");
        }
        return 0;
}
