/* Snapshots of the container and supervised tiers (snapshot.h).
 *
 * The writable layers are overlay upper dirs on the sandbox's staging
 * tmpfs, which only the host's clone of that mount (<sandbox dir>/mnt)
 * still reaches. Their contents were written by the sandbox: the copy runs
 * as host root over a hostile tree, so every step is relative to a dirfd,
 * nothing is followed (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), the depth is
 * capped, devices other than overlay whiteouts are dropped, setuid/setgid
 * bits and security.* xattrs are not copied. Owners are shifted from the
 * sandbox's host uid range back to 0..65535, as template trees are stored
 * (they are idmapped into each new sandbox's range). */
#include "tiers/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "lib/template.h"
#include "tiers/host.h"
#include "lib/util.h"

/* below pd_rm_rf's 256 levels, with the snapshot directory's own (its
 * .snap-/rootfs/grafts levels): a snapshot, whole or half-made, can always
 * be removed again */
#define MAX_DEPTH 250
#define RANGE 65536u

int pd_container_attach_stage(struct pd_sandbox *sb, int tree_fd, struct pd_error *err)
{
        char stage[PATH_MAX];
        snprintf(stage, sizeof stage, "%s/mnt", sb->dir);
        int r = 0;
        if (move_mount(tree_fd, "", AT_FDCWD, stage, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                r = pd_error_set(err, errno, "attach the writable layer of sandbox %s", sb->id);
        close(tree_fd);
        return r;
}

struct copy {
        uint32_t base;          /* the sandbox's first host uid */
        uint32_t to;            /* ... becomes this: 0 (snapshots), the store's range (builds) */
        bool store;             /* a layer for the store: setuid kept, overlay xattrs but opaque dropped */
        uint64_t files;
};

static uint32_t unshift(const struct copy *c, uint32_t id)
{
        return c->to + (id >= c->base && id - c->base < RANGE ? id - c->base : 65534u);
}

static int copy_xattrs(const struct copy *c, int sfd, int dfd, const char *what, struct pd_error *err)
{
        char names[4096], value[4096];
        ssize_t n = flistxattr(sfd, names, sizeof names);
        if (n < 0)
                return errno == ENOTSUP ? 0 : pd_error_set(err, errno, "list xattrs of '%s'", what);
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
                /* user.* carries overlay's opaque/whiteout marks; security.*
                 * (file capabilities) and trusted.* are never taken over. */
                if (strncmp(names + i, "user.", 5))
                        continue;
                /* a store layer keeps overlay's opaque mark only (origin,
                 * impure... describe this sandbox's layers, not the store's) */
                if (c->store && !strncmp(names + i, "user.overlay.", 13) &&
                    strcmp(names + i, "user.overlay.opaque"))
                        continue;
                ssize_t v = fgetxattr(sfd, names + i, value, sizeof value);
                if (v < 0)
                        return pd_error_set(err, errno, "read xattr of '%s'", what);
                if (fsetxattr(dfd, names + i, value, (size_t)v, 0) < 0)
                        return pd_error_set(err, errno, "write xattr of '%s'", what);
        }
        return 0;
}

/* Owner, mode and times on an open copy. */
static int finish(const struct copy *c, int dfd, const struct stat *st, bool dir, const char *what,
                  struct pd_error *err)
{
        /* snapshot files lose setuid/setgid; in the store they are
         * setuid to the store's range, never a host account */
        mode_t mode = st->st_mode & (dir || c->store ? 07777 : 01777);
        if (fchown(dfd, unshift(c, st->st_uid), unshift(c, st->st_gid)) < 0 || fchmod(dfd, mode) < 0)
                return pd_error_set(err, errno, "set owner and mode of '%s'", what);
        struct timespec ts[2] = { st->st_atim, st->st_mtim };
        (void)futimens(dfd, ts);
        return 0;
}

static int copy_data(int sfd, int dfd, const char *what, struct pd_error *err)
{
        for (;;) {
                ssize_t n = copy_file_range(sfd, NULL, dfd, NULL, 1 << 20, 0);
                if (n == 0)
                        return 0;
                if (n > 0)
                        continue;
                if (errno == EINTR)
                        continue;
                if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
                        return pd_error_set(err, errno, "copy '%s'", what);
                break;
        }
        char buf[65536];
        for (;;) {
                ssize_t n = read(sfd, buf, sizeof buf);
                if (n == 0)
                        return 0;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return pd_error_set(err, errno, "read '%s'", what);
                }
                int r = pd_write_all(dfd, buf, (size_t)n);
                if (r < 0)
                        return pd_error_set(err, -r, "write '%s'", what);
        }
}

static int copy_dir(struct copy *c, int sdir, int ddir, unsigned depth, struct pd_error *err);

static int copy_entry(struct copy *c, int sdir, int ddir, const char *name, unsigned depth, struct pd_error *err)
{
        struct stat st;
        if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return pd_error_set(err, errno, "stat '%s'", name);
        c->files++;
        uint32_t uid = unshift(c, st.st_uid), gid = unshift(c, st.st_gid);
        switch (st.st_mode & S_IFMT) {
        case S_IFDIR: {
                if (depth >= MAX_DEPTH)
                        return pd_error_setx(err, ELOOP, "directories nested deeper than %d levels", MAX_DEPTH);
                if (mkdirat(ddir, name, 0700) < 0)
                        return pd_error_set(err, errno, "create directory '%s'", name);
                _pd_cleanup_close_ int s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _pd_cleanup_close_ int d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (s < 0 || d < 0)
                        return pd_error_set(err, errno, "open directory '%s'", name);
                int r = copy_dir(c, s, d, depth + 1, err);
                if (r < 0)
                        return pd_error_prefix(err, "%s", name);
                if ((r = copy_xattrs(c, s, d, name, err)) < 0)
                        return r;
                return finish(c, d, &st, true, name, err);
        }
        case S_IFREG: {
                _pd_cleanup_close_ int s = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (s < 0)
                        return pd_error_set(err, errno, "open '%s'", name);
                struct stat st2;
                if (fstat(s, &st2) < 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino)
                        return pd_error_setx(err, EAGAIN, "'%s' changed during the snapshot", name);
                _pd_cleanup_close_ int d = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (d < 0)
                        return pd_error_set(err, errno, "create '%s'", name);
                int r;
                if ((r = copy_data(s, d, name, err)) < 0 || (r = copy_xattrs(c, s, d, name, err)) < 0)
                        return r;
                return finish(c, d, &st, false, name, err);
        }
        case S_IFLNK: {
                char target[PATH_MAX];
                ssize_t n = readlinkat(sdir, name, target, sizeof target - 1);
                if (n < 0)
                        return pd_error_set(err, errno, "read link '%s'", name);
                target[n] = '\0';
                if (symlinkat(target, ddir, name) < 0 || fchownat(ddir, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return pd_error_set(err, errno, "create link '%s'", name);
                struct timespec ts[2] = { st.st_atim, st.st_mtim };
                (void)utimensat(ddir, name, ts, AT_SYMLINK_NOFOLLOW);
                return 0;
        }
        case S_IFCHR:
                /* 0/0 is overlay's whiteout (a file deleted from a lower
                 * layer); the sandbox cannot make other device nodes. */
                if (st.st_rdev != makedev(0, 0))
                        return 0;
                if (mknodat(ddir, name, S_IFCHR | 0600, makedev(0, 0)) < 0 ||
                    fchownat(ddir, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return pd_error_set(err, errno, "create whiteout '%s'", name);
                return 0;
        case S_IFIFO:
                if (mkfifoat(ddir, name, st.st_mode & 0777) < 0 ||
                    fchownat(ddir, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return pd_error_set(err, errno, "create fifo '%s'", name);
                return 0;
        default:
                return 0;       /* sockets and block devices are not state */
        }
}

static int copy_dir(struct copy *c, int sdir, int ddir, unsigned depth, struct pd_error *err)
{
        int fd = openat(sdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "read directory");
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return pd_error_set(err, errno, "read directory");
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if ((r = copy_entry(c, sdir, ddir, de->d_name, depth, err)) < 0)
                        break;
        }
        closedir(d);
        return r;
}

/* Copy one upper dir (below the stage) to a new layer dir at dst. */
static int copy_layer(struct copy *c, int stagefd, const char *upper, const char *dst, struct pd_error *err)
{
        if (mkdir(dst, 0755) < 0)
                return pd_error_set(err, errno, "create '%s'", dst);
        _pd_cleanup_close_ int s = openat(stagefd, upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s < 0) {
                if (errno == ENOENT)
                        return 0;       /* an overlay never set up: an empty layer */
                return pd_error_set(err, errno, "open writable layer '%s'", upper);
        }
        _pd_cleanup_close_ int d = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
                return pd_error_set(err, errno, "open '%s'", dst);
        struct stat st;
        int r;
        if (fstat(s, &st) < 0)
                return pd_error_set(err, errno, "stat writable layer '%s'", upper);
        if ((r = copy_dir(c, s, d, 0, err)) < 0 || (r = copy_xattrs(c, s, d, upper, err)) < 0 ||
            (r = finish(c, d, &st, true, upper, err)) < 0)
                return r;
        return 0;
}

static int copy_layers(struct pd_sandbox *sb, const char *tmp, int stagefd, struct pd_error *err)
{
        struct pd_template tpl;
        struct pd_spec spec = sb->spec;
        spec.template_name = sb->template_buf;
        spec.template_dir = NULL;
        int r = pd_template_resolve(sb->state, &spec, &tpl, err);
        if (r < 0)
                return r;
        if (tpl.n_stack + 1 > PD_MAX_STACK)
                return pd_error_setx(err, ELOOP, "sandbox %s runs on %u stacked snapshots; at most %d can stack",
                                     sb->id, tpl.n_stack, PD_MAX_STACK);
        struct copy c = { .base = pd_host(sb)->uids.base };
        char dst[PATH_MAX];
        snprintf(dst, sizeof dst, "%s/rootfs", tmp);
        if ((r = copy_layer(&c, stagefd, "upper", dst, err)) < 0)
                return pd_error_prefix(err, "root filesystem");
        snprintf(dst, sizeof dst, "%s/grafts", tmp);
        if (mkdir(dst, 0755) < 0)
                return pd_error_set(err, errno, "create '%s'", dst);
        for (unsigned i = 0; i < tpl.n_grafts; i++) {
                char upper[32];
                snprintf(upper, sizeof upper, "g%u-upper", i);
                int n = snprintf(dst, sizeof dst, "%s/grafts/", tmp);
                for (const char *p = tpl.grafts[i].target; *p && (size_t)n + 1 < sizeof dst; p++)
                        dst[n++] = *p == '/' ? '_' : *p;
                dst[n] = '\0';
                if ((r = copy_layer(&c, stagefd, upper, dst, err)) < 0)
                        return pd_error_prefix(err, "/%s", tpl.grafts[i].target);
        }
        return 0;
}

int pd_container_copy_upper(struct pd_sandbox *sb, const char *dst, uint32_t to, struct pd_error *err)
{
        char stage[PATH_MAX];
        snprintf(stage, sizeof stage, "%s/mnt", sb->dir);
        _pd_cleanup_close_ int stagefd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (stagefd < 0)
                return pd_error_set(err, errno, "sandbox %s has no host view of its writable layer", sb->id);
        struct copy c = { .base = pd_host(sb)->uids.base, .to = to, .store = true };
        bool froze = !sb->paused;
        int r = 0;
        if (froze && (r = pd_cgroup_freeze(&pd_host(sb)->cg, true, err)) < 0)
                return r;
        /* dst exists (the store made it): copy into it */
        _pd_cleanup_close_ int s = openat(stagefd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _pd_cleanup_close_ int d = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (s < 0 || d < 0 || fstat(s, &st) < 0)
                r = pd_error_set(err, errno, "open the writable layer of sandbox %s", sb->id);
        else if ((r = copy_dir(&c, s, d, 0, err)) == 0 && (r = copy_xattrs(&c, s, d, "upper", err)) == 0)
                r = finish(&c, d, &st, true, "upper", err);
        if (froze)
                (void)pd_cgroup_freeze(&pd_host(sb)->cg, false, NULL);
        return r;
}

int pd_container_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err)
{
        struct pd_state *st = sb->state;
        if (!sb->template_buf[0])
                return pd_error_setx(err, ENOTSUP,
                                     "sandbox %s runs on a host directory, not a registered template; "
                                     "only sandboxes of named templates can be snapshotted", sb->id);
        char stage[PATH_MAX];
        snprintf(stage, sizeof stage, "%s/mnt", sb->dir);
        _pd_cleanup_close_ int stagefd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat s1, s2;
        if (stagefd < 0 || fstat(stagefd, &s1) < 0 || stat(sb->dir, &s2) < 0 || s1.st_dev == s2.st_dev)
                return pd_error_setx(err, ENOTSUP,
                                     "sandbox %s has no host view of its writable layer "
                                     "(one-shot `paddock run` sandboxes cannot be snapshotted)", sb->id);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/templates/%s", st->dir, name);
        if (access(path, F_OK) == 0)
                return pd_error_setx(err, EEXIST, "a template or snapshot named '%s' exists already", name);

        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/templates/.snap-%s-%d", st->dir, name, (int)getpid());
        (void)pd_rm_rf(tmp, NULL);
        if (mkdir(tmp, 0755) < 0)
                return pd_error_set(err, errno, "create '%s'", tmp);
        /* Frozen while copying, so the layer is one moment's state. */
        bool froze = !sb->paused;
        int r = 0;
        _pd_cleanup_close_ int tfd = -1;
        struct pd_record rec;
        if (froze && (r = pd_cgroup_freeze(&pd_host(sb)->cg, true, err)) < 0)
                goto fail;
        r = copy_layers(sb, tmp, stagefd, err);
        if (froze)
                (void)pd_cgroup_freeze(&pd_host(sb)->cg, false, NULL);
        if (r < 0)
                goto fail;
        pd_record_init(&rec);
        pd_record_add(&rec, "parent", "%s", sb->template_buf);
        pd_record_add(&rec, "source", "%s", sb->id);
        pd_record_add(&rec, "isolation", "%s", sb->ops->name);
        pd_record_add(&rec, "created", "%lld", (long long)time(NULL));
        tfd = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (tfd < 0) {
                r = pd_error_set(err, errno, "open '%s'", tmp);
                goto fail;
        }
        if ((r = pd_snapshot_install(tfd, tmp, path, name, &rec, err)) < 0)
                goto fail;
        if ((r = pd_snapshot_register(st, name, sb->template_buf, err)) < 0) {
                (void)pd_rm_rf(path, NULL);
                return r;
        }
        return 0;
fail:
        (void)pd_rm_rf(tmp, NULL);
        return pd_error_prefix(err, "snapshot '%s' of sandbox %s", name, sb->id);
}
