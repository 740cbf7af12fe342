/* paddock-supervisor, the broker: the calls that create, remove, rename or
 * link a name, or change a file's size, mode, owner, extended attributes or
 * times (notified when the policy has ro or deny rules; main's intake.c
 * copied their arguments). docs/security.md "`supervised` tier".
 *
 * Two shapes, both decided on what we resolved and performed on exactly
 * that, under the caller's credentials (apply_creds), never continued:
 *   a name (create, remove, rename, the new name of a link): resolve its
 *   parent directory to an O_PATH fd, decide on "<parent's path>/<name>",
 *   act on (parent fd, name);
 *   a file (chmod, chown, truncate, xattrs, times, a link's source): resolve
 *   it (following a final symlink or not, as the call would) to an O_PATH
 *   fd, or take the caller's fd, decide on its path, act on that fd.
 * Denials answer EACCES ("supervisor.deny" in the audit). A rename of a
 * directory that would carry files across a rule boundary, and a link
 * between places of different access, answer EXDEV: mv and cp -l then copy,
 * and every copied file goes through the brokered opens. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/broker.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_setxattrat
#define SYS_setxattrat 463
#endif
#ifndef SYS_removexattrat
#define SYS_removexattrat 466
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

struct xattr_args_ {
        uint64_t value;
        uint32_t size;
        uint32_t flags;
};

static const char *reason_of(enum sv_access a)
{
        return a == SV_ACC_DENY ? "deny" : a == SV_ACC_RO ? "ro" : "rw";
}

static bool restricted(enum sv_access a)
{
        return a == SV_ACC_RO || a == SV_ACC_DENY;
}

static void audit_pathop(const struct sv_job *j, const char *path, const char *path2, const char *decision, int e,
                         const char *reason)
{
        bool deny = !strcmp(decision, "deny");
        if (!sv_audit_begin(&B.audit, deny ? "supervisor.deny" : "supervisor.modify"))
                return;
        sv_audit_int(&B.audit, "pid", j->ns_pid);
        sv_audit_str(&B.audit, "syscall", sv_syscall_name(j->nr));
        if (path && path[0])
                sv_audit_str(&B.audit, "path", path);
        else
                sv_audit_str(&B.audit, "requested", j->path);
        if (path2 && path2[0])
                sv_audit_str(&B.audit, "path2", path2);
        sv_audit_int(&B.audit, "uid", j->creds.fsuid);
        sv_audit_str(&B.audit, "decision", decision);
        if (reason)
                sv_audit_str(&B.audit, "rule", reason);
        if (e)
                sv_audit_int(&B.audit, "errno", e);
        sv_audit_end(&B.audit);
}

/* Split path into its parent directory and last name (trailing slashes
 * dropped). The name is "" for "/", "." or ".." as given. */
static void split(const char *path, char *parent, size_t psize, char *name, size_t nsize, bool *trailing)
{
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s", path);
        size_t l = strlen(tmp);
        *trailing = false;
        while (l > 1 && tmp[l - 1] == '/') {
                tmp[--l] = '\0';
                *trailing = true;
        }
        char *slash = strrchr(tmp, '/');
        if (!slash) {
                snprintf(parent, psize, ".");
                snprintf(name, nsize, "%s", tmp);
        } else {
                snprintf(name, nsize, "%s", slash + 1);
                if (slash == tmp)
                        snprintf(parent, psize, "/");
                else {
                        *slash = '\0';
                        snprintf(parent, psize, "%s", tmp);
                }
        }
        if (!strcmp(name, ".") || !strcmp(name, ".."))
                name[0] = '\0';
}

/* The parent of path as an O_PATH fd and "<its path>/<name>" in resolved.
 * -errno on failure. */
static int parent_of(const struct sv_job *j, int root, int dir, const char *path, char *name, size_t nsize,
                     char *resolved, size_t rsize, bool *trailing)
{
        char parent[PATH_MAX];
        split(path, parent, sizeof parent, name, nsize, trailing);
        int pfd = sv_b_resolve(j, root, dir, parent, O_DIRECTORY);
        if (pfd < 0)
                return -errno;
        sv_b_fd_path(pfd, resolved, rsize);
        if (!resolved[0]) {     /* nothing to decide on */
                close(pfd);
                return -EACCES;
        }
        size_t rl = strlen(resolved);
        snprintf(resolved + rl, rsize - rl, "%s%s", rl && resolved[rl - 1] == '/' ? "" : "/", name);
        return pfd;
}

/* The file a call acts on: the caller's fd (extra), or path resolved. */
static int object_of(const struct sv_job *j, int root, int dir, int extra, bool nofollow, char *resolved,
                     size_t rsize)
{
        int fd;
        if (extra >= 0)
                fd = fcntl(extra, F_DUPFD_CLOEXEC, 3);
        else
                fd = sv_b_resolve(j, root, dir, j->path, nofollow ? O_NOFOLLOW : 0);
        if (fd < 0)
                return -errno;
        sv_b_fd_path(fd, resolved, rsize);
        if (!resolved[0]) {     /* nothing to decide on */
                close(fd);
                return -EACCES;
        }
        return fd;
}

static bool is_opath(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        return fl >= 0 && (fl & O_PATH);
}

/* A name op: create, remove. */
static void name_op(struct sv_job *j, int root, int dir)
{
        char name[NAME_MAX + 1], resolved[PATH_MAX] = "";
        bool trailing;
        int e = 0;
        int pfd = parent_of(j, root, dir, j->path, name, sizeof name, resolved, sizeof resolved, &trailing);
        if (pfd < 0) {
                e = -pfd;
                goto fail;
        }
        /* A name that exists is EEXIST before anything else, as in the
         * kernel (mkdir -p relies on it, even on a read-only mount). */
        struct stat ex;
        bool creates = j->pathop != PO_UNLINK;
        if (creates && (!name[0] || fstatat(pfd, name, &ex, AT_SYMLINK_NOFOLLOW) == 0)) {
                close(pfd);
                e = EEXIST;
                goto fail;
        }
        enum sv_access acc = sv_policy_path(B.a->policy, resolved);
        if (restricted(acc)) {
                close(pfd);
                if (sv_b_id_valid(j->id))
                        sv_b_respond(j->id, EACCES);
                audit_pathop(j, resolved, NULL, "deny", EACCES, reason_of(acc));
                return;
        }
        if (!name[0]) {
                e = j->pathop == PO_UNLINK ? EBUSY : EEXIST;
        } else if (trailing && j->pathop != PO_MKDIR && j->pathop != PO_UNLINK) {
                e = ENOENT;
        } else {
                int r = -1;
                switch (j->pathop) {
                case PO_MKDIR: r = mkdirat(pfd, name, (mode_t)j->args[0]); break;
                case PO_MKNOD: r = mknodat(pfd, name, (mode_t)j->args[0], (dev_t)j->args[1]); break;
                case PO_SYMLINK: r = symlinkat(j->path2, pfd, name); break;
                case PO_UNLINK: {
                        struct stat st;
                        if (trailing && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
                                errno = ENOTDIR;
                                break;
                        }
                        r = unlinkat(pfd, name, (int)j->args[0]);
                        break;
                }
                }
                e = r < 0 ? errno : 0;
        }
        close(pfd);
fail:
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
        audit_pathop(j, resolved, NULL, e ? "error" : "allow", e, NULL);
}

static void link_op(struct sv_job *j, int root, int dir, int dir2, int extra)
{
        char src[PATH_MAX] = "", dst[PATH_MAX] = "", name[NAME_MAX + 1];
        const char *reason = NULL;
        bool trailing;
        int e = 0, sfd = -1, pfd = -1;
        if (j->args[0] & ~(uint64_t)(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH)) {
                e = EINVAL;
                goto out;
        }
        sfd = object_of(j, root, dir, extra, !(j->args[0] & AT_SYMLINK_FOLLOW), src, sizeof src);
        if (sfd < 0) {
                e = -sfd;
                goto out;
        }
        pfd = parent_of(j, root, dir2 >= 0 ? dir2 : dir, j->path2, name, sizeof name, dst, sizeof dst, &trailing);
        if (pfd < 0) {
                e = -pfd;
                goto out;
        }
        enum sv_access as = sv_policy_path(B.a->policy, src), ad = sv_policy_path(B.a->policy, dst);
        struct stat st;
        if (!name[0] || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                e = EEXIST;
                goto out;
        }
        if (restricted(as) || restricted(ad)) {
                e = EACCES;
                reason = reason_of(restricted(as) ? as : ad);
        } else if (fstat(sfd, &st) == 0 && sv_b_denied_inode(st.st_dev, st.st_ino)) {
                e = EACCES;
                reason = "deny (a covered file)";
        } else if (as != ad) {
                /* A second name under another rule would give the file
                 * that rule's access. */
                e = EXDEV;
                reason = "boundary";
        }
        if (e) {
                if (sv_b_id_valid(j->id))
                        sv_b_respond(j->id, e);
                audit_pathop(j, src, dst, "deny", e, reason);
                close(sfd);
                close(pfd);
                return;
        }
        if (!name[0] || trailing) {
                e = name[0] ? ENOENT : EEXIST;
        } else {
                /* Through our own /proc/self/fd: the file we decided on. */
                char n[16];
                snprintf(n, sizeof n, "%d", sfd);
                e = linkat(B.selffd, n, pfd, name, AT_SYMLINK_FOLLOW) < 0 ? errno : 0;
        }
out:
        if (sfd >= 0)
                close(sfd);
        if (pfd >= 0)
                close(pfd);
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
        audit_pathop(j, src, dst, e ? "error" : "allow", e, NULL);
}

static void rename_op(struct sv_job *j, int root, int dir, int dir2)
{
        char src[PATH_MAX] = "", dst[PATH_MAX] = "", n1[NAME_MAX + 1], n2[NAME_MAX + 1];
        const char *reason = NULL;
        bool t1, t2;
        int e = 0, p1 = -1, p2 = -1;
        p1 = parent_of(j, root, dir, j->path, n1, sizeof n1, src, sizeof src, &t1);
        if (p1 < 0) {
                e = -p1;
                goto out;
        }
        p2 = parent_of(j, root, dir2 >= 0 ? dir2 : dir, j->path2, n2, sizeof n2, dst, sizeof dst, &t2);
        if (p2 < 0) {
                e = -p2;
                goto out;
        }
        if (!n1[0] || !n2[0]) {
                e = EBUSY;
                goto out;
        }
        enum sv_access as = sv_policy_path(B.a->policy, src), ad = sv_policy_path(B.a->policy, dst);
        struct stat s1, s2;
        bool have1 = fstatat(p1, n1, &s1, AT_SYMLINK_NOFOLLOW) == 0;
        bool have2 = fstatat(p2, n2, &s2, AT_SYMLINK_NOFOLLOW) == 0;
        bool exchange = (j->args[0] & RENAME_EXCHANGE) != 0;
        if (restricted(as) || restricted(ad)) {
                e = EACCES;
                reason = reason_of(restricted(as) ? as : ad);
        } else if ((have1 && S_ISREG(s1.st_mode) && sv_b_denied_inode(s1.st_dev, s1.st_ino)) ||
                   (exchange && have2 && S_ISREG(s2.st_mode) && sv_b_denied_inode(s2.st_dev, s2.st_ino))) {
                e = EACCES;
                reason = "deny (a covered file)";
        } else if (((have1 && S_ISDIR(s1.st_mode)) || (exchange && have2 && S_ISDIR(s2.st_mode))) &&
                   (sv_policy_restricts_beneath(B.a->policy, src) ||
                    sv_policy_restricts_beneath(B.a->policy, dst))) {
                /* Its contents would change rules by a rename no rule
                 * sees: let mv copy them one by one. */
                e = EXDEV;
                reason = "boundary";
        }
        if (e) {
                if (sv_b_id_valid(j->id))
                        sv_b_respond(j->id, e);
                audit_pathop(j, src, dst, "deny", e, reason);
                close(p1);
                close(p2);
                return;
        }
        if ((t1 && have1 && !S_ISDIR(s1.st_mode)) || (t2 && have2 && !S_ISDIR(s2.st_mode)))
                e = ENOTDIR;
        else
                e = renameat2(p1, n1, p2, n2, (unsigned)j->args[0]) < 0 ? errno : 0;
out:
        if (p1 >= 0)
                close(p1);
        if (p2 >= 0)
                close(p2);
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
        audit_pathop(j, src, dst, e ? "error" : "allow", e, NULL);
}

/* chmod, chown, truncate, fallocate, xattrs, times: on one file. */
static void file_op(struct sv_job *j, int root, int dir, int extra)
{
        char resolved[PATH_MAX] = "";
        bool fdform = extra >= 0;
        uint64_t flags = j->pathop == PO_CHOWN || j->pathop == PO_UTIMENS || j->pathop == PO_SETXATTR ||
                                         j->pathop == PO_REMOVEXATTR
                                 ? j->args[2]
                                 : 0;
        int e = 0;
        if (j->pathop == PO_CHOWN && (flags & ~(uint64_t)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))) {
                e = EINVAL;
                goto out;
        }
        if (j->pathop == PO_UTIMENS && (flags & ~(uint64_t)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))) {
                e = EINVAL;
                goto out;
        }
        int fd = object_of(j, root, dir, extra, (flags & AT_SYMLINK_NOFOLLOW) != 0, resolved, sizeof resolved);
        if (fd < 0) {
                e = -fd;
                goto out;
        }
        enum sv_access acc = sv_policy_path(B.a->policy, resolved);
        if (restricted(acc)) {
                close(fd);
                if (sv_b_id_valid(j->id))
                        sv_b_respond(j->id, EACCES);
                audit_pathop(j, resolved, NULL, "deny", EACCES, reason_of(acc));
                return;
        }
        /* The fd-based calls refuse an O_PATH fd (EBADF): so do we. */
        if (fdform && is_opath(fd) && !(j->nr == SYS_fchownat)) {
                close(fd);
                e = EBADF;
                goto out;
        }
        int r = -1;
        switch (j->pathop) {
        case PO_CHMOD:
                r = fdform && !is_opath(fd) ? fchmod(fd, (mode_t)j->args[0])
                                            : (int)syscall(SYS_fchmodat2, fd, "", (unsigned)j->args[0], AT_EMPTY_PATH);
                break;
        case PO_CHOWN:
                r = fchownat(fd, "", (uid_t)j->args[0], (gid_t)j->args[1], AT_EMPTY_PATH);
                break;
        case PO_TRUNCATE:
                if (fdform) {
                        r = ftruncate(fd, (off_t)j->args[0]);
                } else {
                        /* truncate(2) needs what an open for writing needs */
                        struct stat st;
                        if (fstat(fd, &st) < 0)
                                break;
                        if (S_ISDIR(st.st_mode)) {
                                errno = EISDIR;
                                break;
                        }
                        if (!S_ISREG(st.st_mode)) {
                                errno = EINVAL;
                                break;
                        }
                        char n[16];
                        snprintf(n, sizeof n, "%d", fd);
                        int w = openat(B.selffd, n, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                        if (w < 0)
                                break;
                        r = ftruncate(w, (off_t)j->args[0]);
                        int se = errno;
                        close(w);
                        errno = se;
                }
                break;
        case PO_FALLOCATE:
                r = fallocate(fd, (int)j->args[0], (off_t)j->args[1], (off_t)j->args[2]);
                break;
        case PO_SETXATTR:
                if (fdform) {
                        r = fsetxattr(fd, j->path2, j->tail, (size_t)j->args[0], (int)j->args[1]);
                } else {
                        struct xattr_args_ xa = { (uintptr_t)j->tail, (uint32_t)j->args[0], (uint32_t)j->args[1] };
                        r = (int)syscall(SYS_setxattrat, fd, "", AT_EMPTY_PATH, j->path2, &xa, sizeof xa);
                }
                break;
        case PO_REMOVEXATTR:
                r = fdform ? fremovexattr(fd, j->path2)
                           : (int)syscall(SYS_removexattrat, fd, "", AT_EMPTY_PATH, j->path2);
                break;
        case PO_UTIMENS:
                r = fdform ? futimens(fd, j->tail_len ? (const struct timespec *)j->tail : NULL)
                           : utimensat(fd, "", j->tail_len ? (const struct timespec *)j->tail : NULL, AT_EMPTY_PATH);
                break;
        }
        e = r < 0 ? errno : 0;
        close(fd);
out:
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
        audit_pathop(j, resolved, NULL, e ? "error" : "allow", e, NULL);
}

/* bind: a named unix socket is a new name (decided as a create); any other
 * address is no path rule's business. */
static void bind_op(struct sv_job *j, int root, int dir, int sock)
{
        char resolved[PATH_MAX] = "", name[NAME_MAX + 1];
        bool trailing;
        int e = 0;
        if (!j->path[0]) {
                e = bind(sock, (const struct sockaddr *)j->addr, j->addrlen) < 0 ? errno : 0;
                if (sv_b_id_valid(j->id))
                        sv_b_respond(j->id, e);
                return;         /* not a path: not recorded */
        }
        int pfd = parent_of(j, root, dir, j->path, name, sizeof name, resolved, sizeof resolved, &trailing);
        if (pfd < 0) {
                e = -pfd;
                goto out;
        }
        enum sv_access acc = sv_policy_path(B.a->policy, resolved);
        if (restricted(acc)) {
                close(pfd);
                if (sv_b_id_valid(j->id))
                        sv_b_respond(j->id, EACCES);
                audit_pathop(j, resolved, NULL, "deny", EACCES, reason_of(acc));
                return;
        }
        struct sockaddr_un su = { .sun_family = AF_UNIX };
        if (!name[0] || trailing || strlen(name) >= sizeof su.sun_path) {
                e = name[0] ? EINVAL : EADDRINUSE;
        } else {
                /* bind(2) takes a path: ours, relative to the parent we
                 * decided on (the broker is single-threaded; its own
                 * lookups all use explicit directory fds). */
                memcpy(su.sun_path, name, strlen(name) + 1);
                if (fchdir(pfd) < 0)
                        e = errno;
                else
                        e = bind(sock, (struct sockaddr *)&su,
                                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name) + 1)) < 0
                                    ? errno
                                    : 0;
                (void)fchdir(B.sandroot);
        }
        close(pfd);
out:
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
        audit_pathop(j, resolved, NULL, e ? "error" : "allow", e, NULL);
}

void sv_do_pathop(struct sv_job *j, int root, int dir, int dir2, int extra)
{
        switch (j->pathop) {
        case PO_MKDIR:
        case PO_MKNOD:
        case PO_SYMLINK:
        case PO_UNLINK:
                return name_op(j, root, dir);
        case PO_LINK:
                return link_op(j, root, dir, dir2, extra);
        case PO_RENAME:
                return rename_op(j, root, dir, dir2);
        case PO_BIND:
                return bind_op(j, root, dir, extra);
        case PO_CHMOD:
        case PO_CHOWN:
        case PO_TRUNCATE:
        case PO_FALLOCATE:
        case PO_SETXATTR:
        case PO_REMOVEXATTR:
        case PO_UTIMENS:
                return file_op(j, root, dir, extra);
        default:
                if (sv_b_id_valid(j->id))
                        sv_b_respond(j->id, ENOSYS);
        }
}
