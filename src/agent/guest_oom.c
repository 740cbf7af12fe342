/* The guest kernel's OOM-kill count, for telling an OOM kill from another
 * SIGKILL in a microvm (the host sees only QEMU, which the guest kernel's
 * OOM killer never touches). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"

uint64_t ag_guest_oom_kills(void)
{
        char buf[16384];
        int fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        size_t len = 0;
        ssize_t n;
        while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
                len += (size_t)n;
        close(fd);
        buf[len] = '\0';
        const char *p = strstr(buf, "\noom_kill ");
        return p ? strtoull(p + 10, NULL, 10) : 0;
}
