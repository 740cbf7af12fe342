/* The HTTP client of the client verbs (remote*.c): where the server is, the
 * API key, JSON calls and streamed transfers over libcurl (docs/api.md). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* Exit statuses of the client verbs (docs/cli.md). exec exits with the
 * command's own status instead of 0. */
#define PD_RC_OK 0
#define PD_RC_REFUSED 1         /* the server said no (4xx), with its message */
#define PD_RC_USAGE 2           /* bad command line */
#define PD_RC_UNREACHABLE 3     /* cannot reach the server */
#define PD_RC_INTERNAL 125      /* paddock's own error (client, or a 5xx) */

struct pd_rc {
        char url[1024];         /* base, no trailing slash: http://127.0.0.1:49982 */
        char key[512];
};

/* --url/--key (taken out of argv, up to a "--"), else PADDOCK_URL and
 * PADDOCK_API_KEY, else the default state dir's api-key file (said on
 * stderr with --verbose, or -v right after the verb but create's). Returns
 * 0 or an exit status (after printing why). */
int pd_rc_init(struct pd_rc *rc, int *argc, char **argv);

/* A JSON call: path is under /api/v1 and already escaped; body may be NULL.
 * 2xx: 0 and *out (NULL for an empty answer; may pass out = NULL). Else
 * prints "paddock: <server message>" and returns the exit status. */
int pd_rc_json(const struct pd_rc *rc, const char *method, const char *path, json_t *body, json_t **out);
/* The same, also giving the error's "reason" (empty if none) in reason. */
int pd_rc_json_reason(const struct pd_rc *rc, const char *method, const char *path, json_t *body, json_t **out,
                      char reason[32]);

/* Sink for a streamed 2xx body; return < 0 to stop (the call returns
 * s->sink_status then). */
typedef int (*pd_rc_sink_fn)(void *ctx, const char *data, size_t n);

struct pd_rc_stream {
        const char *method;     /* default GET */
        const char *path;
        pd_rc_sink_fn sink;
        void *ctx;
        FILE *upload;           /* PUT this file's bytes (chunked if size < 0) */
        long long upload_size;
        const void *body;       /* or send these bytes */
        size_t body_len;
        const char *content_type;
        long timeout_s;         /* whole-transfer limit; 0: none */
        bool quiet;             /* do not print HTTP errors (still returned) */
        /* out */
        long status;            /* HTTP status, 0 if none arrived */
        int sink_status;
        char neterr[256];       /* transport error text */
        char message[512];      /* the server's error message */
        char reason[32];        /* its error.reason, if any (exec: not-found, ...) */
};

/* 0 on a complete 2xx transfer; PD_RC_UNREACHABLE on a transport error
 * (s->neterr, not printed: a follower may reconnect; s->status tells whether
 * an answer had begun); an HTTP error prints the server's message (unless
 * quiet) and returns PD_RC_REFUSED (4xx) or PD_RC_INTERNAL (5xx); a sink
 * that stopped: s->sink_status. */
int pd_rc_stream(const struct pd_rc *rc, struct pd_rc_stream *s);

/* "could not reach" message for a transport error of pd_rc_stream. */
int pd_rc_net_error(const struct pd_rc *rc, const struct pd_rc_stream *s);

/* URL-escape a value for a query string (malloc'd; NULL on ENOMEM). */
char *pd_rc_escape(const char *s);

/* A sandbox id as the API allows it ([a-z0-9]{20}). */
bool pd_rc_id_ok(const char *s);
