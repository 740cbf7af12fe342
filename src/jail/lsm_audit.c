/* Starting and stopping the process tier's Landlock audit reader
 * (lsm_audit.h; the reader itself is lsm_audit_main.c).
 *
 * Like the supervised tier's supervisor, the reader is its own executable,
 * fork+exec'd here: the creator may be the multi-threaded server, where a
 * forked child may only make async-signal-safe calls until it execs. It
 * gets its own session and no parent-death signal; it exits by itself once
 * the sandbox's agent is gone, and teardown (or gc, from the pid and start
 * time in the tier's record) stops it. */
#include "lsm_audit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentpath.h"
#include "sandbox.h"
#include "util.h"

#ifndef LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
#define LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)      /* ABI 7 */
#endif

#define READY_TIMEOUT_MS 5000
#define STOP_TIMEOUT_MS 2000

unsigned pd_lsm_audit_restrict_flags(int abi)
{
        return abi >= 7 ? LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON : 0;
}

int pd_lsm_audit_restrict(int ruleset_fd, unsigned flags)
{
        if (syscall(SYS_landlock_restrict_self, ruleset_fd, flags) < 0)
                return -errno;
        return 0;
}

/* Post-fork child: async-signal-safe calls only. fds: 0 /dev/null, 1 and 2
 * the log, 3 the ready pipe. */
static _Noreturn void exec_child(const char *path, char *const argv[], int nullfd, int logfd, int readyfd)
{
        int src[] = { nullfd, logfd, logfd, readyfd };
        int tmp[4];
        for (int i = 0; i < 4; i++) {
                tmp[i] = fcntl(src[i], F_DUPFD, 16);
                if (tmp[i] < 0)
                        _exit(127);
        }
        for (int i = 0; i < 4; i++)
                if (dup2(tmp[i], i) < 0)
                        _exit(127);
        syscall(SYS_close_range, 4, ~0U, 0);
        setsid();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        execve(path, argv, envp);
        _exit(127);
}

void pd_lsm_audit_start(struct pd_sandbox *sb, pid_t agent_pid, uid_t uid, struct pd_lsm_audit *out)
{
        memset(out, 0, sizeof *out);
        struct pd_error err = { 0 };
        char path[PATH_MAX], audit[PATH_MAX + 64];
        if (pd_helper_path("paddock-lsm-audit", "PADDOCK_LSM_AUDIT", path, sizeof path, &err) < 0) {
                snprintf(out->status, sizeof out->status, "no (%s)", err.msg);
                return;
        }
        /* The same file the server's audit.c and the supervisor append to. */
        if (mkdirat(sb->state->dirfd, "audit", 0700) < 0 && errno != EEXIST) {
                snprintf(out->status, sizeof out->status, "no (create '%s/audit': %s)", sb->state->dir,
                         strerror(errno));
                return;
        }
        snprintf(audit, sizeof audit, "%s/audit/%s.jsonl", sb->state->dir, sb->id);

        _pd_cleanup_close_ int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
        _pd_cleanup_close_ int logfd = openat(sb->dirfd, "lsm-audit.log",
                                              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        int ready[2];
        if (nullfd < 0 || logfd < 0 || pipe2(ready, O_CLOEXEC) < 0) {
                snprintf(out->status, sizeof out->status, "no (reader's stdio: %s)", strerror(errno));
                return;
        }
        _pd_cleanup_close_ int ready_r = ready[0];
        _pd_cleanup_close_ int ready_w = ready[1];

        char pid_s[16], uid_s[16];
        snprintf(pid_s, sizeof pid_s, "%d", (int)agent_pid);
        snprintf(uid_s, sizeof uid_s, "%u", (unsigned)uid);
        char *argv[] = { "paddock-lsm-audit", "--ready-fd", "3", "--sandbox", sb->id, "--pid", pid_s,
                         "--audit", audit, uid == (uid_t)-1 ? NULL : "--uid", uid_s, NULL };
        pid_t pid = fork();
        if (pid < 0) {
                snprintf(out->status, sizeof out->status, "no (fork the reader: %s)", strerror(errno));
                return;
        }
        if (pid == 0)
                exec_child(path, argv, nullfd, logfd, ready_w);
        close(ready_w);
        ready_w = -1;

        char msg[512];
        ssize_t n = 0;
        struct pollfd p = { .fd = ready_r, .events = POLLIN };
        int pr;
        do
                pr = poll(&p, 1, READY_TIMEOUT_MS);
        while (pr < 0 && errno == EINTR);
        if (pr > 0)
                n = pd_read_all(ready_r, msg, sizeof msg - 1);
        msg[n > 0 ? n : 0] = '\0';
        if (!strncmp(msg, "on", 2)) {
                out->pid = pid;
                out->start = pd_proc_starttime(pid);
                snprintf(out->status, sizeof out->status, "yes%s%s%s", msg[2] == ':' ? " (" : "",
                         msg[2] == ':' ? msg + 3 : "", msg[2] == ':' ? ")" : "");
                return;
        }
        if (!strncmp(msg, "off:", 4))
                snprintf(out->status, sizeof out->status, "no (%s)", msg + 4);
        else
                snprintf(out->status, sizeof out->status, "no (the reader '%s' did not start%s)", path,
                         pr == 0 ? ": timeout" : "; see lsm-audit.log");
        kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
}

void pd_lsm_audit_stop(pid_t pid, uint64_t start)
{
        if (pid <= 0)
                return;
        /* pid + start time, checked again after the pidfd pins the process:
         * never signal a reused pid. */
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd < 0)
                return;
        if (!start || pd_proc_starttime(pid) != start) {
                (void)waitpid(pid, NULL, WNOHANG);      /* our zombie? */
                close(pfd);
                return;
        }
        /* SIGTERM: the reader writes what the kernel still has queued for
         * the sandbox, then exits. */
        syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0);
        struct pollfd p = { .fd = pfd, .events = POLLIN };
        int pr;
        do
                pr = poll(&p, 1, STOP_TIMEOUT_MS);
        while (pr < 0 && errno == EINTR);
        if (pr <= 0)
                syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
        siginfo_t si;
        /* reap it when it is our child (not when gc or a new server stops it) */
        if (waitid(P_PIDFD, (id_t)pfd, &si, WEXITED) < 0 && pr <= 0)
                (void)poll(&p, 1, STOP_TIMEOUT_MS);
        close(pfd);
}
