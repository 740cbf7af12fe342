/* The teardown lock of a state dir (lib/teardown.h). */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "lib/teardown.h"

static int open_lock(struct pd_state *st)
{
        int fd = openat(st->dirfd, PD_TEARDOWN_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        return fd < 0 ? -errno : fd;
}

static int lock(int fd, int op)
{
        while (flock(fd, op) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

int pd_teardown_hold(struct pd_state *st)
{
        int fd = open_lock(st);
        if (fd < 0)
                return fd;
        int r = lock(fd, LOCK_SH);
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

int pd_teardown_wait(struct pd_state *st)
{
        int fd = open_lock(st);
        if (fd < 0)
                return fd;
        /* granted once every shared holder is gone; dropped at once, so a
         * teardown starting meanwhile waits only for this instant */
        int r = lock(fd, LOCK_EX);
        close(fd);
        return r;
}
