/* The supervised tier's path rules as mounts (mount.h, docs/security.md
 * "`supervised` tier"): what the kernel can enforce for every syscall form,
 * fd-based ones included, the supervisor's brokering cannot.
 *
 * Runs in the post-clone child after the tree is built and before
 * pivot_root, as root of the sandbox's user namespace: no malloc, no stdio.
 *
 * Which rules become mounts. The policy's first matching rule decides, so a
 * mount for rule i must not restrict a path that an earlier rule j decides
 * differently:
 *   - i is dropped when an earlier "P/" "**" rule (or the same literal path)
 *     covers all of i: i never decides anything;
 *   - an earlier rule that is itself a mount and lies beneath i becomes a
 *     nested mount over i's (attached later: mounts go parent first), so
 *     its own access holds there; for rw rules that nested mount is a bind
 *     of the original tree (a "hole"). A deny cover is an empty directory:
 *     nothing can be nested in it, so such a deny rule is left to the
 *     supervisor;
 *   - any other earlier rule that may match beneath i (a glob, by its
 *     literal prefix; a rule whose path is missing or is not a directory)
 *     keeps i's mount only if it restricts at least what i's mount does
 *     (deny > ro, deny > noexec); else i is left to the supervisor.
 * A rule left to the supervisor is still enforced by it on every brokered
 * call (opens, creates, renames, links, metadata changes); only the
 * kernel-level guarantee is missing (docs). */
#include "jail/mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/openat2.h"
#include "lib/util.h"

#define R_READ 1
#define R_WRITE 2
#define R_EXEC 4
#define WALK_DEPTH 16
#define WALK_MAX_ENTRIES 50000

enum { ST_NONE = 0, ST_HOLE, ST_MOUNT };

static unsigned restrictions(uint8_t access)
{
        switch (access) {
        case PD_RULE_RO: return R_WRITE;
        case PD_RULE_NOEXEC: return R_EXEC;
        case PD_RULE_DENY: return R_READ | R_WRITE | R_EXEC;
        default: return 0;
        }
}

/* a is b or lies beneath b */
static bool under(const char *a, const char *b)
{
        size_t n = strlen(b);
        if (!strcmp(b, "/"))
                return true;
        return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/');
}

static unsigned depth(const char *p)
{
        unsigned d = 0;
        if (!strcmp(p, "/"))
                return 0;
        for (; *p; p++)
                d += *p == '/';
        return d;
}

/* O_PATH of path inside the tree at rootfd, no symlink anywhere on the way
 * (a rule decides on resolved paths: a path through a symlink is never
 * one), -errno if there is none. */
static int open_target(int rootfd, const char *path)
{
        return pd_open_in_root(rootfd, path, O_PATH | O_NOFOLLOW, 0, RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS);
}

static void note_inode(struct pd_mount_plan *p, const struct stat *st)
{
        for (unsigned i = 0; i < p->n_deny_inodes; i++)
                if (p->deny_inodes[i].dev == st->st_dev && p->deny_inodes[i].ino == st->st_ino)
                        return;
        if (p->n_deny_inodes >= PD_MAX_DENY_INODES) {
                p->deny_inodes_truncated = true;
                return;
        }
        p->deny_inodes[p->n_deny_inodes].dev = st->st_dev;
        p->deny_inodes[p->n_deny_inodes].ino = st->st_ino;
        p->n_deny_inodes++;
}

struct dirent64_hdr {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
};

/* The files beneath a denied directory that have other names (st_nlink >
 * 1): after the cover, those other names are the only way to them. Depth-
 * first with one fd per level; a level resumes after a subdirectory at the
 * d_off of that subdirectory's entry. Bounded in depth and entries (the
 * bound is in the docs). */
static void walk_denied_dir(struct pd_mount_plan *p, int top)
{
        static char buf[8192];
        int fds[WALK_DEPTH];
        int64_t resume[WALK_DEPTH];
        unsigned level = 0, seen = 0;
        fds[0] = openat(top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fds[0] < 0) {
                p->deny_inodes_truncated = true;
                return;
        }
        resume[0] = 0;
        for (;;) {
                int fd = fds[level];
                if (lseek(fd, resume[level], SEEK_SET) < 0)
                        goto up;
                long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
                if (n <= 0)
                        goto up;
                bool descended = false;
                for (long off = 0; off < n;) {
                        struct dirent64_hdr *d = (void *)(buf + off);
                        off += d->d_reclen;
                        resume[level] = d->d_off;
                        if (++seen > WALK_MAX_ENTRIES) {
                                p->deny_inodes_truncated = true;
                                goto done;
                        }
                        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
                                continue;
                        /* only directories and regular files matter */
                        if (d->d_type != DT_DIR && d->d_type != DT_REG && d->d_type != DT_UNKNOWN)
                                continue;
                        struct stat st;
                        if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        if (S_ISDIR(st.st_mode)) {
                                if (level + 1 >= WALK_DEPTH) {
                                        p->deny_inodes_truncated = true;
                                        continue;
                                }
                                int sub = openat(fd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                if (sub < 0)
                                        continue;
                                fds[++level] = sub;
                                resume[level] = 0;
                                descended = true;
                                break;
                        }
                        if (!S_ISLNK(st.st_mode) && st.st_nlink > 1)
                                note_inode(p, &st);
                }
                if (descended)
                        continue;
                continue;       /* next chunk of this level */
        up:
                close(fds[level]);
                if (level == 0)
                        return;
                level--;
        }
done:
        for (unsigned i = 0; i <= level; i++)
                close(fds[i]);
}

/* A small read-only tmpfs holding what deny mounts show: an empty mode-000
 * directory "d" and an empty mode-000 file "f". */
static int deny_cover(int stagefd, struct pd_error *err)
{
        if (mkdirat(stagefd, "policy-deny", 0) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create the deny cover");
        _pd_cleanup_close_ int mp = openat(stagefd, "policy-deny", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (mp < 0)
                return pd_error_set(err, errno, "open the deny cover");
        if (mount("paddock-deny", pd_fd_path(mp).s, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=000,size=4k,nr_inodes=8") < 0)
                return pd_error_set(err, errno, "mount the deny cover");
        int fd = openat(stagefd, "policy-deny", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open the deny cover");
        int f = openat(fd, "f", O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
        if (f < 0 || mkdirat(fd, "d", 0) < 0) {
                int e = errno;
                if (f >= 0)
                        close(f);
                close(fd);
                return pd_error_set(err, e, "fill the deny cover");
        }
        close(f);
        if (mount(NULL, pd_fd_path(fd).s, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "make the deny cover read-only");
        }
        return fd;
}

int pd_mount_policy(struct pd_mount_plan *p, int stagefd, struct pd_error *err)
{
        static uint8_t state[PD_MAX_POLICY_RULES];
        static bool isdir[PD_MAX_POLICY_RULES], shadowed[PD_MAX_POLICY_RULES];
        int fds[PD_MAX_POLICY_RULES], trees[PD_MAX_POLICY_RULES];
        unsigned n = p->n_rules < PD_MAX_POLICY_RULES ? p->n_rules : PD_MAX_POLICY_RULES;
        int r = 0, cover = -1;
        for (unsigned i = 0; i < n; i++)
                fds[i] = trees[i] = -1;
        _pd_cleanup_close_ int rootfd = openat(stagefd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                return pd_error_set(err, errno, "open new root");

        for (unsigned i = 0; i < n; i++) {
                const struct pd_mount_rule *ri = &p->rules[i];
                state[i] = ST_NONE;
                shadowed[i] = false;
                if (ri->glob)
                        continue;
                for (unsigned j = 0; j < i && !shadowed[i]; j++) {
                        const struct pd_mount_rule *rj = &p->rules[j];
                        shadowed[i] = !rj->glob && (rj->recursive ? under(ri->path, rj->path)
                                                                  : !strcmp(ri->path, rj->path));
                }
                if (shadowed[i])
                        continue;
                if (ri->create) {
                        char rel[256];
                        snprintf(rel, sizeof rel, "%s", ri->path + 1);
                        for (char *s = rel;; s++) {
                                if (*s == '/' || !*s) {
                                        char c = *s;
                                        *s = '\0';
                                        (void)mkdirat(rootfd, rel, 0755);
                                        *s = c;
                                        if (!c)
                                                break;
                                }
                        }
                }
                fds[i] = open_target(rootfd, ri->path);
                struct stat st;
                if (fds[i] < 0 || fstat(fds[i], &st) < 0)
                        continue;
                isdir[i] = S_ISDIR(st.st_mode);
                if (isdir[i] && !ri->recursive)
                        continue;       /* a literal rule names the directory alone, not what is in it */
                if (ri->access == PD_RULE_RW) {
                        state[i] = ST_HOLE;
                        continue;
                }
                bool ok = true;
                for (unsigned j = 0; j < i && ok; j++) {
                        const struct pd_mount_rule *rj = &p->rules[j];
                        if (shadowed[j])
                                continue;
                        bool overlap;
                        if (rj->glob)
                                overlap = under(rj->path, ri->path) || under(ri->path, rj->path);
                        else
                                overlap = isdir[i] && under(rj->path, ri->path);
                        if (!overlap)
                                continue;
                        if (state[j] != ST_NONE)
                                ok = ri->access != PD_RULE_DENY;        /* nested mount: not in a cover */
                        else
                                ok = (restrictions(rj->access) & restrictions(ri->access)) ==
                                     restrictions(ri->access);
                }
                if (ok)
                        state[i] = ST_MOUNT;
        }
        /* Rules the mounts do not enforce: the supervisor must see the
         * calls that change paths (a shadowed rule decides nothing). */
        p->need_broker = p->rules_truncated;
        for (unsigned i = 0; i < n; i++)
                if (!shadowed[i] && state[i] != ST_MOUNT &&
                    (p->rules[i].access == PD_RULE_RO || p->rules[i].access == PD_RULE_DENY))
                        p->need_broker = true;
        /* A hole is needed only inside a restricting mount. */
        for (unsigned j = 0; j < n; j++) {
                if (state[j] != ST_HOLE)
                        continue;
                bool inside = false;
                for (unsigned i = j + 1; i < n && !inside; i++)
                        inside = state[i] == ST_MOUNT && isdir[i] && under(p->rules[j].path, p->rules[i].path);
                if (!inside)
                        state[j] = ST_NONE;
        }
        /* Clone every source from the tree as built, before any policy
         * mount changes what a path shows. */
        for (unsigned i = 0; i < n && r == 0; i++) {
                if (state[i] == ST_NONE)
                        continue;
                const struct pd_mount_rule *ri = &p->rules[i];
                struct mount_attr attr = { 0 };
                if (ri->access == PD_RULE_DENY) {
                        if (cover < 0 && (cover = deny_cover(stagefd, err)) < 0) {
                                r = cover;
                                break;
                        }
                        struct stat st;
                        if (fstat(fds[i], &st) == 0) {
                                if (isdir[i])
                                        walk_denied_dir(p, fds[i]);
                                else
                                        note_inode(p, &st);
                        }
                        trees[i] = (int)syscall(SYS_open_tree, cover, isdir[i] ? "d" : "f",
                                                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                        attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
                } else {
                        trees[i] = (int)syscall(SYS_open_tree, fds[i], "",
                                                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
                        if (ri->access == PD_RULE_RO)
                                attr.attr_set = MOUNT_ATTR_RDONLY;
                        else if (ri->access == PD_RULE_NOEXEC)
                                attr.attr_set = MOUNT_ATTR_NOEXEC;
                }
                if (trees[i] < 0) {
                        r = pd_error_set(err, errno, "policy rule %u: clone '%s'", i, ri->path);
                        break;
                }
                if (attr.attr_set && syscall(SYS_mount_setattr, trees[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                                             sizeof attr) < 0)
                        r = pd_error_set(err, errno, "policy rule %u: mount attributes for '%s'", i, ri->path);
        }
        /* Attach parents before what is nested in them. */
        for (unsigned d = 0; d < 256 && r == 0; d++) {
                for (unsigned i = 0; i < n && r == 0; i++) {
                        if (state[i] == ST_NONE || depth(p->rules[i].path) != d)
                                continue;
                        _pd_cleanup_close_ int root = openat(stagefd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
                        _pd_cleanup_close_ int t = root < 0 ? -1 : open_target(root, p->rules[i].path);
                        if (t < 0 || syscall(SYS_move_mount, trees[i], "", t, "",
                                             MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                                r = pd_error_set(err, errno, "policy rule %u: mount on '%s'", i, p->rules[i].path);
                }
        }
        for (unsigned i = 0; i < n; i++) {
                if (fds[i] >= 0)
                        close(fds[i]);
                if (trees[i] >= 0)
                        close(trees[i]);
        }
        if (cover >= 0)
                close(cover);
        return r;
}
