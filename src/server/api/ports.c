/* Sandbox ports (docs/api.md, "Ports"): a service listening inside a
 * sandbox is reached through the server only, never published on the host:
 *
 *   Host: <port>-<id>.<domain>[:n]                 any path, relayed as is
 *   /api/v1/sandboxes/{id}/ports/{port}/<rest>     relayed as /<rest>
 *
 * Each request is relayed through an agent tunnel (TUNNEL_OPEN port) with
 * the relay of core/tunnel.c; the HELLO, the TUNNEL_OPEN and the request go
 * to the agent in one write (open_tunnel), so a request costs one agent
 * round trip before its answer streams back. Auth: the sandbox's port token (X-Paddock-Port-Token,
 * ?paddock_port_token= or E2B's E2B-Traffic-Access-Token header, HMAC of
 * "port:<id>" with the server's secret), or, for the path form, the API key
 * of the sandbox's owner; none when the sandbox's ports are public (POST
 * .../ports/public). Upgrade requests (WebSocket) pass the same checks, then
 * ports_ws.c relays them.
 *
 * Nobody learns whether an id exists without the right to use it: without a
 * key or a valid token, an unknown id and a live sandbox whose ports are not
 * public get the same 401; with the owner's key, an unknown id and another
 * key's sandbox the same 404. A token is checked against the id it was
 * sent for, which needs no sandbox. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/api/api.h"
#include "server/api/ports.h"
#include "server/api/ports_cache.h"
#include "server/core/port_host.h"
#include "server/core/sessions.h"
#include "server/core/tunnel.h"
#include "server/core/store.h"
#include "lib/util.h"

#define PORT_BODY_MAX (64u << 20)
#define PORT_PREFIX "/api/v1/sandboxes/"

struct port_call {
        struct pd_srv_sandbox *s;
        unsigned port;
        bool host_form;
        bool key_used;          /* path form authorised by the API key */
        char id[PD_ID_LEN + 1];
        bool upgrade;           /* Connection: upgrade + Upgrade: (WebSocket) */
        bool reuse;             /* a GET without a body: keep-alive upstream, ports_cache.h */
        struct pd_ports_ws *ws; /* the upgraded connection's relay, once answered 101 */
        char *target;           /* "/rest?query" as sent upstream */
        char *body;
        size_t len, cap;
        struct pd_deferred_error fail;
};

static unsigned parse_port(const char *p, size_t n)
{
        if (n == 0 || n > 5 || p[0] == '0')
                return 0;
        unsigned v = 0;
        for (size_t i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return 0;
                v = v * 10 + (unsigned)(p[i] - '0');
        }
        return v <= 65535 ? v : 0;
}

/* Host: <port>-<id>.<domain>[:n] -> port and id; false if not exactly
 * that form: digits, a dash, an id of [a-z0-9] (any case), a dot, our
 * domain (its port, if any, is not compared: a proxy in front may change
 * it), and nothing else. Port 0 or past 65535 parses as port 0 (400). */
static bool host_parse(struct pd_server *srv, const char *host, unsigned *port, char id[PD_ID_LEN + 1])
{
        if (!host || !srv->cfg.domain)
                return false;
        size_t pl = strspn(host, "0123456789");
        if (pl == 0 || host[pl] != '-')
                return false;
        const char *ids = host + pl + 1;
        size_t il = strspn(ids, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
        if (il == 0 || il > PD_ID_LEN || ids[il] != '.')
                return false;
        const char *dom = ids + il + 1, *want = srv->cfg.domain;
        size_t dl = strcspn(dom, ":"), wl = strcspn(want, ":");
        if (dl != wl || strncasecmp(dom, want, dl))
                return false;
        if (dom[dl] == ':' && (!dom[dl + 1] || strspn(dom + dl + 1, "0123456789") != strlen(dom + dl + 1)))
                return false;
        *port = parse_port(host, pl);
        for (size_t i = 0; i < il; i++)
                id[i] = (char)tolower((unsigned char)ids[i]);
        id[il] = '\0';
        return true;
}

/* /api/v1/sandboxes/{id}/ports/{port}[/rest] (not .../ports/public). */
static bool path_parse(const char *path, unsigned *port, char id[PD_ID_LEN + 1], const char **rest)
{
        if (strncmp(path, PORT_PREFIX, strlen(PORT_PREFIX)))
                return false;
        const char *p = path + strlen(PORT_PREFIX), *e = strchr(p, '/');
        if (!e || e == p || (size_t)(e - p) > PD_ID_LEN || strncmp(e, "/ports/", 7))
                return false;
        memcpy(id, p, (size_t)(e - p));
        id[e - p] = '\0';
        const char *q = e + 7;
        size_t pl = strcspn(q, "/?");
        if (pl == 0 || (pl == 6 && !strncmp(q, "public", 6) && (q[6] == '\0' || q[6] == '?')))
                return false;
        *port = parse_port(q, pl);
        *rest = q + pl;
        return true;
}

static const char *hdr(struct MHD_Connection *conn, const char *name)
{
        return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static const char *raw_path(struct pd_req *r)
{
        return r->raw_url ? r->raw_url : r->url;
}

static bool ports_match(struct pd_server *srv, struct MHD_Connection *conn, const char *path)
{
        unsigned port;
        char id[PD_ID_LEN + 1];
        const char *rest;
        return host_parse(srv, hdr(conn, "Host"), &port, id) || path_parse(path, &port, id, &rest);
}

static bool api_key(struct pd_req *r, struct pd_key *key)
{
        const char *v = hdr(r->conn, "Authorization"), *k = NULL;
        if (v && !strncasecmp(v, "Bearer ", 7)) {
                k = v + 7;
                while (*k == ' ')
                        k++;
        }
        if (!k || !*k)
                k = hdr(r->conn, "X-API-Key");
        return k && *k && pd_store_key_lookup(r->srv->store, k, key) == 0;
}

/* The query without paddock_port_token=... (into out, with its '?'). */
static void strip_token(const char *q, char *out, size_t cap)
{
        size_t n = 0;
        out[0] = '\0';
        if (!q || *q != '?')
                return;
        q++;
        while (*q) {
                size_t l = strcspn(q, "&");
                if (strncmp(q, "paddock_port_token=", 19) && l) {
                        if (n + l + 2 < cap) {
                                char sep = n ? '&' : '?';
                                out[n++] = sep;
                                memcpy(out + n, q, l);
                                n += l;
                                out[n] = '\0';
                        }
                }
                q += l;
                if (*q == '&')
                        q++;
        }
}

/* The port token the request carries, if any. */
static const char *given_token(struct pd_req *r)
{
        const char *t = hdr(r->conn, "X-Paddock-Port-Token");
        if (!t)
                t = hdr(r->conn, "E2B-Traffic-Access-Token");
        if (!t)
                t = pd_req_query(r, "paddock_port_token");
        return t;
}

static void call_open(struct pd_req *r, struct port_call *c)
{
        const char *url = raw_path(r), *rest = "/";
        char id[PD_ID_LEN + 1];
        unsigned port = 0;
        if (host_parse(r->srv, hdr(r->conn, "Host"), &port, id)) {
                c->host_form = true;
                rest = url;
        } else if (!path_parse(url, &port, id, &rest)) {
                pd_deferred_fail(&c->fail, 404, "not_found", "not a sandbox port");
                return;
        }
        c->port = port;
        c->upgrade = pd_ports_is_upgrade(r->conn);
        const char *q = strchr(rest, '?');
        size_t pl = q ? (size_t)(q - rest) : strlen(rest);
        char query[4096];
        strip_token(q, query, sizeof query);
        size_t tl = pl + strlen(query) + 2;
        c->target = malloc(tl);
        if (!c->target) {
                pd_deferred_fail(&c->fail, 500, "internal", "out of memory");
                return;
        }
        snprintf(c->target, tl, "%s%.*s%s", pl && rest[0] == '/' ? "" : "/", (int)pl, rest, query);
        if (strpbrk(c->target, " \r\n\t")) {
                pd_deferred_fail(&c->fail, 400, "bad_request", "bad request target");
                return;
        }
        if (!port) {
                pd_deferred_fail(&c->fail, 400, "bad_request", "port must be 1..65535");
                return;
        }
        snprintf(c->id, sizeof c->id, "%s", id);
        /* 1. the owner's API key (path form only) */
        struct pd_key key;
        bool code_port = port == PD_PORTS_CODE_PORT;
        if (!c->host_form && api_key(r, &key)) {
                c->s = pd_server_sandbox_get(r->srv, id, &key);
                if (!c->s) {
                        /* unknown, or another key's: the same answer */
                        pd_deferred_fail(&c->fail, 404, "not_found", "no sandbox %s", id);
                        return;
                }
                c->key_used = true;
        } else if (code_port) {
                /* 2. the code interpreter: the access token, nothing less */
                char token[PD_TOKEN_LEN + 1];
                const char *given = hdr(r->conn, "X-Access-Token");
                if (pd_token(r->srv, id, token) < 0) {
                        pd_deferred_fail(&c->fail, 500, "internal", "cannot compute the access token");
                        return;
                }
                if (!given || !pd_streq_ct(given, token)) {
                        pd_deferred_fail(&c->fail, 401, "unauthorized",
                                         "port %u runs code: it needs the sandbox's access token "
                                         "(X-Access-Token) or, by path, its owner's API key", port);
                        return;
                }
                c->s = pd_server_sandbox_get(r->srv, id, NULL);
        } else {
                /* 3. a port token for this id; 4. public ports */
                char token[PD_TOKEN_LEN + 1];
                const char *given = given_token(r);
                if (pd_ports_token(r->srv, id, token) < 0) {
                        pd_deferred_fail(&c->fail, 500, "internal", "cannot compute the port token");
                        return;
                }
                bool token_ok = given && pd_streq_ct(given, token);
                c->s = pd_server_sandbox_get(r->srv, id, NULL);
                if (!token_ok && !(c->s && __atomic_load_n(&c->s->ports_public, __ATOMIC_RELAXED))) {
                        pd_deferred_fail(&c->fail, 401, "unauthorized",
                                         "missing or wrong port token (send X-Paddock-Port-Token, "
                                         "E2B-Traffic-Access-Token or ?paddock_port_token=)");
                        return;
                }
        }
        if (!c->s) {
                /* only a caller with the id's token gets this far */
                pd_deferred_fail(&c->fail, c->host_form ? 502 : 404, "not_found", "no sandbox %s", id);
                return;
        }
        /* authorised: a paused autoResume sandbox resumes now */
        struct pd_error e2 = { 0 };
        int k = pd_manager_resume_on_traffic(r->srv, c->s, &e2);
        if (k == -ENOENT)
                pd_deferred_fail(&c->fail, c->host_form ? 502 : 404, "not_found", "no sandbox %s", id);
        else if (k < 0)
                pd_deferred_fail(&c->fail, c->host_form ? 502 : 409, "conflict", "%s", e2.msg);
}

static void call_free(struct pd_req *r, struct port_call *c)
{
        if (!c)
                return;
        if (c->s)
                pd_server_sandbox_put(r->srv, c->s);
        pd_ports_ws_free(c->ws);
        free(c->target);
        free(c->body);
        free(c);
        r->route_state = NULL;
}

static bool skip_header(const char *name, bool key_used, bool upgrade, bool code_port)
{
        /* the access token is ours, not the service's */
        if (code_port && !strcasecmp(name, "X-Access-Token"))
                return true;
        static const char *const hop[] = { "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length",
                                           "Proxy-Connection", "Upgrade", "TE", "Trailer",
                                           "X-Paddock-Port-Token", "E2B-Traffic-Access-Token", "Host",
                                           "Expect" };
        /* an upgrade is asked of the service itself: those two go on */
        if (upgrade && (!strcasecmp(name, "Connection") || !strcasecmp(name, "Upgrade")))
                return false;
        for (size_t i = 0; i < PD_ARRAY_SIZE(hop); i++)
                if (!strcasecmp(name, hop[i]))
                        return true;
        return key_used && (!strcasecmp(name, "Authorization") || !strcasecmp(name, "X-API-Key"));
}

struct head_buf {
        char *p;
        size_t len, cap;
        bool key_used, upgrade, code_port, bad;
};

static void head_add(struct head_buf *h, const char *s, size_t n)
{
        if (h->bad)
                return;
        if (h->len + n + 1 > h->cap) {
                size_t c = h->cap ? h->cap : 4096;
                while (c < h->len + n + 1)
                        c *= 2;
                char *b = c <= (1u << 20) ? realloc(h->p, c) : NULL;
                if (!b) {
                        h->bad = true;
                        return;
                }
                h->p = b;
                h->cap = c;
        }
        memcpy(h->p + h->len, s, n);
        h->len += n;
        h->p[h->len] = '\0';
}

/* A Cookie header without the console's session (core/sessions.h): the
 * service inside the sandbox must never see it (the path form is on the
 * console's origin, so the browser sends it there). Empty if nothing else. */
static void cookie_without_session(const char *v, char *out, size_t cap)
{
        size_t o = 0;
        out[0] = '\0';
        for (const char *p = v; *p;) {
                while (*p == ' ' || *p == ';')
                        p++;
                const char *e = strchrnul(p, ';');
                size_t n = (size_t)(e - p);
                bool ours = n >= sizeof PD_SESSION_COOKIE && !strncmp(p, PD_SESSION_COOKIE "=", sizeof PD_SESSION_COOKIE);
                if (n && !ours && o + n + 3 < cap) {
                        if (o) {
                                memcpy(out + o, "; ", 2);
                                o += 2;
                        }
                        memcpy(out + o, p, n);
                        o += n;
                        out[o] = '\0';
                }
                p = e;
        }
}

static enum MHD_Result head_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct head_buf *h = cls;
        if (skip_header(key, h->key_used, h->upgrade, h->code_port) || strpbrk(key, "\r\n:") || (value && strpbrk(value, "\r\n")))
                return MHD_YES;
        if (!strcasecmp(key, "Cookie") && value && strstr(value, PD_SESSION_COOKIE "=")) {
                char rest[8192];
                cookie_without_session(value, rest, sizeof rest);
                if (!*rest)
                        return MHD_YES;
                head_add(h, "Cookie: ", 8);
                head_add(h, rest, strlen(rest));
                head_add(h, "\r\n", 2);
                return MHD_YES;
        }
        head_add(h, key, strlen(key));
        head_add(h, ": ", 2);
        if (value)
                head_add(h, value, strlen(value));
        head_add(h, "\r\n", 2);
        return MHD_YES;
}

/* The host form is how E2B clients reach ports: its 502s (sandbox gone,
 * paused, failed; nothing listening) have the shape of E2B's proxy's. */
static enum MHD_Result reply_fail(struct pd_req *r, const struct port_call *c, unsigned status, const char *code,
                                  const char *msg, bool with_port)
{
        if (c->host_form && status == 502) {
                json_t *o = json_pack("{s:i, s:s, s:s}", "code", 502, "message", msg, "sandboxId", c->id);
                if (o && with_port)
                        json_object_set_new(o, "port", json_integer(c->port));
                if (o)
                        return pd_reply_json(r, 502, o);
        }
        return pd_reply_error(r, status, code, "%s", msg);
}

/* The request head as sent upstream (h->p, h->len; h->bad: too large).
 * HTTP/1.0: the answer ends with the connection, never chunked; an upgrade
 * needs HTTP/1.1. */
static void build_head(struct pd_req *r, const struct port_call *c, struct head_buf *h)
{
        *h = (struct head_buf){ .key_used = c->key_used, .upgrade = c->upgrade,
                                .code_port = c->port == PD_PORTS_CODE_PORT };
        char line[256];
        head_add(h, r->method, strlen(r->method));
        head_add(h, " ", 1);
        head_add(h, c->target, strlen(c->target));
        head_add(h, c->upgrade ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
        const char *host = hdr(r->conn, "Host");
        if (c->host_form && host && !strpbrk(host, "\r\n")) {
                head_add(h, "Host: ", 6);
                head_add(h, host, strlen(host));
                head_add(h, "\r\n", 2);
        } else {
                int n = snprintf(line, sizeof line, "Host: localhost:%u\r\n", c->port);
                head_add(h, line, (size_t)n);
        }
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, head_header, h);
        int n = c->upgrade ? (c->len ? snprintf(line, sizeof line, "Content-Length: %zu\r\n\r\n", c->len)
                                     : snprintf(line, sizeof line, "\r\n"))
                           : snprintf(line, sizeof line, "Content-Length: %zu\r\nConnection: %s\r\n\r\n", c->len,
                                      c->reuse ? "keep-alive" : "close");
        head_add(h, line, (size_t)n);
}

/* The stream is over: a service connection that answered in full and
 * stays open goes to the cache for the next GET to that port. */
static void keep_upstream(struct pd_agent_stream *st)
{
        if (st->keep && st->done && !st->failed && st->size != MHD_SIZE_UNKNOWN && st->sent == st->size && st->s &&
            pd_client_is_open(&st->cl))
                pd_ports_cache_put(st->s, (unsigned)st->kind, &st->cl, st->id);
}

/* Up to this much of a request body goes out with the TUNNEL_OPEN; a
 * larger one follows its reply (the agent buffers a connecting tunnel's
 * bytes only up to AG_TUNNEL_BUF and then stops reading the connection). */
#define PIPELINE_BODY_MAX (64u << 10)

/* An agent connection and tunnel tid to c->port on st->cl, with the
 * request (head, and a small body: *body_sent) queued behind the HELLO and
 * the TUNNEL_OPEN: one agent round trip for all of it where a connect, a
 * HELLO and a TUNNEL_OPEN cost three. An agent over its connection limit
 * closes before reading anything: then again as pd_route_agent does. */
static int open_tunnel(struct pd_req *r, struct pd_agent_stream *st, const struct port_call *c,
                       const struct head_buf *h, uint32_t *tid, bool *body_sent, struct pd_error *err)
{
        *body_sent = false;
        if (c->upgrade) {
                /* ports_ws.c sends the head itself, once the tunnel is open */
                int k = pd_route_agent(st->s, &st->cl, err);
                if (k < 0)
                        return k;
                pd_route_watch(&st->cl, r->srv, NULL, st->s);
                return pd_client_tunnel_open(&st->cl, c->port, tid, err);
        }
        char *first = h->p;
        size_t first_len = h->len;
        if (c->len && c->len <= PIPELINE_BODY_MAX) {
                if (!(first = malloc(h->len + c->len)))
                        return pd_error_set(err, ENOMEM, "request");
                memcpy(first, h->p, h->len);
                memcpy(first + h->len, c->body, c->len);
                first_len += c->len;
        }
        int k = pd_agentc_connect_pipelined(st->s, &st->cl, err);
        if (k == 0) {
                pd_route_watch(&st->cl, r->srv, NULL, st->s);
                k = pd_client_tunnel_open_with(&st->cl, c->port, first, first_len, tid, err);
        }
        if (k < 0 && pd_route_agent_untouched(&st->cl, k)) {
                pd_client_close(&st->cl);
                *err = (struct pd_error){ 0 };
                if ((k = pd_route_agent(st->s, &st->cl, err)) == 0) {
                        pd_route_watch(&st->cl, r->srv, NULL, st->s);
                        k = pd_client_tunnel_open_with(&st->cl, c->port, first, first_len, tid, err);
                }
        }
        if (first != h->p)
                free(first);
        *body_sent = first_len > h->len;
        return k;
}

/* The tunnel could not be opened: 502 (takes st). */
static enum MHD_Result open_failed(struct pd_req *r, const struct port_call *c, struct pd_agent_stream *st, int k,
                                   const struct pd_error *err)
{
        char msg[512];
        if (k == -ECONNREFUSED)
                snprintf(msg, sizeof msg, "nothing listens on port %u inside sandbox %s", c->port, st->s->id);
        else
                snprintf(msg, sizeof msg, "port %u of sandbox %s unreachable: %s", c->port, st->s->id, err->msg);
        pd_agent_stream_free(st);
        return reply_fail(r, c, 502, "bad_gateway", msg, true);
}

static enum MHD_Result finish(struct pd_req *r, struct port_call *c)
{
        if (c->fail.status)
                return reply_fail(r, c, c->fail.status, c->fail.code, c->fail.msg, false);
        c->reuse = !c->upgrade && !strcmp(r->method, "GET") && c->len == 0;
        struct head_buf h;
        build_head(r, c, &h);
        if (h.bad) {
                free(h.p);
                return reply_fail(r, c, 431, "too_large", "request headers too large", false);
        }
        struct pd_agent_stream *st = pd_agent_stream_new(r, c->s);
        if (!st) {
                free(h.p);
                return MHD_NO;
        }
        c->s = NULL;
        struct pd_error err = { 0 };
        uint32_t tid = 0;
        bool body_sent = false, cached = false;
        int k = 0;
        if (c->reuse && pd_ports_cache_take(st->s, c->port, &st->cl, &tid)) {
                cached = true;
                pd_route_watch(&st->cl, r->srv, NULL, st->s);
        } else {
                k = open_tunnel(r, st, c, &h, &tid, &body_sent, &err);
        }
        if (k < 0) {
                free(h.p);
                return open_failed(r, c, st, k, &err);
        }
        st->id = tid;
        if (c->reuse) {
                st->on_free = keep_upstream;
                st->kind = (int)c->port;        /* the relay uses no kind: the port to keep under */
        }
        if (c->upgrade) {
                enum MHD_Result ret = pd_ports_ws_forward(r, st, tid, h.p, h.len, c->body, c->len, c->port, &c->ws);
                free(h.p);
                return ret;
        }
        /* The path form answers on the server's own origin, the web
         * console's: a page the sandbox serves there must not act as the
         * console (its session cookie rides along with same-origin
         * requests). A CSP sandbox gives such a page an opaque origin, so
         * the server refuses its cookie (core/http.c: Origin "null"). The
         * host form is another origin already. */
        static const char csp[] = "Content-Security-Policy: sandbox allow-scripts allow-forms allow-popups "
                                  "allow-modals allow-downloads";
        if (!c->host_form && pd_agent_stream_put_header(st, csp, sizeof csp - 1) < 0) {
                free(h.p);
                pd_agent_stream_free(st);
                return MHD_NO;
        }
        char what[64];
        snprintf(what, sizeof what, "port %u", c->port);
        /* a kept connection gets the head now; else the head (and a small
         * body) went with the TUNNEL_OPEN */
        if (cached) {
                bool again = false;
                enum MHD_Result ret = pd_tunnel_http_relay_kept(r, st, tid, h.p, h.len, NULL, 0, true, what, &again);
                if (!again) {
                        free(h.p);
                        return ret;
                }
                /* the service closed the kept connection as the GET came
                 * (nothing of it answered): once more on a fresh one */
                pd_client_close(&st->cl);
                pd_client_init(&st->cl);
                err = (struct pd_error){ 0 };
                if ((k = open_tunnel(r, st, c, &h, &tid, &body_sent, &err)) < 0) {
                        free(h.p);
                        return open_failed(r, c, st, k, &err);
                }
                st->id = tid;
                cached = false;
        }
        enum MHD_Result ret = pd_tunnel_http_relay(r, st, tid, cached ? h.p : NULL, cached ? h.len : 0,
                                                   body_sent ? NULL : c->body, body_sent ? 0 : c->len, true, what);
        free(h.p);
        return ret;
}

static enum MHD_Result ports_handle(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct port_call *c = r->route_state;
        if (!chunk_len) {
                call_free(r, c);
                return MHD_YES;
        }
        if (!c) {
                if (!(c = calloc(1, sizeof *c)))
                        return MHD_NO;
                r->route_state = c;
                call_open(r, c);
        }
        if (chunk && *chunk_len) {
                size_t n = *chunk_len;
                *chunk_len = 0;
                if (c->fail.status)
                        return MHD_YES;
                if (n > PORT_BODY_MAX - c->len) {
                        pd_deferred_fail(&c->fail, 413, "too_large", "request body over %u bytes", PORT_BODY_MAX);
                        free(c->body);
                        c->body = NULL;
                        c->len = c->cap = 0;
                        return MHD_YES;
                }
                if (c->len + n > c->cap) {
                        size_t cap = c->cap ? c->cap : 4096;
                        while (cap < c->len + n)
                                cap *= 2;
                        char *b = realloc(c->body, cap);
                        if (!b)
                                return MHD_NO;
                        c->body = b;
                        c->cap = cap;
                }
                memcpy(c->body + c->len, chunk, n);
                c->len += n;
                return MHD_YES;
        }
        enum MHD_Result ret = finish(r, c);
        /* an upgrade answered 101: the relay runs once the answer is sent,
         * and the call (with it) is freed when the request is over */
        if (!c->ws)
                call_free(r, c);
        return ret;
}

/* {"id", "public", "domain", "port_token"}: what a client needs to build
 * http://<port>-<id>.<domain>/ and authenticate to it. */
static json_t *ports_json(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        char token[PD_TOKEN_LEN + 1], domain[PD_PORTS_DOMAIN_MAX];
        int k = pd_ports_token(srv, s->id, token);
        pd_ports_domain(srv, domain);
        return json_pack("{s:s, s:b, s:s, s:s?}", "id", s->id, "public",
                         (int)__atomic_load_n(&s->ports_public, __ATOMIC_RELAXED), "domain", domain, "port_token",
                         k == 0 ? token : NULL);
}

/* POST /api/v1/sandboxes/{id}/ports/public {"public": bool} */
static enum MHD_Result ports_public(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *b = pd_req_json(r, &ret);
        if (!b)
                return ret;
        json_t *v = json_object_get(b, "public");
        if (!json_is_boolean(v) || json_object_size(b) != 1) {
                json_decref(b);
                return pd_reply_error(r, 400, "bad_request", "expected {\"public\": true|false}");
        }
        bool pub = json_is_true(v);
        json_decref(b);
        struct pd_srv_sandbox *s = pd_route_sandbox(r, &ret);
        if (!s)
                return ret;
        struct pd_error err = { 0 };
        int k = pd_manager_set_ports_public(r->srv, s, pub, &err);
        if (k < 0) {
                pd_server_sandbox_put(r->srv, s);
                return pd_reply_errno(r, k, err.msg);
        }
        json_t *o = ports_json(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

/* GET /api/v1/sandboxes/{id}/ports: the token and the public flag. */
static enum MHD_Result ports_info(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        struct pd_srv_sandbox *s = pd_route_sandbox(r, &ret);
        if (!s)
                return ret;
        json_t *o = ports_json(r->srv, s);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

const struct pd_route pd_routes_ports[] = {
        { "POST", "/api/v1/sandboxes/{id}/ports/public", ports_public, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/ports", ports_info, 0, 0 },
        { 0 },
};

/* Sandbox ports: by Host <port>-<id>.<domain> or by path; relayed as sent
 * (the service decodes it), so matched on the raw URL before the router
 * looks for NUL escapes; the handler checks the port token itself. */
const struct pd_route_matcher pd_ports_matcher = {
        .name = "ports",
        .group = "native",
        .match = ports_match,
        .route = { "*", "*", ports_handle, PD_ROUTE_PUBLIC | PD_ROUTE_STREAM_BODY | PD_ROUTE_RAW_PATH, 0 },
};
