/* Layer unpacking (unpack.h): libarchive reads, we create every entry
 * ourselves relative to directory fds. Two readers are chained: the outer
 * one undoes the compression ("raw" format: one entry, the decompressed
 * stream), the inner one reads the tar from it; each read callback hashes
 * what passes, so the blob digest and the diff_id cost no second pass. */
#include "image/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/openat2.h"
#include "lib/util.h"

#define IO_BUF (64u << 10)
#define MAX_PATH_LEN 4096
#define MAX_XATTRS 128
#define MAX_XATTR_VALUE (64u << 10)
#define MAX_DEPTH PD_TREE_DEPTH_MAX
#define ID_RANGE 65536u
#define OPAQUE_XATTR "user.overlay.opaque"

struct outer {
        int fd;
        struct pd_sha256 *h;
        uint64_t n, reported;
        const struct pd_unpack_opts *o;
        uint8_t buf[IO_BUF];
};

struct inner {
        struct archive *outer;
        struct pd_sha256 *h;
        uint64_t n;
        uint8_t buf[IO_BUF];
};

static la_ssize_t outer_read(struct archive *a, void *arg, const void **buf)
{
        struct outer *c = arg;
        ssize_t n;
        do
                n = read(c->fd, c->buf, sizeof c->buf);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                archive_set_error(a, errno, "read the layer blob");
                return -1;
        }
        pd_sha256_update(c->h, c->buf, (size_t)n);
        c->n += (uint64_t)n;
        if (c->o->progress && (c->n - c->reported >= (4u << 20) || n == 0)) {
                c->reported = c->n;
                c->o->progress(c->n, c->o->total, c->o->arg);
        }
        *buf = c->buf;
        return n;
}

static la_ssize_t inner_read(struct archive *a, void *arg, const void **buf)
{
        struct inner *c = arg;
        la_ssize_t n = archive_read_data(c->outer, c->buf, sizeof c->buf);
        if (n < 0) {
                archive_set_error(a, archive_errno(c->outer) ? archive_errno(c->outer) : EIO, "%s",
                                  archive_error_string(c->outer) ? archive_error_string(c->outer)
                                                                 : "decompression failed");
                return -1;
        }
        pd_sha256_update(c->h, c->buf, (size_t)n);
        c->n += (uint64_t)n;
        *buf = c->buf;
        return n;
}

/* A tar path made relative and clean: no leading "./", no "." or empty
 * components; absolute paths and ".." refused. "" is the layer's root. */
static int clean_path(const char *in, char *out, size_t size, struct pd_error *err)
{
        if (!in)
                return pd_error_setx(err, EINVAL, "an entry has no path (or one not in this locale's charset)");
        size_t len = strlen(in);
        if (len >= MAX_PATH_LEN || len >= size)
                return pd_error_setx(err, ENAMETOOLONG, "an entry's path is %zu bytes long (at most %d)", len,
                                     MAX_PATH_LEN - 1);
        if (in[0] == '/')
                return pd_error_setx(err, EPERM, "entry '%.200s' has an absolute path", in);
        size_t o = 0;
        const char *p = in;
        while (*p) {
                const char *s = strchr(p, '/');
                size_t n = s ? (size_t)(s - p) : strlen(p);
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return pd_error_setx(err, EPERM, "entry '%.200s' has a '..' component", in);
                if (n > 255)
                        return pd_error_setx(err, ENAMETOOLONG, "entry '%.200s' has a name over 255 bytes", in);
                if (n && !(n == 1 && p[0] == '.')) {
                        if (o)
                                out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p += n;
                while (*p == '/')
                        p++;
        }
        out[o] = '\0';
        unsigned depth = pd_path_depth(out);
        if (depth > MAX_DEPTH)
                return pd_error_setx(err, ELOOP, "entry '%.120s...' is nested %u levels deep (at most %d)", out,
                                     depth, MAX_DEPTH);
        return 0;
}

/* The directory part of path below rootfd, opened without following any
 * symlink or leaving the tree; missing directories are made (owned by the
 * store's root) when create is set. */
static int open_dir(int rootfd, const char *dir, bool create, uint32_t base, struct pd_error *err)
{
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        if (!*dir)
                return pd_openat2(rootfd, ".", &how);
        int fd = pd_openat2(rootfd, dir, &how);
        if (fd >= 0)
                return fd;
        if (errno == ELOOP || errno == ENOTDIR)
                return pd_error_setx(err, EPERM, "'%.200s' is a symlink or not a directory in this layer "
                                     "(refused: symlinks are never followed)", dir);
        if (errno != ENOENT || !create)
                return pd_error_set(err, errno, "open directory '%.200s'", dir);
        char buf[MAX_PATH_LEN];
        snprintf(buf, sizeof buf, "%s", dir);
        for (char *p = buf;; p++) {
                if (*p != '/' && *p != '\0')
                        continue;
                char c = *p;
                *p = '\0';
                int q = pd_openat2(rootfd, buf, &how);
                if (q < 0 && errno == ENOENT) {
                        if (mkdirat(rootfd, buf, 0755) < 0 && errno != EEXIST)
                                return pd_error_set(err, errno, "create directory '%.200s'", buf);
                        q = pd_openat2(rootfd, buf, &how);
                        if (q >= 0 && fchown(q, base, base) < 0) {
                                int e = errno;
                                close(q);
                                return pd_error_set(err, e, "chown '%.200s'", buf);
                        }
                }
                if (q < 0)
                        return errno == ELOOP || errno == ENOTDIR
                                       ? pd_error_setx(err, EPERM, "'%.200s' is a symlink or not a directory in this "
                                                       "layer (refused: symlinks are never followed)", buf)
                                       : pd_error_set(err, errno, "open directory '%.200s'", buf);
                *p = c;
                if (c == '\0')
                        return q;
                close(q);
        }
}

int pd_unpack_remove(int pfd, const char *name, unsigned depth)
{
        if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        if (depth > MAX_DEPTH)
                return -ELOOP;
        int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -ENOMEM;
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        r = pd_unpack_remove(dirfd(d), de->d_name, depth + 1);
        closedir(d);
        if (r == 0 && unlinkat(pfd, name, AT_REMOVEDIR) < 0)
                r = -errno;
        return r;
}

struct ctx {
        const struct pd_unpack_opts *o;
        struct archive *in;
        int rootfd;
        struct pd_unpack_result *res;
        char path[MAX_PATH_LEN];
};

static int owner(struct ctx *c, struct archive_entry *e, uint32_t *uid, uint32_t *gid, struct pd_error *err)
{
        int64_t u = archive_entry_uid(e), g = archive_entry_gid(e);
        if (u < 0 || g < 0 || u >= ID_RANGE || g >= ID_RANGE)
                return pd_error_setx(err, ERANGE, "'%.200s' is owned by %lld:%lld; image ids must be below %u",
                                     c->path, (long long)u, (long long)g, ID_RANGE);
        *uid = c->o->id_base + (uint32_t)u;
        *gid = c->o->id_base + (uint32_t)g;
        return 0;
}

static int set_xattrs(struct ctx *c, struct archive_entry *e, int fd, struct pd_error *err)
{
        const char *name;
        const void *value;
        size_t size;
        unsigned n = 0;
        archive_entry_xattr_reset(e);
        while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
                if (++n > MAX_XATTRS || size > MAX_XATTR_VALUE)
                        return pd_error_setx(err, E2BIG, "'%.200s' has too many or too large xattrs", c->path);
                /* user.* only, and never overlay's own marks (a forged
                 * whiteout, opaque dir or redirect in our overlays) */
                if (strncmp(name, "user.", 5) || !strncmp(name, "user.overlay.", 13))
                        continue;
                if (fsetxattr(fd, name, value, size, 0) < 0 && errno != ENOTSUP)
                        return pd_error_set(err, errno, "set xattr '%.64s' on '%.200s'", name, c->path);
        }
        return 0;
}

/* Owner, mode, xattrs and times on an entry we just made, through an fd. */
static int finish_fd(struct ctx *c, struct archive_entry *e, int fd, bool times, struct pd_error *err)
{
        uint32_t uid, gid;
        int r = owner(c, e, &uid, &gid, err);
        if (r < 0)
                return r;
        /* chown first: it clears setuid/setgid bits that fchmod then sets */
        if (fchown(fd, uid, gid) < 0 || fchmod(fd, archive_entry_mode(e) & 07777) < 0)
                return pd_error_set(err, errno, "set owner and mode of '%.200s'", c->path);
        if ((r = set_xattrs(c, e, fd, err)) < 0)
                return r;
        if (times) {
                struct timespec ts[2] = { { archive_entry_mtime(e), archive_entry_mtime_nsec(e) },
                                          { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
                (void)futimens(fd, ts);
        }
        return 0;
}

/* Make room for a new entry called name: anything there goes (a directory
 * only if the new entry is not one too: then it is kept and merged). */
static int clear_name(struct ctx *c, int pfd, const char *name, bool keep_dir, bool *was_dir, struct pd_error *err)
{
        struct stat st;
        *was_dir = false;
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : pd_error_set(err, errno, "stat '%.200s'", c->path);
        if (S_ISDIR(st.st_mode) && keep_dir) {
                *was_dir = true;
                return 0;
        }
        int r = pd_unpack_remove(pfd, name, 0);
        return r < 0 ? pd_error_set(err, -r, "replace '%.200s'", c->path) : 0;
}

static int write_data(struct ctx *c, struct archive_entry *e, int fd, struct pd_error *err)
{
        const void *buf;
        size_t size;
        la_int64_t off;
        int r;
        while ((r = archive_read_data_block(c->in, &buf, &size, &off)) == ARCHIVE_OK) {
                const char *p = buf;
                while (size) {
                        ssize_t w = pwrite(fd, p, size, (off_t)off);
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w <= 0)
                                return pd_error_set(err, w < 0 ? errno : EIO, "write '%.200s'", c->path);
                        p += w;
                        size -= (size_t)w;
                        off += w;
                }
        }
        if (r != ARCHIVE_EOF)
                return pd_error_setx(err, EIO, "read '%.200s' from the layer: %s", c->path,
                                     archive_error_string(c->in) ? archive_error_string(c->in) : "error");
        /* a sparse file's trailing hole */
        if (ftruncate(fd, (off_t)archive_entry_size(e)) < 0)
                return pd_error_set(err, errno, "size '%.200s'", c->path);
        return 0;
}

static int whiteout(struct ctx *c, int pfd, const char *name, struct pd_error *err)
{
        if (!strcmp(name, ".wh..opq")) {
                /* ".wh..wh..opq": this directory hides the layers below */
                if (fsetxattr(pfd, OPAQUE_XATTR, "y", 1, 0) < 0)
                        return pd_error_set(err, errno, "mark '%.200s' opaque", c->path);
                return 0;
        }
        if (!strncmp(name, ".wh.", 4))
                return 0;       /* aufs's own bookkeeping (.wh..wh.plnk, ...) */
        /* an entry of this layer with that name stays: a whiteout hides
         * only what the layers below have (OCI image spec) */
        if (faccessat(pfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return 0;
        if (mknodat(pfd, name, S_IFCHR | 0600, makedev(0, 0)) < 0 ||
            fchownat(pfd, name, c->o->id_base, c->o->id_base, AT_SYMLINK_NOFOLLOW) < 0)
                return pd_error_set(err, errno, "create whiteout '%.200s'", c->path);
        return 0;
}

static int hardlink(struct ctx *c, int pfd, const char *name, const char *target, struct pd_error *err)
{
        char t[MAX_PATH_LEN];
        int r = clean_path(target, t, sizeof t, err);
        if (r < 0)
                return pd_error_prefix(err, "hard link '%.200s'", c->path);
        if (!*t)
                return pd_error_setx(err, EPERM, "hard link '%.200s' to the layer's root", c->path);
        char *slash = strrchr(t, '/');
        const char *tname = slash ? slash + 1 : t;
        if (slash)
                *slash = '\0';
        _pd_cleanup_close_ int tp = open_dir(c->rootfd, slash ? t : "", false, c->o->id_base, err);
        if (tp < 0)
                return pd_error_prefix(err, "hard link '%.200s'", c->path);
        struct stat st;
        if (fstatat(tp, tname, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return pd_error_setx(err, ENOENT, "hard link '%.200s': its target '%.200s' is not in this layer",
                                     c->path, target);
        if (S_ISDIR(st.st_mode))
                return pd_error_setx(err, EPERM, "hard link '%.200s' to a directory", c->path);
        bool was_dir;
        if (pfd == tp && !strcmp(name, tname))
                return 0;
        if ((r = clear_name(c, pfd, name, false, &was_dir, err)) < 0)
                return r;
        /* flags 0: a link to a symlink is a link to the symlink itself */
        if (linkat(tp, tname, pfd, name, 0) < 0)
                return pd_error_set(err, errno, "hard link '%.200s'", c->path);
        return 0;
}

static int entry(struct ctx *c, struct archive_entry *e, struct pd_error *err)
{
        int r = clean_path(archive_entry_pathname(e), c->path, sizeof c->path, err);
        if (r < 0)
                return r;
        mode_t type = archive_entry_filetype(e);
        const char *link = archive_entry_hardlink(e);
        if (!*c->path) {
                /* "./": the layer's root directory itself */
                if (type != AE_IFDIR)
                        return pd_error_setx(err, EPERM, "the layer's root entry is not a directory");
                return finish_fd(c, e, c->rootfd, false, err);
        }
        char *slash = strrchr(c->path, '/');
        char dir[MAX_PATH_LEN];
        const char *name = slash ? slash + 1 : c->path;
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - c->path) : 0, c->path);
        _pd_cleanup_close_ int pfd = open_dir(c->rootfd, dir, true, c->o->id_base, err);
        if (pfd < 0)
                return pd_error_prefix(err, "entry '%.200s'", c->path);
        if (!strncmp(name, ".wh.", 4))
                return whiteout(c, pfd, name + 4, err);
        if (link)
                return hardlink(c, pfd, name, link, err);
        bool was_dir = false;
        switch (type) {
        case AE_IFDIR: {
                bool whited = false;
                struct stat st;
                if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == 0)
                        whited = true;
                if ((r = clear_name(c, pfd, name, true, &was_dir, err)) < 0)
                        return r;
                if (!was_dir && mkdirat(pfd, name, 0700) < 0)
                        return pd_error_set(err, errno, "create directory '%.200s'", c->path);
                _pd_cleanup_close_ int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return pd_error_set(err, errno, "open directory '%.200s'", c->path);
                /* a directory replacing this layer's whiteout of the same
                 * name must not merge with the one below it */
                if (whited && fsetxattr(fd, OPAQUE_XATTR, "y", 1, 0) < 0)
                        return pd_error_set(err, errno, "mark '%.200s' opaque", c->path);
                return finish_fd(c, e, fd, false, err);
        }
        case AE_IFREG: {
                if ((r = clear_name(c, pfd, name, false, &was_dir, err)) < 0)
                        return r;
                _pd_cleanup_close_ int fd =
                        openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return pd_error_set(err, errno, "create '%.200s'", c->path);
                if ((r = write_data(c, e, fd, err)) < 0)
                        return r;
                return finish_fd(c, e, fd, true, err);
        }
        case AE_IFLNK: {
                const char *target = archive_entry_symlink(e);
                if (!target || strlen(target) >= MAX_PATH_LEN)
                        return pd_error_setx(err, ENAMETOOLONG, "symlink '%.200s' has no or an over-long target",
                                             c->path);
                if ((r = clear_name(c, pfd, name, false, &was_dir, err)) < 0)
                        return r;
                uint32_t uid, gid;
                if ((r = owner(c, e, &uid, &gid, err)) < 0)
                        return r;
                /* a symlink is data here: never followed by us */
                if (symlinkat(target, pfd, name) < 0 || fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return pd_error_set(err, errno, "create symlink '%.200s'", c->path);
                struct timespec ts[2] = { { archive_entry_mtime(e), 0 }, { archive_entry_mtime(e), 0 } };
                (void)utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW);
                return 0;
        }
        case AE_IFIFO: {
                if ((r = clear_name(c, pfd, name, false, &was_dir, err)) < 0)
                        return r;
                if (mkfifoat(pfd, name, 0600) < 0)
                        return pd_error_set(err, errno, "create fifo '%.200s'", c->path);
                /* O_PATH: opening a fifo for real would block */
                _pd_cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                uint32_t uid, gid;
                if (fd < 0 || (r = owner(c, e, &uid, &gid, err)) < 0)
                        return fd < 0 ? pd_error_set(err, errno, "open fifo '%.200s'", c->path) : r;
                if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0 || chmod(pd_fd_path(fd).s, archive_entry_mode(e) & 0777) < 0)
                        return pd_error_set(err, errno, "set owner and mode of fifo '%.200s'", c->path);
                return 0;
        }
        default:
                /* character and block devices, sockets: never made */
                c->res->devices_skipped++;
                return 0;
        }
}

int pd_unpack_layer(int fd, int rootfd, const struct pd_unpack_opts *o, struct pd_unpack_result *res,
                    struct pd_error *err)
{
        memset(res, 0, sizeof *res);
        struct outer *oc = calloc(1, sizeof *oc);
        struct inner *ic = calloc(1, sizeof *ic);
        struct ctx c = { .o = o, .rootfd = rootfd, .res = res };
        struct archive *outer = archive_read_new(), *in = archive_read_new();
        int r = 0;
        if (!oc || !ic || !outer || !in || !(oc->h = pd_sha256_new()) || !(ic->h = pd_sha256_new())) {
                r = pd_error_set(err, ENOMEM, "layer reader");
                goto out;
        }
        oc->fd = fd;
        oc->o = o;
        /* Compression formats by content, not by what the manifest says;
         * only built-in ones (no external programs). */
        archive_read_support_filter_gzip(outer);
        archive_read_support_filter_zstd(outer);
        archive_read_support_filter_none(outer);
        archive_read_support_format_raw(outer);
        struct archive_entry *e;
        if (archive_read_open(outer, oc, NULL, outer_read, NULL) != ARCHIVE_OK ||
            archive_read_next_header(outer, &e) != ARCHIVE_OK) {
                r = pd_error_setx(err, EINVAL, "layer blob: %s",
                                  archive_error_string(outer) ? archive_error_string(outer) : "unreadable");
                goto out;
        }
        ic->outer = outer;
        c.in = in;
        archive_read_support_format_tar(in);
        if (archive_read_open(in, ic, NULL, inner_read, NULL) != ARCHIVE_OK) {
                r = pd_error_setx(err, EINVAL, "layer tar: %s",
                                  archive_error_string(in) ? archive_error_string(in) : "unreadable");
                goto out;
        }
        for (;;) {
                int a = archive_read_next_header(in, &e);
                if (a == ARCHIVE_EOF)
                        break;
                if (a < ARCHIVE_WARN) {
                        r = pd_error_setx(err, EINVAL, "layer tar, after %llu entries: %s",
                                          (unsigned long long)res->entries,
                                          archive_error_string(in) ? archive_error_string(in) : "damaged");
                        goto out;
                }
                res->entries++;
                if ((r = entry(&c, e, err)) < 0)
                        goto out;
        }
        /* the rest of the streams count for the digests (tar padding,
         * bytes after the compressed stream) */
        for (;;) {
                la_ssize_t n = archive_read_data(outer, ic->buf, sizeof ic->buf);
                if (n < 0) {
                        r = pd_error_setx(err, EIO, "layer blob: %s", archive_error_string(outer));
                        goto out;
                }
                if (n == 0)
                        break;
                pd_sha256_update(ic->h, ic->buf, (size_t)n);
                ic->n += (uint64_t)n;
        }
        for (;;) {
                ssize_t n = read(fd, oc->buf, sizeof oc->buf);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = pd_error_set(err, errno, "read the layer blob");
                        goto out;
                }
                if (n == 0)
                        break;
                pd_sha256_update(oc->h, oc->buf, (size_t)n);
                oc->n += (uint64_t)n;
        }
        pd_sha256_final(oc->h, res->blob);
        pd_sha256_final(ic->h, res->diff);
        res->blob_bytes = oc->n;
        res->tar_bytes = ic->n;
        if (o->progress)
                o->progress(oc->n, o->total, o->arg);
        if (o->want_blob && strcmp(o->want_blob, res->blob)) {
                r = pd_error_setx(err, EBADMSG, "layer blob digest mismatch: the manifest says sha256:%.12s..., "
                                  "the bytes are sha256:%.12s... (corrupt or tampered)", o->want_blob, res->blob);
                goto out;
        }
        if (o->want_diff && strcmp(o->want_diff, res->diff)) {
                r = pd_error_setx(err, EBADMSG, "layer diff_id mismatch: the image config says sha256:%.12s..., "
                                  "the tar is sha256:%.12s... (corrupt or tampered)", o->want_diff, res->diff);
                goto out;
        }
out:
        if (in)
                archive_read_free(in);
        if (outer)
                archive_read_free(outer);
        if (oc)
                pd_sha256_free(oc->h);
        if (ic)
                pd_sha256_free(ic->h);
        free(oc);
        free(ic);
        return r;
}
