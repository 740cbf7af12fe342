#include "lib/openat2.h"
#include "jail/mount.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/trace.h"
#include "lib/util.h"

#define STAGE_FLAGS (MS_NOSUID | MS_NODEV)

/* Open a path below rootfd without leaving it and without following any
 * symlink: a template whose /dev or /proc is a symlink to the host is
 * refused, not followed. Creates missing directories when mkdir is set. */
static int open_in_root(int rootfd, const char *path, bool mkdir_missing, struct pd_error *err)
{
        const uint64_t resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS;
        while (*path == '/')
                path++;
        int fd = pd_open_in_root(rootfd, path, O_PATH | O_DIRECTORY, 0, resolve);
        if (fd >= 0 || !*path)
                return fd >= 0 ? fd : pd_error_set(err, -fd, "mount point '/'");
        if (fd != -ENOENT || !mkdir_missing)
                return pd_error_set(err, -fd, "mount point '/%s' (a symlink or not a directory?)", path);
        /* Create component by component, each checked the same way. */
        char buf[256];
        size_t len = strlen(path);
        if (len >= sizeof buf)
                return pd_error_setx(err, ENAMETOOLONG, "mount point '/%s' is too long", path);
        memcpy(buf, path, len + 1);
        for (char *p = buf;; p++) {
                if (*p == '/' || *p == '\0') {
                        char c = *p;
                        *p = '\0';
                        if (mkdirat(rootfd, buf, 0755) < 0 && errno != EEXIST)
                                return pd_error_set(err, errno, "create mount point '/%s'", buf);
                        int q = pd_open_in_root(rootfd, buf, O_PATH | O_DIRECTORY, 0, resolve);
                        if (q < 0)
                                return pd_error_set(err, -q, "mount point '/%s' (a symlink?)", buf);
                        *p = c;
                        if (c == '\0')
                                return q;
                        close(q);
                }
        }
}

/* Same for a file mount point (created empty if missing). */
static int open_file_in_root(int rootfd, const char *path, struct pd_error *err)
{
        const char *slash = strrchr(path, '/');
        char dir[256] = "";
        if (slash) {
                size_t n = (size_t)(slash - path);
                if (n >= sizeof dir)
                        return pd_error_setx(err, ENAMETOOLONG, "mount point '%s' is too long", path);
                memcpy(dir, path, n);
                dir[n] = '\0';
        }
        _pd_cleanup_close_ int dfd = open_in_root(rootfd, dir, true, err);
        if (dfd < 0)
                return dfd;
        const char *base = slash ? slash + 1 : path;
        int fd = openat(dfd, base, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
        if (fd < 0)
                return pd_error_set(err, errno, "create mount point '%s'", path);
        return fd;
}

static int mount_at_fd(const char *src, int fd, const char *type, unsigned long flags,
                       const char *data, struct pd_error *err, const char *what)
{
        if (mount(src, pd_fd_path(fd).s, type, flags, data) < 0)
                return pd_error_set(err, errno, "mount %s", what);
        return 0;
}

static int overlay(int stagefd, const char *prefix, const struct pd_mount_layer *l, int target_fd,
                   struct pd_error *err)
{
        char d[96], opts[1024];
        int tree_fd = l->tree_fd;
        /* The overlay's layers live on the staging tmpfs; paths are relative
         * to it (we chdir'ed there), which keeps the option string short. */
        static const char *const sub[] = { "lower", "upper", "work" };
        for (int i = 0; i < 3; i++) {
                snprintf(d, sizeof d, "%s%s", prefix, sub[i]);
                if (mkdirat(stagefd, d, 0755) < 0 && errno != EEXIST)
                        return pd_error_set(err, errno, "create '%s'", d);
        }
        snprintf(d, sizeof d, "%slower", prefix);
        if (move_mount(tree_fd, "", stagefd, d, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return pd_error_set(err, errno, "attach template layer '%s'", d);
        /* Snapshot layers stack above the template: lowerdir=s0:s1:..:lower. */
        size_t n = (size_t)snprintf(opts, sizeof opts, "lowerdir=");
        for (unsigned i = 0; i < l->n_stack && i < PD_MOUNT_MAX_STACK; i++) {
                snprintf(d, sizeof d, "%ss%u", prefix, i);
                if (mkdirat(stagefd, d, 0755) < 0 && errno != EEXIST)
                        return pd_error_set(err, errno, "create '%s'", d);
                if (move_mount(l->stack_fds[i], "", stagefd, d, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return pd_error_set(err, errno, "attach snapshot layer '%s'", d);
                n += (size_t)snprintf(opts + n, sizeof opts - n, "%s:", d);
        }
        snprintf(opts + n, sizeof opts - n, "%slower,upperdir=%supper,workdir=%swork,userxattr",
                 prefix, prefix, prefix);
        return mount_at_fd("overlay", target_fd, "overlay", STAGE_FLAGS, opts, err, "overlay");
}

static const char *const dev_nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };

static int build_dev(int rootfd, struct pd_error *err)
{
        _pd_cleanup_close_ int dfd = open_in_root(rootfd, "dev", true, err);
        if (dfd < 0)
                return dfd;
        int r = mount_at_fd("tmpfs", dfd, "tmpfs", MS_NOSUID | MS_NOEXEC,
                            "mode=755,size=64k,nr_inodes=64", err, "/dev");
        if (r < 0)
                return r;
        /* Reopen: dfd still names the directory under the new tmpfs. */
        _pd_cleanup_close_ int dev = openat(rootfd, "dev", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dev < 0)
                return pd_error_set(err, errno, "open /dev");
        for (size_t i = 0; i < PD_ARRAY_SIZE(dev_nodes); i++) {
                int fd = openat(dev, dev_nodes[i], O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
                if (fd < 0)
                        return pd_error_set(err, errno, "create /dev/%s", dev_nodes[i]);
                char src[32];
                snprintf(src, sizeof src, "/dev/%s", dev_nodes[i]);
                r = mount_at_fd(src, fd, NULL, MS_BIND, NULL, err, src);
                close(fd);
                if (r < 0)
                        return r;
        }
        if (mkdirat(dev, "pts", 0755) < 0 || mkdirat(dev, "shm", 01777) < 0 ||
            mkdirat(dev, "mqueue", 0755) < 0)
                return pd_error_set(err, errno, "create /dev directories");
        _pd_cleanup_close_ int pts = openat(dev, "pts", O_PATH | O_DIRECTORY | O_CLOEXEC);
        _pd_cleanup_close_ int shm = openat(dev, "shm", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (pts < 0 || shm < 0)
                return pd_error_set(err, errno, "open /dev/pts or /dev/shm");
        if ((r = mount_at_fd("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC,
                             "newinstance,ptmxmode=0666,mode=0620,gid=5", err, "/dev/pts")) < 0 ||
            (r = mount_at_fd("shm", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                             "mode=1777,size=65536k", err, "/dev/shm")) < 0)
                return r;
        static const char *const links[][2] = {
                { "pts/ptmx", "ptmx" }, { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
                { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
        };
        for (size_t i = 0; i < PD_ARRAY_SIZE(links); i++)
                if (symlinkat(links[i][0], dev, links[i][1]) < 0)
                        return pd_error_set(err, errno, "create /dev/%s", links[i][1]);
        /* Leave the tmpfs read-only: nothing may add device nodes later. */
        return mount_at_fd(NULL, dev, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
                           NULL, err, "/dev read-only");
}

/* Paths of /proc that expose the host or let root inside poke the kernel. */
static const char *const proc_null[] = { "kcore", "keys", "timer_list", "sched_debug",
                                          "sysrq-trigger", "latency_stats", "kallsyms" };
static const char *const proc_ro[] = { "sys", "irq", "bus", "fs", "acpi", "scsi" };

/* Each start of a sandbox is a boot of its own: a fresh random boot id
 * (a file on the writable layer's tmpfs, bound read-only) over the host
 * kernel's, as a VM or gVisor shows one. E2B's filesystem-only resume is
 * told from an in-memory one by it. */
static int bind_boot_id(int stagefd, int proc, struct pd_error *err)
{
        unsigned char b[16];
        if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
                return pd_error_set(err, errno ? errno : EIO, "boot id");
        b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);   /* version 4 */
        b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
        char id[40];
        snprintf(id, sizeof id, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        _pd_cleanup_close_ int f = openat(stagefd, "boot_id", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                          0444);
        if (f < 0 || write(f, id, strlen(id)) != (ssize_t)strlen(id))
                return pd_error_set(err, errno, "write the boot id");
        _pd_cleanup_close_ int src = openat(stagefd, "boot_id", O_PATH | O_NOFOLLOW | O_CLOEXEC);
        _pd_cleanup_close_ int dst = openat(proc, "sys/kernel/random/boot_id", O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0 || dst < 0)
                return 0;       /* no such proc file on this kernel: nothing to cover */
        int r = mount_at_fd(pd_fd_path(src).s, dst, NULL, MS_BIND, NULL, err, "boot_id");
        if (r < 0)
                return r;
        _pd_cleanup_close_ int again = openat(proc, "sys/kernel/random/boot_id", O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (again < 0)
                return pd_error_set(err, errno, "reopen boot_id");
        return mount_at_fd(NULL, again, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                           NULL, err, "boot_id read-only");
}

static int build_proc(int rootfd, int stagefd, struct pd_error *err)
{
        _pd_cleanup_close_ int pfd = open_in_root(rootfd, "proc", true, err);
        if (pfd < 0)
                return pfd;
        int r = mount_at_fd("proc", pfd, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err, "/proc");
        if (r < 0)
                return r;
        _pd_cleanup_close_ int proc = openat(rootfd, "proc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (proc < 0)
                return pd_error_set(err, errno, "open /proc");
        if ((r = bind_boot_id(stagefd, proc, err)) < 0)
                return r;
        for (size_t i = 0; i < PD_ARRAY_SIZE(proc_null); i++) {
                int fd = openat(proc, proc_null[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue;       /* absent on this kernel: nothing to mask */
                r = mount_at_fd("/dev/null", fd, NULL, MS_BIND, NULL, err, proc_null[i]);
                close(fd);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < PD_ARRAY_SIZE(proc_ro); i++) {
                int fd = openat(proc, proc_ro[i], O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                r = mount_at_fd(pd_fd_path(fd).s, fd, NULL, MS_BIND | MS_REC, NULL, err, proc_ro[i]);
                if (r == 0) {
                        int fd2 = openat(proc, proc_ro[i], O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
                        if (fd2 < 0)
                                r = pd_error_set(err, errno, "reopen /proc/%s", proc_ro[i]);
                        else {
                                r = mount_at_fd(NULL, fd2, NULL,
                                                MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                                NULL, err, proc_ro[i]);
                                close(fd2);
                        }
                }
                close(fd);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int build_sys(int rootfd, struct pd_error *err)
{
        _pd_cleanup_close_ int sfd = open_in_root(rootfd, "sys", true, err);
        if (sfd < 0)
                return sfd;
        return mount_at_fd("sysfs", sfd, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                           NULL, err, "/sys");
}

static int build_binds(const struct pd_mount_plan *p, int rootfd, struct pd_error *err)
{
        for (unsigned i = 0; i < p->n_binds; i++) {
                const struct pd_mount_bind *b = &p->binds[i];
                _pd_cleanup_close_ int fd = b->is_dir ? open_in_root(rootfd, b->target, true, err)
                                                      : open_file_in_root(rootfd, b->target, err);
                if (fd < 0)
                        return pd_error_prefix(err, "volume '%s'", b->target);
                if (move_mount(b->tree_fd, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                        return pd_error_set(err, errno, "attach volume '%s'", b->target);
        }
        return 0;
}

int pd_mount_stage(const struct pd_mount_plan *p, struct pd_error *err)
{
        /* Nothing we mount may propagate back to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return pd_error_set(err, errno, "make mounts private");
        /* Inodes are kernel memory charged to the sandbox, and tmpfs has no
         * other limit on them: one per 8 KiB of the layer (131072 for 1 GiB)
         * makes "too many empty files" an ENOSPC, not an OOM kill. */
        unsigned long long inodes = p->disk_bytes / 8192 < 1024 ? 1024 : p->disk_bytes / 8192;
        char opts[96];
        snprintf(opts, sizeof opts, "mode=0755,uid=0,gid=0,size=%llu,nr_inodes=%llu",
                 (unsigned long long)p->disk_bytes, inodes);
        if (mount("paddock", p->stage_dir, "tmpfs", STAGE_FLAGS, opts) < 0)
                return pd_error_set(err, errno, "mount writable layer on '%s'", p->stage_dir);
        int fd = open(p->stage_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open writable layer '%s'", p->stage_dir);
        return fd;
}

int pd_mount_build(struct pd_mount_plan *p, int stagefd, struct pd_error *err)
{
        int r;
        if (fchdir(stagefd) < 0)
                return pd_error_set(err, errno, "enter '%s'", p->stage_dir);
        if (mkdirat(stagefd, "root", 0755) < 0)
                return pd_error_set(err, errno, "create stage root");
        _pd_cleanup_close_ int rootmp = openat(stagefd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootmp < 0)
                return pd_error_set(err, errno, "open stage root");
        if ((r = overlay(stagefd, "", &p->root, rootmp, err)) < 0)
                return pd_error_prefix(err, "root filesystem");
        pd_trace("child: root overlay");
        _pd_cleanup_close_ int rootfd = openat(stagefd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                return pd_error_set(err, errno, "open new root");
        for (unsigned i = 0; i < p->n_grafts; i++) {
                char prefix[16];
                snprintf(prefix, sizeof prefix, "g%u-", i);
                _pd_cleanup_close_ int t = open_in_root(rootfd, p->grafts[i].target, true, err);
                if (t < 0)
                        return t;
                if ((r = overlay(stagefd, prefix, &p->grafts[i], t, err)) < 0)
                        return pd_error_prefix(err, "/%s", p->grafts[i].target);
        }
        pd_trace("child: grafts");
        if ((r = build_binds(p, rootfd, err)) < 0)
                return r;
        pd_trace("child: binds");
        if ((r = build_dev(rootfd, err)) < 0)
                return r;
        pd_trace("child: dev");
        if ((r = build_proc(rootfd, stagefd, err)) < 0)
                return r;
        pd_trace("child: proc");
        if ((r = build_sys(rootfd, err)) < 0)
                return r;
        pd_trace("child: sys");
        if (p->n_rules) {
                if ((r = pd_mount_policy(p, stagefd, err)) < 0)
                        return r;
                /* "/" itself may now be covered by a policy mount. */
                close(rootfd);
                rootfd = openat(stagefd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (rootfd < 0)
                        return pd_error_set(err, errno, "reopen new root");
                pd_trace("child: policy mounts");
        }
        /* pivot_root(".", "."): the old root ends up stacked under the new
         * one and is detached at once; no directory for it is needed. */
        if (fchdir(rootfd) < 0)
                return pd_error_set(err, errno, "enter new root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return pd_error_set(err, errno, "pivot_root");
        if (umount2(".", MNT_DETACH) < 0)
                return pd_error_set(err, errno, "detach the host's root");
        if (chdir("/") < 0)
                return pd_error_set(err, errno, "chdir /");
        return 0;
}
