/* Flattening store layers into one (image.h): what overlay would show of
 * them, copied bottom layer first into a new store layer, whiteouts and
 * opaque directories applied. Owners stay as stored (the store's range);
 * hard links between files become copies. The new layer's id is the
 * sha256 of "flatten" and the ids it came from. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/digest.h"
#include "image/image.h"
#include "image/layers.h"
#include "image/unpack.h"
#include "lib/util.h"

#define MAX_DEPTH PD_TREE_DEPTH_MAX

static int copy_meta(int sfd, int dfd, const struct stat *s)
{
        if (fchown(dfd, s->st_uid, s->st_gid) < 0 || fchmod(dfd, s->st_mode & 07777) < 0)
                return -errno;
        char names[4096], v[65536];
        ssize_t n = flistxattr(sfd, names, sizeof names);
        for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(names + i) + 1) {
                if (strncmp(names + i, "user.", 5) || !strcmp(names + i, "user.overlay.opaque"))
                        continue;
                ssize_t vl = fgetxattr(sfd, names + i, v, sizeof v);
                if (vl >= 0)
                        (void)fsetxattr(dfd, names + i, v, (size_t)vl, 0);
        }
        struct timespec ts[2] = { s->st_atim, s->st_mtim };
        (void)futimens(dfd, ts);
        return 0;
}

static int merge_dir(int sdir, int ddir, unsigned depth, struct pd_error *err);

static int merge_entry(int sdir, int ddir, const char *name, unsigned depth, struct pd_error *err)
{
        struct stat s, d;
        if (fstatat(sdir, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
                return pd_error_set(err, errno, "stat '%s'", name);
        bool have = fstatat(ddir, name, &d, AT_SYMLINK_NOFOLLOW) == 0;
        if (S_ISCHR(s.st_mode) && s.st_rdev == makedev(0, 0)) {
                /* a whiteout: what the layers below had is gone */
                int r = have ? pd_unpack_remove(ddir, name, 0) : 0;
                return r < 0 ? pd_error_set(err, -r, "apply whiteout '%s'", name) : 0;
        }
        if (have && !(S_ISDIR(s.st_mode) && S_ISDIR(d.st_mode))) {
                int r = pd_unpack_remove(ddir, name, 0);
                if (r < 0)
                        return pd_error_set(err, -r, "replace '%s'", name);
                have = false;
        }
        switch (s.st_mode & S_IFMT) {
        case S_IFDIR: {
                _pd_cleanup_close_ int sf = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sf < 0)
                        return pd_error_set(err, errno, "open '%s'", name);
                char v[4];
                if (have && fgetxattr(sf, "user.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y') {
                        int r = pd_unpack_remove(ddir, name, 0);
                        if (r < 0)
                                return pd_error_set(err, -r, "replace opaque '%s'", name);
                        have = false;
                }
                if (!have && mkdirat(ddir, name, 0700) < 0)
                        return pd_error_set(err, errno, "create '%s'", name);
                _pd_cleanup_close_ int df = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (df < 0 || depth > MAX_DEPTH)
                        return pd_error_set(err, df < 0 ? errno : ELOOP, "open '%s'", name);
                int r = merge_dir(sf, df, depth + 1, err);
                if (r < 0)
                        return pd_error_prefix(err, "%s", name);
                return copy_meta(sf, df, &s) < 0 ? pd_error_set(err, errno, "set up '%s'", name) : 0;
        }
        case S_IFREG: {
                _pd_cleanup_close_ int sf = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                _pd_cleanup_close_ int df = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (sf < 0 || df < 0)
                        return pd_error_set(err, errno, "copy '%s'", name);
                for (;;) {
                        ssize_t n = copy_file_range(sf, NULL, df, NULL, 1 << 30, 0);
                        if (n == 0)
                                break;
                        if (n < 0 && errno != EINTR)
                                return pd_error_set(err, errno, "copy '%s'", name);
                }
                return copy_meta(sf, df, &s) < 0 ? pd_error_set(err, errno, "set up '%s'", name) : 0;
        }
        case S_IFLNK: {
                char t[PATH_MAX];
                ssize_t n = readlinkat(sdir, name, t, sizeof t - 1);
                if (n < 0)
                        return pd_error_set(err, errno, "read link '%s'", name);
                t[n] = '\0';
                if (symlinkat(t, ddir, name) < 0 || fchownat(ddir, name, s.st_uid, s.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return pd_error_set(err, errno, "create link '%s'", name);
                return 0;
        }
        case S_IFIFO:
                if (mkfifoat(ddir, name, s.st_mode & 0777) < 0 ||
                    fchownat(ddir, name, s.st_uid, s.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return pd_error_set(err, errno, "create fifo '%s'", name);
                return 0;
        default:
                return 0;
        }
}

static int merge_dir(int sdir, int ddir, unsigned depth, struct pd_error *err)
{
        int fd = openat(sdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return pd_error_set(err, errno, "read directory");
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        r = merge_entry(sdir, ddir, de->d_name, depth, err);
        closedir(d);
        return r;
}

int pd_image_flatten(struct pd_state *st, char (*layers)[65], unsigned n, char out[65], struct pd_error *err)
{
        struct pd_sha256 *h = pd_sha256_new();
        if (!h)
                return pd_error_set(err, ENOMEM, "hash");
        pd_sha256_update(h, "flatten", 7);
        for (unsigned i = 0; i < n; i++)
                pd_sha256_update(h, layers[i], 64);
        pd_sha256_final(h, out);
        pd_sha256_free(h);
        if (pd_layers_has(st, out))
                return 0;
        char tmp[PATH_MAX], tree[PATH_MAX + 8];
        int r = pd_layers_begin(st, tmp, sizeof tmp, err);
        if (r < 0)
                return r;
        snprintf(tree, sizeof tree, "%s/tree", tmp);
        _pd_cleanup_close_ int dfd = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        uint64_t bytes = 0;
        for (unsigned i = 0; r == 0 && i < n; i++) {
                char p[PATH_MAX];
                snprintf(p, sizeof p, "%s/layers/%s/tree", st->dir, layers[i]);
                _pd_cleanup_close_ int sfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sfd < 0 || dfd < 0)
                        r = pd_error_set(err, errno, "open layer %.12s", layers[i]);
                else
                        r = merge_dir(sfd, dfd, 0, err);
                bytes += pd_layers_layer_bytes(st, layers[i]);
        }
        if (r == 0)
                r = pd_layers_commit(st, tmp, out, bytes, "flatten", err);
        if (r < 0)
                pd_rm_rf(tmp, NULL);
        return r;
}
