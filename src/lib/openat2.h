/* openat2(2) with the retry its manual asks for: under RESOLVE_IN_ROOT or
 * RESOLVE_BENEATH the kernel answers EAGAIN when any rename or mount
 * anywhere on the system raced with the resolution of a "..". On a busy
 * host (other sandboxes mounting) that is common, and not an error of the
 * caller's path. Bounded, so a host that mounts without pause cannot keep a
 * caller spinning. Header-only: the static agent and the supervisor use it. */
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define PD_OPENAT2_RETRIES 128

static inline int pd_openat2(int dirfd, const char *path, const struct open_how *how)
{
        int fd;
        int tries = 0;
        do
                fd = (int)syscall(SYS_openat2, dirfd, path, how, sizeof *how);
        while (fd < 0 && errno == EAGAIN && ++tries < PD_OPENAT2_RETRIES);
        return fd;
}

/* Open path inside the tree at rootfd without leaving it: the one way every
 * part (agent, jail, paddock-oci) opens a path it does not trust.
 *   resolve: RESOLVE_IN_ROOT (".." and absolute symlinks stay at rootfd, as
 *            if rootfd were "/") or RESOLVE_BENEATH (anything that would
 *            leave is EXDEV), optionally | RESOLVE_NO_SYMLINKS.
 * Magic links (/proc/<pid>/fd/...) are never followed; leading '/' are
 * dropped and "" is rootfd itself; the fd is CLOEXEC. mode is used with
 * O_CREAT or O_TMPFILE only. Returns the fd or -errno. */
static inline int pd_open_in_root(int rootfd, const char *path, int flags, mode_t mode, uint64_t resolve)
{
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
                .resolve = resolve | RESOLVE_NO_MAGICLINKS,
        };
        while (*path == '/')
                path++;
        int fd = pd_openat2(rootfd, *path ? path : ".", &how);
        return fd < 0 ? -errno : fd;
}
