/* Starting and stopping the supervised tier's supervisor (supervisor.h,
 * src/supervisor/ for the process itself, docs/security.md).
 *
 * The supervisor is its own executable, fork+exec'd here: the creator may
 * be the multi-threaded server, where a forked child may only make
 * async-signal-safe calls until it execs. It gets no parent-death signal
 * and its own session, so it outlives its creator like the agent does; it
 * exits by itself when the sandbox's last process is gone (the listener
 * hangs up). */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentpath.h"
#include "sandbox.h"
#include "util.h"

#define READY_TIMEOUT_MS 10000
#define POLICY_MAX (1 << 20)
#define STOP_GRACE_MS 1000

/* The policy file named by the spec (`paddock run --policy FILE`) is copied
 * into the sandbox's runtime dir, so the supervisor never reads a file its
 * creator's caller could still change. */
static int copy_policy(struct pd_sandbox *sb, char *out, size_t size, struct pd_error *err)
{
        const char *src = sb->spec.policy_file;
        out[0] = '\0';
        if (!src || !*src)
                return 0;
        _pd_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return pd_error_set(err, errno, "supervised policy '%s'", src);
        _pd_cleanup_free_ char *buf = malloc(POLICY_MAX);
        if (!buf)
                return pd_error_set(err, ENOMEM, "read supervised policy");
        ssize_t n = pd_read_all(in, buf, POLICY_MAX);
        if (n < 0)
                return pd_error_set(err, (int)-n, "read supervised policy '%s'", src);
        if (n == POLICY_MAX)
                return pd_error_setx(err, EFBIG, "supervised policy '%s' is larger than %d bytes", src, POLICY_MAX);
        _pd_cleanup_close_ int o = openat(sb->dirfd, "policy.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (o < 0)
                return pd_error_set(err, errno, "write '%s/policy.json'", sb->dir);
        int r = pd_write_all(o, buf, (size_t)n);
        if (r < 0)
                return pd_error_set(err, -r, "write '%s/policy.json'", sb->dir);
        snprintf(out, size, "%s/policy.json", sb->dir);
        return 0;
}

/* Post-fork child: async-signal-safe calls only. fds: 0 /dev/null, 1 and 2
 * the log, 3 the listener, 4 the ready pipe. */
static _Noreturn void exec_child(const char *path, char *const argv[], int nullfd, int logfd, int lfd, int readyfd)
{
        int src[] = { nullfd, logfd, logfd, lfd, readyfd };
        int tmp[5];
        /* Move everything above the targets first, so no dup2 clobbers a
         * source that is still needed. */
        for (int i = 0; i < 5; i++) {
                tmp[i] = fcntl(src[i], F_DUPFD, 16);
                if (tmp[i] < 0)
                        _exit(127);
        }
        for (int i = 0; i < 5; i++)
                if (dup2(tmp[i], i) < 0)
                        _exit(127);
        syscall(SYS_close_range, 5, ~0U, 0);
        setsid();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        execve(path, argv, envp);
        _exit(127);
}

int pd_supervisor_start(struct pd_sandbox *sb, int listener_fd, struct pd_error *err)
{
        _pd_cleanup_close_ int lfd = listener_fd;
        char path[PATH_MAX], policy[PATH_MAX + 16], audit[PATH_MAX + 64];
        int r = pd_helper_path("paddock-supervisor", "PADDOCK_SUPERVISOR", path, sizeof path, err);
        if (r < 0)
                return pd_error_prefix(err, "supervised tier");
        if ((r = copy_policy(sb, policy, sizeof policy, err)) < 0)
                return r;
        /* The same file the server's audit.c appends to. */
        if (mkdirat(sb->state->dirfd, "audit", 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s/audit'", sb->state->dir);
        snprintf(audit, sizeof audit, "%s/audit/%s.jsonl", sb->state->dir, sb->id);

        _pd_cleanup_close_ int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
        _pd_cleanup_close_ int logfd = openat(sb->dirfd, "supervisor.log",
                                              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (nullfd < 0 || logfd < 0)
                return pd_error_set(err, errno, "supervisor's stdio");
        int ready[2];
        if (pipe2(ready, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        _pd_cleanup_close_ int ready_r = ready[0];
        _pd_cleanup_close_ int ready_w = ready[1];

        char pid_s[16], base_s[16];
        snprintf(pid_s, sizeof pid_s, "%d", (int)sb->agent_pid);
        snprintf(base_s, sizeof base_s, "%u", sb->uids.base);
        char *argv[] = { "paddock-supervisor", "--listener-fd", "3", "--ready-fd", "4", "--pid", pid_s,
                         "--uid-base", base_s, "--sandbox", sb->id, "--audit", audit,
                         policy[0] ? "--policy" : NULL, policy, NULL };
        pid_t pid = fork();
        if (pid < 0)
                return pd_error_set(err, errno, "fork the supervisor");
        if (pid == 0)
                exec_child(path, argv, nullfd, logfd, lfd, ready_w);
        close(ready_w);
        ready_w = -1;
        close(lfd);
        lfd = -1;

        char msg[512];
        ssize_t n = 0;
        struct pollfd p = { .fd = ready_r, .events = POLLIN };
        int pr;
        do
                pr = poll(&p, 1, READY_TIMEOUT_MS);
        while (pr < 0 && errno == EINTR);
        if (pr > 0)
                n = pd_read_all(ready_r, msg, sizeof msg - 1);
        if (n == 1 && msg[0] == 'R') {
                sb->supervisor_pid = pid;
                sb->supervisor_start = pd_proc_starttime(pid);
                /* Recorded before anything else can fail: gc must find it. */
                return pd_sandbox_save(sb, err);
        }
        kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        if (n > 0) {
                msg[n] = '\0';
                return pd_error_setx(err, EIO, "supervised tier: supervisor: %s", msg);
        }
        return pd_error_setx(err, pr == 0 ? ETIMEDOUT : EIO, "supervised tier: supervisor '%s' did not start%s",
                             path, pr == 0 ? " (timeout)" : "; see supervisor.log");
}

void pd_supervisor_stop(struct pd_sandbox *sb)
{
        pid_t pid = sb->supervisor_pid;
        if (pid <= 0)
                return;
        sb->supervisor_pid = 0;
        /* pid + start time, checked again after the pidfd pins the process:
         * never signal a reused pid. */
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd < 0)
                return;
        if (!sb->supervisor_start || pd_proc_starttime(pid) != sb->supervisor_start) {
                /* gone already; reap it if it is our zombie */
                (void)waitpid(pid, NULL, WNOHANG);
                close(pfd);
                return;
        }
        /* The sandbox is gone (destroy kills the agent first): the
         * supervisor sees its listener hang up, writes its buffered audit
         * lines, waits for its broker to write its own, and exits. Give it
         * a moment for that before killing it. */
        struct pollfd gp = { .fd = pfd, .events = POLLIN };
        int gr;
        do
                gr = poll(&gp, 1, STOP_GRACE_MS);
        while (gr < 0 && errno == EINTR);
        if (gr <= 0)
                syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
        siginfo_t si;
        if (waitid(P_PIDFD, (id_t)pfd, &si, WEXITED) < 0) {
                /* not our child (adopted by a new server): wait for its exit */
                struct pollfd p = { .fd = pfd, .events = POLLIN };
                (void)poll(&p, 1, 5000);
        }
        close(pfd);
}
