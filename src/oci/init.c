/* The container's init: runs in the clone create.c made, builds the
 * container around itself, reports ready, blocks on exec.fifo until
 * `start`, then execs the workload. The order follows runc's: seccomp
 * before the uid switch unless noNewPrivileges (then right before exec). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "oci/init.h"
#include "lib/util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

__attribute__((noreturn)) static void fail(struct oci_init_args *a, const struct pd_error *err)
{
        struct oci_sync_msg m = { .kind = 'E', .code = err->code };
        snprintf(m.msg, sizeof m.msg, "%s", err->msg);
        send(a->sync, &m, sizeof m, MSG_NOSIGNAL);
        _exit(1);
}

static int join_namespaces(struct oci_init_args *a, struct pd_error *err)
{
        const struct oci_config *c = a->cfg;
        int user = oci_ns_flag(c, CLONE_NEWUSER);
        if (user >= 0 && c->ns[user].path) {
                if (setns(a->nsfd[user], CLONE_NEWUSER) < 0)
                        return pd_error_set(err, errno, "join user namespace '%s'", c->ns[user].path);
        }
        for (size_t i = 0; i < c->n_ns; i++) {
                int f = c->ns[i].flag;
                if (!c->ns[i].path || f == CLONE_NEWUSER || f == CLONE_NEWPID)
                        continue;
                if (setns(a->nsfd[i], f) < 0)
                        return pd_error_set(err, errno, "join %s namespace '%s'", oci_ns_name(f), c->ns[i].path);
        }
        if (a->unshare_flags && unshare(a->unshare_flags) < 0)
                return pd_error_set(err, errno, "unshare namespaces 0x%x", a->unshare_flags);
        if (user >= 0) {
                /* Become the namespace's root where it is mapped. */
                syscall(SYS_setresgid, 0, 0, 0);
                syscall(SYS_setresuid, 0, 0, 0);
        }
        return 0;
}

/* supervised: install paddock's filter with user notification, hand its
 * listener to the runtime, and wait until the supervisor holds it (every
 * open from here on waits for the supervisor's answer). */
int oci_hand_listener(int sync, const struct pd_bpf *notify, struct pd_error *err)
{
        int lfd = pd_seccomp_install_listener(notify);
        if (lfd < 0)
                return pd_error_set(err, -lfd, "supervised: install the notifying seccomp filter");
        struct oci_sync_msg m = { .kind = 'L' };
        char cbuf[CMSG_SPACE(sizeof(int))];
        memset(cbuf, 0, sizeof cbuf);
        struct iovec iov = { .iov_base = &m, .iov_len = sizeof m };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &lfd, sizeof(int));
        ssize_t n = sendmsg(sync, &mh, MSG_NOSIGNAL);
        close(lfd);
        if (n < 0)
                return pd_error_set(err, errno, "supervised: send the listener");
        do
                n = recv(sync, &m, sizeof m, 0);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t)sizeof m || m.kind != 'G')
                _exit(1);       /* the runtime reports why */
        return 0;
}

static void close_fds(struct oci_init_args *a)
{
        /* Fds the engine passed (--preserve-fds) stay; everything else of
         * ours is CLOEXEC already, but be sure nothing else leaks. */
        syscall(SYS_close_range, 3 + a->preserve_fds, ~0U, CLOSE_RANGE_CLOEXEC);
}

__attribute__((noreturn)) void oci_init_main(struct oci_init_args *a)
{
        struct pd_error err = { 0 };
        const struct oci_config *c = a->cfg;
        const struct oci_process *p = &c->proc;
        struct oci_sync_msg m;
        /* Die with the runtime while it still sets us up. */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        ssize_t n;
        do
                n = recv(a->sync, &m, sizeof m, 0);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t)sizeof m || m.kind != 'G')
                _exit(1);
        a->st->pid = m.pid;
        if (join_namespaces(a, &err) < 0)
                fail(a, &err);
        if (oci_rootfs_prepare(c, &err) < 0)
                fail(a, &err);
        json_t *sj = oci_state_json(a->st, OCI_CREATING);
        if (oci_hooks_run(c->hooks, "createContainer", sj, &err) < 0)
                fail(a, &err);
        if (oci_rootfs_pivot(c, &err) < 0 || oci_rootfs_finish(c, &err) < 0)
                fail(a, &err);
        if (p->terminal && oci_proc_console(a->console, p, &err) < 0)
                fail(a, &err);
        if (pd_rlimits_set(p->rlimits, p->n_rlimits, &err) < 0)
                fail(a, &err);
        if (p->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                pd_error_set(&err, errno, "set no_new_privs");
                fail(a, &err);
        }
        if (oci_proc_set_lsm(p, &err) < 0)
                fail(a, &err);
        if (!p->no_new_privs && a->seccomp && oci_seccomp_install(a->seccomp, &err) < 0)
                fail(a, &err);
        /* supervised: every open from the filter on goes through the
         * supervisor, which resolves paths in the container's root, where
         * exec.fifo is not: hold the fifo open (read and write, so this
         * does not block) and wait for `start` to write to it instead. */
        int fifo_rw = -1;
        if (a->notify) {
                fifo_rw = open(pd_fd_path(a->fifo).s, O_RDWR | O_CLOEXEC);
                if (fifo_rw < 0) {
                        pd_error_set(&err, errno, "open exec.fifo");
                        fail(a, &err);
                }
                if (oci_hand_listener(a->sync, a->notify, &err) < 0)
                        fail(a, &err);
        }
        if (oci_proc_become(p, &err) < 0)
                fail(a, &err);
        if (chdir(p->cwd) < 0) {
                pd_error_set(&err, errno, "chdir to process.cwd '%s'", p->cwd);
                fail(a, &err);
        }
        char exe[PATH_MAX];
        if (oci_proc_find_exec(p, exe, sizeof exe, &err) < 0)
                fail(a, &err);
        close_fds(a);
        /* Ready: the runtime writes the pid file and exits. The parent-death
         * signal must not kill us when it does. */
        prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
        m = (struct oci_sync_msg){ .kind = 'R' };
        if (send(a->sync, &m, sizeof m, MSG_NOSIGNAL) < 0)
                _exit(1);
        close(a->sync);
        if (fifo_rw >= 0) {
                char b;
                ssize_t k;
                do
                        k = read(fifo_rw, &b, 1);
                while (k < 0 && errno == EINTR);
                if (k != 1)
                        _exit(127);
                close(fifo_rw);
        } else {
                struct pd_fd_path fifo = pd_fd_path(a->fifo);
                int fd;
                do
                        fd = open(fifo.s, O_WRONLY | O_CLOEXEC);
                while (fd < 0 && errno == EINTR);
                if (fd < 0 || write(fd, "0", 1) != 1) {
                        fprintf(stderr, "paddock-oci: init: open exec.fifo: %m\n");
                        _exit(127);
                }
                /* fd stays open (CLOEXEC) until the exec: `start` waits for
                 * the end of file, so it returns once the workload runs. */
        }
        close(a->fifo);
        sj = oci_state_json(a->st, OCI_CREATED);
        if (oci_hooks_run(c->hooks, "startContainer", sj, &err) < 0) {
                fprintf(stderr, "paddock-oci: %s\n", err.msg);
                _exit(127);
        }
        if (p->no_new_privs && a->seccomp && oci_seccomp_install(a->seccomp, &err) < 0) {
                fprintf(stderr, "paddock-oci: %s\n", err.msg);
                _exit(127);
        }
        execve(exe, p->args, p->env);
        fprintf(stderr, "paddock-oci: exec '%s': %m\n", exe);
        _exit(127);
}
