/* paddock-supervisor, the main process: see sv.h for the split between main
 * and the broker, docs/security.md for the promises.
 *
 *   paddock-supervisor --listener-fd 3 --ready-fd 4 --pid AGENT_PID
 *                      --uid-base BASE --sandbox ID --audit FILE [--policy FILE]
 *                      [--deny-inodes-fd N] [--root-fixed]
 *
 * Started by pd_supervisor_start (src/jail/supervisor_launch.c) while the
 * sandbox's first process waits in its execveat of paddock-agent, which is
 * the first notification this process answers. It writes one byte 'R' on
 * the ready fd once it serves notifications, or an error message and exits.
 * It exits when the listener hangs up (every process of the sandbox is
 * gone) or the broker goes; if it dies, the kernel fails every notified
 * call with ENOSYS: the sandbox fails closed. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/audit.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/supervisor_main.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
#define ARGV_MAX 64                     /* argv entries recorded per exec */
#define ARG_MAX_LEN 512                 /* bytes recorded per argument */
#define ARGV_BYTES 4096                 /* bytes recorded per exec, all arguments */

/* The kernel's VALID_OPEN_FLAGS (open and openat ignore other bits; so do we). */
#define VALID_OPEN_FLAGS (O_RDONLY | O_WRONLY | O_RDWR | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | \
                          O_NDELAY | O_NONBLOCK | O_SYNC | O_DSYNC | O_ASYNC | O_DIRECT | O_LARGEFILE |      \
                          O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_PATH | O_TMPFILE)

static _Noreturn void die(int ready_fd, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (ready_fd >= 0)
                (void)!write(ready_fd, msg, strlen(msg));
        fprintf(stderr, "paddock-supervisor: %s\n", msg);
        exit(1);
}

int sv_deny_inode_cmp(const void *a, const void *b)
{
        const struct sv_deny_inode *x = a, *y = b;
        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        return x->ino < y->ino ? -1 : x->ino > y->ino;
}


void sv_respond(struct sv_main *m, uint64_t id, int error, uint32_t flags)
{
        memset(m->resp, 0, m->resp_size);
        m->resp->id = id;
        m->resp->error = error ? -error : 0;
        m->resp->flags = flags;
        /* ENOENT: the caller is gone (killed, or its syscall interrupted). */
        (void)ioctl(m->listener, SECCOMP_IOCTL_NOTIF_SEND, m->resp);
}

bool sv_id_valid(struct sv_main *m, uint64_t id)
{
        return ioctl(m->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Copy a NUL-terminated string of at most max-1 bytes out of the caller.
 * Page by page, so an unmapped page after the string does not fail it.
 * Returns its length, -EFAULT or -ENAMETOOLONG. */
ssize_t sv_read_string(pid_t tid, uint64_t addr, char *buf, size_t max)
{
        size_t got = 0;
        while (got < max) {
                uint64_t a = addr + got;
                size_t chunk = 4096 - (a & 4095);
                /* Most paths are short: copy 256 bytes first, not the
                 * rest of the page. */
                if (!got && chunk > 256)
                        chunk = 256;
                if (chunk > max - got)
                        chunk = max - got;
                struct iovec l = { buf + got, chunk }, r = { (void *)(uintptr_t)a, chunk };
                ssize_t n = process_vm_readv(tid, &l, 1, &r, 1, 0);
                if (n <= 0)
                        return -EFAULT;
                char *z = memchr(buf + got, '\0', (size_t)n);
                if (z)
                        return z - buf;
                got += (size_t)n;
        }
        return -ENAMETOOLONG;
}

int sv_read_mem(pid_t tid, uint64_t addr, void *buf, size_t n)
{
        struct iovec l = { buf, n }, r = { (void *)(uintptr_t)addr, n };
        ssize_t got = process_vm_readv(tid, &l, 1, &r, 1, 0);
        return got == (ssize_t)n ? 0 : -EFAULT;
}

static int to_ns(struct sv_main *m, unsigned long host, uint32_t *out)
{
        if (host < m->uid_base || host - m->uid_base >= UID_RANGE)
                return -EPERM;
        *out = (uint32_t)(host - m->uid_base);
        return 0;
}

/* The caller's fsuid, fsgid, groups, umask and effective capabilities
 * (ids as the sandbox sees them), its pid and tgid in the sandbox. The
 * status file is generated per read: these are the values at this moment,
 * while the caller is stopped in the notified syscall. */
static ssize_t status_read(struct sv_main *m, pid_t tid, char *buf, size_t size)
{
        struct status_fd *e = &m->status[(unsigned)tid % STATUS_CACHE];
        for (int attempt = 0; attempt < 2; attempt++) {
                if (e->tid != tid || e->fd < 0 || attempt) {
                        if (e->fd >= 0)
                                close(e->fd);
                        char name[32];
                        snprintf(name, sizeof name, "%d/status", (int)tid);
                        e->tid = tid;
                        e->fd = openat(m->procfd, name, O_RDONLY | O_CLOEXEC);
                        if (e->fd < 0)
                                return -ESRCH;
                        attempt = 1;
                }
                ssize_t n = pread(e->fd, buf, size, 0);
                if (n > 0)
                        return n;
        }
        return -ESRCH;
}

static unsigned long field_ul(const char **pp, int base, bool *ok)
{
        const char *p = *pp;
        while (*p == ' ' || *p == '\t')
                p++;
        char *end;
        unsigned long v = strtoul(p, &end, base);
        if (end == p)
                *ok = false;
        *pp = end;
        return v;
}

/* The last field of an "NSpid:"-style line: the id in the innermost (the
 * sandbox's) namespace. */
static int last_field(const char *p, const char *eol)
{
        const char *t = eol;
        while (t > p && t[-1] != '\t' && t[-1] != ' ')
                t--;
        return atoi(t);
}

int sv_read_status(struct sv_main *m, pid_t tid, struct sv_creds *c, int *ns_pid, int *ns_tgid)
{
        char buf[4096];
        ssize_t n = status_read(m, tid, buf, sizeof buf - 1);
        if (n < 0)
                return (int)n;
        buf[n] = '\0';
        memset(c, 0, sizeof *c);
        unsigned have = 0;
        for (const char *line = buf; *line && have != 31;) {
                const char *eol = strchr(line, '\n');
                if (!eol)
                        eol = line + strlen(line);
                const char *p = line;
                bool ok = true;
                switch (line[0]) {
                case 'U':
                        if (!strncmp(line, "Umask:", 6)) {
                                p += 6;
                                c->umask = (uint32_t)field_ul(&p, 8, &ok) & 0777;
                        } else if (!strncmp(line, "Uid:", 4)) {
                                p += 4;
                                for (int i = 0; i < 3; i++)
                                        (void)field_ul(&p, 10, &ok);
                                unsigned long fs = field_ul(&p, 10, &ok);
                                if (!ok || to_ns(m, fs, &c->fsuid) < 0)
                                        return -EPERM;
                                have |= 1;
                        }
                        break;
                case 'G':
                        if (!strncmp(line, "Gid:", 4)) {
                                p += 4;
                                for (int i = 0; i < 3; i++)
                                        (void)field_ul(&p, 10, &ok);
                                unsigned long fs = field_ul(&p, 10, &ok);
                                if (!ok || to_ns(m, fs, &c->fsgid) < 0)
                                        return -EPERM;
                                have |= 2;
                        } else if (!strncmp(line, "Groups:", 7)) {
                                p += 7;
                                for (;;) {
                                        bool more = true;
                                        unsigned long g = field_ul(&p, 10, &more);
                                        if (!more || p > eol)
                                                break;
                                        if (c->ngroups >= SV_MAX_GROUPS || to_ns(m, g, &c->groups[c->ngroups]) < 0)
                                                return -EPERM;
                                        c->ngroups++;
                                }
                        }
                        break;
                case 'N':
                        if (!strncmp(line, "NStgid:", 7)) {
                                *ns_tgid = last_field(line + 7, eol);
                                have |= 8;
                        } else if (!strncmp(line, "NSpid:", 6)) {
                                *ns_pid = last_field(line + 6, eol);
                                have |= 16;
                        }
                        break;
                case 'C':
                        if (!strncmp(line, "CapEff:", 7)) {
                                p += 7;
                                c->cap_eff = strtoull(p, NULL, 16);
                                have |= 4;
                        }
                        break;
                }
                line = *eol ? eol + 1 : eol;
        }
        return (have & 7) == 7 ? 0 : -ESRCH;
}

/* Hand the job and its fds to the broker (a broker that cannot take it is
 * gone: exit); our copies of the fds are closed here (the broker has its
 * own once sent). The job goes as its fields, path, path2 and tail_len
 * bytes of tail: only what is used. */
void sv_send_job(struct sv_main *m, const int *fds, unsigned nfds)
{
        struct sv_job *j = &m->job;
        if (!j->has_path2)
                j->path2[0] = '\0';
        struct iovec iov[4] = {
                { j, offsetof(struct sv_job, path) },
                { j->path, strlen(j->path) + 1 },
                { j->path2, strlen(j->path2) + 1 },
                { j->tail, j->tail_len },
        };
        size_t len = iov[0].iov_len + iov[1].iov_len + iov[2].iov_len + iov[3].iov_len;
        static char ctrl[CMSG_SPACE(SV_JOB_FDS * sizeof(int))];
        memset(ctrl, 0, sizeof ctrl);
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 4 };
        if (nfds) {
                mh.msg_control = ctrl;
                mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
                memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
        }
        ssize_t w;
        do
                w = sendmsg(m->sock, &mh, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        if (w != (ssize_t)len) {
                fprintf(stderr, "paddock-supervisor: broker gone (%s); exiting: the sandbox fails closed\n",
                        strerror(errno));
                exit(1);
        }
        for (unsigned i = 0; i < nfds; i++)
                close(fds[i]);
}

void sv_respond_val(struct sv_main *m, uint64_t id, int64_t val)
{
        memset(m->resp, 0, m->resp_size);
        m->resp->id = id;
        m->resp->val = val;
        (void)ioctl(m->listener, SECCOMP_IOCTL_NOTIF_SEND, m->resp);
}

int sv_take_fd(pid_t tid, int fd)
{
        int pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
        if (pidfd < 0)
                return -ESRCH;
        int r = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        int e = errno;
        close(pidfd);
        return r < 0 ? -e : r;
}

void sv_audit_fail(struct sv_main *m, const char *event, const char *path, int e)
{
        struct sv_job *j = &m->job;
        if (!sv_audit_begin(&m->audit, event))
                return;
        sv_audit_int(&m->audit, "pid", j->ns_pid);
        sv_audit_str(&m->audit, "syscall", sv_syscall_name(j->nr));
        if (path)
                sv_audit_str(&m->audit, "requested", path);
        sv_audit_str(&m->audit, "decision", "error");
        sv_audit_int(&m->audit, "errno", e);
        sv_audit_end(&m->audit);
}

int sv_open_proc(struct sv_main *m, pid_t tid, const char *what, int flags)
{
        char name[64];
        snprintf(name, sizeof name, "%d/%s", (int)tid, what);
        return openat(m->procfd, name, O_PATH | O_CLOEXEC | flags);
}

/* "/proc/<pid>" (and "/task/<tid>" if tid) at the start of p: what follows, else NULL. */
static const char *proc_prefix(const char *p, int pid, int tid)
{
        char pre[64];
        int n = tid ? snprintf(pre, sizeof pre, "/proc/%d/task/%d", pid, tid) : snprintf(pre, sizeof pre, "/proc/%d", pid);
        return pid > 0 && !strncmp(p, pre, (size_t)n) ? p + n : NULL;
}

/* /dev/std{in,out,err}, /dev/fd/N, and (after rewrite_proc_self) the
 * caller's own /proc/PID/fd/N and /proc/PID/task/TID/fd/N: the fd number
 * they name, else -1. These resolve through a magic link (the broker
 * refuses magic links: it would follow its own; and /proc/PID/fd is
 * guarded by a ptrace check its Landlock domain fails), so main opens the
 * caller's /proc/TID/fd/N for it; the broker then reopens that. */
int sv_magic_fd(const char *p, int ns_tgid, int ns_pid)
{
        if (!strcmp(p, "/dev/stdin"))
                return 0;
        if (!strcmp(p, "/dev/stdout"))
                return 1;
        if (!strcmp(p, "/dev/stderr"))
                return 2;
        const char *n = NULL, *rest;
        if (!strncmp(p, "/dev/fd/", 8))
                n = p + 8;
        else if ((rest = proc_prefix(p, ns_tgid, 0)) && !strncmp(rest, "/fd/", 4))
                n = rest + 4;
        else if ((rest = proc_prefix(p, ns_tgid, ns_pid)) && !strncmp(rest, "/fd/", 4))
                n = rest + 4;
        if (!n || !*n || strlen(n) > 9 || strspn(n, "0123456789") != strlen(n))
                return -1;
        return atoi(n);
}

/* Is the caller's root the sandbox's root (same directory on the same
 * mount)? Then the broker resolves against its own root and we pass no fd.
 * One statx of /proc/TID/root instead of opening and passing it. */
bool sv_root_is_sandbox(struct sv_main *m, pid_t tid)
{
        if (!m->root_mnt_mask)
                return false;
        /* No chroot yet: it is (see root_fixed), no statx needed. */
        if (m->root_fixed && !m->chroot_seen)
                return true;
        char name[32];
        snprintf(name, sizeof name, "%d/root", (int)tid);
        struct statx sx;
        if (statx(m->procfd, name, AT_STATX_DONT_SYNC, STATX_INO | m->root_mnt_mask, &sx) < 0 ||
            !(sx.stx_mask & m->root_mnt_mask))
                return false;
        return sx.stx_ino == m->root_ino && sx.stx_mnt_id == m->root_mnt && sx.stx_dev_major == m->root_dev_major &&
               sx.stx_dev_minor == m->root_dev_minor;
}

/* /proc/self and /proc/thread-self name the reader: the broker would be
 * reading them. Rewrite them to the caller's pid in the sandbox. */
void sv_rewrite_proc_self(char *path, int ns_tgid, int ns_pid)
{
        char tmp[PATH_MAX];
        const char *rest = NULL;
        int n = -1;
        if (!strncmp(path, "/proc/self", 10) && (path[10] == '/' || !path[10])) {
                rest = path + 10;
                n = snprintf(tmp, sizeof tmp, "/proc/%d%s", ns_tgid, rest);
        } else if (!strncmp(path, "/proc/thread-self", 17) && (path[17] == '/' || !path[17])) {
                rest = path + 17;
                n = snprintf(tmp, sizeof tmp, "/proc/%d/task/%d%s", ns_tgid, ns_pid, rest);
        }
        if (n > 0 && (size_t)n < sizeof tmp && ns_tgid > 0)
                memcpy(path, tmp, (size_t)n + 1);
}

static void handle_open(struct sv_main *m, const struct seccomp_notif *n)
{
        struct sv_job *j = &m->job;
        pid_t tid = (pid_t)n->pid;
        int dirfd = AT_FDCWD;
        uint64_t path_ptr;
        j->flags = j->mode = j->resolve = 0;
        switch (n->data.nr) {
        case SYS_open:
                path_ptr = n->data.args[0];
                j->flags = n->data.args[1];
                j->mode = n->data.args[2];
                break;
        case SYS_creat:
                path_ptr = n->data.args[0];
                j->flags = O_CREAT | O_WRONLY | O_TRUNC;
                j->mode = n->data.args[1];
                break;
        case SYS_openat:
                dirfd = (int)n->data.args[0];
                path_ptr = n->data.args[1];
                j->flags = n->data.args[2];
                j->mode = n->data.args[3];
                break;
        default: {      /* openat2 */
                dirfd = (int)n->data.args[0];
                path_ptr = n->data.args[1];
                uint64_t size = n->data.args[3];
                struct open_how how;
                if (size < sizeof how) {
                        sv_audit_fail(m, "supervisor.open", NULL, EINVAL);
                        return sv_respond(m, n->id, EINVAL, 0);
                }
                if (size > 4096) {
                        sv_audit_fail(m, "supervisor.open", NULL, E2BIG);
                        return sv_respond(m, n->id, E2BIG, 0);
                }
                uint8_t raw[4096];
                if (sv_read_mem(tid, n->data.args[2], raw, (size_t)size) < 0) {
                        sv_audit_fail(m, "supervisor.open", NULL, EFAULT);
                        return sv_respond(m, n->id, EFAULT, 0);
                }
                for (size_t i = sizeof how; i < size; i++)
                        if (raw[i]) {
                                sv_audit_fail(m, "supervisor.open", NULL, E2BIG);
                                return sv_respond(m, n->id, E2BIG, 0);
                        }
                memcpy(&how, raw, sizeof how);
                /* The broker's own openat2 validates flags, mode and
                 * resolve exactly as the kernel would have for the caller. */
                j->flags = how.flags;
                j->mode = how.mode;
                j->resolve = how.resolve;
                break;
        }
        }
        if (n->data.nr != SYS_openat2) {
                /* What open/openat do with their arguments (build_open_how). */
                j->flags &= VALID_OPEN_FLAGS;
                if (j->flags & O_PATH)
                        j->flags &= O_DIRECTORY | O_NOFOLLOW | O_PATH | O_CLOEXEC;
                j->mode = (j->flags & (O_CREAT | __O_TMPFILE)) ? j->mode & 07777 : 0;
        }
        j->cloexec = (j->flags & O_CLOEXEC) != 0;
        int ns_tgid = 0, r = sv_read_status(m, tid, &j->creds, &j->ns_pid, &ns_tgid);
        j->ns_tgid = ns_tgid;
        if (r < 0) {
                sv_audit_fail(m, "supervisor.open", NULL, -r);
                return sv_respond(m, n->id, r == -ESRCH ? ESRCH : EACCES, 0);
        }
        ssize_t len = sv_read_string(tid, path_ptr, j->path, sizeof j->path);
        if (len < 0) {
                sv_audit_fail(m, "supervisor.open", NULL, (int)-len);
                return sv_respond(m, n->id, (int)-len, 0);
        }
        if (len == 0) {
                sv_audit_fail(m, "supervisor.open", "", ENOENT);
                return sv_respond(m, n->id, ENOENT, 0);
        }
        sv_rewrite_proc_self(j->path, ns_tgid, j->ns_pid);
        if ((j->flags & O_PATH) && n->data.nr != SYS_openat2) {
                /* open/openat with O_PATH: the kernel cannot inject an O_PATH
                 * file (ADDFD takes its source with fget(), which skips
                 * them), so such a call continues. Allowed by the rule: the
                 * decision rests on the flags register alone, never on
                 * memory we read. An O_PATH fd grants no access by itself:
                 * every open through it (as a dirfd, or reopened through
                 * /proc/self/fd) is brokered again, and what it shows
                 * (fstat) stat(2) shows unbrokered anyway. The path in the
                 * record is what the caller asked for, unverified. */
                sv_respond(m, n->id, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
                if (sv_audit_begin(&m->audit, "supervisor.open")) {
                        sv_audit_int(&m->audit, "pid", j->ns_pid);
                        sv_audit_str(&m->audit, "syscall", sv_syscall_name(j->nr));
                        sv_audit_str(&m->audit, "requested", j->path);
                        sv_audit_int(&m->audit, "flags", (long long)j->flags);
                        sv_audit_int(&m->audit, "uid", j->creds.fsuid);
                        sv_audit_str(&m->audit, "decision", "continue");
                        sv_audit_end(&m->audit);
                }
                return;
        }

        int fds[3], nfds = 0;
        j->has_root = j->has_dir = j->has_extra = j->sandbox_root = 0;
        bool scoped = (j->resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) != 0;
        if (j->path[0] == '/' && !scoped && sv_root_is_sandbox(m, tid)) {
                j->sandbox_root = 1;
        } else if (j->path[0] == '/' && !scoped) {
                fds[nfds] = sv_open_proc(m, tid, "root", O_DIRECTORY);
                if (fds[nfds] < 0)
                        goto gone;
                nfds++;
                j->has_root = 1;
        } else {
                if (dirfd == AT_FDCWD) {
                        fds[nfds] = sv_open_proc(m, tid, "cwd", 0);
                } else if (dirfd >= 0) {
                        char what[32];
                        snprintf(what, sizeof what, "fd/%d", dirfd);
                        fds[nfds] = sv_open_proc(m, tid, what, 0);
                } else {
                        sv_audit_fail(m, "supervisor.open", j->path, EBADF);
                        return sv_respond(m, n->id, EBADF, 0);
                }
                if (fds[nfds] < 0) {
                        if (!sv_id_valid(m, n->id))
                                return;
                        sv_audit_fail(m, "supervisor.open", j->path, EBADF);
                        return sv_respond(m, n->id, EBADF, 0);
                }
                nfds++;
                j->has_dir = 1;
        }
        int mfd = sv_magic_fd(j->path, ns_tgid, j->ns_pid);
        if (mfd >= 0) {
                char what[32];
                snprintf(what, sizeof what, "fd/%d", mfd);
                fds[nfds] = sv_open_proc(m, tid, what, 0);
                if (fds[nfds] >= 0) {
                        nfds++;
                        j->has_extra = 1;
                }
        }
        /* What we read (memory, status) and the /proc/TID objects above are
         * the caller's only if TID still is the caller: it is while the
         * notification is pending. The broker checks that (ID_VALID) after
         * all of this and before anything it does could matter: before an
         * open with a side effect (create, truncate, write, a device or a
         * FIFO) and before ADDFD. One check on the path of a plain read,
         * not two. */
        j->validated = 0;
        j->op = SV_OPEN;
        j->nfds = (uint32_t)nfds;
        sv_send_job(m, fds, (unsigned)nfds);
        return;
gone:
        /* The caller went away (or its /proc entry with it). */
        if (sv_id_valid(m, n->id))
                sv_respond(m, n->id, ESRCH, 0);
}

static void handle_connect(struct sv_main *m, const struct seccomp_notif *n)
{
        struct sv_job *j = &m->job;
        pid_t tid = (pid_t)n->pid;
        int sockfd = (int)n->data.args[0];
        uint64_t alen = (uint32_t)n->data.args[2];
        j->path[0] = '\0';
        int ns_tgid = 0, r = sv_read_status(m, tid, &j->creds, &j->ns_pid, &ns_tgid);
        j->ns_tgid = ns_tgid;
        j->sandbox_root = 0;
        if (r < 0) {
                sv_audit_fail(m, "supervisor.connect", NULL, -r);
                return sv_respond(m, n->id, r == -ESRCH ? ESRCH : EACCES, 0);
        }
        /* The kernel refuses addrlen > sizeof(struct sockaddr_storage). */
        if ((int)n->data.args[2] < 0 || alen > sizeof(struct sockaddr_storage)) {
                sv_audit_fail(m, "supervisor.connect", NULL, EINVAL);
                return sv_respond(m, n->id, EINVAL, 0);
        }
        memset(j->addr, 0, sizeof j->addr);
        if (alen && sv_read_mem(tid, n->data.args[1], j->addr, (size_t)alen) < 0) {
                sv_audit_fail(m, "supervisor.connect", NULL, EFAULT);
                return sv_respond(m, n->id, EFAULT, 0);
        }
        j->addrlen = (uint32_t)alen;
        int fds[3], nfds = 0;
        int pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
        if (pidfd < 0)
                goto gone;
        int s = (int)syscall(SYS_pidfd_getfd, pidfd, sockfd, 0);
        close(pidfd);
        if (s < 0) {
                int e = errno == EBADF ? EBADF : errno;
                if (!sv_id_valid(m, n->id))
                        return;
                sv_audit_fail(m, "supervisor.connect", NULL, e);
                return sv_respond(m, n->id, e, 0);
        }
        struct stat st;
        if (fstat(s, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                close(s);
                sv_audit_fail(m, "supervisor.connect", NULL, ENOTSOCK);
                return sv_respond(m, n->id, ENOTSOCK, 0);
        }
        j->has_root = j->has_dir = 0;
        j->has_extra = 1;
        /* A path-named unix socket resolves like an open. */
        const struct sockaddr *sa = (const void *)j->addr;
        if (sa->sa_family == AF_UNIX && alen > offsetof(struct sockaddr, sa_data) && j->addr[2] != '\0') {
                size_t plen = alen - 2;
                if (plen >= sizeof j->path)
                        plen = sizeof j->path - 1;
                memcpy(j->path, j->addr + 2, plen);
                j->path[plen] = '\0';
                sv_rewrite_proc_self(j->path, ns_tgid, j->ns_pid);
                fds[nfds] = j->path[0] == '/' ? sv_open_proc(m, tid, "root", O_DIRECTORY) : sv_open_proc(m, tid, "cwd", 0);
                if (fds[nfds] < 0) {
                        close(s);
                        goto gone;
                }
                if (j->path[0] == '/')
                        j->has_root = 1;
                else
                        j->has_dir = 1;
                nfds++;
        }
        fds[nfds++] = s;
        if (!sv_id_valid(m, n->id)) {
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return;
        }
        j->validated = 1;       /* the socket we took is the caller's */
        j->op = SV_CONNECT;
        j->nfds = (uint32_t)nfds;
        j->flags = j->mode = j->resolve = 0;
        sv_send_job(m, fds, (unsigned)nfds);
        return;
gone:
        if (sv_id_valid(m, n->id))
                sv_respond(m, n->id, ESRCH, 0);
}

/* execve/execveat: record path and argv, then let the call continue.
 * SECCOMP_USER_NOTIF_FLAG_CONTINUE is allowed here because no decision is
 * taken on what we read: the record is informational (a racing thread can
 * change the path after we read it; the record says what was asked), and
 * exec policy belongs to the kernel: the noexec and deny mounts the
 * sandbox's setup makes (src/jail/policy_mounts.c, docs/security.md). */
static void handle_exec(struct sv_main *m, const struct seccomp_notif *n)
{
        struct sv_job *j = &m->job;
        pid_t tid = (pid_t)n->pid;
        bool at = n->data.nr == SYS_execveat;
        uint64_t path_ptr = at ? n->data.args[1] : n->data.args[0];
        uint64_t argv_ptr = at ? n->data.args[2] : n->data.args[1];
        int ns_tgid = 0;
        struct sv_creds c;
        j->ns_pid = 0;
        bool have_creds = sv_read_status(m, tid, &c, &j->ns_pid, &ns_tgid) == 0;
        char path[PATH_MAX];
        ssize_t plen = sv_read_string(tid, path_ptr, path, sizeof path);
        if (plen < 0)
                path[0] = '\0';
        if (at && plen == 0) {
                /* execveat(fd, "", AT_EMPTY_PATH): name the file by its fd. */
                char name[64];
                snprintf(name, sizeof name, "%d/fd/%d", (int)tid, (int)n->data.args[0]);
                ssize_t l = readlinkat(m->procfd, name, path, sizeof path - 1);
                path[l > 0 ? l : 0] = '\0';
        }
        static char argbuf[ARGV_BYTES];
        const char *args[ARGV_MAX];
        size_t lens[ARGV_MAX];
        unsigned nargs = 0;
        size_t used = 0;
        uint64_t ptrs[ARGV_MAX];
        memset(ptrs, 0, sizeof ptrs);
        /* The pointer array may end before an unmapped page: read it in
         * pieces that stay inside one page. */
        for (unsigned i = 0; i < ARGV_MAX && argv_ptr; i++) {
                if (sv_read_mem(tid, argv_ptr + i * 8, &ptrs[i], 8) < 0 || !ptrs[i])
                        break;
                size_t room = sizeof argbuf - used;
                if (room < 2)
                        break;
                ssize_t l = sv_read_string(tid, ptrs[i], argbuf + used, room < ARG_MAX_LEN ? room : ARG_MAX_LEN);
                if (l == -EFAULT)
                        break;
                if (l < 0)      /* longer than we record: keep the start */
                        l = (ssize_t)strnlen(argbuf + used, (room < ARG_MAX_LEN ? room : ARG_MAX_LEN) - 1);
                args[nargs] = argbuf + used;
                lens[nargs++] = (size_t)l;
                used += (size_t)l + 1;
        }
        /* CONTINUE: the kernel now runs the caller's own execve. */
        sv_respond(m, n->id, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
        if (sv_audit_begin(&m->audit, "supervisor.exec")) {
                sv_audit_int(&m->audit, "pid", j->ns_pid);
                sv_audit_str(&m->audit, "syscall", sv_syscall_name(n->data.nr));
                sv_audit_str(&m->audit, "path", path);
                sv_audit_list(&m->audit, "argv", args, lens, nargs);
                if (have_creds)
                        sv_audit_int(&m->audit, "uid", c.fsuid);
                sv_audit_str(&m->audit, "decision", "allow");
                sv_audit_end(&m->audit);
        }
}

/* The sandbox is gone (or we are): write what is buffered, let the broker
 * write its lines and exit (end of its socket), then exit. Teardown waits
 * a moment for this before it kills us. */
static _Noreturn void finish(struct sv_main *m, int code)
{
        sv_audit_flush(&m->audit);
        shutdown(m->sock, SHUT_RDWR);
        int pfd = (int)syscall(SYS_pidfd_open, m->broker, 0);
        if (pfd >= 0) {
                struct pollfd p = { .fd = pfd, .events = POLLIN };
                if (poll(&p, 1, 2000) <= 0)
                        syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
        }
        (void)waitpid(m->broker, NULL, 0);
        exit(code);
}

static void serve(struct sv_main *m)
{
        for (;;) {
                struct pollfd p[2] = { { .fd = m->listener, .events = POLLIN }, { .fd = m->sock, .events = 0 } };
                int r = poll(p, 2, sv_audit_due_ms(&m->audit));
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        exit(1);
                }
                if (r == 0) {
                        sv_audit_flush(&m->audit);
                        continue;
                }
                if (p[1].revents & (POLLHUP | POLLERR)) {
                        sv_audit_flush(&m->audit);
                        fprintf(stderr, "paddock-supervisor: broker gone; exiting: the sandbox fails closed\n");
                        exit(1);
                }
                if (!(p[0].revents & POLLIN)) {
                        if (p[0].revents & (POLLHUP | POLLERR))
                                finish(m, 0);   /* every process of the sandbox is gone */
                        continue;
                }
                if (sv_audit_due_ms(&m->audit) == 0)
                        sv_audit_flush(&m->audit);
                memset(m->req, 0, m->req_size);
                if (ioctl(m->listener, SECCOMP_IOCTL_NOTIF_RECV, m->req) < 0) {
                        if (errno == EINTR || errno == ENOENT)
                                continue;
                        fprintf(stderr, "paddock-supervisor: receive: %s\n", strerror(errno));
                        exit(1);
                }
                const struct seccomp_notif *n = m->req;
                m->job.id = n->id;
                m->job.nr = n->data.nr;
                m->job.host_tid = (int32_t)n->pid;
                m->job.ns_pid = 0;
                if (n->data.arch != AUDIT_ARCH_X86_64) {
                        sv_respond(m, n->id, ENOSYS, 0);
                        continue;
                }
                /* Fields only some jobs use start empty. */
                m->job.has_dir2 = m->job.has_path2 = 0;
                m->job.tail_len = m->job.nmsg = m->job.nrights = m->job.pathop = 0;
                m->job.path2[0] = '\0';
                m->job.flags = m->job.mode = m->job.resolve = 0;
                if (sv_is_pathop(n->data.nr)) {
                        sv_handle_pathop(m, n);
                        continue;
                }
                if (sv_is_send(n->data.nr)) {
                        sv_handle_send(m, n);
                        continue;
                }
                switch (n->data.nr) {
                case SYS_open:
                case SYS_openat:
                case SYS_openat2:
                case SYS_creat:
                        handle_open(m, n);
                        break;
                case SYS_connect:
                        handle_connect(m, n);
                        break;
                case SYS_execve:
                case SYS_execveat:
                        handle_exec(m, n);
                        break;
                case SYS_chroot:
                        /* Noted before the call can take effect (the caller
                         * waits for this answer, and we handle notifications
                         * one at a time), then the kernel's own chroot runs. */
                        m->chroot_seen = true;
                        sv_respond(m, n->id, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
                        break;
                default:
                        sv_respond(m, n->id, ENOSYS, 0);
                }
        }
}

static int parse_fd(const char *s)
{
        char *end;
        long v = strtol(s, &end, 10);
        return (*end || v < 0 || v > 1 << 20) ? -1 : (int)v;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "listener-fd", required_argument, NULL, 'l' }, { "ready-fd", required_argument, NULL, 'r' },
                { "pid", required_argument, NULL, 'p' },         { "uid-base", required_argument, NULL, 'u' },
                { "sandbox", required_argument, NULL, 's' },     { "audit", required_argument, NULL, 'a' },
                { "policy", required_argument, NULL, 'P' },      { "deny-inodes-fd", required_argument, NULL, 'I' },
                { "root-fixed", no_argument, NULL, 'F' },        { NULL, 0, NULL, 0 },
        };
        int listener = -1, ready = -1, inodes = -1, c;
        bool root_fixed = false;
        long agent = 0;
        unsigned long base = 0;
        const char *sandbox = NULL, *audit_path = NULL, *policy_path = NULL;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'l': listener = parse_fd(optarg); break;
                case 'r': ready = parse_fd(optarg); break;
                case 'p': agent = strtol(optarg, NULL, 10); break;
                case 'u': base = strtoul(optarg, NULL, 10); break;
                case 's': sandbox = optarg; break;
                case 'a': audit_path = optarg; break;
                case 'P': policy_path = optarg; break;
                case 'I': inodes = parse_fd(optarg); break;
                case 'F': root_fixed = true; break;
                default: die(ready, "usage: paddock-supervisor --listener-fd N --ready-fd N --pid PID "
                                    "--uid-base N --sandbox ID --audit FILE [--policy FILE] [--root-fixed]");
                }
        }
        if (listener < 0 || agent <= 0 || !base || !sandbox || !audit_path)
                die(ready, "missing or invalid arguments");
        if (fcntl(ready, F_SETFD, FD_CLOEXEC) < 0 || fcntl(listener, F_SETFD, FD_CLOEXEC) < 0)
                die(-1, "fds not passed");
        signal(SIGPIPE, SIG_IGN);

        char msg[512] = "";
        struct sv_policy *policy = sv_policy_load(policy_path, msg, sizeof msg);
        if (!policy)
                die(ready, "%s", msg);
        /* The files deny mounts cover, by identity (the sandbox's setup
         * recorded them before covering them): sorted for bsearch. */
        static struct sv_deny_inode dinodes[4096];
        unsigned n_dinodes = 0;
        if (inodes >= 0) {
                ssize_t got = pread(inodes, dinodes, sizeof dinodes, 0);
                if (got < 0)
                        die(ready, "read the denied files' identities: %s", strerror(errno));
                n_dinodes = (unsigned)((size_t)got / sizeof dinodes[0]);
                qsort(dinodes, n_dinodes, sizeof dinodes[0], sv_deny_inode_cmp);
                close(inodes);
        }
        int audit_fd = open(audit_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (audit_fd < 0)
                die(ready, "open audit log '%s': %s", audit_path, strerror(errno));

        static struct sv_main m;
        m.listener = listener;
        m.uid_base = (uint32_t)base;
        m.root_fixed = root_fixed;
        m.procfd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
        for (unsigned i = 0; i < STATUS_CACHE; i++)
                m.status[i].fd = -1;
        struct seccomp_notif_sizes sizes;
        if (m.procfd < 0 || syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
                die(ready, "seccomp notification sizes: %s", strerror(errno));
        m.req_size = sizes.seccomp_notif > sizeof *m.req ? sizes.seccomp_notif : sizeof *m.req;
        m.resp_size = sizes.seccomp_notif_resp > sizeof *m.resp ? sizes.seccomp_notif_resp : sizeof *m.resp;
        m.req = calloc(1, m.req_size);
        m.resp = calloc(1, m.resp_size);
        if (!m.req || !m.resp)
                die(ready, "out of memory");
        sv_audit_init(&m.audit, audit_fd, sandbox);
        /* Kernel >= 6.6: the notifying task hands its CPU straight to us
         * (and back): far less wake-up latency per brokered call. Older
         * kernels refuse it; that only costs speed. */
        (void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);

        /* The sandbox's root and user namespace, through its first process
         * (our creator's unreaped child, waiting on us: its pid is stable). */
        char p[64];
        snprintf(p, sizeof p, "%ld/root", agent);
        int rootfd = openat(m.procfd, p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        snprintf(p, sizeof p, "%ld/ns/user", agent);
        int userns = openat(m.procfd, p, O_RDONLY | O_CLOEXEC);
        if (rootfd < 0 || userns < 0)
                die(ready, "open the sandbox's root and user namespace (pid %ld): %s", agent, strerror(errno));
        /* Its identity, to know a caller whose root it is (root_is_sandbox):
         * the mount's unique id where the kernel has it (never reused). */
        struct statx sx;
        unsigned masks[] = { STATX_MNT_ID_UNIQUE, STATX_MNT_ID };
        for (unsigned i = 0; i < 2 && !m.root_mnt_mask; i++)
                if (statx(rootfd, "", AT_EMPTY_PATH, STATX_INO | masks[i], &sx) == 0 && (sx.stx_mask & masks[i])) {
                        m.root_mnt_mask = masks[i];
                        m.root_ino = sx.stx_ino;
                        m.root_mnt = sx.stx_mnt_id;
                        m.root_dev_major = sx.stx_dev_major;
                        m.root_dev_minor = sx.stx_dev_minor;
                }

        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                die(ready, "socketpair: %s", strerror(errno));
        /* A job with a send's data is up to ~80 KiB: room for several. */
        int sndbuf = 1 << 20;
        (void)setsockopt(sp[0], SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
        pid_t broker = fork();
        if (broker < 0)
                die(ready, "fork the broker: %s", strerror(errno));
        if (broker == 0) {
                close(sp[0]);
                if (ready >= 0)
                        close(ready);
                struct sv_broker_args a = { .listener = listener, .sock = sp[1], .rootfd = rootfd,
                                            .userns = userns, .audit_fd = audit_fd, .sandbox = sandbox,
                                            .uid_base = (uint32_t)base, .policy = policy,
                                            .deny_inodes = dinodes, .n_deny_inodes = n_dinodes };
                sv_broker_main(&a);
        }
        m.broker = broker;
        close(sp[1]);
        close(rootfd);
        close(userns);
        m.sock = sp[0];
        char answer[512];
        ssize_t got = recv(m.sock, answer, sizeof answer - 1, 0);
        if (got != 1 || answer[0] != 'R') {
                answer[got > 0 ? got : 0] = '\0';
                kill(broker, SIGKILL);
                die(ready, "broker: %s", got > 0 ? answer : "exited during setup");
        }
        /* Ready: the caller may return; we are on our own from here. */
        if (write(ready, "R", 1) != 1)
                die(-1, "creator gone before we were ready");
        close(ready);
        serve(&m);
        return 0;
}
