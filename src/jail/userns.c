#include "jail/userns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/util.h"

static int registry_open(struct pd_error *err)
{
        int fd = open(PD_UID_REGISTRY, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0)
                return fd;
        int r = pd_mkdir_p(PD_UID_REGISTRY, 0700, err);
        if (r < 0)
                return pd_error_prefix(err, "uid range registry");
        fd = open(PD_UID_REGISTRY, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open '%s'", PD_UID_REGISTRY);
        return fd;
}

int pd_uidrange_alloc(const char *owner, struct pd_uidrange *out, struct pd_error *err)
{
        _pd_cleanup_close_ int dfd = registry_open(err);
        if (dfd < 0)
                return dfd;
        /* The directory itself is the host-wide lock. */
        if (flock(dfd, LOCK_EX) < 0)
                return pd_error_set(err, errno, "lock '%s'", PD_UID_REGISTRY);
        uint32_t start;
        if (getrandom(&start, sizeof start, 0) != sizeof start)
                start = (uint32_t)pd_now_ns();
        start %= PD_UID_SLOTS;
        for (uint32_t i = 0; i < PD_UID_SLOTS; i++) {
                uint32_t slot = (start + i) % PD_UID_SLOTS;
                char name[16];
                snprintf(name, sizeof name, "%u", slot);
                int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                if (fd < 0) {
                        if (errno == EEXIST)
                                continue;
                        return pd_error_set(err, errno, "record uid range %u", slot);
                }
                int r = pd_write_all(fd, owner, strlen(owner));
                close(fd);
                if (r < 0) {
                        unlinkat(dfd, name, 0);
                        return pd_error_set(err, -r, "record uid range %u", slot);
                }
                out->slot = slot;
                out->base = PD_UID_BASE + slot * PD_UID_RANGE;
                return 0;       /* flock released when dfd closes */
        }
        return pd_error_setx(err, EAGAIN, "all %u uid ranges are in use", PD_UID_SLOTS);
}

int pd_uidrange_free(uint32_t slot, const char *owner, struct pd_error *err)
{
        _pd_cleanup_close_ int dfd = registry_open(err);
        if (dfd < 0)
                return dfd;
        char name[16], buf[256];
        snprintf(name, sizeof name, "%u", slot);
        if (flock(dfd, LOCK_EX) < 0)
                return pd_error_set(err, errno, "lock '%s'", PD_UID_REGISTRY);
        ssize_t n = pd_read_file_at(dfd, name, buf, sizeof buf);
        if (n == -ENOENT)
                return 0;
        if (n < 0)
                return pd_error_set(err, (int)-n, "read uid range %u", slot);
        if (strcmp(buf, owner) != 0)
                return pd_error_setx(err, EPERM, "uid range %u belongs to '%s', not '%s'", slot, buf, owner);
        if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
                return pd_error_set(err, errno, "free uid range %u", slot);
        return 0;
}

int pd_uidrange_gc(const char *instance, struct pd_error *err)
{
        int dfd = registry_open(err);
        if (dfd < 0)
                return dfd;
        if (flock(dfd, LOCK_EX) < 0) {
                close(dfd);
                return pd_error_set(err, errno, "lock '%s'", PD_UID_REGISTRY);
        }
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return pd_error_set(err, errno, "list '%s'", PD_UID_REGISTRY);
        }
        size_t ilen = strlen(instance);
        int count = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char buf[256];
                if (pd_read_file_at(dirfd(d), de->d_name, buf, sizeof buf) < 0)
                        continue;
                if (!strncmp(buf, instance, ilen) && buf[ilen] == ':' &&
                    unlinkat(dirfd(d), de->d_name, 0) == 0)
                        count++;
        }
        closedir(d);
        return count;
}

int pd_userns_write_maps(pid_t pid, uint32_t base, struct pd_error *err)
{
        char path[64], map[64];
        snprintf(map, sizeof map, "0 %u %u\n", base, PD_UID_RANGE);
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
        int r = pd_write_file_at(AT_FDCWD, path, map, err);
        if (r < 0)
                return r;
        snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
        return pd_write_file_at(AT_FDCWD, path, map, err);
}

/* The holder's whole life: wait until the parent closes the pipe (its
 * maps are written and its namespace is held by an fd by then), then go.
 * It shares the parent's memory (CLONE_VM) and starts with every signal
 * blocked, so it runs no handler and touches nothing of the parent's: raw
 * system calls that cannot fail (no EINTR with signals blocked), so not
 * even errno, which would be the parent thread's, is written. */
static int holder_main(void *arg)
{
        const int *pfd = arg;
        char c;
        syscall(SYS_close, pfd[1]);
        syscall(SYS_read, pfd[0], &c, 1);
        syscall(SYS_exit, 0);
        return 0;
}

int pd_userns_make(const char *uid_map, const char *gid_map, struct pd_userns_holder *h, struct pd_error *err)
{
        /* CLONE_VM: a fork-like copy of the creator's memory costs about a
         * millisecond here (more for the server), sharing it ~0.1 ms. The
         * stack must outlive this call: the holder may still be on it. */
        h->pid = 0;
        h->stack = mmap(NULL, PD_USERNS_HOLDER_STACK, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (h->stack == MAP_FAILED) {
                h->stack = NULL;
                return pd_error_set(err, errno, "stack for an idmapping user namespace");
        }
        int *pfd = h->pfd;
        if (pipe2(pfd, O_CLOEXEC) < 0) {
                int e = errno;
                pd_userns_reap(h);
                return pd_error_set(err, e, "pipe");
        }
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pid_t pid = clone(holder_main, (char *)h->stack + PD_USERNS_HOLDER_STACK, CLONE_VM | CLONE_NEWUSER | SIGCHLD,
                          pfd);
        int e = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid < 0) {
                close(pfd[0]);
                close(pfd[1]);
                pd_userns_reap(h);
                return pd_error_set(err, e, "create an idmapping user namespace");
        }
        h->pid = pid;
        close(pfd[0]);
        char path[64];
        int fd = -1;
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
        int r = pd_write_file_at(AT_FDCWD, path, uid_map, err);
        if (r == 0) {
                snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
                r = pd_write_file_at(AT_FDCWD, path, gid_map, err);
        }
        if (r == 0) {
                snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        r = pd_error_set(err, errno, "open '%s'", path);
        }
        /* The holder exits once it is scheduled; waiting for that here
         * would cost a scheduling round trip per volume (milliseconds on a
         * busy host): the caller reaps it later. */
        close(pfd[1]);
        return r < 0 ? r : fd;
}

void pd_userns_reap(struct pd_userns_holder *h)
{
        if (h->pid > 0)
                while (waitpid(h->pid, NULL, __WALL) < 0 && errno == EINTR)
                        ;
        h->pid = 0;
        if (h->stack)
                munmap(h->stack, PD_USERNS_HOLDER_STACK);
        h->stack = NULL;
}
