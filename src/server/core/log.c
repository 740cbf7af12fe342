/* The server's log lines (log.h): one write(2) per line on stderr, so lines
 * from concurrent threads never interleave. */
#include "server/core/log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/core/store.h"
#include "lib/util.h"

void pd_log(const char *level, const char *fmt, ...)
{
        char line[2048];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char t[32];
        pd_rfc3339_ms((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u, t);
        int n = snprintf(line, sizeof line, "%s %s ", t, level);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
        va_end(ap);
        size_t len = strlen(line);
        line[len++] = '\n';
        (void)pd_write_all(2, line, len);
}
