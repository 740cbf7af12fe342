/* paddock serve's core: the types every part of the server shares. The
 * server is three folders (docs/architecture.md): core/ (this: the sandbox
 * table and lifecycle, HTTP dispatch, store, audit, log), api/ (the native
 * routes) and e2b/ (E2B compatibility); core includes neither of the
 * others, and src/server/routes.c registers their route tables.
 *
 *   http.c      libmicrohttpd daemon, dispatch over registered routes, auth, body caps
 *   reply.c     JSON replies and errors, request bodies and queries
 *   log.c       structured log lines
 *   store.c     SQLite (WAL): sandboxes, keys, templates, snapshots
 *   manager.c   the sandbox manager (mgr_int.h lists its files); pools: pool.c,
 *               the agent watcher: watcher.c
 *   lifecycle_table.c  the states and the one transition table (lifecycle.h)
 *   audit_log.c per-sandbox append-only JSON lines
 *   agentc.c    a fresh agent connection for a route (the calls are
 *               proto/client.h's)
 *   agent_io.c  connecting with retries, waiting while watching the sandbox
 *   stream.c    a streaming response fed by an agent connection
 *   tunnel.c    HTTP through an agent tunnel
 *   tokens.c    HMAC tokens of the server's secret
 *   port_host.c the domain of sandbox port URLs (with the server's port)
 *   sessions.c  the web console's sign-in sessions (cookie tokens; http.c
 *               accepts them with its cross-origin checks)
 *
 * Threading: libmicrohttpd runs one thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION), so a route handler may block: a streaming
 * response's reader callback waits on its own agent connection. Shared state
 * (the sandbox table, the store) is behind srv->lock. */
#pragma once
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "proto/client.h"
#include "lib/error.h"
#include "lib/sandbox.h"
#include "lib/state.h"
#include "server/core/lifecycle.h"
#include "server/core/log.h"

struct pd_store;

struct pd_key {
        char id[17];            /* public key id (first 16 hex of its hash) */
        char name[65];
        bool admin;             /* `paddock key create --admin`: manages shared templates */
};

/* json_decref when the variable goes out of scope, after a return
 * statement's expression: a reply formatted there may quote strings that
 * the document still owns (json_string_value of a request body). */
static inline void pd_json_decrefp(json_t **j)
{
        json_decref(*j);
}
#define _pd_cleanup_json_ __attribute__((cleanup(pd_json_decrefp)))

/* One sandbox as the server tracks it. Reference counted: routes take a
 * reference with pd_server_sandbox_get and drop it with _put. */
struct pd_srv_sandbox {
        struct pd_sandbox *sb;
        char id[PD_ID_LEN + 1];
        char key_id[17];
        char template_name[65];
        json_t *env;            /* sandbox-wide env applied to every process */
        json_t *metadata;
        /* lifecycle.h; changed only by pd_sb_apply under lock and srv->lock,
         * read under either or with pd_srv_sandbox_state */
        enum pd_sb_state state;
        uint64_t created_ms;    /* wall clock, ms since epoch */
        uint64_t deadline_boot_ms;      /* CLOCK_BOOTTIME ms; 0 = none */
        uint32_t timeout_s;
        int refs;
        bool ports_public;      /* ports reachable without a port token (persisted; atomic reads) */
        pthread_mutex_t lock;   /* serialises lifecycle changes of this sandbox */
};

struct pd_server_config {
        const char *listen_addr;        /* "127.0.0.1:49982" */
        const char *state_dir;
        unsigned pool_size;             /* warm sandboxes per template+limits class */
        unsigned max_sandboxes;         /* in all */
        unsigned max_per_key;
        unsigned default_timeout_s;     /* 300 */
        bool destroy_on_exit;
        const char *domain;             /* ports: <port>-<id>.<domain> (default "localhost") */
        /* network (docs/network.md): the router's uplink ("netns:PATH") and
         * upstream resolvers; E2B creates that say nothing about the
         * network get e2b_network ("open" or "none") */
        const char *net_uplink;
        const char *net_resolver;
        const char *e2b_network;
        /* registries POST /api/v1/templates may pull from ("host[:port]",
         * exact); none: server-side pulls are refused (docs/templates.md) */
        const char *const *template_registries;
        unsigned n_template_registries;
        /* the largest image archive POST /api/v1/templates/{name}/image
         * takes (bytes; 0: PD_TPL_ARCHIVE_MAX_DEFAULT, api/templates.h) */
        uint64_t template_upload_max;
        /* audit logs of deleted sandboxes are removed this many days after
         * their last line (audit_retention.c; default 7) */
        unsigned audit_retention_days;
};

struct pd_server {
        struct pd_server_config cfg;
        struct pd_state state;
        struct pd_store *store;
        struct MHD_Daemon *mhd;
        pthread_mutex_t lock;
        /* sandbox table: managed by manager.c */
        struct pd_srv_sandbox **sandboxes;
        size_t n_sandboxes, cap_sandboxes;
        void *manager_private;
        uint64_t http_requests[6];      /* by status class: 1xx..5xx, other */
        /* CLOCK_MONOTONIC ms of the last API request's start or end (atomic;
         * /metrics and /health polls do not count): the warm pool refills
         * once the API is quiet (pool.c) */
        uint64_t last_request_ms;
        unsigned requests_in_flight;    /* of a client's work (http.c); the pool refills when 0 */
        int audit_dirfd;
        /* what the router dispatches to (pd_http_register*), in order */
        struct {
                const char *group;
                const struct pd_route *table;
        } route_tables[16];
        unsigned n_route_tables;
        const struct pd_route_matcher *matchers[8];
        unsigned n_matchers;
};

/* One HTTP request as a route sees it. */
struct pd_req {
        struct pd_server *srv;
        struct MHD_Connection *conn;
        const char *method;
        const char *url;
        const char *raw_url;            /* as the client sent it, query included */
        const char *params[4];          /* path captures: {id}, {pid} in order */
        unsigned n_params;
        const char *body;               /* buffered body (NUL-terminated), if the route buffers */
        size_t body_len;
        struct pd_key key;              /* authenticated caller */
        bool authed;
        void *route_state;              /* for streaming-body routes */
        int64_t resp_bytes;             /* body of a buffered answer (reply.c); -1: streamed */
};

/* Route handler: queue a response (pd_reply_*) and return its result.
 * Streaming-body routes (PD_ROUTE_STREAM_BODY) are called once per chunk
 * with *chunk_len > 0 (consume it, set *chunk_len = 0, return MHD_YES), and
 * a last time with chunk == NULL to answer. */
typedef enum MHD_Result (*pd_route_fn)(struct pd_req *r, const char *chunk, size_t *chunk_len);

enum pd_route_flags {
        PD_ROUTE_PUBLIC = 1u << 0,      /* no API key needed */
        PD_ROUTE_STREAM_BODY = 1u << 1, /* body handed over in chunks, not buffered */
        PD_ROUTE_RAW_PATH = 1u << 2,    /* matchers: see the request as sent, before the
                                           router refuses NUL escapes (a relay) */
};

struct pd_route {
        const char *method;
        const char *pattern;            /* "/api/v1/sandboxes/{id}/processes/{pid}" */
        pd_route_fn fn;
        unsigned flags;
        size_t body_max;                /* buffered routes: 413 beyond this (0 = 1 MiB) */
};

/* A route that claims requests by what they carry rather than by method
 * and path: a Host naming a sandbox's port, E2B's E2b-Sandbox-Id header.
 * path: the request's path (with PD_ROUTE_RAW_PATH, its raw URL). */
typedef bool (*pd_route_match_fn)(struct pd_server *srv, struct MHD_Connection *conn, const char *path);
struct pd_route_matcher {
        const char *name;               /* for --print-routes */
        const char *group;
        pd_route_match_fn match;
        struct pd_route route;          /* its handler and flags; method and pattern "*" */
};

/* Registration (http.c), before pd_http_start, by whoever assembles the
 * server (src/server/routes.c). Matchers are tried first, in the order
 * registered (those with PD_ROUTE_RAW_PATH before the NUL-escape checks),
 * then the tables' patterns, table by table. group names the table's part
 * of the API ("native", "e2b") for --print-routes. -ENOSPC when full. */
int pd_http_register(struct pd_server *srv, const char *group, const struct pd_route *table /* NULL-terminated */);
int pd_http_register_matcher(struct pd_server *srv, const struct pd_route_matcher *m);
/* One line per route: "METHOD PATTERN GROUP[ public]", then per matcher
 * "match NAME GROUP[ public][ raw]" (first). */
void pd_http_print_routes(const struct pd_server *srv, FILE *f);

/* Replies (reply.c; pd_reply_response is http.c's). Each returns the
 * MHD_queue_response result. */
enum MHD_Result pd_reply_json(struct pd_req *r, unsigned status, json_t *body /* stolen */);
enum MHD_Result pd_reply_empty(struct pd_req *r, unsigned status);
enum MHD_Result pd_reply_error(struct pd_req *r, unsigned status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Map a negative errno from the library/agent to an HTTP error reply. */
enum MHD_Result pd_reply_errno(struct pd_req *r, int neg_errno, const char *message);
/* Queue an arbitrary response (streaming responses built by the route). */
enum MHD_Result pd_reply_response(struct pd_req *r, unsigned status, struct MHD_Response *resp);
/* Parse r->body as a JSON object; on failure queue a 400 and return NULL. */
json_t *pd_req_json(struct pd_req *r, enum MHD_Result *ret);
const char *pd_req_query(struct pd_req *r, const char *name);

/* The state without a lock: an answer that may be stale by the time it is
 * used (callers that act on it take s->lock, or fail cleanly later). */
static inline enum pd_sb_state pd_srv_sandbox_state(const struct pd_srv_sandbox *s)
{
        return (enum pd_sb_state)__atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
}

/* Sandbox table (registry.c). get: NULL if unknown, deleted, or owned by
 * another key (callers answer 404 either way). */
struct pd_srv_sandbox *pd_server_sandbox_get(struct pd_server *srv, const char *id, const struct pd_key *key);
void pd_server_sandbox_put(struct pd_server *srv, struct pd_srv_sandbox *s);

/* Agent connection (agentc.c): a fresh one with the HELLO done (out is
 * initialised, closed, first: pd_client_close it whatever the result). */
int pd_agentc_connect(struct pd_srv_sandbox *s, struct pd_client *out, struct pd_error *err);
/* The same with the HELLO pipelined (pd_client_connect_pipelined). */
int pd_agentc_connect_pipelined(struct pd_srv_sandbox *s, struct pd_client *out, struct pd_error *err);

/* Audit (audit_log.c): append one event for sandbox id; fields is stolen. */
void pd_audit(struct pd_server *srv, const char *sandbox_id, const char *key_id, const char *event, json_t *fields);

/* An eventfd that becomes readable when the server stops: streaming
 * responses that block (follow=1) poll it with their own fds and end. */
int pd_server_stop_fd(struct pd_server *srv);
/* http.c: start/stop the libmicrohttpd daemon on srv->cfg.listen_addr. */
int pd_http_start(struct pd_server *srv, struct pd_error *err);
void pd_http_stop(struct pd_server *srv);
/* audit_retention.c: remove the logs of sandboxes no longer in the table
 * whose last line is older than cfg.audit_retention_days. */
void pd_audit_prune(struct pd_server *srv);

/* audit_log.c: the route streaming GET /sandboxes/{id}/audit[?follow=1]. */
enum MHD_Result pd_audit_reply(struct pd_req *r, const char *sandbox_id, struct pd_srv_sandbox *live);
/* Note: pd_reply_response takes over resp (it drops the caller's reference
 * with MHD_destroy_response after queueing); do not destroy it again. */
/* Note: a PD_ROUTE_STREAM_BODY route whose request ends before its last
 * call (client gone, timeout) while r->route_state is still set is called
 * once more with chunk == NULL and chunk_len == NULL, only to free its state
 * (no reply can be queued then). */

/* An error decided while a streaming request is still arriving, answered
 * when it ends (libmicrohttpd cannot answer mid-upload). The first error
 * wins; status 0 = none (reply.c). */
struct pd_deferred_error {
        unsigned status;
        char code[32];
        char msg[256];
};
void pd_deferred_fail(struct pd_deferred_error *d, unsigned status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
