/* See agent_inproc.h. Why it is safe to skip the exec (docs/security.md,
 * "PID 1 of a one-shot run"): the CLI process it is copied from holds no
 * secret of its own, and what it does hold of its caller (argv, environ)
 * is wiped here; its memory stays readable only to a tracer with
 * CAP_SYS_PTRACE in the host's user namespace (the mm was made there and
 * the agent clears its dumpable flag), which nothing in the sandbox has;
 * every fd it held is closed; the seccomp filter, capabilities, rlimits,
 * cgroups and namespaces are exactly those of the exec path. */
#include "jail/agent_inproc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/fds.h"

extern char **environ;

/* Fields 48..51 of /proc/self/stat: arg_start, arg_end, env_start,
 * env_end (proc(5)). Read from the sandbox's own /proc, mounted by now,
 * in which nothing but us runs yet. */
static int arg_env_area(unsigned long v[4])
{
        char buf[2048];
        int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        int e = errno;
        close(fd);
        if (n <= 0)
                return n < 0 ? -e : -EIO;
        buf[n] = 0;
        /* the fields after "(comm)": the name may hold spaces or ')' */
        char *p = strrchr(buf, ')');
        if (!p)
                return -EIO;
        p++;
        /* p is before field 3; field k starts after k - 2 more spaces */
        for (int field = 2; field < 48; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return -EIO;
                p++;
        }
        for (int i = 0; i < 4; i++) {
                unsigned long x = 0;
                if (*p < '0' || *p > '9')
                        return -EIO;
                while (*p >= '0' && *p <= '9')
                        x = x * 10 + (unsigned long)(*p++ - '0');
                v[i] = x;
                if (i < 3 && *p++ != ' ')
                        return -EIO;
        }
        if (v[1] < v[0] || v[3] < v[2])
                return -EIO;
        return 0;
}

int pd_agent_inproc_prepare(int n_cg, int sync_fd, struct pd_error *err)
{
        /* fds: what pd_fds_for_agent marked close-on-exec goes now */
        unsigned lo = 4u + (unsigned)n_cg;
        if (sync_fd < (int)lo)
                return pd_error_setx(err, EINVAL, "sync fd %d inside the agent's range", sync_fd);
        if ((unsigned)sync_fd > lo && syscall(SYS_close_range, lo, (unsigned)sync_fd - 1, 0) < 0)
                return pd_error_set(err, errno, "close fds for the agent");
        if (syscall(SYS_close_range, (unsigned)sync_fd + 1, ~0U, 0) < 0)
                return pd_error_set(err, errno, "close fds for the agent");
        /* signals: exec resets caught ones and keeps ignored ones; the
         * mask is inherited either way */
        for (int sig = 1; sig < NSIG; sig++) {
                struct sigaction old;
                if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &old) < 0)
                        continue;       /* glibc's own (32, 33) refuse */
                if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
                        signal(sig, SIG_DFL);
        }
        /* the caller's command line and environment */
        unsigned long area[4];
        int r = arg_env_area(area);
        if (r < 0)
                return pd_error_set(err, -r, "find paddock's command line in /proc/self/stat");
        static const char name[] = "paddock-agent";
        memset((void *)area[2], 0, area[3] - area[2]);
        memset((void *)area[0], 0, area[1] - area[0]);
        if (area[1] - area[0] > sizeof name)
                memcpy((void *)area[0], name, sizeof name);
        static char *agent_env[] = { PD_AGENT_ENV_PATH, NULL };
        environ = agent_env;
        if (prctl(PR_SET_NAME, name, 0, 0, 0) < 0)
                return pd_error_set(err, errno, "name the agent");
        return 0;
}

_Noreturn void pd_agent_inproc_run(pd_agent_main_fn fn, int sync_fd, int n_cg, const char *opt,
                                   const char *optval)
{
        struct pd_agent_argv a;
        int argc = pd_fds_agent_argv(&a, n_cg, opt, optval);
        close(sync_fd);
        if (argc < 0)
                _exit(125);
        /* never exit(): paddock's atexit handlers and stdio buffers are
         * the host process's, not ours */
        _exit(fn(argc, a.argv));
}
