/* The native API (docs/api.md, docs/openapi.yaml): its route tables, the
 * port relay's matcher, and what the routes share. Registered by
 * src/server/routes.c; nothing in core/ includes this. */
#pragma once
#include <stdio.h>
#include <stdbool.h>

#include "server/core/agent_io.h"
#include "server/core/manager.h"
#include "server/core/server.h"

/* Route tables (NULL-terminated), one per file. */
extern const struct pd_route pd_routes_sandboxes[];   /* routes_sandboxes.c */
extern const struct pd_route pd_routes_procs[];       /* routes_procs.c, procs_*.c */
extern const struct pd_route pd_routes_files[];       /* routes_files.c */
extern const struct pd_route pd_routes_snapshots[];   /* routes_snapshots.c */
extern const struct pd_route pd_routes_tiers[];       /* routes_tiers.c: GET /api/v1/tiers */
extern const struct pd_route pd_routes_network[];     /* routes_network.c */
extern const struct pd_route pd_routes_templates[];   /* routes_templates.c, tpl_builds.c */
extern const struct pd_route pd_routes_ports[];       /* ports.c: GET .../ports, POST .../ports/public */
extern const struct pd_route pd_routes_console[];     /* routes_console.c: the web console's pages */
extern const struct pd_route pd_routes_console_session[]; /* routes_console.c: its sign-in and out */
extern const struct pd_route pd_routes_console_pty[]; /* console_pty_ws.c: a pty over a WebSocket */
/* A sandbox's ports (ports.c): a request whose Host is
 * <port>-<id>.<domain>[:n] or whose path is /api/v1/sandboxes/{id}/ports/
 * {port}/...; relayed as sent, authenticated by the port token. */
extern const struct pd_route_matcher pd_ports_matcher;

/* ---- sandbox_json.c: the API's objects ---- */

/* The sandbox object (GET /sandboxes/{id}). */
json_t *pd_api_sandbox_json(struct pd_server *srv, struct pd_srv_sandbox *s);
/* The network policy a sandbox runs with ({"mode":"none"} without one);
 * drops: with what the kernel dropped so far. */
json_t *pd_api_network_json(struct pd_server *srv, struct pd_srv_sandbox *s, bool drops);
/* GET .../metrics */
json_t *pd_api_metrics_json(const struct pd_sandbox_metrics *m);
/* GET /metrics: per-sandbox series and the warm pool's memory
 * (metrics_sandboxes.c), written to f. */
void pd_api_prom_sandboxes(struct pd_server *srv, FILE *f);

/* ---- routes_common.c ---- */

/* The sandbox named by r->params[0] with a reference taken; NULL with a 404
 * (unknown, deleted, another key's) already queued in *ret. */
struct pd_srv_sandbox *pd_route_sandbox(struct pd_req *r, enum MHD_Result *ret);
/* Answer an agent failure: ESRCH/ENOENT 404, EINVAL 400, ... (message from err). */
enum MHD_Result pd_route_reply_agent_error(struct pd_req *r, int neg_errno, const struct pd_error *err);

/* ---- console_signin_limit.c: wrong keys at the console's sign-in ---- */

#define PD_SIGNIN_FAILS 10              /* wrong keys per client address ... */
#define PD_SIGNIN_WINDOW_S 60           /* ... in this many seconds, then 429 */
/* 0, or the seconds until r's client may try again. */
unsigned pd_signin_retry_after(struct pd_req *r);
/* Count a wrong key from r's client. */
void pd_signin_failed(struct pd_req *r);
