/* fork+exec of helper executables with a readiness pipe, and their stop
 * (helper_proc.h). */
#include "jail/helper_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/state.h"
#include "lib/util.h"

#define HELPER_FDS_MAX 8

/* Post-fork child: async-signal-safe calls only. src[i] becomes fd i. */
static _Noreturn void exec_child(const char *path, char *const argv[], const int *src, int n)
{
        int tmp[HELPER_FDS_MAX];
        /* Move everything above the targets first, so no dup2 clobbers a
         * source that is still needed. */
        for (int i = 0; i < n; i++) {
                tmp[i] = fcntl(src[i], F_DUPFD, 16);
                if (tmp[i] < 0)
                        _exit(127);
        }
        for (int i = 0; i < n; i++)
                if (dup2(tmp[i], i) < 0)
                        _exit(127);
        syscall(SYS_close_range, (unsigned)n, ~0U, 0);
        setsid();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        execve(path, argv, envp);
        _exit(127);
}

pid_t pd_helper_spawn(const char *path, char *const argv[], int dirfd, const char *log, const int *fds, int nfds,
                      int *ready_r, const char **step)
{
        *ready_r = -1;
        if (nfds < 0 || nfds > HELPER_FDS_MAX - 4) {
                *step = "stdio";
                return -EINVAL;
        }
        _pd_cleanup_close_ int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
        _pd_cleanup_close_ int logfd = openat(dirfd, log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (nullfd < 0 || logfd < 0) {
                *step = "stdio";
                return -errno;
        }
        int ready[2];
        if (pipe2(ready, O_CLOEXEC) < 0) {
                *step = "pipe";
                return -errno;
        }
        int src[HELPER_FDS_MAX] = { nullfd, logfd, logfd };
        for (int i = 0; i < nfds; i++)
                src[3 + i] = fds[i];
        src[3 + nfds] = ready[1];
        pid_t pid = fork();
        if (pid == 0)
                exec_child(path, argv, src, 4 + nfds);
        int e = errno;
        close(ready[1]);
        if (pid < 0) {
                close(ready[0]);
                *step = "fork";
                return -e;
        }
        *ready_r = ready[0];
        return pid;
}

int pd_helper_wait_ready(int ready_r, int timeout_ms, char *msg, size_t size, ssize_t *n)
{
        struct pollfd p = { .fd = ready_r, .events = POLLIN };
        int pr;
        *n = 0;
        do
                pr = poll(&p, 1, timeout_ms);
        while (pr < 0 && errno == EINTR);
        if (pr > 0)
                *n = pd_read_all(ready_r, msg, size - 1);
        msg[*n > 0 ? *n : 0] = '\0';
        return pr;
}

void pd_helper_kill(pid_t pid)
{
        kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
}

void pd_helper_stop(pid_t pid, uint64_t start, int sig, int grace_ms, int reap_ms)
{
        if (pid <= 0)
                return;
        /* pid + start time, checked again after the pidfd pins the process:
         * never signal a reused pid. */
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd < 0)
                return;
        if (!start || pd_proc_starttime(pid) != start) {
                (void)waitpid(pid, NULL, WNOHANG);      /* gone already: our zombie? */
                close(pfd);
                return;
        }
        if (sig)
                syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0);
        struct pollfd p = { .fd = pfd, .events = POLLIN };
        int pr;
        do
                pr = poll(&p, 1, grace_ms);
        while (pr < 0 && errno == EINTR);
        if (pr <= 0)
                syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
        siginfo_t si;
        /* reap it when it is our child (not when gc or a new server stops
         * it, adopted): then wait for its exit */
        if (waitid(P_PIDFD, (id_t)pfd, &si, WEXITED) < 0)
                (void)poll(&p, 1, reap_ms);
        close(pfd);
}
