#include "image/layers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/template.h"
#include "lib/util.h"

int pd_layers_dir(struct pd_state *st, struct pd_error *err)
{
        if (mkdirat(st->dirfd, "layers", 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s/layers'", st->dir);
        int fd = openat(st->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open '%s/layers'", st->dir);
        /* 0700 whatever umask made it: only root walks the store */
        (void)fchmod(fd, 0700);
        return fd;
}

int pd_layers_lock(struct pd_state *st, bool exclusive, struct pd_error *err)
{
        _pd_cleanup_close_ int d = pd_layers_dir(st, err);
        if (d < 0)
                return d;
        int fd = openat(d, ".gc.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return pd_error_set(err, errno, "open the layer store's lock");
        if (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "lock the layer store");
        }
        return fd;
}

int pd_layers_has(struct pd_state *st, const char *hex)
{
        char p[128];
        if (!pd_digest_hex_ok(hex))
                return 0;
        snprintf(p, sizeof p, "layers/%s/info", hex);
        return faccessat(st->dirfd, p, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int pd_layers_begin(struct pd_state *st, char *tmp, size_t size, struct pd_error *err)
{
        _pd_cleanup_close_ int d = pd_layers_dir(st, err);
        if (d < 0)
                return d;
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
                rnd = pd_now_ns();
        snprintf(tmp, size, "%s/layers/.tmp-%d-%016llx", st->dir, (int)getpid(), (unsigned long long)rnd);
        char tree[PATH_MAX + 8];
        snprintf(tree, sizeof tree, "%s/tree", tmp);
        if (mkdir(tmp, 0700) < 0 || mkdir(tree, 0755) < 0)
                return pd_error_set(err, errno, "create '%s'", tree);
        /* the tree's root is the image's too: never host root's */
        if (chown(tree, PD_STORE_UID_BASE, PD_STORE_UID_BASE) < 0) {
                int e = errno;
                pd_rm_rf(tmp, NULL);
                return pd_error_set(err, e, "chown '%s'", tree);
        }
        return 0;
}

int pd_layers_commit(struct pd_state *st, const char *tmp, const char *hex, uint64_t bytes, const char *source,
                    struct pd_error *err)
{
        _pd_cleanup_close_ int tfd = open(tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd < 0)
                return pd_error_set(err, errno, "open '%s'", tmp);
        struct pd_record rec;
        pd_record_init(&rec);
        pd_record_add(&rec, "bytes", "%llu", (unsigned long long)bytes);
        pd_record_add(&rec, "created", "%lld", (long long)time(NULL));
        pd_record_add(&rec, "source", "%.200s", source ? source : "");
        int r = pd_record_write(tfd, "info", &rec, err);
        if (r < 0)
                return r;
        char dst[PATH_MAX];
        snprintf(dst, sizeof dst, "%s/layers/%s", st->dir, hex);
        if (rename(tmp, dst) < 0) {
                if (errno == EEXIST || errno == ENOTEMPTY) {
                        /* the same layer, unpacked meanwhile by another */
                        pd_rm_rf(tmp, NULL);
                        return 0;
                }
                return pd_error_set(err, errno, "install layer %.12s", hex);
        }
        return 0;
}

int pd_layers_add(struct pd_state *st, int fd, const struct pd_unpack_opts *o, struct pd_unpack_result *res,
                 const char *source, struct pd_error *err)
{
        if (!o->want_diff || !pd_digest_hex_ok(o->want_diff))
                return pd_error_setx(err, EINVAL, "a layer's diff_id is missing or not sha256");
        if (pd_layers_has(st, o->want_diff))
                return 0;
        char tmp[PATH_MAX], tree[PATH_MAX + 8];
        int r = pd_layers_begin(st, tmp, sizeof tmp, err);
        if (r < 0)
                return r;
        snprintf(tree, sizeof tree, "%s/tree", tmp);
        _pd_cleanup_close_ int tfd = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd < 0) {
                r = pd_error_set(err, errno, "open '%s'", tree);
                goto fail;
        }
        if ((r = pd_unpack_layer(fd, tfd, o, res, err)) < 0)
                goto fail;
        if ((r = pd_layers_commit(st, tmp, o->want_diff, res->tar_bytes, source, err)) < 0)
                goto fail;
        return 0;
fail:
        pd_rm_rf(tmp, NULL);
        return r;
}

uint64_t pd_layers_layer_bytes(struct pd_state *st, const char *hex)
{
        char p[128];
        snprintf(p, sizeof p, "layers/%s", hex);
        _pd_cleanup_close_ int d = openat(st->dirfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct pd_record rec;
        uint64_t b = 0;
        if (d >= 0 && pd_record_read(d, "info", &rec, NULL) == 0)
                (void)pd_record_get_u64(&rec, "bytes", &b);
        return b;
}
