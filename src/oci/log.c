/* --log FILE and --log-format text|json, the way engines read them: conmon
 * and containerd's shim read the last "error" line of the log file when a
 * runtime verb fails, so every error goes there as well as to stderr. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "oci/oci.h"

static FILE *log_file;
static bool log_json, log_debug;

void oci_log_init(const struct oci_global *g)
{
        log_json = g->log_json;
        log_debug = g->debug;
        if (g->log_path && *g->log_path)
                log_file = fopen(g->log_path, "ae");
}

static void emit(FILE *f, const char *level, const char *msg, bool json)
{
        char ts[64];
        struct timespec now;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(ts + n, sizeof ts - n, ".%09ldZ", now.tv_nsec);
        if (json) {
                json_t *o = json_pack("{s:s,s:s,s:s}", "level", level, "msg", msg, "time", ts);
                char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
                if (s)
                        fprintf(f, "%s\n", s);
                free(s);
                json_decref(o);
        } else {
                fprintf(f, "time=\"%s\" level=%s msg=\"%s\"\n", ts, level, msg);
        }
        fflush(f);
}

void oci_log(const char *level, const char *fmt, ...)
{
        bool is_debug = strcmp(level, "debug") == 0;
        /* info: for the --log file (stderr only with --debug), so engines'
         * output stays the workload's. */
        bool is_info = strcmp(level, "info") == 0;
        if ((is_debug && !log_debug) || (is_info && !log_file && !log_debug))
                return;
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (log_file)
                emit(log_file, level, msg, log_json);
        if ((!is_debug && !is_info) || !log_file)
                fprintf(stderr, "paddock-oci: %s: %s\n", level, msg);
}

void oci_fail(const struct pd_error *err)
{
        oci_log("error", "%s", err->msg[0] ? err->msg : "failed");
}
