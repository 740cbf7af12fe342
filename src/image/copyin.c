/* COPY and ADD of a recipe (build.c): files from the build context into
 * a new store layer. The context is the user's directory but still
 * resolved with openat2(RESOLVE_BENEATH): a source that leaves it ('..',
 * a symlink pointing out) is refused; inside a copied directory symlinks
 * are copied as symlinks, never followed. The same walk, without writing,
 * hashes what would be copied (the step's cache key). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/copyin.h"
#include "lib/openat2.h"
#include "lib/template.h"
#include "lib/util.h"

#define MAX_DEPTH PD_TREE_DEPTH_MAX

struct walk {
        struct pd_sha256 *h;            /* hashing, or */
        int dst;                        /* writing below this dir fd (-1 when hashing) */
        uint32_t uid, gid;              /* store ids of the copies */
        uint64_t bytes;
};

static int open_src(int ctxfd, const char *src, struct pd_error *err)
{
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
        while (*src == '/')
                src++;          /* "/x" is the context's x, as in Docker */
        int fd = pd_openat2(ctxfd, *src ? src : ".", &how);
        if (fd < 0) {
                if (errno == EXDEV || errno == ELOOP)
                        return pd_error_setx(err, EPERM, "COPY source '%.200s' is outside the build context (refused)",
                                             src);
                return pd_error_set(err, errno, "COPY source '%.200s'", src);
        }
        return fd;
}

static void hash_meta(struct walk *w, const char *rel, const struct stat *s)
{
        char m[64];
        pd_sha256_update(w->h, rel, strlen(rel) + 1);
        snprintf(m, sizeof m, "%o %lld", s->st_mode, (long long)s->st_size);
        pd_sha256_update(w->h, m, strlen(m) + 1);
}

static int copy_file(struct walk *w, int sfd, int dparent, const char *name, const struct stat *s, const char *rel,
                     struct pd_error *err)
{
        char buf[65536];
        /* sfd is an O_PATH fd of a regular file we resolved: reopen it
         * for reading through its magic link (the one link we follow) */
        _pd_cleanup_close_ int in = open(pd_fd_path(sfd).s, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        struct stat now;
        if (in >= 0 && (fstat(in, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != s->st_ino)) {
                close(in);
                in = -1;
                errno = EAGAIN;
        }
        if (in < 0)
                return pd_error_set(err, errno, "read '%.200s'", rel);
        _pd_cleanup_close_ int out = -1;
        if (w->dst >= 0) {
                (void)pd_unpack_remove(dparent, name, 0);
                out = openat(dparent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (out < 0)
                        return pd_error_set(err, errno, "create '%.200s'", rel);
        }
        ssize_t n;
        while ((n = read(in, buf, sizeof buf)) > 0) {
                if (w->dst < 0)
                        pd_sha256_update(w->h, buf, (size_t)n);
                else if (pd_write_all(out, buf, (size_t)n) < 0)
                        return pd_error_set(err, errno, "write '%.200s'", rel);
                w->bytes += (uint64_t)n;
        }
        if (n < 0)
                return pd_error_set(err, errno, "read '%.200s'", rel);
        if (w->dst >= 0 && (fchown(out, w->uid, w->gid) < 0 || fchmod(out, s->st_mode & 0777) < 0))
                return pd_error_set(err, errno, "set up '%.200s'", rel);
        return 0;
}

static int walk_entry(struct walk *w, int sdir, const char *sname, int dparent, const char *dname, const char *rel,
                      unsigned depth, struct pd_error *err);

static int walk_dir(struct walk *w, int sfd, int dfd, const char *rel, unsigned depth, struct pd_error *err)
{
        if (depth > MAX_DEPTH)
                return pd_error_setx(err, ELOOP, "'%.200s' is nested too deep", rel);
        int fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return pd_error_set(err, errno, "read directory '%.200s'", rel);
        }
        /* sorted, so the hash does not depend on the directory's order */
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (n == cap) {
                        char **nn = realloc(names, (cap = cap ? cap * 2 : 32) * sizeof *names);
                        if (!nn) {
                                r = pd_error_set(err, ENOMEM, "list");
                                break;
                        }
                        names = nn;
                }
                names[n++] = strdup(de->d_name);
        }
        closedir(d);
        if (r == 0 && n)
                qsort(names, n, sizeof *names, (int (*)(const void *, const void *))strcmp);
        for (size_t i = 0; i < n; i++) {
                if (r == 0 && names[i]) {
                        char sub[PATH_MAX];
                        snprintf(sub, sizeof sub, "%s/%s", rel, names[i]);
                        r = walk_entry(w, sfd, names[i], dfd, names[i], sub, depth + 1, err);
                }
                free(names[i]);
        }
        free(names);
        return r;
}

static int walk_entry(struct walk *w, int sdir, const char *sname, int dparent, const char *dname, const char *rel,
                      unsigned depth, struct pd_error *err)
{
        struct stat s;
        if (fstatat(sdir, sname, &s, AT_SYMLINK_NOFOLLOW) < 0)
                return pd_error_set(err, errno, "stat '%.200s'", rel);
        if (w->dst < 0)
                hash_meta(w, rel, &s);
        switch (s.st_mode & S_IFMT) {
        case S_IFDIR: {
                _pd_cleanup_close_ int sf = openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sf < 0)
                        return pd_error_set(err, errno, "open '%.200s'", rel);
                _pd_cleanup_close_ int df = -1;
                if (w->dst >= 0) {
                        struct stat d;
                        if (fstatat(dparent, dname, &d, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(d.st_mode))
                                (void)pd_unpack_remove(dparent, dname, 0);
                        if (mkdirat(dparent, dname, 0755) < 0 && errno != EEXIST)
                                return pd_error_set(err, errno, "create '%.200s'", rel);
                        df = openat(dparent, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (df < 0 || fchown(df, w->uid, w->gid) < 0 || fchmod(df, s.st_mode & 0777) < 0)
                                return pd_error_set(err, errno, "set up '%.200s'", rel);
                }
                return walk_dir(w, sf, df, rel, depth, err);
        }
        case S_IFREG: {
                _pd_cleanup_close_ int sf = openat(sdir, sname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (sf < 0)
                        return pd_error_set(err, errno, "open '%.200s'", rel);
                return copy_file(w, sf, dparent, dname, &s, rel, err);
        }
        case S_IFLNK: {
                char t[PATH_MAX];
                ssize_t n = readlinkat(sdir, sname, t, sizeof t - 1);
                if (n < 0)
                        return pd_error_set(err, errno, "read link '%.200s'", rel);
                t[n] = '\0';
                if (w->dst < 0) {
                        pd_sha256_update(w->h, t, (size_t)n + 1);
                        return 0;
                }
                (void)pd_unpack_remove(dparent, dname, 0);
                if (symlinkat(t, dparent, dname) < 0 || fchownat(dparent, dname, w->uid, w->gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return pd_error_set(err, errno, "create link '%.200s'", rel);
                return 0;
        }
        default:
                return 0;       /* devices, fifos, sockets of the context are not copied */
        }
}

/* The destination's parent directories in the new layer, each taking its
 * mode and owner from the image below when it has that directory. */
static int dest_parent(const struct pd_copyin *c, int root, const char *dir, struct pd_error *err)
{
        int fd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char buf[PATH_MAX], sofar[PATH_MAX] = "";
        snprintf(buf, sizeof buf, "%s", dir);
        char *save = NULL;
        for (char *p = strtok_r(buf, "/", &save); p && fd >= 0; p = strtok_r(NULL, "/", &save)) {
                if (!strcmp(p, ".") || !strcmp(p, "..")) {
                        close(fd);
                        return pd_error_setx(err, EINVAL, "COPY destination '%.200s' has '.' or '..'", dir);
                }
                size_t l = strlen(sofar);
                snprintf(sofar + l, sizeof sofar - l, "%s%s", l ? "/" : "", p);
                struct stat below = { .st_mode = S_IFDIR | 0755, .st_uid = PD_STORE_UID_BASE,
                                      .st_gid = PD_STORE_UID_BASE };
                int bfd = pd_image_lookup(c->st, c->top_first, c->n, sofar, &below);
                if (bfd >= 0)
                        close(bfd);
                if (bfd >= 0 && !S_ISDIR(below.st_mode)) {
                        close(fd);
                        return pd_error_setx(err, ENOTDIR, "COPY destination: '/%.200s' is not a directory in the image",
                                             sofar);
                }
                if (mkdirat(fd, p, below.st_mode & 07777) < 0 && errno != EEXIST) {
                        close(fd);
                        return pd_error_set(err, errno, "create '/%.200s'", sofar);
                }
                int nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                close(fd);
                fd = nfd;
                if (fd >= 0 && (fchown(fd, below.st_uid, below.st_gid) < 0 || fchmod(fd, below.st_mode & 07777) < 0)) {
                        close(fd);
                        return pd_error_set(err, errno, "set up '/%.200s'", sofar);
                }
        }
        return fd < 0 ? pd_error_set(err, errno, "create '%.200s'", dir) : fd;
}

int pd_copyin(const struct pd_copyin *c, int root, struct pd_sha256 *hash, uint64_t *bytes, struct pd_error *err)
{
        struct walk w = { .h = hash, .dst = root, .uid = PD_STORE_UID_BASE + c->uid,
                          .gid = PD_STORE_UID_BASE + c->gid };
        bool to_dir = c->dest[strlen(c->dest) - 1] == '/' || c->n_srcs > 1;
        int r = 0;
        for (unsigned i = 0; i < c->n_srcs && r == 0; i++) {
                _pd_cleanup_close_ int sfd = open_src(c->ctxfd, c->srcs[i], err);
                if (sfd < 0)
                        return sfd;
                struct stat s;
                if (fstat(sfd, &s) < 0)
                        return pd_error_set(err, errno, "stat '%.200s'", c->srcs[i]);
                if (hash) {
                        char tag[PATH_MAX];
                        snprintf(tag, sizeof tag, "src:%s", c->srcs[i]);
                        pd_sha256_update(hash, tag, strlen(tag) + 1);
                }
                /* where it lands: a directory's contents into dest; a
                 * file at dest, or into it when dest is a directory */
                char dpath[PATH_MAX], dname[256] = "";
                snprintf(dpath, sizeof dpath, "%s", c->dest);
                if (!S_ISDIR(s.st_mode)) {
                        const char *base = strrchr(c->srcs[i], '/');
                        base = base ? base + 1 : c->srcs[i];
                        if (to_dir) {
                                snprintf(dname, sizeof dname, "%s", base);
                        } else {
                                char *slash = strrchr(dpath, '/');
                                snprintf(dname, sizeof dname, "%s", slash ? slash + 1 : dpath);
                                if (slash)
                                        *slash = '\0';
                                else
                                        dpath[0] = '\0';
                        }
                }
                _pd_cleanup_close_ int dfd = -1;
                if (!hash && (dfd = dest_parent(c, root, dpath, err)) < 0)
                        return dfd;
                w.dst = hash ? -1 : dfd;
                if (S_ISDIR(s.st_mode)) {
                        _pd_cleanup_close_ int d = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (d < 0)
                                return pd_error_set(err, errno, "open '%.200s'", c->srcs[i]);
                        r = walk_dir(&w, d, w.dst, c->srcs[i], 0, err);
                } else if (S_ISREG(s.st_mode)) {
                        if (hash)
                                hash_meta(&w, c->srcs[i], &s);
                        r = copy_file(&w, sfd, dfd, dname, &s, c->srcs[i], err);
                } else {
                        return pd_error_setx(err, EINVAL, "COPY source '%.200s' is not a file or directory", c->srcs[i]);
                }
        }
        if (bytes)
                *bytes = w.bytes;
        return r;
}
