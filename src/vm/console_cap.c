/* The cap on a microvm's console log (docs/microvm.md, "Files of a microvm
 * sandbox on the host").
 *
 * QEMU appends the guest's serial console to <vm dir>/console.log (chardev
 * file, append=on). A guest writes there as much as it likes (root in the
 * guest writes /dev/console), and the file lives on the runtime dir, often
 * a tmpfs: memory. The relay, one per VM for as long as the VM runs, watches
 * the file with inotify and, whenever it passes its cap, truncates it to
 * nothing and writes a line saying so: the file keeps the latest output,
 * never more than the cap plus one burst of QEMU's writes. QEMU's O_APPEND
 * writes land at the new end. The directory is root's and QEMU cannot put
 * anything in place of the file (qemu.c, qemu_files). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/console_cap.h"
#include "lib/util.h"

struct cap {
        int fd, ino;
        uint64_t max;
};

static void trim(struct cap *c)
{
        struct stat st;
        if (fstat(c->fd, &st) < 0 || (uint64_t)st.st_size <= c->max)
                return;
        if (ftruncate(c->fd, 0) < 0)
                return;
        char line[128];
        int n = snprintf(line, sizeof line, "[paddock: console log over %" PRIu64 " bytes, truncated; "
                         "what follows is newer]\n", c->max);
        (void)pd_write_all(c->fd, line, (size_t)n);
}

static void *watch(void *arg)
{
        struct cap *c = arg;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
                trim(c);
                ssize_t n = read(c->ino, buf, sizeof buf);
                if (n < 0 && errno != EINTR)
                        break;
        }
        return NULL;
}

int pd_console_cap_start(const char *path, uint64_t max)
{
        struct cap *c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->max = max;
        c->fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        c->ino = inotify_init1(IN_CLOEXEC);
        struct stat st;
        int r = 0;
        if (c->fd < 0 || c->ino < 0 || fstat(c->fd, &st) < 0)
                r = -errno;
        else if (!S_ISREG(st.st_mode))
                r = -EINVAL;
        else if (inotify_add_watch(c->ino, path, IN_MODIFY) < 0)
                r = -errno;
        pthread_t t;
        if (r == 0 && (r = -pthread_create(&t, NULL, watch, c)) == 0) {
                pthread_detach(t);
                return 0;
        }
        if (c->fd >= 0)
                close(c->fd);
        if (c->ino >= 0)
                close(c->ino);
        free(c);
        return r;
}
