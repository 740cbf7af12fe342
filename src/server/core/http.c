/* The HTTP side of paddock serve: a libmicrohttpd daemon (one thread per
 * connection, so a route may block), a router over the route tables and
 * matchers registered by whoever assembles the server (src/server/routes.c;
 * this file knows no route), API-key auth and body caps. Replies: reply.c.
 *
 * libmicrohttpd calls the access handler several times per request:
 *   1. headers only (*con_cls == NULL): route, authenticate, check
 *      Content-Length against the route's cap; answer 401/404/405/413 here,
 *      before a single body byte is buffered;
 *   2. once per body chunk (*upload_data_size > 0), already de-chunked when
 *      the client sent Transfer-Encoding: chunked;
 *   3. a last time with *upload_data_size == 0: the route answers.
 *
 * The request context (struct req_ctx) is born in the URI callback, before
 * libmicrohttpd parses the query. Some of its own error paths (a query whose
 * arguments overflow its per-connection memory pool) close the connection
 * without the request-completed callback: each connection keeps a pointer to
 * its request in flight (struct conn_ctx) and frees what is left when the
 * connection ends, a callback libmicrohttpd never skips.
 *
 * Timeouts (idle, in seconds): REQUEST_IDLE_S while a request arrives (a new
 * connection, then from the request line to the end of its body), so that a
 * client that stalls (a Content-Length larger than what it sends) does not
 * hold a thread for long; RESPONSE_IDLE_S from the route's answer on, and
 * between keep-alive requests. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/core/server.h"
#include "server/core/sessions.h"
#include "server/core/store.h"
#include "lib/util.h"

#define BODY_MAX_DEFAULT (1u << 20)
#define PARAM_MAX 256
#define DISCARD_MAX (64u << 20)
#define QUERY_ARGS_MAX 128              /* more query arguments: 414 */
#define REQUEST_IDLE_S 15u
#define RESPONSE_IDLE_S 60u
/* libmicrohttpd's per-connection memory: headers, the read buffer, and the
 * write buffer of a chunked body, which is as large as what is left of it
 * (the response's block size does not count there). Its default, 32 KiB,
 * cut an output stream into ~29 KiB chunks, a select() and a send() each.
 * It is mmap()ed, so a connection pays only for the pages it touches. */
#define CONN_MEMORY (256u << 10)

struct req_ctx {
        struct pd_req r;
        const struct pd_route *route;
        char params[4][PARAM_MAX];
        char *body;
        size_t len, cap, max;
        bool started;           /* headers seen (first on_request call done) */
        char *raw_url;          /* from the URI log callback */
        bool replied;           /* a response is queued: ignore further body bytes */
        bool too_large;         /* body over the cap: discarding the rest */
        size_t discarded;
        unsigned query_args;    /* arguments in the raw URI's query */
        uint64_t t0_ns;         /* the request line arrived (access log) */
        unsigned status;        /* of the answer queued */
};

/* One per connection (MHD_OPTION_NOTIFY_CONNECTION): its request in flight. */
struct conn_ctx {
        struct req_ctx *req;
};

static struct conn_ctx *conn_ctx_of(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

static void set_idle_timeout(struct MHD_Connection *conn, unsigned secs)
{
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, secs);
}

/* Restart the idle clock: libmicrohttpd counts the time a route's upload
 * callback spends blocked (a slow sandbox) as the client's idleness; it
 * resets the clock only when a timeout is set over "none". */
static void touch_idle_timeout(struct MHD_Connection *conn, unsigned secs)
{
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, secs);
}

/* A request of a client's work began (delta 1) or ended (-1)
 * (pd_server.last_request_ms, requests_in_flight: a long one, such as a
 * command's output stream, is work all along): monitoring polls are not
 * work. */
static void note_activity(struct pd_server *srv, const char *url, int delta)
{
        if (url && (!strcmp(url, "/metrics") || !strcmp(url, "/api/v1/health")))
                return;
        __atomic_add_fetch(&srv->requests_in_flight, (unsigned)delta, __ATOMIC_RELAXED);
        __atomic_store_n(&srv->last_request_ms, pd_now_ms(), __ATOMIC_RELAXED);
}

static void count_status(struct pd_server *srv, unsigned status)
{
        unsigned cls = status >= 100 && status < 600 ? status / 100 - 1 : 5;
        __atomic_fetch_add(&srv->http_requests[cls], 1, __ATOMIC_RELAXED);
}

enum MHD_Result pd_reply_response(struct pd_req *r, unsigned status, struct MHD_Response *resp)
{
        if (!resp)
                return MHD_NO;
        count_status(r->srv, status);
        enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
        MHD_destroy_response(resp);
        struct req_ctx *c = (struct req_ctx *)r;
        c->replied = true;
        c->status = status;
        return ret;
}

/* ---- routing ---- */

/* Match path against pattern segment by segment; {x} captures one
 * non-empty segment. 1 on a match. */
static int match(const char *pattern, const char *path, struct req_ctx *c)
{
        unsigned n = 0;
        const char *p = pattern, *u = path;
        while (*p && *u) {
                if (*p != '/' || *u != '/')
                        return 0;
                p++;
                u++;
                const char *pe = strchrnul(p, '/'), *ue = strchrnul(u, '/');
                if (*p == '{') {
                        size_t len = (size_t)(ue - u);
                        if (len == 0 || len >= PARAM_MAX || n >= 4)
                                return 0;
                        memcpy(c->params[n], u, len);
                        c->params[n][len] = '\0';
                        n++;
                } else if ((size_t)(pe - p) != (size_t)(ue - u) || memcmp(p, u, (size_t)(pe - p))) {
                        return 0;
                }
                p = pe;
                u = ue;
        }
        if (*p || *u)
                return 0;
        c->r.n_params = n;
        for (unsigned i = 0; i < n; i++)
                c->r.params[i] = c->params[i];
        return 1;
}

int pd_http_register(struct pd_server *srv, const char *group, const struct pd_route *table)
{
        if (srv->n_route_tables >= PD_ARRAY_SIZE(srv->route_tables))
                return -ENOSPC;
        srv->route_tables[srv->n_route_tables].group = group;
        srv->route_tables[srv->n_route_tables++].table = table;
        return 0;
}

int pd_http_register_matcher(struct pd_server *srv, const struct pd_route_matcher *m)
{
        if (srv->n_matchers >= PD_ARRAY_SIZE(srv->matchers))
                return -ENOSPC;
        srv->matchers[srv->n_matchers++] = m;
        return 0;
}

void pd_http_print_routes(const struct pd_server *srv, FILE *f)
{
        for (unsigned i = 0; i < srv->n_matchers; i++) {
                const struct pd_route_matcher *m = srv->matchers[i];
                fprintf(f, "match %s %s%s%s\n", m->name, m->group, m->route.flags & PD_ROUTE_PUBLIC ? " public" : "",
                        m->route.flags & PD_ROUTE_RAW_PATH ? " raw" : "");
        }
        for (unsigned i = 0; i < srv->n_route_tables; i++)
                for (const struct pd_route *rt = srv->route_tables[i].table; rt->pattern; rt++)
                        fprintf(f, "%s %s %s%s\n", rt->method, rt->pattern, srv->route_tables[i].group,
                                rt->flags & PD_ROUTE_PUBLIC ? " public" : "");
}

/* The first matcher that claims the request, among those with (raw) or
 * without the PD_ROUTE_RAW_PATH flag, in registration order. */
static const struct pd_route *matcher_find(struct pd_server *srv, struct MHD_Connection *conn, const char *path,
                                           bool raw)
{
        for (unsigned i = 0; i < srv->n_matchers; i++) {
                const struct pd_route_matcher *m = srv->matchers[i];
                if (!!(m->route.flags & PD_ROUTE_RAW_PATH) == raw && m->match(srv, conn, path))
                        return &m->route;
        }
        return NULL;
}

/* The route for method+path; *path_known tells 405 from 404. */
static const struct pd_route *route_find(struct pd_server *srv, const char *method, const char *path,
                                         struct req_ctx *c, bool *path_known)
{
        *path_known = false;
        for (unsigned i = 0; i < srv->n_route_tables; i++)
                for (const struct pd_route *rt = srv->route_tables[i].table; rt->pattern; rt++) {
                        if (!match(rt->pattern, path, c))
                                continue;
                        *path_known = true;
                        if (!strcmp(rt->method, method))
                                return rt;
                }
        return NULL;
}

/* Origin "scheme://host[:port]" names this server as the client reached
 * it (its Host header). */
static bool origin_is_self(struct MHD_Connection *conn, const char *origin)
{
        const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
        if (!host || !*host)
                return false;
        if (!strncmp(origin, "http://", 7))
                origin += 7;
        else if (!strncmp(origin, "https://", 8))
                origin += 8;
        else
                return false;
        return !strcasecmp(origin, host);
}

/* A console session (sessions.h) in the pd_session cookie, for the native
 * API only. A cookie rides along with whatever a browser sends, so the
 * request must show it comes from the console's own pages: no cross-site
 * fetch metadata, an Origin (if any) naming this server, and for anything
 * but GET/HEAD both an Origin and the X-Paddock-Console header, which a
 * page of another origin cannot set without a CORS preflight we never
 * grant. A WebSocket (a GET with Upgrade) must carry our Origin: browsers
 * always send it there and cross-site WebSocket hijacking is the attack.
 * 0 and *key, or an HTTP status with the reason in msg. */
static unsigned cookie_auth(struct pd_server *srv, struct MHD_Connection *conn, const char *method,
                            const char *url, struct pd_key *key, char *msg, size_t msgsz)
{
        const char *tok = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, PD_SESSION_COOKIE);
        if (!tok || strncmp(url, "/api/v1/", 8))
                return 401;
        const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
        const char *site = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-Fetch-Site");
        const char *upgrade = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Upgrade");
        bool safe = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        if (site && strcmp(site, "same-origin") && strcmp(site, "none")) {
                snprintf(msg, msgsz, "console session refused: a %.16s request", site);
                return 403;
        }
        if (origin && !origin_is_self(conn, origin)) {
                snprintf(msg, msgsz, "console session refused: request from another origin");
                return 403;
        }
        if ((!safe || (upgrade && *upgrade)) && !origin) {
                snprintf(msg, msgsz, "console session refused: no Origin header");
                return 403;
        }
        if (!safe && !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Paddock-Console")) {
                snprintf(msg, msgsz, "console session refused: no X-Paddock-Console header");
                return 403;
        }
        if (!pd_session_lookup(srv, tok, key)) {
                snprintf(msg, msgsz, "console session expired or signed out: sign in again");
                return 401;
        }
        return 0;
}

/* 0 and *key for an API key (Authorization: Bearer, X-API-Key) or a
 * console session; else an HTTP status (401, 403) with msg set. */
static unsigned authenticate(struct pd_server *srv, struct MHD_Connection *conn, const char *method,
                             const char *url, struct pd_key *key, char *msg, size_t msgsz)
{
        const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
        const char *k = NULL;
        if (v && !strncasecmp(v, "Bearer ", 7)) {
                k = v + 7;
                while (*k == ' ')
                        k++;
        }
        if (!k || !*k)
                k = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-API-Key");
        snprintf(msg, msgsz, "missing or wrong API key (send Authorization: Bearer KEY)");
        if (k)
                return pd_store_key_lookup(srv->store, k, key) == 0 ? 0 : 401;
        return cookie_auth(srv, conn, method, url, key, msg, msgsz);
}

/* A decoded NUL in the path or the query ("%00"): libmicrohttpd hands
 * routes C strings, which would end there and name something else
 * ("/api/v1/sandboxes/%00" would be the list). 1 in the path, 2 in the
 * query, 0 if none. */
static int nul_escape(const char *raw)
{
        if (!raw)
                return 0;
        const char *q = strchr(raw, '?');
        for (const char *p = raw; (p = strchr(p, '%')); p++)
                if (p[1] == '0' && p[2] == '0')
                        return q && p > q ? 2 : 1;
        return 0;
}

/* Refusals that do not depend on the route: framing a request smuggler
 * would play with, too many query arguments. 0 or an HTTP status, with
 * the message in msg. */
static unsigned request_refusal(struct MHD_Connection *conn, const struct req_ctx *c, char *msg, size_t msgsz)
{
        const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (te && cl) {
                /* RFC 9112 6.3: a request with both may be a smuggling
                 * attempt; a proxy in front might frame it the other way */
                snprintf(msg, msgsz, "a request must not carry both Content-Length and Transfer-Encoding");
                return 400;
        }
        if (te && strcasecmp(te, "chunked")) {
                snprintf(msg, msgsz, "Transfer-Encoding '%.32s' is not supported (only chunked)", te);
                return 501;
        }
        if (c->query_args > QUERY_ARGS_MAX) {
                snprintf(msg, msgsz, "too many query arguments (%u; at most %u)", c->query_args, QUERY_ARGS_MAX);
                return 414;
        }
        return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
        struct pd_server *srv = cls;
        struct req_ctx *c = *con_cls;
        if (!c || !c->started) {
                if (!c && !(c = calloc(1, sizeof *c)))
                        return MHD_NO;
                *con_cls = c;
                c->started = true;
                if (!c->t0_ns) {        /* no URI callback came first */
                        c->t0_ns = pd_now_ns();
                        c->r.resp_bytes = -1;
                }
                c->r.raw_url = c->raw_url;
                c->r.srv = srv;
                c->r.conn = conn;
                c->r.method = method;
                c->r.url = url;
                note_activity(srv, url, 1);
                /* "/x/" routes like "/x" */
                char path[2048];
                snprintf(path, sizeof path, "%s", url);
                size_t pl = strlen(path);
                if (pl > 1 && path[pl - 1] == '/')
                        path[pl - 1] = '\0';
                char why[160];
                unsigned refuse = request_refusal(conn, c, why, sizeof why);
                if (refuse) {
                        const char *code = refuse == 414 ? "too_many_arguments" : refuse == 501 ? "not_implemented"
                                                                                               : "bad_request";
                        return pd_reply_error(&c->r, refuse, code, "%s", why);
                }
                bool known = true;
                /* matchers that relay the request as sent (a sandbox's port:
                 * the service decodes it) see it before the NUL checks */
                if ((c->route = matcher_find(srv, conn, c->raw_url ? c->raw_url : path, true)))
                        ;
                else if (nul_escape(c->raw_url) == 1)
                        return pd_reply_error(&c->r, 404, "not_found", "no such route: a NUL byte (%%00) in the path");
                else if (nul_escape(c->raw_url) == 2)
                        return pd_reply_error(&c->r, 400, "bad_request", "a NUL byte (%%00) in the query");
                else if (!(c->route = matcher_find(srv, conn, path, false)))
                        c->route = route_find(srv, method, path, c, &known);
                if (!c->route) {
                        if (known)
                                return pd_reply_error(&c->r, 405, "method_not_allowed",
                                                      "method %s is not allowed on this path", method);
                        return pd_reply_error(&c->r, 404, "not_found", "no such route: %s %s", method, path);
                }
                if (!(c->route->flags & PD_ROUTE_PUBLIC)) {
                        char why_auth[160];
                        unsigned st = authenticate(srv, conn, method, path, &c->r.key, why_auth, sizeof why_auth);
                        if (st)
                                return pd_reply_error(&c->r, st, st == 403 ? "forbidden" : "unauthorized", "%s",
                                                      why_auth);
                        c->r.authed = true;
                }
                if (!(c->route->flags & PD_ROUTE_STREAM_BODY)) {
                        c->max = c->route->body_max ? c->route->body_max : BODY_MAX_DEFAULT;
                        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
                        if (cl) {
                                char *end;
                                errno = 0;
                                unsigned long long n = strtoull(cl, &end, 10);
                                if (errno || end == cl || n > c->max)
                                        return pd_reply_error(&c->r, 413, "too_large",
                                                              "request body over %zu bytes", c->max);
                        }
                }
                return MHD_YES;
        }
        if (c->replied) {
                *upload_data_size = 0; /* answered already: drop the rest */
                return MHD_YES;
        }
        if (*upload_data_size) {
                if (c->route->flags & PD_ROUTE_STREAM_BODY) {
                        enum MHD_Result ret = c->route->fn(&c->r, upload_data, upload_data_size);
                        touch_idle_timeout(conn, REQUEST_IDLE_S);
                        return ret;
                }
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                if (c->too_large || n > c->max - c->len) {
                        /* libmicrohttpd cannot queue a response in the
                         * middle of a body: drop what comes (never buffer
                         * it) and answer 413 at its end; a client that
                         * goes on sending far past the cap is cut off. */
                        c->too_large = true;
                        c->discarded += n;
                        return c->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
                }
                if (c->len + n + 1 > c->cap) {
                        size_t cap = c->cap ? c->cap : 4096;
                        while (cap < c->len + n + 1)
                                cap *= 2;
                        char *b = realloc(c->body, cap);
                        if (!b)
                                return MHD_NO;
                        c->body = b;
                        c->cap = cap;
                }
                memcpy(c->body + c->len, upload_data, n);
                c->len += n;
                c->body[c->len] = '\0';
                return MHD_YES;
        }
        /* the request is in: the answer may take long (a stream) or be read
         * slowly; a stalled reader is cut after RESPONSE_IDLE_S */
        touch_idle_timeout(conn, RESPONSE_IDLE_S);
        size_t zero = 0;
        if (c->too_large)
                return pd_reply_error(&c->r, 413, "too_large", "request body over %zu bytes", c->max);
        if (!(c->route->flags & PD_ROUTE_STREAM_BODY)) {
                c->r.body = c->body ? c->body : "";
                c->r.body_len = c->len;
        }
        enum MHD_Result ret = c->route->fn(&c->r, NULL, &zero);
        if (!c->replied && ret == MHD_YES) {
                /* a route that forgot to answer must not hang the client */
                pd_log("error", "route answered nothing method=%s url=%s", method, url);
                ret = pd_reply_error(&c->r, 500, "internal", "no answer");
        }
        return ret;
}

static void req_free(struct req_ctx *c)
{
        if (!c)
                return;
        /* A streaming-body route whose request ended early (client gone,
         * timeout) never got its last call: let it release what it holds. */
        if (c->route && (c->route->flags & PD_ROUTE_STREAM_BODY) && c->r.route_state)
                (void)c->route->fn(&c->r, NULL, NULL);
        free(c->body);
        free(c->raw_url);
        free(c);
}

/* The route's name for the access log: its pattern, or a matcher's name. */
static const char *route_name(const struct pd_server *srv, const struct pd_route *route)
{
        if (!route)
                return NULL;
        for (unsigned i = 0; i < srv->n_matchers; i++)
                if (route == &srv->matchers[i]->route)
                        return srv->matchers[i]->name;
        return route->pattern;
}

static void access_line(struct pd_server *srv, const struct req_ctx *c, enum MHD_RequestTerminationCode toe)
{
        struct pd_access a = {
                .key_id = c->r.authed ? c->r.key.id : NULL, .method = c->r.method,
                .route = route_name(srv, c->route), .status = c->status,
                .bytes = c->r.resp_bytes, .duration_ns = c->t0_ns ? pd_now_ns() - c->t0_ns : 0,
                .aborted = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK,
        };
        pd_access_log(&a);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
        struct req_ctx *c = *con_cls;
        if (c && c->started) {
                access_line(cls, c, toe);
                note_activity(cls, c->r.url, -1);
        }
        struct conn_ctx *cc = conn_ctx_of(conn);
        if (cc && cc->req == c)
                cc->req = NULL;
        *con_cls = NULL;
        req_free(c);
        /* between keep-alive requests */
        set_idle_timeout(conn, RESPONSE_IDLE_S);
}

/* Arguments in a raw URI's query ("a=1&&b" is 2): counted before
 * libmicrohttpd stores each in its per-connection pool. */
static unsigned count_query_args(const char *uri)
{
        const char *q = uri ? strchr(uri, '?') : NULL;
        unsigned n = 0;
        if (!q)
                return 0;
        for (const char *p = q + 1; *p;) {
                size_t l = strcspn(p, "&");
                n += l > 0;
                p += l;
                if (*p == '&')
                        p++;
        }
        return n;
}

/* Called before on_request with the URI as sent (query included): the
 * request context starts here so that routes can see the raw URI. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
        struct conn_ctx *cc = conn_ctx_of(conn);
        /* the request line is in: the rest of the request must follow */
        set_idle_timeout(conn, REQUEST_IDLE_S);
        struct req_ctx *c = calloc(1, sizeof *c);
        if (c) {
                c->raw_url = uri ? strdup(uri) : NULL;
                c->query_args = count_query_args(uri);
                c->t0_ns = pd_now_ns();
                c->r.resp_bytes = -1;
        }
        if (cc) {
                /* the last request of this connection never completed (see
                 * the top of this file) */
                req_free(cc->req);
                cc->req = c;
        }
        return c;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                /* NULL on no memory: requests then go untracked, as before */
                *socket_context = calloc(1, sizeof(struct conn_ctx));
                return;
        }
        struct conn_ctx *cc = *socket_context;
        if (!cc)
                return;
        req_free(cc->req);
        free(cc);
        *socket_context = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
        char msg[512];
        vsnprintf(msg, sizeof msg, fmt, ap);
        size_t n = strlen(msg);
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
                msg[--n] = '\0';
        pd_log(pd_log_http_level(msg), "http: %s", msg);
}

static int parse_listen(const char *addr, struct sockaddr_storage *ss, bool *v6, struct pd_error *err)
{
        char host[256];
        const char *colon = strrchr(addr, ':');
        if (!colon || colon == addr || !colon[1])
                return pd_error_setx(err, EINVAL, "--listen '%s': expected ADDR:PORT", addr);
        size_t hl = (size_t)(colon - addr);
        if (hl >= sizeof host)
                return pd_error_setx(err, EINVAL, "--listen '%s': address too long", addr);
        memcpy(host, addr, hl);
        host[hl] = '\0';
        if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
                memmove(host, host + 1, hl - 2);
                host[hl - 2] = '\0';
        }
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res = NULL;
        int rc = getaddrinfo(host, colon + 1, &hints, &res);
        if (rc != 0)
                return pd_error_setx(err, EINVAL, "--listen '%s': %s", addr, gai_strerror(rc));
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *v6 = res->ai_family == AF_INET6;
        freeaddrinfo(res);
        return 0;
}

static size_t conn_memory(void)
{
        /* PADDOCK_HTTP_CONN_MEMORY (bytes, 32 KiB..16 MiB): for measuring */
        const char *v = getenv("PADDOCK_HTTP_CONN_MEMORY");
        char *end;
        unsigned long long n = v ? strtoull(v, &end, 10) : 0;
        if (v && *v && !*end && n >= (32u << 10) && n <= (16u << 20))
                return (size_t)n;
        return CONN_MEMORY;
}

int pd_http_start(struct pd_server *srv, struct pd_error *err)
{
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof ss);
        bool v6 = false;
        int r = parse_listen(srv->cfg.listen_addr, &ss, &v6, err);
        if (r < 0)
                return r;
        /* ALLOW_UPGRADE: WebSocket to sandbox ports (ports_ws.c); with a
         * thread per connection, the upgraded relay may block its thread.
         * POLL: each connection's thread waits in poll(), not select(),
         * which is cheaper per call and takes fds past FD_SETSIZE. */
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                         MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE;
        if (v6)
                flags |= MHD_USE_IPv6;
        uint16_t port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
        srv->mhd = MHD_start_daemon(flags, port, NULL, NULL, on_request, srv,
                                    MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
                                    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)REQUEST_IDLE_S,
                                    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)1000,
                                    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)conn_memory(),
                                    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)0,
                                    MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                                    MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
                                    MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                                    MHD_OPTION_END);
        if (!srv->mhd)
                return pd_error_set(err, errno ? errno : EADDRINUSE, "listen on %s", srv->cfg.listen_addr);
        return 0;
}

void pd_http_stop(struct pd_server *srv)
{
        if (srv->mhd) {
                MHD_stop_daemon(srv->mhd);
                srv->mhd = NULL;
        }
}
