/* supervised isolation: the runtime's side of paddock-supervisor. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "jail/helper_proc.h"
#include "lib/state.h"
#include "oci/init.h"
#include "lib/util.h"

/* A datagram from the init, with an fd if one is attached. */
ssize_t oci_recv_msg(int sock, struct oci_sync_msg *m, int *fd)
{
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = { .iov_base = m, .iov_len = sizeof *m };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        ssize_t n;
        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
                memcpy(fd, CMSG_DATA(cm), sizeof(int));
        return n;
}

/* supervised: paddock-supervisor (src/supervisor/) takes a listener (the
 * init's, or an exec'd process's); it exits when every process under that
 * filter is gone. The init's is recorded in the state and delete stops it.
 * Audit trail of both: <root>/<id>/audit.jsonl. */
int oci_supervisor_start(const struct oci_state *st, const char *uid_map, int lfd, pid_t *out_pid, uint64_t *out_start,
                         struct pd_error *err)
{
        if (lfd < 0)
                return pd_error_setx(err, EPROTO, "supervised: the init sent no listener");
        char path[PATH_MAX], audit[PATH_MAX + 16], pid_s[16], base_s[16];
        int r = pd_helper_path("paddock-supervisor", "PADDOCK_SUPERVISOR", path, sizeof path, err);
        if (r < 0) {
                close(lfd);
                return r;
        }
        /* Ids in the container map to host ids from the uid map's base. */
        unsigned long inside = 1, host = 0;
        if (!uid_map || sscanf(uid_map, "%lu %lu", &inside, &host) != 2 || inside != 0 || host == 0) {
                close(lfd);
                return pd_error_setx(err, EINVAL, "supervised: the first uidMappings entry must map container id 0 "
                                     "to a host id other than 0");
        }
        snprintf(audit, sizeof audit, "%s/audit.jsonl", st->dir);
        snprintf(pid_s, sizeof pid_s, "%d", (int)st->pid);
        snprintf(base_s, sizeof base_s, "%lu", host);
        char *argv[] = { "paddock-supervisor", "--listener-fd", "3", "--ready-fd", "4", "--pid", pid_s,
                         "--uid-base", base_s, "--sandbox", (char *)st->id, "--audit", audit, NULL };
        int dirfd = open(st->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int ready_r = -1;
        const char *step = "open";
        pid_t pid = dirfd < 0 ? -errno : pd_helper_spawn(path, argv, dirfd, "supervisor.log", &lfd, 1, &ready_r, &step);
        close(lfd);
        if (dirfd >= 0)
                close(dirfd);
        if (pid < 0)
                return pd_error_set(err, -pid, "supervised: start paddock-supervisor (%s)", step);
        char msg[512];
        ssize_t n = 0;
        int pr = pd_helper_wait_ready(ready_r, 10000, msg, sizeof msg, &n);
        close(ready_r);
        if (n == 1 && msg[0] == 'R') {
                *out_pid = pid;
                *out_start = pd_proc_starttime(pid);
                return 0;
        }
        pd_helper_kill(pid);
        if (n > 0)
                return pd_error_setx(err, EIO, "supervised: supervisor: %s", msg);
        return pd_error_setx(err, pr == 0 ? ETIMEDOUT : EIO, "supervised: paddock-supervisor did not start (see %s/supervisor.log)",
                             st->dir);
}

