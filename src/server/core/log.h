/* The server's log: structured lines on stderr (log.c), and the access log
 * (access_log.c). Only the edges of the server log (STYLE §6); libraries
 * return errors. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

struct pd_error;

/* "<RFC3339 ts> <level> <msg>\n" in one write; callers write msg as
 * "words key=value key=value". level: error, warn, info, debug; lines
 * below the level set by pd_log_set_level (default info) are dropped. */
void pd_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* --log-level: error, warn, info or debug; -EINVAL for anything else. */
int pd_log_set_level(const char *name);
bool pd_log_enabled(const char *level);

/* The level of a libmicrohttpd message (log.c): "debug" for what an
 * ordinary client disconnect makes it say (the client left mid-request or
 * mid-answer: nothing for an operator to do), "warn" for the rest. */
const char *pd_log_http_level(const char *msg);

/* One finished request (access_log.c). */
struct pd_access {
        const char *key_id;     /* public id of the caller's key; NULL: none */
        const char *method;
        const char *route;      /* the route's pattern or matcher name; NULL: no route */
        unsigned status;        /* 0: no answer was queued */
        int64_t bytes;          /* body bytes of a buffered answer; -1: streamed */
        uint64_t duration_ns;
        bool aborted;           /* the connection ended before the answer did */
};

/* --access-log PATH ("-": stderr), opened before the server starts. */
int pd_access_log_open(const char *path, struct pd_error *err);
void pd_access_log(const struct pd_access *a);
