/* The server's log lines (log.h): one write(2) per line on stderr, so lines
 * from concurrent threads never interleave. */
#include "server/core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/core/store.h"
#include "lib/util.h"

/* Set once at start (--log-level), read by every thread. */
static int min_rank = 2;

static int rank_of(const char *level)
{
        static const char *const names[] = { "error", "warn", "info", "debug" };
        for (int i = 0; i < 4; i++)
                if (!strcmp(level, names[i]))
                        return i;
        return -1;
}

int pd_log_set_level(const char *name)
{
        int r = rank_of(name);
        if (r < 0)
                return -EINVAL;
        min_rank = r;
        return 0;
}

bool pd_log_enabled(const char *level)
{
        return rank_of(level) <= min_rank;      /* an unknown level is always said */
}

void pd_log(const char *level, const char *fmt, ...)
{
        if (!pd_log_enabled(level))
                return;
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

const char *pd_log_http_level(const char *msg)
{
        /* libmicrohttpd's wording (1.0): the peer closed or reset the
         * connection while the request was read or the answer written, and
         * an answer cut because its producer stopped: the routes stop one
         * when its client left, and log their own failures themselves. */
        static const char *const quiet[] = {
                "closed by remote side",
                "closed by remote peer", /* "...forcibly closed by remote peer" */
                "has been disconnected",
                "Connection reset",
                "Broken pipe",
                "Failed to send data",
                "Failed to receive data",
                "application error generating response",
                "application reported error generating data",
        };
        for (size_t i = 0; i < sizeof quiet / sizeof *quiet; i++)
                if (strstr(msg, quiet[i]))
                        return "debug";
        return "warn";
}
