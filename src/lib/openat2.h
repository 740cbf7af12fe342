/* openat2(2) with the retry its manual asks for: under RESOLVE_IN_ROOT or
 * RESOLVE_BENEATH the kernel answers EAGAIN when any rename or mount
 * anywhere on the system raced with the resolution of a "..". On a busy
 * host (other sandboxes mounting) that is common, and not an error of the
 * caller's path. Bounded, so a host that mounts without pause cannot keep a
 * caller spinning. Header-only: the static agent and the supervisor use it. */
#pragma once
#include <errno.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
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
