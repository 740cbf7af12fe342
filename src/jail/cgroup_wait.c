/* The two cgroup operations that wait for the kernel: freezing (every task
 * stopped) and removal (every task gone). Both wait on events where the
 * kernel offers one:
 *   - v2's cgroup.events changes ("frozen", "populated") with a
 *     notification: poll(2) reports POLLPRI on an fd that has read it.
 *   - a process's exit is a pidfd turning readable, and the kernel takes a
 *     task out of its cgroup (cgroup_exit) before it notifies the pidfd, so
 *     once every pidfd fired the cgroup is empty and rmdir succeeds.
 *   - v1's freezer has no event at all: freezer.state is computed when read
 *     (update_if_frozen). Since the 6.1 freezer rewrite the write itself
 *     freezes every task asleep in a freezable state, so the first read
 *     usually says FROZEN; a task running on another CPU needs its way back
 *     to user space, and only for that is there a bounded, backing-off
 *     re-read (re-writing FROZEN, as the kernel's freezer document says to).
 */
#include "jail/cgroupfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/util.h"

#define MAX_DEPTH 8
#define MAX_WAIT_FDS 256

static int left_ms(uint64_t deadline)
{
        uint64_t now = pd_now_ms();
        return now >= deadline ? 0 : (int)(deadline - now > INT_MAX ? INT_MAX : deadline - now);
}

/* The value of key in a "key value\n" file (cgroup.events), -1 if absent. */
static long long key_value(const char *text, const char *key)
{
        size_t kl = strlen(key);
        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (!strncmp(p, key, kl) && p[kl] == ' ')
                        return strtoll(p + kl + 1, NULL, 10);
        return -1;
}

/* Wait until key reads want in <dirfd>/cgroup.events (v2). The fd is read
 * before each poll: kernfs reports POLLPRI for changes after the last read,
 * so nothing between the read and the poll is missed. */
static int wait_events(int dirfd, const char *key, long long want, uint64_t deadline)
{
        _pd_cleanup_close_ int fd = openat(dirfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (;;) {
                char buf[256];
                ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
                if (n < 0)
                        return -errno;
                buf[n] = '\0';
                if (key_value(buf, key) == want)
                        return 0;
                struct pollfd p = { .fd = fd, .events = POLLPRI };
                int k = poll(&p, 1, left_ms(deadline));
                if (k == 0)
                        return -ETIMEDOUT;
                if (k < 0 && errno != EINTR)
                        return -errno;
        }
}

/* path as openat takes it below the hierarchy's root. */
static const char *rel(const char *path)
{
        while (*path == '/')
                path++;
        return *path ? path : ".";
}

int pd_cg_freeze(const struct pd_cg_hier *h, const char *path, bool frozen, int timeout_ms, struct pd_error *err)
{
        const char *file = h->v2 ? "cgroup.freeze" : "freezer.state";
        const char *want = h->v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
        int r = pd_cg_write(h, path, file, want, err);
        /* Thawing takes effect within the write (v1 and v2 alike). */
        if (r < 0 || !frozen)
                return r;
        uint64_t deadline = pd_now_ms() + (uint64_t)timeout_ms;
        if (h->v2) {
                _pd_cleanup_close_ int dfd = openat(h->rootfd, rel(path), O_PATH | O_DIRECTORY | O_CLOEXEC);
                r = dfd < 0 ? -errno : wait_events(dfd, "frozen", 1, deadline);
                if (r == -ETIMEDOUT)
                        return pd_error_setx(err, ETIMEDOUT, "cgroup '%s' did not freeze within %d ms", path, timeout_ms);
                return r < 0 ? pd_error_set(err, -r, "wait for cgroup '%s' to freeze", path) : 0;
        }
        long ns = 50 * 1000;
        for (;;) {
                char buf[64];
                if (pd_cg_read(h, path, file, buf, sizeof buf) > 0 && !strncmp(buf, "FROZEN", 6))
                        return 0;
                if (pd_now_ms() >= deadline)
                        return pd_error_setx(err, ETIMEDOUT, "cgroup '%s' did not freeze within %d ms", path, timeout_ms);
                /* No event exists for FREEZING -> FROZEN in v1 (see above). */
                struct timespec ts = { 0, ns };
                nanosleep(&ts, NULL);
                ns = ns < 8 * 1000 * 1000 ? ns * 2 : ns;
                (void)pd_cg_write(h, path, file, want, NULL);
        }
}

bool pd_cg_frozen(const struct pd_cg_hier *h, const char *path)
{
        char buf[64];
        if (pd_cg_read(h, path, h->v2 ? "cgroup.freeze" : "freezer.state", buf, sizeof buf) <= 0)
                return false;
        return h->v2 ? buf[0] == '1' : !strncmp(buf, "FROZEN", 6);
}

/* SIGKILL every process in the cgroup at dirfd and wait for them to exit,
 * through pidfds (never a pid that was reused meanwhile). Returns how many
 * it waited for, or -errno. Processes forked meanwhile are the caller's
 * next round. */
static int kill_procs_wait(int dirfd, const char *what, uint64_t deadline)
{
        pid_t *pids;
        size_t n;
        int r = 0, fds[MAX_WAIT_FDS];
        unsigned nfd = 0;
        if ((r = pd_cg_procs_at(dirfd, what, &pids, &n, NULL)) < 0)
                return r == -ENOENT ? 0 : r;
        for (size_t i = 0; i < n; i++) {
                int fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
                if (fd < 0)
                        continue;       /* gone already */
                syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
                if (nfd < MAX_WAIT_FDS)
                        fds[nfd++] = fd;
                else
                        close(fd);      /* killed; waited for in a later round */
        }
        free(pids);
        for (unsigned i = 0; i < nfd;) {
                struct pollfd p = { .fd = fds[i], .events = POLLIN };
                int k = poll(&p, 1, left_ms(deadline));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        r = k == 0 ? -ETIMEDOUT : -errno;
                        break;
                }
                i++;
        }
        for (unsigned i = 0; i < nfd; i++)
                close(fds[i]);
        return r < 0 ? r : (int)nfd;
}

/* Empty the cgroup at dirfd: v2 kills the whole subtree with one write to
 * cgroup.kill and waits for "populated 0"; v1 (and v2 before 5.14) kills
 * process by process. Returns how many events it waited for. */
static int empty(const struct pd_cg_hier *h, int dirfd, const char *what, uint64_t deadline)
{
        if (h->v2 && pd_write_file_at(dirfd, "cgroup.kill", "1", NULL) == 0) {
                int r = wait_events(dirfd, "populated", 0, deadline);
                return r < 0 ? r : 1;
        }
        return kill_procs_wait(dirfd, what, deadline);
}

static int remove_tree(const struct pd_cg_hier *h, const char *rel, int depth, uint64_t deadline)
{
        if (unlinkat(h->rootfd, rel, AT_REMOVEDIR) == 0 || errno == ENOENT)
                return 0;
        if (errno != EBUSY)
                return -errno;
        /* Busy: processes in it, or cgroups below it. */
        int fd = openat(h->rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        char what[PATH_MAX + 96];
        snprintf(what, sizeof what, "%s/%s", h->mnt, rel);
        int r;
        for (;;) {
                int waited = r = empty(h, dirfd(d), what, deadline);
                if (r < 0)
                        break;
                rewinddir(d);
                struct dirent *de;
                while ((de = readdir(d)))
                        if (de->d_type == DT_DIR && de->d_name[0] != '.' && depth < MAX_DEPTH) {
                                char child[PATH_MAX];
                                if (snprintf(child, sizeof child, "%s/%s", rel, de->d_name) < (int)sizeof child)
                                        (void)remove_tree(h, child, depth + 1, deadline);
                        }
                if (unlinkat(h->rootfd, rel, AT_REMOVEDIR) == 0 || errno == ENOENT) {
                        r = 0;
                        break;
                }
                r = -errno;
                if (errno != EBUSY || left_ms(deadline) == 0)
                        break;
                /* Still busy: a process forked before the kill reached its
                 * parent (the next round kills it), or, with nothing left to
                 * wait on, an exit the kernel has not finished: only then a
                 * pause, so this never spins. */
                if (waited == 0) {
                        struct timespec ts = { 0, 1000 * 1000 };
                        nanosleep(&ts, NULL);
                }
        }
        closedir(d);
        return r;
}

int pd_cg_remove(const struct pd_cg_hier *h, const char *path, int timeout_ms, struct pd_error *err)
{
        while (*path == '/')
                path++;
        if (!*path)
                return pd_error_setx(err, EINVAL, "refusing to remove a cgroup hierarchy's root");
        int r = remove_tree(h, path, 0, pd_now_ms() + (uint64_t)timeout_ms);
        if (r == -ETIMEDOUT)
                r = -EBUSY;
        return r < 0 ? pd_error_set(err, -r, "remove cgroup '%s/%s'", h->mnt, path) : 0;
}
