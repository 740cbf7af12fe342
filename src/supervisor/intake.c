/* paddock-supervisor, main: the intake of the calls that change paths
 * (notified when the policy has ro or deny rules) and of sends (notified
 * when it has connect rules). See docs/security.md "`supervised` tier".
 *
 * As for opens (main.c): copy what the call points to out of the caller,
 * open the caller's root, cwd or dirfds through /proc/TID as O_PATH, take
 * the fds the call acts on with pidfd_getfd, check that the notification
 * is still pending (so all of that was the caller's), and hand everything
 * to the broker, which decides on what it resolves and performs the call
 * itself (modify.c, send.c). Nothing is ever continued: the kernel would
 * read the caller's memory again, and a racing thread may have changed it
 * (and the fd table, for the fd-based calls) since we read it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "supervisor/supervisor_main.h"

#define XATTR_VALUE_MAX 65536           /* the kernel's XATTR_SIZE_MAX */
#define XATTR_NAME_MAX_ 255
#define IOV_MAX_ 1024                   /* UIO_MAXIOV */
#define CONTROL_MAX 8192

bool sv_is_pathop(int nr)
{
        switch (nr) {
        case SYS_mkdir: case SYS_mkdirat: case SYS_mknod: case SYS_mknodat: case SYS_rmdir:
        case SYS_unlink: case SYS_unlinkat: case SYS_symlink: case SYS_symlinkat: case SYS_link:
        case SYS_linkat: case SYS_rename: case SYS_renameat: case SYS_renameat2: case SYS_chmod:
        case SYS_fchmod: case SYS_fchmodat: case SYS_chown: case SYS_lchown: case SYS_fchown:
        case SYS_fchownat: case SYS_truncate: case SYS_ftruncate: case SYS_fallocate: case SYS_setxattr:
        case SYS_lsetxattr: case SYS_fsetxattr: case SYS_removexattr: case SYS_lremovexattr:
        case SYS_fremovexattr: case SYS_utime: case SYS_utimes: case SYS_futimesat: case SYS_utimensat:
        case SYS_bind:
                return true;
        default:
                return false;
        }
}

bool sv_is_send(int nr)
{
        return nr == SYS_sendto || nr == SYS_sendmsg || nr == SYS_sendmmsg;
}

/* What a call names: up to two paths, each relative to a dirfd (AT_FDCWD:
 * the cwd), and/or an fd it acts on. */
struct names {
        int d1, d2;             /* dirfds of path 1 and path 2 */
        uint64_t p1, p2;        /* pointers; 0 = none */
        bool p2_is_path;        /* else path2 is a string (symlink content, xattr name) */
        int fd;                 /* the fd the call acts on, -1 none */
        bool empty_ok;          /* AT_EMPTY_PATH: "" names d1 itself */
};

static void finish_fail(struct sv_main *m, const struct seccomp_notif *n, int *fds, int nfds, int e)
{
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        if (!sv_id_valid(m, n->id))
                return;
        sv_audit_fail(m, "supervisor.modify", m->job.path[0] ? m->job.path : NULL, e);
        sv_respond(m, n->id, e, 0);
}

/* Times as two struct timespec in the tail (none: "now"). */
static int read_times(pid_t tid, int nr, uint64_t ptr, struct sv_job *j)
{
        struct timespec ts[2];
        if (!ptr) {
                j->tail_len = 0;
                return 0;
        }
        if (nr == SYS_utime) {
                struct utimbuf u;
                if (sv_read_mem(tid, ptr, &u, sizeof u) < 0)
                        return -EFAULT;
                ts[0] = (struct timespec){ u.actime, 0 };
                ts[1] = (struct timespec){ u.modtime, 0 };
        } else if (nr == SYS_utimes || nr == SYS_futimesat) {
                struct timeval tv[2];
                if (sv_read_mem(tid, ptr, tv, sizeof tv) < 0)
                        return -EFAULT;
                for (int i = 0; i < 2; i++) {
                        if (tv[i].tv_usec < 0 || tv[i].tv_usec >= 1000000)
                                return -EINVAL;
                        ts[i] = (struct timespec){ tv[i].tv_sec, tv[i].tv_usec * 1000 };
                }
        } else if (sv_read_mem(tid, ptr, ts, sizeof ts) < 0) {
                return -EFAULT;
        }
        memcpy(j->tail, ts, sizeof ts);
        j->tail_len = sizeof ts;
        return 0;
}

/* The directory a path is relative to, as an fd for the broker: the
 * caller's root for an absolute path (none if it is the sandbox's), its
 * cwd or the dirfd for a relative one. -errno on failure, 0 with *out = -1
 * when no fd is needed. */
static int base_fd(struct sv_main *m, pid_t tid, const char *path, int dirfd, bool *sandbox_root, int *out)
{
        *out = -1;
        if (path[0] == '/') {
                if (sv_root_is_sandbox(m, tid)) {
                        *sandbox_root = true;
                        return 0;
                }
                *out = sv_open_proc(m, tid, "root", O_DIRECTORY);
        } else if (dirfd == AT_FDCWD) {
                *out = sv_open_proc(m, tid, "cwd", 0);
        } else if (dirfd >= 0) {
                char what[32];
                snprintf(what, sizeof what, "fd/%d", dirfd);
                *out = sv_open_proc(m, tid, what, 0);
        } else {
                return -EBADF;
        }
        return *out < 0 ? -EBADF : 0;
}

void sv_handle_pathop(struct sv_main *m, const struct seccomp_notif *n)
{
        struct sv_job *j = &m->job;
        pid_t tid = (pid_t)n->pid;
        const __u64 *a = n->data.args;
        struct names nm = { .d1 = AT_FDCWD, .d2 = AT_FDCWD, .fd = -1 };
        int fds[4], nfds = 0, r;
        memset(j->args, 0, sizeof j->args);
        j->path[0] = '\0';
        j->has_root = j->has_dir = j->has_extra = j->sandbox_root = 0;
        int ns_tgid = 0;
        r = sv_read_status(m, tid, &j->creds, &j->ns_pid, &ns_tgid);
        j->ns_tgid = ns_tgid;
        if (r < 0)
                return finish_fail(m, n, fds, 0, r == -ESRCH ? ESRCH : EACCES);
        uint64_t times = 0, xname = 0, xvalue = 0;
        switch (n->data.nr) {
        case SYS_mkdir: j->pathop = PO_MKDIR; nm.p1 = a[0]; j->args[0] = a[1]; break;
        case SYS_mkdirat: j->pathop = PO_MKDIR; nm.d1 = (int)a[0]; nm.p1 = a[1]; j->args[0] = a[2]; break;
        case SYS_mknod: j->pathop = PO_MKNOD; nm.p1 = a[0]; j->args[0] = a[1]; j->args[1] = a[2]; break;
        case SYS_mknodat:
                j->pathop = PO_MKNOD; nm.d1 = (int)a[0]; nm.p1 = a[1]; j->args[0] = a[2]; j->args[1] = a[3];
                break;
        case SYS_rmdir: j->pathop = PO_UNLINK; nm.p1 = a[0]; j->args[0] = AT_REMOVEDIR; break;
        case SYS_unlink: j->pathop = PO_UNLINK; nm.p1 = a[0]; break;
        case SYS_unlinkat: j->pathop = PO_UNLINK; nm.d1 = (int)a[0]; nm.p1 = a[1]; j->args[0] = a[2]; break;
        case SYS_symlink: j->pathop = PO_SYMLINK; nm.p1 = a[1]; nm.p2 = a[0]; break;
        case SYS_symlinkat: j->pathop = PO_SYMLINK; nm.d1 = (int)a[1]; nm.p1 = a[2]; nm.p2 = a[0]; break;
        case SYS_link: j->pathop = PO_LINK; nm.p1 = a[0]; nm.p2 = a[1]; nm.p2_is_path = true; break;
        case SYS_linkat:
                j->pathop = PO_LINK; nm.d1 = (int)a[0]; nm.p1 = a[1]; nm.d2 = (int)a[2]; nm.p2 = a[3];
                nm.p2_is_path = true; j->args[0] = a[4]; nm.empty_ok = (a[4] & AT_EMPTY_PATH) != 0;
                break;
        case SYS_rename: j->pathop = PO_RENAME; nm.p1 = a[0]; nm.p2 = a[1]; nm.p2_is_path = true; break;
        case SYS_renameat:
        case SYS_renameat2:
                j->pathop = PO_RENAME; nm.d1 = (int)a[0]; nm.p1 = a[1]; nm.d2 = (int)a[2]; nm.p2 = a[3];
                nm.p2_is_path = true; j->args[0] = n->data.nr == SYS_renameat2 ? (uint32_t)a[4] : 0;
                break;
        case SYS_chmod: j->pathop = PO_CHMOD; nm.p1 = a[0]; j->args[0] = a[1]; break;
        case SYS_fchmod: j->pathop = PO_CHMOD; nm.fd = (int)a[0]; j->args[0] = a[1]; break;
        case SYS_fchmodat: j->pathop = PO_CHMOD; nm.d1 = (int)a[0]; nm.p1 = a[1]; j->args[0] = a[2]; break;
        case SYS_chown:
        case SYS_lchown:
                j->pathop = PO_CHOWN; nm.p1 = a[0]; j->args[0] = a[1]; j->args[1] = a[2];
                j->args[2] = n->data.nr == SYS_lchown ? AT_SYMLINK_NOFOLLOW : 0;
                break;
        case SYS_fchown: j->pathop = PO_CHOWN; nm.fd = (int)a[0]; j->args[0] = a[1]; j->args[1] = a[2]; break;
        case SYS_fchownat:
                j->pathop = PO_CHOWN; nm.d1 = (int)a[0]; nm.p1 = a[1]; j->args[0] = a[2]; j->args[1] = a[3];
                j->args[2] = a[4]; nm.empty_ok = (a[4] & AT_EMPTY_PATH) != 0;
                break;
        case SYS_truncate: j->pathop = PO_TRUNCATE; nm.p1 = a[0]; j->args[0] = a[1]; break;
        case SYS_ftruncate: j->pathop = PO_TRUNCATE; nm.fd = (int)a[0]; j->args[0] = a[1]; break;
        case SYS_fallocate:
                j->pathop = PO_FALLOCATE; nm.fd = (int)a[0]; j->args[0] = a[1]; j->args[1] = a[2]; j->args[2] = a[3];
                break;
        case SYS_setxattr:
        case SYS_lsetxattr:
        case SYS_fsetxattr:
                j->pathop = PO_SETXATTR;
                if (n->data.nr == SYS_fsetxattr)
                        nm.fd = (int)a[0];
                else
                        nm.p1 = a[0];
                xname = a[1]; xvalue = a[2]; j->args[0] = a[3]; j->args[1] = a[4];
                j->args[2] = n->data.nr == SYS_lsetxattr ? AT_SYMLINK_NOFOLLOW : 0;
                break;
        case SYS_removexattr:
        case SYS_lremovexattr:
        case SYS_fremovexattr:
                j->pathop = PO_REMOVEXATTR;
                if (n->data.nr == SYS_fremovexattr)
                        nm.fd = (int)a[0];
                else
                        nm.p1 = a[0];
                xname = a[1];
                j->args[2] = n->data.nr == SYS_lremovexattr ? AT_SYMLINK_NOFOLLOW : 0;
                break;
        case SYS_utime:
        case SYS_utimes:
                j->pathop = PO_UTIMENS; nm.p1 = a[0]; times = a[1];
                break;
        case SYS_futimesat:
        case SYS_utimensat:
                j->pathop = PO_UTIMENS;
                times = a[2];
                j->args[2] = n->data.nr == SYS_utimensat ? (uint32_t)a[3] : 0;
                if (a[1]) {
                        nm.d1 = (int)a[0];
                        nm.p1 = a[1];
                } else if ((int)a[0] == AT_FDCWD) {
                        return finish_fail(m, n, fds, 0, EFAULT);
                } else {
                        /* utimensat(fd, NULL, ...): futimens (flags must be 0) */
                        if (j->args[2])
                                return finish_fail(m, n, fds, 0, EINVAL);
                        nm.fd = (int)a[0];
                }
                break;
        case SYS_bind: {
                j->pathop = PO_BIND;
                nm.fd = (int)a[0];
                uint64_t alen = (uint32_t)a[2];
                if ((int)a[2] < 0 || alen > sizeof(struct sockaddr_storage))
                        return finish_fail(m, n, fds, 0, EINVAL);
                memset(j->addr, 0, sizeof j->addr);
                if (alen && sv_read_mem(tid, a[1], j->addr, (size_t)alen) < 0)
                        return finish_fail(m, n, fds, 0, EFAULT);
                j->addrlen = (uint32_t)alen;
                /* A named unix socket: a new name in the filesystem. */
                const struct sockaddr *sa = (const void *)j->addr;
                if (alen > 2 && sa->sa_family == AF_UNIX && j->addr[2] != '\0') {
                        size_t plen = strnlen((const char *)j->addr + 2, alen - 2);
                        memcpy(j->path, j->addr + 2, plen);
                        j->path[plen] = '\0';
                        sv_rewrite_proc_self(j->path, ns_tgid, j->ns_pid);
                        bool sr = false;
                        int bf;
                        if ((r = base_fd(m, tid, j->path, AT_FDCWD, &sr, &bf)) < 0)
                                return finish_fail(m, n, fds, nfds, -r);
                        j->sandbox_root = sr;
                        if (bf >= 0) {
                                fds[nfds++] = bf;
                                if (j->path[0] == '/')
                                        j->has_root = 1;
                                else
                                        j->has_dir = 1;
                        }
                }
                break;
        }
        default:
                return finish_fail(m, n, fds, 0, ENOSYS);
        }

        /* The strings. */
        if (nm.p1) {
                ssize_t len = sv_read_string(tid, nm.p1, j->path, sizeof j->path);
                if (len < 0)
                        return finish_fail(m, n, fds, nfds, (int)-len);
                if (len == 0 && !nm.empty_ok)
                        return finish_fail(m, n, fds, nfds, ENOENT);
                if (len == 0)
                        nm.fd = nm.d1;          /* AT_EMPTY_PATH: the dirfd itself */
                sv_rewrite_proc_self(j->path, ns_tgid, j->ns_pid);
        } else if (n->data.nr != SYS_bind && nm.fd < 0) {
                return finish_fail(m, n, fds, nfds, EFAULT);
        }
        if (nm.p2 || xname) {
                uint64_t p = nm.p2 ? nm.p2 : xname;
                size_t max = xname ? XATTR_NAME_MAX_ + 1 : sizeof j->path2;
                ssize_t len = sv_read_string(tid, p, j->path2, max);
                if (len == -ENAMETOOLONG && xname)
                        len = -ERANGE;
                if (len < 0)
                        return finish_fail(m, n, fds, nfds, (int)-len);
                if (len == 0 && nm.p2_is_path)
                        return finish_fail(m, n, fds, nfds, ENOENT);
                if (len == 0 && xname)
                        return finish_fail(m, n, fds, nfds, ERANGE);
                j->has_path2 = 1;
                if (nm.p2_is_path)
                        sv_rewrite_proc_self(j->path2, ns_tgid, j->ns_pid);
        }
        if (j->pathop == PO_SETXATTR) {
                size_t size = j->args[0];
                if (size > XATTR_VALUE_MAX)
                        return finish_fail(m, n, fds, nfds, E2BIG);
                if (size && sv_read_mem(tid, xvalue, j->tail, size) < 0)
                        return finish_fail(m, n, fds, nfds, EFAULT);
                j->tail_len = (uint32_t)size;
        }
        if (j->pathop == PO_UTIMENS && (r = read_times(tid, n->data.nr, times, j)) < 0)
                return finish_fail(m, n, fds, nfds, -r);

        /* The directories the paths are relative to. */
        if (nm.p1 && j->path[0]) {
                bool sr = false;
                int bf;
                if ((r = base_fd(m, tid, j->path, nm.d1, &sr, &bf)) < 0)
                        return finish_fail(m, n, fds, nfds, -r);
                j->sandbox_root = sr;
                if (bf >= 0) {
                        fds[nfds++] = bf;
                        if (j->path[0] == '/')
                                j->has_root = 1;
                        else
                                j->has_dir = 1;
                }
        }
        if (nm.p2_is_path && j->path2[0] != '/') {
                int bf;
                bool sr = false;
                if ((r = base_fd(m, tid, j->path2, nm.d2, &sr, &bf)) < 0)
                        return finish_fail(m, n, fds, nfds, -r);
                /* after root and dir, in that order */
                fds[nfds++] = bf;
                j->has_dir2 = 1;
        } else if (nm.p2_is_path && !j->has_root && !j->sandbox_root) {
                bool sr = false;
                int bf;
                if ((r = base_fd(m, tid, j->path2, AT_FDCWD, &sr, &bf)) < 0)
                        return finish_fail(m, n, fds, nfds, -r);
                if (sr) {
                        j->sandbox_root = 1;
                } else {
                        /* the root goes first */
                        memmove(fds + 1, fds, (size_t)nfds * sizeof fds[0]);
                        fds[0] = bf;
                        nfds++;
                        j->has_root = 1;
                }
        }
        /* The fd it acts on: the caller's own file (a magic link such as
         * /proc/self/fd/N as a link's source: the caller's fd N). */
        int mfd = j->pathop == PO_LINK && j->path[0] ? sv_magic_fd(j->path, ns_tgid, j->ns_pid) : -1;
        if (nm.fd >= 0 || nm.fd == AT_FDCWD || mfd >= 0) {
                int x;
                if (mfd >= 0) {
                        char what[32];
                        snprintf(what, sizeof what, "fd/%d", mfd);
                        x = sv_open_proc(m, tid, what, 0);
                        if (x < 0)
                                x = -EBADF;
                } else if (nm.fd == AT_FDCWD) {
                        x = sv_open_proc(m, tid, "cwd", 0);
                        if (x < 0)
                                x = -ESRCH;
                } else {
                        x = sv_take_fd(tid, nm.fd);
                }
                if (x < 0)
                        return finish_fail(m, n, fds, nfds, -x);
                fds[nfds++] = x;
                j->has_extra = 1;
        } else if (nm.fd < -1 || (nm.fd == -1 && !nm.p1 && n->data.nr != SYS_bind)) {
                return finish_fail(m, n, fds, nfds, EBADF);
        }
        if (n->data.nr == SYS_bind && !j->has_extra)
                return finish_fail(m, n, fds, nfds, EBADF);
        /* Everything above was the caller's only if it still waits. */
        if (!sv_id_valid(m, n->id)) {
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return;
        }
        j->validated = 1;
        j->op = SV_PATHOP;
        j->nfds = (uint32_t)nfds;
        sv_send_job(m, fds, (unsigned)nfds);
}

/* ---- sends ---------------------------------------------------------------- */

static void send_fail(struct sv_main *m, const struct seccomp_notif *n, int *fds, unsigned nfds, int e)
{
        for (unsigned i = 0; i < nfds; i++)
                close(fds[i]);
        if (!sv_id_valid(m, n->id))
                return;
        sv_audit_fail(m, "supervisor.send", NULL, e);
        sv_respond(m, n->id, e, 0);
}

static uint8_t *tail_put(struct sv_job *j, const void *p, size_t n)
{
        uint8_t *at = j->tail + j->tail_len;
        if (p)
                memcpy(at, p, n);
        j->tail_len += (uint32_t)((n + 7) & ~(size_t)7);
        return at;
}

/* One message into the tail: its address, up to *budget data bytes (a
 * stream socket's send may be shorter than asked, a datagram's may not),
 * its control part with SCM_RIGHTS fds taken from the caller. 0 or -errno. */
static int add_msg(struct sv_main *m, pid_t tid, const struct msghdr *mh, bool local_iov, size_t *budget, int *fds,
                   unsigned *nfds)
{
        struct sv_job *j = &m->job;
        struct sv_msg hdr = { 0 };
        uint8_t name[SV_ADDR_MAX];
        if (mh->msg_name) {
                if (mh->msg_namelen > sizeof(struct sockaddr_storage))
                        return -EINVAL;
                hdr.namelen = mh->msg_namelen;
                if (hdr.namelen && sv_read_mem(tid, (uintptr_t)mh->msg_name, name, hdr.namelen) < 0)
                        return -EFAULT;
        }
        if (mh->msg_iovlen > IOV_MAX_)
                return -EMSGSIZE;
        static struct iovec iov[IOV_MAX_];
        if (local_iov)  /* sendto: built here from its registers */
                memcpy(iov, mh->msg_iov, mh->msg_iovlen * sizeof iov[0]);
        else if (mh->msg_iovlen && sv_read_mem(tid, (uintptr_t)mh->msg_iov, iov, mh->msg_iovlen * sizeof iov[0]) < 0)
                return -EFAULT;
        size_t total = 0;
        for (size_t i = 0; i < mh->msg_iovlen; i++) {
                if ((ssize_t)iov[i].iov_len < 0)
                        return -EINVAL;
                total += iov[i].iov_len;
        }
        if (total > *budget) {
                if (j->sock_type != SOCK_STREAM)
                        return -EMSGSIZE;
                total = *budget;
        }
        if (mh->msg_controllen > CONTROL_MAX)
                return -ENOBUFS;
        struct sv_msg *h = (struct sv_msg *)tail_put(j, NULL, sizeof hdr);
        tail_put(j, name, hdr.namelen);
        uint8_t *data = j->tail + j->tail_len;
        size_t got = 0;
        for (size_t i = 0; i < mh->msg_iovlen && got < total; i++) {
                size_t take = iov[i].iov_len < total - got ? iov[i].iov_len : total - got;
                if (take && sv_read_mem(tid, (uintptr_t)iov[i].iov_base, data + got, take) < 0)
                        return -EFAULT;
                got += take;
        }
        tail_put(j, NULL, got);
        hdr.datalen = (uint32_t)got;
        *budget -= got;
        if (mh->msg_control && mh->msg_controllen) {
                uint8_t *ctl = j->tail + j->tail_len;
                if (sv_read_mem(tid, (uintptr_t)mh->msg_control, ctl, mh->msg_controllen) < 0)
                        return -EFAULT;
                hdr.controllen = (uint32_t)mh->msg_controllen;
                tail_put(j, NULL, hdr.controllen);
                struct msghdr c = { .msg_control = ctl, .msg_controllen = hdr.controllen };
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&c); cm; cm = CMSG_NXTHDR(&c, cm)) {
                        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                                continue;
                        if (cm->cmsg_len < CMSG_LEN(0) || (uint8_t *)cm + cm->cmsg_len > ctl + hdr.controllen)
                                return -EINVAL;
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; i++) {
                                int cfd;
                                memcpy(&cfd, CMSG_DATA(cm) + i * sizeof(int), sizeof cfd);
                                if (j->nrights >= SV_RIGHTS_MAX)
                                        return -ETOOMANYREFS;
                                int x = sv_take_fd(tid, cfd);
                                if (x < 0)
                                        return x == -ESRCH ? -ESRCH : -EBADF;
                                fds[(*nfds)++] = x;
                                j->nrights++;
                                hdr.nrights++;
                        }
                }
        }
        *h = hdr;
        return 0;
}

void sv_handle_send(struct sv_main *m, const struct seccomp_notif *n)
{
        struct sv_job *j = &m->job;
        pid_t tid = (pid_t)n->pid;
        const __u64 *a = n->data.args;
        static int fds[SV_JOB_FDS];
        unsigned nfds = 0;
        j->path[0] = '\0';
        j->has_root = j->has_dir = j->has_extra = j->sandbox_root = 0;
        int ns_tgid = 0, r = sv_read_status(m, tid, &j->creds, &j->ns_pid, &ns_tgid);
        j->ns_tgid = ns_tgid;
        if (r < 0)
                return send_fail(m, n, fds, 0, r == -ESRCH ? ESRCH : EACCES);
        /* The socket, first among the fds after root and cwd: taken first,
         * placed last (the broker finds it as "extra"). */
        int sock = sv_take_fd(tid, (int)a[0]);
        if (sock < 0)
                return send_fail(m, n, fds, 0, -sock);
        struct stat st;
        socklen_t tl = sizeof j->sock_type;
        if (fstat(sock, &st) < 0 || !S_ISSOCK(st.st_mode) ||
            getsockopt(sock, SOL_SOCKET, SO_TYPE, &j->sock_type, &tl) < 0) {
                close(sock);
                return send_fail(m, n, fds, 0, ENOTSOCK);
        }
        size_t budget = SV_SEND_MAX;
        static int rights[SV_RIGHTS_MAX];
        unsigned nrights = 0;
        if (n->data.nr == SYS_sendto) {
                struct iovec iov = { (void *)(uintptr_t)a[1], (size_t)a[2] };
                struct msghdr mh = { .msg_name = (void *)(uintptr_t)a[4], .msg_namelen = (socklen_t)a[5],
                                     .msg_iov = &iov, .msg_iovlen = 1 };
                if ((int)a[5] < 0)
                        r = -EINVAL;
                else
                        r = add_msg(m, tid, &mh, true, &budget, rights, &nrights);
                j->args[0] = (uint32_t)a[3];
                j->nmsg = 1;
        } else if (n->data.nr == SYS_sendmsg) {
                struct msghdr mh;
                r = sv_read_mem(tid, a[1], &mh, sizeof mh);
                if (r == 0)
                        r = add_msg(m, tid, &mh, false, &budget, rights, &nrights);
                j->args[0] = (uint32_t)a[2];
                j->nmsg = 1;
        } else {
                /* sendmmsg: as many messages as fit; the call may send
                 * fewer than asked (it says how many). Each msg_len is
                 * written now as the message's full length: the broker
                 * cannot write the caller's memory (Landlock), and a
                 * datagram is sent whole or not at all. A stream socket
                 * gets one message per call (docs). */
                unsigned vlen = (unsigned)a[2] > IOV_MAX_ ? IOV_MAX_ : (unsigned)a[2];
                if (vlen > SV_SEND_MSGS)
                        vlen = SV_SEND_MSGS;
                if (j->sock_type == SOCK_STREAM && vlen > 1)
                        vlen = 1;
                j->args[0] = (uint32_t)a[3];
                j->nmsg = 0;
                r = 0;
                for (unsigned k = 0; k < vlen; k++) {
                        struct mmsghdr mm;
                        uint64_t at = a[1] + (uint64_t)k * sizeof mm;
                        uint32_t before = j->tail_len;
                        size_t b0 = budget;
                        if (sv_read_mem(tid, at, &mm, sizeof mm) < 0) {
                                r = -EFAULT;
                        } else {
                                r = add_msg(m, tid, &mm.msg_hdr, false, &budget, rights, &nrights);
                        }
                        if (r == 0) {
                                unsigned len = (unsigned)(b0 - budget);
                                struct iovec l = { &len, sizeof len },
                                             rv = { (void *)(uintptr_t)(at + offsetof(struct mmsghdr, msg_len)),
                                                    sizeof len };
                                if (process_vm_writev(tid, &l, 1, &rv, 1, 0) != sizeof len)
                                        r = -EFAULT;
                        }
                        if (r < 0) {
                                if (k > 0) {
                                        /* send what came before; the error shows on the next call */
                                        j->tail_len = before;
                                        r = 0;
                                }
                                break;
                        }
                        j->nmsg++;
                        /* room for another message: header, address, the
                         * data budget left and a control part, each padded */
                        if (!budget || j->tail_len + sizeof(struct sv_msg) + SV_ADDR_MAX + CONTROL_MAX + budget + 32 >
                                               SV_TAIL_MAX)
                                break;
                }
                if (r == 0 && j->nmsg == 0) {
                        close(sock);
                        if (sv_id_valid(m, n->id))
                                sv_respond_val(m, n->id, 0);
                        for (unsigned i = 0; i < nrights; i++)
                                close(rights[i]);
                        return;
                }
        }
        if (r < 0) {
                close(sock);
                return send_fail(m, n, rights, nrights, -r);
        }
        /* A named unix address resolves like an open: root and cwd for it. */
        bool named = false;
        const uint8_t *p = j->tail;
        for (unsigned k = 0; k < j->nmsg; k++) {
                const struct sv_msg *h = (const void *)p;
                const uint8_t *name = p + ((sizeof *h + 7) & ~7u);
                if (h->namelen > 2 && ((const struct sockaddr *)name)->sa_family == AF_UNIX && name[2] != '\0')
                        named = true;
                p = name + ((h->namelen + 7) & ~7u) + ((h->datalen + 7) & ~7u) + ((h->controllen + 7) & ~7u);
        }
        if (named) {
                int rfd = sv_open_proc(m, tid, "root", O_DIRECTORY), cfd = sv_open_proc(m, tid, "cwd", 0);
                if (rfd < 0 || cfd < 0) {
                        if (rfd >= 0)
                                close(rfd);
                        if (cfd >= 0)
                                close(cfd);
                        close(sock);
                        return send_fail(m, n, rights, nrights, ESRCH);
                }
                fds[nfds++] = rfd;
                fds[nfds++] = cfd;
                j->has_root = j->has_dir = 1;
        }
        fds[nfds++] = sock;
        j->has_extra = 1;
        for (unsigned i = 0; i < nrights; i++)
                fds[nfds++] = rights[i];
        j->nrights = nrights;
        if (!sv_id_valid(m, n->id)) {
                for (unsigned i = 0; i < nfds; i++)
                        close(fds[i]);
                return;
        }
        j->validated = 1;
        j->op = SV_SEND;
        j->nfds = nfds;
        sv_send_job(m, fds, nfds);
}
