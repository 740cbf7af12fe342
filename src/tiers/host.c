#include "tiers/host.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tiers/snapshot.h"
#include "jail/supervisor_launch.h"
#include "lib/util.h"

int pd_host_listen_socket(struct pd_sandbox *sb, struct pd_error *err)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sb->socket_path);
        if (n < 0 || (size_t)n >= sizeof sa.sun_path)
                return pd_error_setx(err, ENAMETOOLONG,
                                     "agent socket path '%s' is too long for a unix socket; "
                                     "set PADDOCK_RUNTIME_DIR to a shorter directory",
                                     sb->socket_path);
        _pd_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(err, errno, "agent socket");
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
                return pd_error_set(err, errno, "bind agent socket '%s'", sb->socket_path);
        if (listen(fd, 64) < 0)
                return pd_error_set(err, errno, "listen on agent socket");
        return PD_TAKE_FD(fd);
}

int pd_host_wait_exec(struct pd_sandbox *sb, int sync_fd, struct pd_error *err)
{
        for (;;) {
                struct pd_error child_err;
                char ctrl[CMSG_SPACE(sizeof(int))];
                struct iovec iov = { &child_err, sizeof child_err };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
                                     .msg_controllen = sizeof ctrl };
                ssize_t n;
                do
                        n = recvmsg(sync_fd, &mh, MSG_CMSG_CLOEXEC);
                while (n < 0 && errno == EINTR);
                if (n == 0)
                        return 0;
                if (n < 0)
                        return pd_error_set(err, errno, "wait for the sandbox's setup");
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                if (n == 1 + 2 * (ssize_t)sizeof(int) && ((char *)&child_err)[0] == 'L') {
                        /* supervised: the numbers of the child's listener and
                         * of its memfd of denied files' identities (-1: none);
                         * it waits in its execveat for the supervisor, so they
                         * are still there to take. */
                        int nums[2], fds[2] = { -1, -1 };
                        memcpy(nums, (char *)&child_err + 1, sizeof nums);
                        for (int i = 0; i < 2; i++)
                                if (nums[i] >= 0 &&
                                    (fds[i] = (int)syscall(SYS_pidfd_getfd, sb->agent_pidfd, nums[i], 0)) < 0) {
                                        int e = errno;
                                        if (i)
                                                close(fds[0]);
                                        return pd_error_set(err, e, "take the sandbox's seccomp listener");
                                }
                        int r = pd_supervisor_start(sb, fds[0], fds[1], err);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (n == 1 && ((char *)&child_err)[0] == 'S' && c && c->cmsg_type == SCM_RIGHTS &&
                    c->cmsg_len == CMSG_LEN(sizeof(int))) {
                        int tfd;
                        memcpy(&tfd, CMSG_DATA(c), sizeof tfd);
                        int r = pd_container_attach_stage(sb, tfd, err);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (n == (ssize_t)sizeof child_err) {
                        child_err.msg[sizeof child_err.msg - 1] = '\0';
                        return pd_error_setx(err, child_err.code > 0 ? child_err.code : EIO, "sandbox setup: %s",
                                             child_err.msg);
                }
                return pd_error_setx(err, EIO, "sandbox setup failed without a reason");
        }
}

int pd_host_connect(struct pd_sandbox *sb, struct pd_error *err)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sb->socket_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(err, errno, "socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "connect to the agent of sandbox %s", sb->id);
        }
        return fd;
}

int pd_host_freeze(struct pd_sandbox *sb, bool frozen, struct pd_error *err)
{
        if (!sb->have_cgroup)
                return pd_error_setx(err, ENOTSUP, "sandbox %s has no cgroup (none could be made): "
                                     "it cannot be %s", sb->id, frozen ? "paused" : "resumed");
        return pd_cgroup_freeze(&sb->cg, frozen, err);
}

void pd_host_kill_agent(struct pd_sandbox *sb)
{
        /* Frozen tasks do not die of SIGKILL until thawed (cgroup v1): a
         * paused sandbox must be thawed before it can be killed. */
        if (sb->have_cgroup)
                (void)pd_cgroup_freeze(&sb->cg, false, NULL);
        if (sb->agent_pidfd >= 0) {
                syscall(SYS_pidfd_send_signal, sb->agent_pidfd, SIGKILL, NULL, 0);
                siginfo_t si;
                if (waitid(P_PIDFD, (id_t)sb->agent_pidfd, &si, WEXITED) < 0 && errno == ECHILD) {
                        /* not our child (adopted): the pidfd turns readable at exit */
                        struct pollfd p = { .fd = sb->agent_pidfd, .events = POLLIN };
                        (void)poll(&p, 1, 10000);
                }
                close(sb->agent_pidfd);
                sb->agent_pidfd = -1;
        } else if (sb->agent_pid > 0 && sb->agent_start && pd_proc_starttime(sb->agent_pid) == sb->agent_start) {
                kill(sb->agent_pid, SIGKILL);
        }
        sb->agent_pid = 0;
}

int pd_host_release(struct pd_sandbox *sb, struct pd_error *err)
{
        int ret = 0, r;
        if (sb->have_cgroup) {
                r = pd_cgroup_destroy(&sb->cg, err);
                if (r < 0 && ret == 0)
                        ret = r;
                pd_cgroup_close(&sb->cg);
                sb->have_cgroup = false;
        }
        if (sb->have_uids) {
                char owner[64];
                snprintf(owner, sizeof owner, "%s:%s", sb->state->instance, sb->id);
                r = pd_uidrange_free(sb->uids.slot, owner, ret == 0 ? err : NULL);
                if (r < 0 && ret == 0)
                        ret = r;
                sb->have_uids = false;
        }
        if (sb->dirfd >= 0) {
                close(sb->dirfd);
                sb->dirfd = -1;
        }
        r = pd_rm_rf(sb->dir, ret == 0 ? err : NULL);
        if (r < 0 && ret == 0)
                ret = r;
        return ret;
}

int pd_host_stats(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err)
{
        struct pd_cgroup_stats cs;
        memset(out, 0, sizeof *out);
        if (!sb->have_cgroup)
                return pd_error_setx(err, ESRCH, "sandbox %s has no cgroup", sb->id);
        pd_cgroup_stats(&sb->cg, &cs);
        out->memory_current = cs.memory_current;
        out->memory_peak = cs.memory_peak;
        out->cpu_ns = cs.cpu_ns;
        out->pids_current = cs.pids_current;
        out->pids_max_events = cs.pids_max_events;
        out->oom_kills = cs.oom_kills;
        return 0;
}

int pd_host_adopt(struct pd_sandbox *sb, struct pd_error *err)
{
        if (sb->agent_pid <= 0 || !sb->agent_start || pd_proc_starttime(sb->agent_pid) != sb->agent_start)
                return pd_error_setx(err, ESRCH, "the agent of sandbox %s is gone", sb->id);
        sb->agent_pidfd = (int)syscall(SYS_pidfd_open, sb->agent_pid, 0);
        if (sb->agent_pidfd < 0)
                return pd_error_set(err, errno, "pidfd of the agent of sandbox %s", sb->id);
        /* Re-check after opening the pidfd: the pid could have been reused
         * between the first check and pidfd_open. */
        if (pd_proc_starttime(sb->agent_pid) != sb->agent_start) {
                close(sb->agent_pidfd);
                sb->agent_pidfd = -1;
                return pd_error_setx(err, ESRCH, "the agent of sandbox %s is gone", sb->id);
        }
        return 0;
}
