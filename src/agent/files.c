/* File requests that answer at once: stat, list, mkdir, move, remove.
 * Every path goes through openat2(RESOLVE_IN_ROOT) (path.c) and every
 * operation runs under the caller's fsuid/fsgid. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"

/* Common prologue: credentials and one resolved path. */
static int prologue(const struct ag_req *r, uint32_t *uid, uint32_t *gid, char *abs)
{
        int k = ag_req_creds(r->payload, r->h->len, uid, gid, r->err);
        if (k < 0)
                return k;
        return ag_get_path(r, PD_A_PATH, *uid, abs, PATH_MAX);
}

int ag_req_file_stat(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t uid, gid;
        char abs[PATH_MAX], name[NAME_MAX + 1];
        int k = prologue(r, &uid, &gid, abs);
        if (k < 0)
                return k;
        struct ag_fsid f;
        ag_fsid_enter(&f, uid, gid);
        _pd_cleanup_close_ int dfd = ag_open_parent(ag, abs, name, sizeof name, r->err);
        k = dfd < 0 ? dfd : ag_put_entry(r->reply, dfd, name, abs, r->err);
        ag_fsid_leave(&f);
        return k;
}

static int list_dir(struct pd_msg *m, int dfd, const char *abs, uint32_t depth, struct pd_error *err)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open '%s'", abs);
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return pd_error_set(err, errno, "opendir '%s'", abs);
        }
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                char child[PATH_MAX];
                if (snprintf(child, sizeof child, "%s/%s", strcmp(abs, "/") ? abs : "",
                             de->d_name) >= (int)sizeof child)
                        continue;
                if (ag_put_entry(m, dirfd(d), de->d_name, child, err) < 0)
                        continue;       /* vanished meanwhile */
                if (m->failed) {
                        r = pd_error_setx(err, EMSGSIZE, "too many entries under '%s' for one reply",
                                          abs);
                        break;
                }
                if (depth > 1) {
                        /* O_NOFOLLOW: never descend through a symlink */
                        int sub = openat(dirfd(d), de->d_name,
                                         O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                continue;
                        r = list_dir(m, sub, child, depth - 1, err);
                        close(sub);
                        if (r < 0 && m->failed)
                                break;
                        r = 0;
                }
        }
        closedir(d);
        return r;
}

int ag_req_file_list(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t uid, gid, depth = 1;
        char abs[PATH_MAX];
        int k = prologue(r, &uid, &gid, abs);
        if (k < 0)
                return k;
        if ((k = ag_get_u32(r, PD_A_DEPTH, &depth)) < 0)
                return k;
        if (depth == 0)
                depth = 1;
        if (depth > 64)
                depth = 64;
        struct ag_fsid f;
        ag_fsid_enter(&f, uid, gid);
        _pd_cleanup_close_ int fd = ag_open_in_root(ag, abs, O_PATH | O_DIRECTORY, 0);
        if (fd < 0)
                k = pd_error_set(r->err, -fd, "open directory '%s'", abs);
        else
                k = list_dir(r->reply, fd, abs, depth, r->err);
        ag_fsid_leave(&f);
        return k;
}

static int mkdir_parents(struct agent *ag, const char *abs, mode_t mode, struct pd_error *err)
{
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s", abs);
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                char name[NAME_MAX + 1];
                int dfd = ag_open_parent(ag, p, name, sizeof name, err);
                if (dfd < 0)
                        return dfd;
                int k = mkdirat(dfd, name, 0755);
                int e = errno;
                close(dfd);
                if (k < 0 && e != EEXIST)
                        return pd_error_set(err, e, "mkdir '%s'", p);
                *s = '/';
        }
        (void)mode;
        return 0;
}

int ag_req_file_mkdir(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t uid, gid, mode = 0755, parents = 0;
        char abs[PATH_MAX], name[NAME_MAX + 1];
        int k = prologue(r, &uid, &gid, abs);
        if (k < 0)
                return k;
        if ((k = ag_get_u32(r, PD_A_MODE, &mode)) < 0 || (k = ag_get_u32(r, PD_A_PARENTS, &parents)) < 0)
                return k;
        if (mode & ~07777u)
                return pd_error_setx(r->err, EINVAL, "bad mode %o", mode);
        struct ag_fsid f;
        ag_fsid_enter(&f, uid, gid);
        if (parents)
                k = mkdir_parents(ag, abs, mode, r->err);
        int dfd = -1;
        if (k >= 0) {
                dfd = ag_open_parent(ag, abs, name, sizeof name, r->err);
                k = dfd;
        }
        if (k >= 0 && !name[0])
                k = pd_error_setx(r->err, EEXIST, "'/' exists");
        if (k >= 0 && mkdirat(dfd, name, (mode_t)mode) < 0)
                k = pd_error_set(r->err, errno, "mkdir '%s'", abs);
        if (k >= 0) {
                int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                        fchmod(sub, (mode_t)mode);      /* past the umask */
                        close(sub);
                }
                k = ag_put_entry(r->reply, dfd, name, abs, r->err);
        }
        if (dfd >= 0)
                close(dfd);
        ag_fsid_leave(&f);
        return k;
}

int ag_req_file_move(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t uid, gid;
        char abs[PATH_MAX], abs2[PATH_MAX], n1[NAME_MAX + 1], n2[NAME_MAX + 1];
        int k = prologue(r, &uid, &gid, abs);
        if (k < 0)
                return k;
        if ((k = ag_get_path(r, PD_A_PATH2, uid, abs2, sizeof abs2)) < 0)
                return k;
        struct ag_fsid f;
        ag_fsid_enter(&f, uid, gid);
        _pd_cleanup_close_ int d1 = ag_open_parent(ag, abs, n1, sizeof n1, r->err);
        _pd_cleanup_close_ int d2 = d1 < 0 ? -1 : ag_open_parent(ag, abs2, n2, sizeof n2, r->err);
        k = d1 < 0 ? d1 : d2;
        if (k >= 0 && (!n1[0] || !n2[0]))
                k = pd_error_setx(r->err, EBUSY, "cannot move '/'");
        if (k >= 0 && renameat(d1, n1, d2, n2) < 0)
                k = pd_error_set(r->err, errno, "move '%s' to '%s'", abs, abs2);
        if (k >= 0)
                k = ag_put_entry(r->reply, d2, n2, abs2, r->err);
        ag_fsid_leave(&f);
        return k;
}

/* rm -r below dfd/name without following symlinks. */
static int remove_tree(int dfd, const char *name, const char *abs, struct pd_error *err)
{
        if (unlinkat(dfd, name, 0) == 0)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return pd_error_set(err, errno, "remove '%s'", abs);
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno == ENOTDIR ? EPERM : errno, "remove '%s'", abs);
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return pd_error_set(err, errno, "opendir '%s'", abs);
        }
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                char child[PATH_MAX];
                snprintf(child, sizeof child, "%s/%s", abs, de->d_name);
                r = remove_tree(dirfd(d), de->d_name, child, err);
                if (r < 0)
                        break;
        }
        closedir(d);
        if (r < 0)
                return r;
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0)
                return pd_error_set(err, errno, "remove '%s'", abs);
        return 0;
}

int ag_req_file_remove(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t uid, gid;
        char abs[PATH_MAX], name[NAME_MAX + 1];
        int k = prologue(r, &uid, &gid, abs);
        if (k < 0)
                return k;
        struct ag_fsid f;
        ag_fsid_enter(&f, uid, gid);
        _pd_cleanup_close_ int dfd = ag_open_parent(ag, abs, name, sizeof name, r->err);
        k = dfd;
        if (k >= 0 && !name[0])
                k = pd_error_setx(r->err, EBUSY, "refusing to remove '/'");
        if (k >= 0)
                k = remove_tree(dfd, name, abs, r->err);
        ag_fsid_leave(&f);
        return k;
}
