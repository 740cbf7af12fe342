/* paddock serve: shared types of the server's modules.
 *
 *   http.c      libmicrohttpd daemon, router, auth, body caps, JSON replies
 *   store.c     SQLite (WAL): sandboxes, keys, templates
 *   manager.c   the sandbox table: create, delete, TTL, adoption (pools: pool.c)
 *   routes_sandboxes.c  /sandboxes, /templates, /health, /metrics
 *   routes_procs.c      /sandboxes/{id}/processes..., /exec (with procs_*.c, procs.h)
 *   routes_files.c      /sandboxes/{id}/files...
 *   audit.c     per-sandbox append-only JSON lines
 *   agentc.c    a fresh agent connection for a route (the calls are
 *               proto/client.h's)
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

#include "proto/client.h"
#include "lib/error.h"
#include "lib/sandbox.h"
#include "lib/state.h"

struct pd_store;

struct pd_key {
        char id[17];            /* public key id (first 16 hex of its hash) */
        char name[65];
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
        char state[16];         /* "running", "paused", "failed", "deleted" */
        uint64_t created_ms;    /* wall clock, ms since epoch */
        uint64_t deadline_boot_ms;      /* CLOCK_BOOTTIME ms; 0 = none */
        uint32_t timeout_s;
        int refs;
        bool deleted;
        bool ports_public;      /* ports reachable without a port token (not persisted) */
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
        int audit_dirfd;
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
};

/* Route handler: queue a response (pd_reply_*) and return its result.
 * Streaming-body routes (PD_ROUTE_STREAM_BODY) are called once per chunk
 * with *chunk_len > 0 (consume it, set *chunk_len = 0, return MHD_YES), and
 * a last time with chunk == NULL to answer. */
typedef enum MHD_Result (*pd_route_fn)(struct pd_req *r, const char *chunk, size_t *chunk_len);

enum pd_route_flags {
        PD_ROUTE_PUBLIC = 1u << 0,      /* no API key needed */
        PD_ROUTE_STREAM_BODY = 1u << 1, /* body handed over in chunks, not buffered */
};

struct pd_route {
        const char *method;
        const char *pattern;            /* "/api/v1/sandboxes/{id}/processes/{pid}" */
        pd_route_fn fn;
        unsigned flags;
        size_t body_max;                /* buffered routes: 413 beyond this (0 = 1 MiB) */
};

/* Route tables, one per routes_*.c file (NULL-terminated). */
extern const struct pd_route pd_routes_sandboxes[];
extern const struct pd_route pd_routes_network[];     /* routes_network.c */
extern const struct pd_route pd_routes_procs[];
extern const struct pd_route pd_routes_files[];

/* Replies (http.c). Each returns the MHD_queue_response result. */
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

/* Sandbox table (manager.c). get: NULL if unknown, deleted, or owned by
 * another key (callers answer 404 either way). */
struct pd_srv_sandbox *pd_server_sandbox_get(struct pd_server *srv, const char *id, const struct pd_key *key);
void pd_server_sandbox_put(struct pd_server *srv, struct pd_srv_sandbox *s);

/* Agent connection (agentc.c): a fresh one with the HELLO done (out is
 * initialised, closed, first: pd_client_close it whatever the result). */
int pd_agentc_connect(struct pd_srv_sandbox *s, struct pd_client *out, struct pd_error *err);

/* Audit (audit.c): append one event for sandbox id; fields is stolen. */
void pd_audit(struct pd_server *srv, const char *sandbox_id, const char *key_id, const char *event, json_t *fields);

/* --- Helpers shared by the routes that call the agent (defined in
 * routes_common.c). --- */

/* The sandbox named by r->params[0] with a reference taken; NULL with a 404
 * (unknown, deleted, another key's) already queued in *ret. */
struct pd_srv_sandbox *pd_route_sandbox(struct pd_req *r, enum MHD_Result *ret);
/* pd_agentc_connect, retried for a while when the agent turns connections
 * away (it serves a bounded number at once). */
int pd_route_agent(struct pd_srv_sandbox *s, struct pd_client *c, struct pd_error *err);
/* Make c's waits also give up when the sandbox is deleted or the server
 * stops (-ESHUTDOWN), or the HTTP client mc has gone (-ECONNABORTED; mc
 * may be NULL). */
void pd_route_watch(struct pd_client *c, struct pd_server *srv, struct MHD_Connection *mc,
                    struct pd_srv_sandbox *s);
/* An agent's ENTRY's name, path and link target as JSON strings, set in o
 * under "name", "path" and link_key, in the agent's order (a string that
 * is not UTF-8 becomes ""). */
void pd_route_entry_names(const struct pd_entry *e, json_t *o, const char *link_key);
/* Answer an agent failure: ESRCH/ENOENT 404, EINVAL 400, ... (message from err). */
enum MHD_Result pd_route_reply_agent_error(struct pd_req *r, int neg_errno, const struct pd_error *err);
/* "user" (default) or "root": uid, gid, home, name. false if unknown. */
struct pd_route_user {
        uint32_t uid, gid;
        const char *home, *name;
        uint32_t groups[3];
        unsigned n_groups;
};
bool pd_route_user_parse(const char *name, struct pd_route_user *u);

/* ---- added by the server core (http.c, manager.c, serve.c) ---- */

/* Structured log line on stderr: "<RFC3339 ts> <level> <msg>"; callers
 * write msg as "words key=value key=value". level: info, warn, error. */
void pd_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An eventfd that becomes readable when the server stops: streaming
 * responses that block (follow=1) poll it with their own fds and end. */
int pd_server_stop_fd(struct pd_server *srv);
/* http.c: start/stop the libmicrohttpd daemon on srv->cfg.listen_addr. */
int pd_http_start(struct pd_server *srv, struct pd_error *err);
void pd_http_stop(struct pd_server *srv);
/* audit.c: the route streaming GET /sandboxes/{id}/audit[?follow=1]. */
enum MHD_Result pd_audit_reply(struct pd_req *r, const char *sandbox_id, struct pd_srv_sandbox *live);
/* Note: pd_reply_response takes over resp (it drops the caller's reference
 * with MHD_destroy_response after queueing); do not destroy it again. */
/* Note: a PD_ROUTE_STREAM_BODY route whose request ends before its last
 * call (client gone, timeout) while r->route_state is still set is called
 * once more with chunk == NULL and chunk_len == NULL, only to free its state
 * (no reply can be queued then). */

/* ---- E2B compatibility (e2b_*.c, docs/e2b.md) ---- */
/* The E2B control plane (/v2/sandboxes, /sandboxes/...) and the signed
 * /files URLs; NULL-terminated like the other tables. */
extern const struct pd_route pd_routes_e2b[];
/* envd and the code interpreter: the router calls this for every request
 * that carries an E2b-Sandbox-Id header, whatever its path, with the
 * calling convention of a PD_ROUTE_STREAM_BODY route and without API-key
 * auth (it checks X-Access-Token itself). */
enum MHD_Result pd_e2b_envd_handle(struct pd_req *r, const char *chunk, size_t *chunk_len);

/* ---- sandbox ports (ports.c, docs/api.md "Ports") ---- */
/* POST /api/v1/sandboxes/{id}/ports/public */
extern const struct pd_route pd_routes_ports[];
/* routes_snapshots.c: snapshots and forks */
extern const struct pd_route pd_routes_snapshots[];
/* true if the request is for a sandbox port: its Host is
 * <port>-<id>.<domain>[:n] or its path /api/v1/sandboxes/{id}/ports/{port}/...
 * The router then calls pd_ports_handle (a PD_ROUTE_PUBLIC |
 * PD_ROUTE_STREAM_BODY route: it authenticates itself). */
bool pd_ports_match(struct pd_server *srv, struct MHD_Connection *conn, const char *path);
enum MHD_Result pd_ports_handle(struct pd_req *r, const char *chunk, size_t *chunk_len);
/* Relay one buffered HTTP request through a TUNNEL_OPEN stream already open
 * on st->cl (tunnel id tid) and stream the answer back (e2b_ci.c).
 * head: the request line and headers, as sent. all_headers: pass the
 * answer's headers on (else only its Content-Type). */
struct pd_e2b_stream;
enum MHD_Result pd_tunnel_http_relay(struct pd_req *r, struct pd_e2b_stream *st, uint32_t tid, const char *head,
                                     size_t head_len, const char *body, size_t body_len, bool all_headers,
                                     const char *what);

/* An error decided while a streaming request is still arriving, answered
 * when it ends (libmicrohttpd cannot answer mid-upload). The first error
 * wins; status 0 = none. */
struct pd_deferred_error {
        unsigned status;
        char code[32];
        char msg[256];
};
void pd_deferred_fail(struct pd_deferred_error *d, unsigned status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
