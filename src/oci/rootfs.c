/* The container's filesystem, built by its init in a fresh mount namespace:
 * the bundle's rootfs bound onto itself, config.json's mounts on it, device
 * nodes, pivot_root, then masked and read-only paths.
 *
 * Every mount target is opened beneath the rootfs with openat2 and mounted
 * through /proc/self/fd, so a symlink in the rootfs can never redirect a
 * mount onto the host. A target that only resolves by leaving the rootfs
 * (an absolute symlink, "..") is an error, not silently re-rooted. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/openat2.h"
#include "oci/oci.h"
#include "lib/util.h"

/* Set by create before the clone: the container's cgroup path (for
 * "cgroup" mounts). */
const char *oci_rootfs_cgroup;

static int rootfd = -1;

/* pd_open_in_root beneath the rootfs, with a message that says why a path
 * that resolves out of it is refused. */
int oci_open_in_root(int dirfd, const char *path, int flags, struct pd_error *err)
{
        while (*path == '/')
                path++;
        int fd = pd_open_in_root(dirfd, path, flags, 0, RESOLVE_BENEATH);
        if (fd == -EXDEV || fd == -ELOOP)
                return pd_error_setx(err, EXDEV, "'/%s' resolves outside the container's rootfs (a symlink or '..'); refused",
                                     path);
        if (fd < 0)
                return pd_error_set(err, -fd, "open '/%s' in the rootfs", path);
        return fd;
}

/* Create path (dir or empty file) beneath the rootfs, parents included, and
 * return an O_PATH fd of it. */
static int make_target(const char *path, bool dir, struct pd_error *err)
{
        char rel[PATH_MAX];
        while (*path == '/')
                path++;
        snprintf(rel, sizeof rel, "%s", path);
        int fd = pd_open_in_root(rootfd, rel, O_PATH, 0, RESOLVE_BENEATH);
        if (fd >= 0 || fd != -ENOENT)
                return fd >= 0 ? fd : oci_open_in_root(rootfd, rel, O_PATH, err);
        for (char *s = rel; ; s++) {
                if (*s != '/' && *s != '\0')
                        continue;
                char saved = *s;
                *s = '\0';
                char *slash = strrchr(rel, '/');
                const char *name = slash ? slash + 1 : rel;
                int parent = rootfd;
                if (slash) {
                        *slash = '\0';
                        parent = oci_open_in_root(rootfd, rel, O_PATH | O_DIRECTORY, err);
                        *slash = '/';
                        if (parent < 0)
                                return parent;
                }
                int r = 0;
                if (*name && strcmp(name, ".") != 0) {
                        if (saved || dir)
                                r = mkdirat(parent, name, 0755) < 0 && errno != EEXIST ? -errno : 0;
                        else {
                                int f = openat(parent, name, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
                                r = f < 0 && errno != EEXIST ? -errno : 0;
                                if (f >= 0)
                                        close(f);
                        }
                }
                if (parent != rootfd)
                        close(parent);
                if (r < 0)
                        return pd_error_set(err, -r, "create '/%s' in the rootfs", rel);
                *s = saved;
                if (!saved)
                        break;
        }
        return oci_open_in_root(rootfd, rel, O_PATH, err);
}

/* Flags a bind remount in a user namespace must keep (the kernel locks
 * them on mounts inherited from a more privileged namespace). */
static unsigned long locked_flags(const char *path)
{
        struct statvfs sv;
        unsigned long f = 0;
        if (statvfs(path, &sv) < 0)
                return 0;
        if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
        if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
        if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
        if (sv.f_flag & ST_RDONLY) f |= MS_RDONLY;
        if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
        if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
        if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
        return f;
}

static int remount_bind(const char *target, unsigned long flags, unsigned long clear, struct pd_error *err)
{
        unsigned long f = (locked_flags(target) & ~clear) | flags;
        f &= ~(MS_REMOUNT | MS_BIND | MS_REC);
        if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | f, NULL) < 0) {
                /* Locked atime flags differ by kernel; retry keeping only the
                 * flags that matter for safety. */
                f &= ~(MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME);
                if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | f, NULL) < 0)
                        return pd_error_set(err, errno, "remount (flags 0x%lx)", f);
        }
        return 0;
}

static int remount_target(const char *dest, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = make_target(dest, true, err);
        if (fd < 0)
                return fd;
        struct pd_fd_path t = pd_fd_path(fd);
        return remount_bind(t.s, MS_RDONLY, 0, err);
}

static int mount_cgroup(const struct oci_mount *m, int tfd, struct pd_error *err)
{
        struct pd_fd_path t = pd_fd_path(tfd);
        const char *cg = oci_rootfs_cgroup ? oci_rootfs_cgroup : "/";
        if (oci_cgroup_version() == 2) {
                if (mount("cgroup2", t.s, "cgroup2", m->flags & ~MS_RDONLY, NULL) == 0)
                        return (m->flags & MS_RDONLY) ? remount_target(m->destination, err) : 0;
                char src[PATH_MAX];
                snprintf(src, sizeof src, "/sys/fs/cgroup%s", cg);
                if (mount(src, t.s, NULL, MS_BIND | MS_REC, NULL) < 0)
                        return pd_error_set(err, errno, "bind cgroup '%s'", src);
                return (m->flags & MS_RDONLY) ? remount_target(m->destination, err) : 0;
        }
        /* v1: a tmpfs with each hierarchy's container cgroup bound in. */
        if (mount("tmpfs", t.s, "tmpfs", (m->flags & ~MS_RDONLY) | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755") < 0)
                return pd_error_set(err, errno, "mount tmpfs for cgroup on '%s'", m->destination);
        /* tfd names the directory under the new tmpfs: reopen. */
        _pd_cleanup_close_ int nfd = make_target(m->destination, true, err);
        if (nfd < 0)
                return nfd;
        t = pd_fd_path(nfd);
        const struct pd_cg_hier *h;
        unsigned n = oci_cgroup_hierarchies(&h);
        for (unsigned i = 0; i < n; i++) {
                if (strncmp(h[i].mnt, "/sys/fs/cgroup/", 15) != 0)
                        continue;
                const char *name = h[i].mnt + 15;
                char dst[PATH_MAX], src[PATH_MAX];
                snprintf(dst, sizeof dst, "%s/%s", t.s, name);
                snprintf(src, sizeof src, "%s%s", h[i].mnt, cg);
                if (mkdir(dst, 0755) < 0 && errno != EEXIST)
                        continue;
                if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                        continue;       /* a hierarchy we did not join */
                remount_bind(dst, (m->flags & MS_RDONLY) | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0, NULL);
        }
        if (m->flags & MS_RDONLY)
                return remount_bind(t.s, MS_RDONLY, 0, err);
        return 0;
}

static int do_mount(const struct oci_mount *m, struct pd_error *err)
{
        bool dir = true;
        if (m->bind) {
                struct stat sb;
                if (stat(m->source, &sb) < 0)
                        return pd_error_set(err, errno, "bind mount source '%s'", m->source);
                dir = S_ISDIR(sb.st_mode);
        }
        _pd_cleanup_close_ int tfd = make_target(m->destination, dir, err);
        if (tfd < 0)
                return -err->code;
        struct pd_fd_path t = pd_fd_path(tfd);
        if (m->type && strcmp(m->type, "cgroup") == 0 && !m->bind)
                return mount_cgroup(m, tfd, err);
        if (m->bind) {
                if (mount(m->source, t.s, NULL, MS_BIND | (m->rec ? MS_REC : 0), NULL) < 0)
                        return pd_error_set(err, errno, "bind '%s' on '%s'", m->source, m->destination);
        } else {
                unsigned long f = m->flags & ~MS_REMOUNT;
                int r = mount(m->source && *m->source ? m->source : m->type, t.s, m->type, f,
                              m->data[0] ? m->data : NULL);
                if (r < 0 && errno == EPERM && strcmp(m->type, "sysfs") == 0) {
                        /* sysfs needs a network namespace the user namespace
                         * owns; the host's /sys, bound read-only, instead. */
                        r = mount("/sys", t.s, NULL, MS_BIND | MS_REC, NULL);
                        if (r == 0) {
                                close(tfd);
                                tfd = make_target(m->destination, true, err);
                                t = pd_fd_path(tfd);
                                return remount_bind(t.s, m->flags | MS_RDONLY, 0, err);
                        }
                }
                if (r < 0)
                        return pd_error_set(err, errno, "mount %s on '%s'", m->type, m->destination);
        }
        /* The fd still names the directory under the new mount: reopen. */
        close(tfd);
        tfd = make_target(m->destination, dir, err);
        if (tfd < 0)
                return tfd;
        t = pd_fd_path(tfd);
        if (m->bind && (m->flags & ~MS_REMOUNT))
                if (remount_bind(t.s, m->flags & ~MS_REMOUNT, m->clear_flags, err) < 0)
                        return -err->code;
        if (m->propagation && mount(NULL, t.s, NULL, m->propagation, NULL) < 0)
                return pd_error_set(err, errno, "set propagation of '%s'", m->destination);
        return 0;
}

static int make_device(const char *path, mode_t type, unsigned major_, unsigned minor_, mode_t mode, uid_t uid,
                       gid_t gid, struct pd_error *err)
{
        const char *rel = path;
        while (*rel == '/')
                rel++;
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", rel);
        char *slash = strrchr(parent, '/');
        const char *name = slash ? slash + 1 : parent;
        if (slash)
                *slash = '\0';
        _pd_cleanup_close_ int pfd = -1;
        if (slash) {
                pd_closep(&pfd);
                int d = make_target(parent, true, err);
                if (d < 0)
                        return d;
                pfd = d;
        }
        int dirfd = slash ? pfd : rootfd;
        unlinkat(dirfd, name, 0);
        if (mknodat(dirfd, name, type | (mode & 07777), makedev(major_, minor_)) == 0) {
                /* mknod applies the umask; the config's mode is exact. */
                fchmodat(dirfd, name, mode & 07777, 0);
                int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0) {
                        /* fchownat on an O_PATH fd via AT_EMPTY_PATH. */
                        if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0)
                                oci_debug("chown %s: %m", path);
                        close(fd);
                }
                return 0;
        }
        if (errno != EPERM)
                return pd_error_set(err, errno, "mknod '%s'", path);
        /* In a user namespace mknod is refused: bind the host's node. */
        char host[PATH_MAX];
        snprintf(host, sizeof host, "/%s", rel);
        int f = openat(dirfd, name, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (f < 0)
                return pd_error_set(err, errno, "create '%s'", path);
        close(f);
        _pd_cleanup_close_ int tfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct pd_fd_path t = pd_fd_path(tfd);
        if (tfd < 0 || mount(host, t.s, NULL, MS_BIND, NULL) < 0)
                return pd_error_set(err, errno, "bind device '%s'", host);
        return 0;
}

static int default_devices(const struct oci_config *c, struct pd_error *err)
{
        static const struct { const char *path; unsigned maj, min; } devs[] = {
                { "/dev/null", 1, 3 }, { "/dev/zero", 1, 5 }, { "/dev/full", 1, 7 },
                { "/dev/random", 1, 8 }, { "/dev/urandom", 1, 9 }, { "/dev/tty", 5, 0 },
        };
        int r;
        for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
                if ((r = make_device(devs[i].path, S_IFCHR, devs[i].maj, devs[i].min, 0666, 0, 0, err)) < 0)
                        return r;
        _pd_cleanup_close_ int devfd = oci_open_in_root(rootfd, "dev", O_PATH | O_DIRECTORY, err);
        if (devfd < 0)
                return devfd;
        static const struct { const char *target, *name; } links[] = {
                { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" }, { "/proc/self/fd/1", "stdout" },
                { "/proc/self/fd/2", "stderr" }, { "pts/ptmx", "ptmx" }, { "/proc/kcore", "core" },
        };
        for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
                if (strcmp(links[i].name, "ptmx") == 0) {
                        struct stat sb;
                        if (fstatat(devfd, "pts/ptmx", &sb, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        unlinkat(devfd, "ptmx", 0);
                }
                if (symlinkat(links[i].target, devfd, links[i].name) < 0 && errno != EEXIST)
                        return pd_error_set(err, errno, "symlink /dev/%s", links[i].name);
        }
        (void)c;
        return 0;
}

static int config_devices(const struct oci_config *c, struct pd_error *err)
{
        size_t i;
        json_t *d;
        json_array_foreach(c->devices, i, d) {
                const char *path = json_string_value(json_object_get(d, "path"));
                const char *type = json_string_value(json_object_get(d, "type"));
                if (!path || path[0] != '/' || !type)
                        return pd_error_setx(err, EINVAL, "config.json: linux.devices[%zu] needs path and type", i);
                mode_t t = type[0] == 'b' ? S_IFBLK : type[0] == 'p' ? S_IFIFO : S_IFCHR;
                json_t *fm = json_object_get(d, "fileMode");
                mode_t mode = json_is_integer(fm) ? (mode_t)json_integer_value(fm) : 0666;
                int r = make_device(path, t, (unsigned)json_integer_value(json_object_get(d, "major")),
                                    (unsigned)json_integer_value(json_object_get(d, "minor")), mode,
                                    (uid_t)json_integer_value(json_object_get(d, "uid")),
                                    (gid_t)json_integer_value(json_object_get(d, "gid")), err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int oci_rootfs_prepare(const struct oci_config *c, struct pd_error *err)
{
        /* Nothing we mount may propagate back to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return pd_error_set(err, errno, "make / rslave");
        /* rootfsPropagation is applied to the new root after pivot_root:
         * here "shared" would stop pivot_root and "unbindable" the bind. */
        if (mount(c->rootfs, c->rootfs, NULL, MS_BIND | MS_REC, NULL) < 0)
                return pd_error_set(err, errno, "bind rootfs '%s'", c->rootfs);
        /* pivot_root needs the rootfs mount and its parent not shared. */
        if (mount(NULL, c->rootfs, NULL, MS_PRIVATE, NULL) < 0)
                return pd_error_set(err, errno, "make rootfs private");
        rootfd = open(c->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                return pd_error_set(err, errno, "open rootfs '%s'", c->rootfs);
        bool dev_mounted = false;
        for (size_t i = 0; i < c->n_mounts; i++) {
                int r = do_mount(&c->mounts[i], err);
                if (r < 0)
                        return pd_error_prefix(err, "mount %s on '%s'", c->mounts[i].bind ? "bind" : c->mounts[i].type,
                                               c->mounts[i].destination);
                if (strcmp(c->mounts[i].destination, "/dev") == 0 && !c->mounts[i].bind)
                        dev_mounted = true;
        }
        int r;
        if (dev_mounted && (r = default_devices(c, err)) < 0)
                return r;
        if (!dev_mounted) {
                /* A /dev that is a symlink to the host's is refused here too. */
                struct stat sb;
                if (fstatat(rootfd, "dev", &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
                        return pd_error_setx(err, EXDEV, "rootfs /dev is a symlink; refused");
        }
        return config_devices(c, err);
}

int oci_rootfs_pivot(const struct oci_config *c, struct pd_error *err)
{
        if (chdir(c->rootfs) < 0)
                return pd_error_set(err, errno, "chdir rootfs");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return pd_error_set(err, errno, "pivot_root");
        /* The old root is stacked under "."; detach it without letting the
         * unmount propagate anywhere. */
        if (mount(NULL, ".", NULL, MS_SLAVE | MS_REC, NULL) < 0)
                return pd_error_set(err, errno, "make old root rslave");
        if (umount2(".", MNT_DETACH) < 0)
                return pd_error_set(err, errno, "detach old root");
        if (chdir("/") < 0)
                return pd_error_set(err, errno, "chdir /");
        close(rootfd);
        rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                return pd_error_set(err, errno, "open /");
        /* linux.rootfsPropagation, on the root mount. The root is private
         * by now and the host's mounts were made rslave, so "shared" makes
         * a peer group of the container's own: nothing propagates to the
         * host (config.c logs that this is stricter than runc). */
        unsigned long prop = c->rootfs_propagation & (MS_SHARED | MS_SLAVE | MS_PRIVATE | MS_UNBINDABLE);
        if (prop && mount(NULL, "/", NULL, prop | (c->rootfs_propagation & MS_REC), NULL) < 0)
                return pd_error_set(err, errno, "set rootfsPropagation");
        return 0;
}

static int mask_path(const char *path, struct pd_error *err)
{
        int fd = pd_open_in_root(rootfd, path, O_PATH, 0, RESOLVE_BENEATH);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return pd_error_set(err, -fd, "maskedPaths: '%s'", path);
        struct stat sb;
        struct pd_fd_path t = pd_fd_path(fd);
        int r = 0;
        if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode))
                r = mount("tmpfs", t.s, "tmpfs", MS_RDONLY, "size=0");
        else
                r = mount("/dev/null", t.s, NULL, MS_BIND, NULL);
        close(fd);
        return r < 0 ? pd_error_set(err, errno, "mask '%s'", path) : 0;
}

static int readonly_path(const char *path, struct pd_error *err)
{
        int fd = pd_open_in_root(rootfd, path, O_PATH, 0, RESOLVE_BENEATH);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return pd_error_set(err, -fd, "readonlyPaths: '%s'", path);
        struct pd_fd_path t = pd_fd_path(fd);
        if (mount(t.s, t.s, NULL, MS_BIND | MS_REC, NULL) < 0) {
                close(fd);
                return pd_error_set(err, errno, "bind '%s'", path);
        }
        close(fd);
        fd = pd_open_in_root(rootfd, path, O_PATH, 0, RESOLVE_BENEATH);
        t = pd_fd_path(fd);
        int r = remount_bind(t.s, MS_RDONLY, 0, err);
        close(fd);
        return r;
}

int oci_rootfs_finish(const struct oci_config *c, struct pd_error *err)
{
        size_t i;
        json_t *e;
        int r;
        if ((r = oci_sysctl_apply(c, err)) < 0)
                return r;
        json_array_foreach(c->readonly_paths, i, e)
                if (json_is_string(e) && (r = readonly_path(json_string_value(e), err)) < 0)
                        return r;
        json_array_foreach(c->masked, i, e)
                if (json_is_string(e) && (r = mask_path(json_string_value(e), err)) < 0)
                        return r;
        if (c->root_readonly && (r = remount_bind("/", MS_RDONLY, 0, err)) < 0)
                return r;
        if (c->hostname && sethostname(c->hostname, strlen(c->hostname)) < 0)
                return pd_error_set(err, errno, "sethostname");
        if (c->domainname && setdomainname(c->domainname, strlen(c->domainname)) < 0)
                return pd_error_set(err, errno, "setdomainname");
        return 0;
}
