/* Files of a guest's saved state, written by paddock rather than by QEMU.
 *
 * The kernel charges a page of a file to the memory cgroup of the process
 * that first writes it, and keeps it there. On a disk those pages are page
 * cache and can be reclaimed; on a tmpfs (a state dir under /tmp on a
 * system whose /tmp is a tmpfs, as Debian 13's is) they are the file
 * itself and cannot, with no swap. A save written by QEMU would then count
 * against QEMU's own cgroup, whose limit is the guest's memory plus QEMU's
 * overhead: the save of a guest that uses its memory is OOM-killed halfway,
 * and a resume (the same cgroup: the file's pages and the restored RAM
 * together) as well. cgroup v1 cannot move a file's charge afterwards
 * (memory.move_charge_at_immigrate moves a task's anonymous and mapped
 * pages, not a file nobody maps), and neither can v2.
 *
 * So QEMU migrates into a pipe, and this process, outside every sandbox's
 * cgroup, writes the file: the save is charged to paddock (the server, or
 * the CLI that asked), like any other file it keeps in the state dir, and
 * never to the guest. A template's RAM file, which QEMU fills through its
 * shared mapping while the template boots, is copied once by this process
 * when it is on a tmpfs, for the same reason, and allocated whole: every
 * clone maps it private, and a clone's fault on a hole would add a page to
 * the file, charged to that clone. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/trace.h"
#include "lib/util.h"
#include "vm/vm.h"

#define PIPE_BYTES (1 << 20)    /* fewer wake-ups than the default 64 KiB */
#define QUIET_MS 200            /* no data for this long: ask QEMU how it goes */

/* Move what the pipe holds into fd: 1 at end of stream, 0 when the pipe is
 * empty for now, -errno on a write error (ENOSPC on a full tmpfs). */
static int pump(int rd, int fd, bool *use_splice, struct pd_error *err)
{
        for (;;) {
                ssize_t n;
                if (*use_splice) {
                        n = splice(rd, NULL, fd, NULL, PIPE_BYTES, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n < 0 && errno == EINVAL) {  /* a file system without splice */
                                *use_splice = false;
                                continue;
                        }
                } else {
                        char buf[65536];
                        n = read(rd, buf, sizeof buf);
                        int w = n > 0 ? pd_write_all(fd, buf, (size_t)n) : 0;
                        if (w < 0)
                                return pd_error_set(err, -w, "write the saved state");
                }
                if (n == 0)
                        return 1;
                if (n < 0) {
                        if (errno == EAGAIN)
                                return 0;
                        if (errno == EINTR)
                                continue;
                        return pd_error_set(err, errno, "write the saved state");
                }
        }
}

int pd_vm_migrate_to_file(struct pd_qmp *q, int fd, int timeout_ms, struct pd_error *err)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        _pd_cleanup_close_ int rd = p[0];
        {
                _pd_cleanup_close_ int wr = p[1];
                /* only our end: QEMU's writes block while we catch up */
                if (fcntl(rd, F_SETFL, O_NONBLOCK) < 0)
                        return pd_error_set(err, errno, "pipe");
                (void)fcntl(rd, F_SETPIPE_SZ, PIPE_BYTES);
                if (pd_qmp_getfd(q, "save", wr, err) < 0)
                        return -1;
        }       /* QEMU now holds the only write end: its close is our end of stream */
        if (pd_qmp_cmd(q, "migrate", "{\"uri\":\"fd:save\"}", err) < 0)
                return -1;
        bool use_splice = true;
        long long end = (long long)pd_now_ms() + timeout_ms;
        int r = 0;
        for (;;) {
                struct pollfd pf = { .fd = rd, .events = POLLIN };
                int n = poll(&pf, 1, QUIET_MS);
                if (n < 0 && errno != EINTR) {
                        r = pd_error_set(err, errno, "poll the save");
                        break;
                }
                if (n > 0) {
                        r = pump(rd, fd, &use_splice, err);
                        if (r == 1)
                                pd_trace("save: written, QEMU closed its end");
                        if (r != 0)
                                break;
                } else {
                        /* Quiet: QEMU has written the whole stream before it
                         * says "completed" (its writes are synchronous), and
                         * closes its end only a moment later, so take what
                         * is left and stop; a failed migration says so. */
                        char st[32];
                        r = pd_qmp_migration_status(q, st, sizeof st, err);
                        if (r == 1 && (r = pump(rd, fd, &use_splice, err)) >= 0) {
                                pd_trace("save: written, QEMU says completed");
                                r = 1;
                        }
                        if (r != 0)
                                break;
                }
                if ((long long)pd_now_ms() > end) {
                        r = pd_error_setx(err, ETIMEDOUT, "the save did not finish in %d s", timeout_ms / 1000);
                        break;
                }
        }
        if (r < 0) {
                /* QEMU's next write fails (EPIPE) and so does its migration:
                 * the caller can let the guest go on */
                close(rd);
                rd = -1;
                (void)pd_qmp_cmd(q, "migrate_cancel", NULL, NULL);
                (void)pd_qmp_wait_migration(q, 10000, NULL);
                return r;
        }
        return pd_qmp_wait_migration(q, 30000, err);
}

static int pwrite_all(int fd, const char *buf, size_t n, off_t off)
{
        while (n > 0) {
                ssize_t w = pwrite(fd, buf, n, off);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                buf += w;
                n -= (size_t)w;
                off += w;
        }
        return 0;
}

/* Copy the data extents of src into dst (already allocated and zero). */
static int copy_extents(int src, int dst, off_t size, struct pd_error *err)
{
        _pd_cleanup_free_ char *buf = malloc(PIPE_BYTES);
        if (!buf)
                return pd_error_set(err, ENOMEM, "copy");
        for (off_t off = 0; off < size;) {
                off_t data = lseek(src, off, SEEK_DATA);
                if (data < 0)
                        return errno == ENXIO ? 0 : pd_error_set(err, errno, "seek");
                off_t hole = lseek(src, data, SEEK_HOLE);
                if (hole < 0)
                        return pd_error_set(err, errno, "seek");
                for (off_t o = data; o < hole;) {
                        size_t want = hole - o < PIPE_BYTES ? (size_t)(hole - o) : PIPE_BYTES;
                        ssize_t n = pread(src, buf, want, o);
                        if (n <= 0)
                                return pd_error_set(err, n == 0 ? EIO : errno, "read");
                        int w = pwrite_all(dst, buf, (size_t)n, o);
                        if (w < 0)
                                return pd_error_set(err, -w, "write");
                        o += n;
                }
                off = hole;
        }
        return 0;
}

int pd_vm_recharge_file(const char *path, struct pd_error *err)
{
        _pd_cleanup_close_ int src = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct statfs sf;
        struct stat st;
        if (src < 0 || fstatfs(src, &sf) < 0 || fstat(src, &st) < 0)
                return pd_error_set(err, errno, "open '%s'", path);
        if (sf.f_type != (__typeof__(sf.f_type))TMPFS_MAGIC && sf.f_type != (__typeof__(sf.f_type))RAMFS_MAGIC)
                return 0;
        char tmp[PATH_MAX];
        if (snprintf(tmp, sizeof tmp, "%s.copy", path) >= (int)sizeof tmp)
                return pd_error_setx(err, ENAMETOOLONG, "'%s'", path);
        (void)unlink(tmp);
        int r;
        {
                _pd_cleanup_close_ int dst = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                /* Every page allocated now, holes included: a clone maps
                 * the file private, and a fault on a hole of a tmpfs file,
                 * even one that then copies the page, adds that page to the
                 * file, charged to the clone's QEMU for as long as the
                 * template lives. */
                if (dst < 0 || fchown(dst, st.st_uid, st.st_gid) < 0 || fchmod(dst, st.st_mode & 07777) < 0 ||
                    fallocate(dst, 0, 0, st.st_size) < 0)
                        r = pd_error_set(err, errno, "create '%s'", tmp);
                else
                        r = copy_extents(src, dst, st.st_size, err);
        }
        if (r == 0 && rename(tmp, path) < 0)
                r = pd_error_set(err, errno, "rename '%s'", tmp);
        if (r < 0) {
                (void)unlink(tmp);
                return pd_error_prefix(err, "copy '%s' out of QEMU's memory cgroup", path);
        }
        return 1;
}
