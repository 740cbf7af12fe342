#include "jail/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/cgroup.h"

int pd_fds_for_agent(int listen_fd, const int *cg_fds, int n_cg, int *const *keep, int n_keep)
{
        if (n_cg < 0 || n_cg > PD_CG_MAX_CTRL)
                return -EINVAL;
        /* Everything we still need goes above the range first: any of it may
         * sit at a number we are about to overwrite (even 0-2, if paddock was
         * started with stdio closed). */
        const int hi = 4 + n_cg;
        int sock = fcntl(listen_fd, F_DUPFD_CLOEXEC, hi), cg[PD_CG_MAX_CTRL];
        if (sock < 0)
                return -errno;
        for (int i = 0; i < n_cg; i++)
                if ((cg[i] = fcntl(cg_fds[i], F_DUPFD_CLOEXEC, hi)) < 0)
                        return -errno;
        for (int i = 0; i < n_keep; i++)
                if ((*keep[i] = fcntl(*keep[i], F_DUPFD_CLOEXEC, hi)) < 0)
                        return -errno;
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                return -errno;
        for (int fd = 0; fd < 3; fd++)
                if (dup2(devnull, fd) < 0)
                        return -errno;
        /* dup2 clears CLOEXEC on the copy: exactly the fds the agent gets. */
        if (dup2(sock, 3) < 0)
                return -errno;
        for (int i = 0; i < n_cg; i++)
                if (dup2(cg[i], 4 + i) < 0)
                        return -errno;
        if (syscall(SYS_close_range, hi, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                return -errno;
        return 0;
}

int pd_fds_close_except(const int *keep, int n)
{
        int sorted[16];
        if (n < 0 || n > 16)
                return -EINVAL;
        for (int i = 0; i < n; i++) {
                int v = keep[i], j = i;
                while (j > 0 && sorted[j - 1] > v) {
                        sorted[j] = sorted[j - 1];
                        j--;
                }
                sorted[j] = v;
        }
        unsigned lo = 3;
        for (int i = 0; i < n; i++) {
                if (sorted[i] < 0 || (unsigned)sorted[i] < lo) {
                        if (sorted[i] >= 0 && (unsigned)sorted[i] + 1 > lo)
                                lo = (unsigned)sorted[i] + 1;
                        continue;
                }
                if ((unsigned)sorted[i] > lo && syscall(SYS_close_range, lo, (unsigned)sorted[i] - 1, 0) < 0)
                        return -errno;
                lo = (unsigned)sorted[i] + 1;
        }
        if (syscall(SYS_close_range, lo, ~0U, 0) < 0)
                return -errno;
        return 0;
}

int pd_fds_agent_argv(struct pd_agent_argv *a, int n_cg, const char *opt, const char *optval)
{
        int n = 0;
        if (n_cg < 0 || n_cg > PD_CG_MAX_CTRL)
                return -EINVAL;
        a->argv[n++] = "paddock-agent";
        a->argv[n++] = "--listen-fd";
        a->argv[n++] = "3";
        for (int i = 0; i < n_cg; i++) {
                snprintf(a->cgargs[i], sizeof a->cgargs[i], "%d", 4 + i);
                a->argv[n++] = "--cgroup-fd";
                a->argv[n++] = a->cgargs[i];
        }
        if (opt && optval) {
                a->argv[n++] = (char *)opt;
                a->argv[n++] = (char *)optval;
        }
        a->argv[n] = NULL;
        return n;
}

int pd_fds_exec_agent(int agent_fd, int n_cg, const char *opt, const char *optval)
{
        struct pd_agent_argv a;
        int r = pd_fds_agent_argv(&a, n_cg, opt, optval);
        if (r < 0)
                return r;
        char *envp[] = { PD_AGENT_ENV_PATH, NULL };
        syscall(SYS_execveat, agent_fd, "", a.argv, envp, AT_EMPTY_PATH);
        return -errno;
}
