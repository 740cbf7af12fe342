/* The access log (log.h): one line per finished request, to the file or
 * stderr given by `paddock serve --access-log`, else to stderr at
 * --log-level debug. A line says who (the key's public id, never the key),
 * what (method and the route's pattern, never the path as sent: a signed
 * URL or a port token may ride in it), the status, the answer's bytes and
 * the time taken; never a body. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/core/log.h"
#include "server/core/metrics.h"
#include "server/core/store.h"
#include "lib/error.h"
#include "lib/util.h"

/* Set once before the server takes requests; read by every request thread. */
static int access_fd = -1;

int pd_access_log_open(const char *path, struct pd_error *err)
{
        if (!strcmp(path, "-")) {
                access_fd = STDERR_FILENO;
                return 0;
        }
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return pd_error_set(err, errno, "--access-log: open '%s'", path);
        access_fd = fd;
        return 0;
}

void pd_access_log(const struct pd_access *a)
{
        /* every finished request passes here: /metrics counts it too */
        pd_metrics_request(a->route, a->status, a->duration_ns);
        int fd = access_fd >= 0 ? access_fd : pd_log_enabled("debug") ? STDERR_FILENO : -1;
        if (fd < 0)
                return;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char t[32], bytes[24];
        pd_rfc3339_ms((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u, t);
        if (a->bytes >= 0)
                snprintf(bytes, sizeof bytes, "%" PRId64, a->bytes);
        else
                snprintf(bytes, sizeof bytes, "-");     /* a streamed answer */
        char line[1024];
        int n = snprintf(line, sizeof line, "%s access key=%s method=%s route=%s status=%u bytes=%s ms=%.1f%s\n", t,
                         a->key_id && *a->key_id ? a->key_id : "-", a->method ? a->method : "-",
                         a->route ? a->route : "-", a->status, bytes, (double)a->duration_ns / 1e6,
                         a->aborted ? " aborted=1" : "");
        if (n > 0)
                (void)pd_write_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
