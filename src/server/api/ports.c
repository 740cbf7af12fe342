/* Sandbox ports (docs/api.md, "Ports"): a service listening inside a
 * sandbox is reached through the server only, never published on the host:
 *
 *   Host: <port>-<id>.<domain>[:n]                 any path, relayed as is
 *   /api/v1/sandboxes/{id}/ports/{port}/<rest>     relayed as /<rest>
 *
 * Each request is relayed through an agent tunnel (TUNNEL_OPEN port) with
 * the relay of e2b_ci.c. Auth: the sandbox's port token (X-Paddock-Port-Token,
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

#include "server/e2b/e2b.h"
#include "server/api/ports.h"
#include "server/core/store.h"
#include "lib/util.h"

#define PORT_BODY_MAX (64u << 20)
#define PORT_PREFIX "/api/v1/sandboxes/"

struct port_call {
        struct pd_srv_sandbox *s;
        unsigned port;
        bool host_form;
        bool key_used;          /* path form authorised by the API key */
        bool upgrade;           /* Connection: upgrade + Upgrade: (WebSocket) */
        struct pd_ports_ws *ws; /* the upgraded connection's relay, once answered 101 */
        char *target;           /* "/rest?query" as sent upstream */
        char *body;
        size_t len, cap;
        struct pd_deferred_error fail;
};

int pd_ports_token(struct pd_server *srv, const char *id, char out[PD_E2B_TOKEN_LEN + 1])
{
        char label[PD_ID_LEN + 16];
        snprintf(label, sizeof label, "port:%s", id);
        return pd_e2b_token(srv, label, out);
}

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

/* Host: <port>-<id>.<domain>[:n] -> port and id; false if not that form. */
static bool host_parse(struct pd_server *srv, const char *host, unsigned *port, char id[PD_ID_LEN + 1])
{
        if (!host || !srv->cfg.domain)
                return false;
        const char *dash = strchr(host, '-'), *dot = dash ? strchr(dash, '.') : NULL;
        if (!dash || !dot)
                return false;
        const char *dom = dot + 1, *want = srv->cfg.domain;
        size_t dl = strcspn(dom, ":"), wl = strcspn(want, ":");
        if (dl != wl || strncasecmp(dom, want, dl))
                return false;
        size_t il = (size_t)(dot - dash - 1);
        if (il == 0 || il > PD_ID_LEN)
                return false;
        *port = parse_port(host, (size_t)(dash - host));
        if (!*port && strspn(host, "0123456789") != (size_t)(dash - host))
                return false;
        for (size_t i = 0; i < il; i++)
                id[i] = (char)tolower((unsigned char)dash[1 + i]);
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

bool pd_ports_match(struct pd_server *srv, struct MHD_Connection *conn, const char *path)
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
        /* 1. the owner's API key (path form only) */
        struct pd_key key;
        if (!c->host_form && api_key(r, &key)) {
                c->s = pd_server_sandbox_get(r->srv, id, &key);
                if (!c->s) {
                        /* unknown, or another key's: the same answer */
                        pd_deferred_fail(&c->fail, 404, "not_found", "no sandbox %s", id);
                        return;
                }
                c->key_used = true;
        } else {
                /* 2. a port token for this id; 3. public ports */
                char token[PD_E2B_TOKEN_LEN + 1];
                const char *given = given_token(r);
                if (pd_ports_token(r->srv, id, token) < 0) {
                        pd_deferred_fail(&c->fail, 500, "internal", "cannot compute the port token");
                        return;
                }
                bool token_ok = given && pd_e2b_streq(given, token);
                c->s = pd_server_sandbox_get(r->srv, id, NULL);
                if (token_ok && !c->s) {
                        pd_deferred_fail(&c->fail, 404, "not_found", "no sandbox %s", id);
                        return;
                }
                if (!token_ok && !(c->s && __atomic_load_n(&c->s->ports_public, __ATOMIC_RELAXED))) {
                        pd_deferred_fail(&c->fail, 401, "unauthorized",
                                         "missing or wrong port token (send X-Paddock-Port-Token or "
                                         "?paddock_port_token=)");
                        return;
                }
        }
        if (strcmp(c->s->state, "running"))
                pd_deferred_fail(&c->fail, 409, "conflict", "sandbox %s is %s", c->s->id, c->s->state);
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

static bool skip_header(const char *name, bool key_used, bool upgrade)
{
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
        bool key_used, upgrade, bad;
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

static enum MHD_Result head_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct head_buf *h = cls;
        if (skip_header(key, h->key_used, h->upgrade) || strpbrk(key, "\r\n:") || (value && strpbrk(value, "\r\n")))
                return MHD_YES;
        head_add(h, key, strlen(key));
        head_add(h, ": ", 2);
        if (value)
                head_add(h, value, strlen(value));
        head_add(h, "\r\n", 2);
        return MHD_YES;
}

static enum MHD_Result reply_fail(struct pd_req *r, unsigned status, const char *code, const char *msg)
{
        return pd_reply_error(r, status, code, "%s", msg);
}

static enum MHD_Result finish(struct pd_req *r, struct port_call *c)
{
        if (c->fail.status)
                return reply_fail(r, c->fail.status, c->fail.code, c->fail.msg);
        struct pd_e2b_stream *st = pd_e2b_stream_new(r, c->s);
        if (!st)
                return MHD_NO;
        c->s = NULL;
        struct pd_error err = { 0 };
        uint32_t tid = 0;
        int k = pd_route_agent(st->s, &st->cl, &err);
        if (k >= 0) {
                pd_route_watch(&st->cl, r->srv, NULL, st->s);
                k = pd_client_tunnel_open(&st->cl, c->port, &tid, &err);
        }
        if (k < 0) {
                char msg[512];
                unsigned status = 502;
                if (k == -ECONNREFUSED)
                        snprintf(msg, sizeof msg, "nothing listens on port %u inside sandbox %s", c->port, st->s->id);
                else
                        snprintf(msg, sizeof msg, "port %u of sandbox %s unreachable: %s", c->port, st->s->id,
                                 err.msg);
                pd_e2b_stream_free(st);
                return reply_fail(r, status, "bad_gateway", msg);
        }
        st->id = tid;
        /* HTTP/1.0: the answer ends with the connection, never chunked;
         * an upgrade needs HTTP/1.1 */
        struct head_buf h = { .key_used = c->key_used, .upgrade = c->upgrade };
        char line[256];
        head_add(&h, r->method, strlen(r->method));
        head_add(&h, " ", 1);
        head_add(&h, c->target, strlen(c->target));
        head_add(&h, c->upgrade ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
        const char *host = hdr(r->conn, "Host");
        if (c->host_form && host && !strpbrk(host, "\r\n")) {
                head_add(&h, "Host: ", 6);
                head_add(&h, host, strlen(host));
                head_add(&h, "\r\n", 2);
        } else {
                int n = snprintf(line, sizeof line, "Host: localhost:%u\r\n", c->port);
                head_add(&h, line, (size_t)n);
        }
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, head_header, &h);
        int n = c->upgrade ? (c->len ? snprintf(line, sizeof line, "Content-Length: %zu\r\n\r\n", c->len)
                                     : snprintf(line, sizeof line, "\r\n"))
                           : snprintf(line, sizeof line, "Content-Length: %zu\r\nConnection: close\r\n\r\n", c->len);
        head_add(&h, line, (size_t)n);
        if (h.bad) {
                free(h.p);
                pd_e2b_stream_free(st);
                return reply_fail(r, 431, "too_large", "request headers too large");
        }
        if (c->upgrade) {
                enum MHD_Result ret = pd_ports_ws_forward(r, st, tid, h.p, h.len, c->body, c->len, c->port, &c->ws);
                free(h.p);
                return ret;
        }
        char what[64];
        snprintf(what, sizeof what, "port %u", c->port);
        enum MHD_Result ret = pd_tunnel_http_relay(r, st, tid, h.p, h.len, c->body, c->len, true, what);
        free(h.p);
        return ret;
}

enum MHD_Result pd_ports_handle(struct pd_req *r, const char *chunk, size_t *chunk_len)
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

/* POST /api/v1/sandboxes/{id}/ports/public {"public": bool} */
static enum MHD_Result ports_public(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *b = pd_req_json(r, &ret);
        if (!b)
                return ret;
        json_t *v = json_object_get(b, "public");
        if (!json_is_boolean(v)) {
                json_decref(b);
                return pd_reply_error(r, 400, "bad_request", "expected {\"public\": true|false}");
        }
        bool pub = json_is_true(v);
        json_decref(b);
        struct pd_srv_sandbox *s = pd_route_sandbox(r, &ret);
        if (!s)
                return ret;
        __atomic_store_n(&s->ports_public, pub, __ATOMIC_RELAXED);
        char token[PD_E2B_TOKEN_LEN + 1];
        int k = pd_ports_token(r->srv, s->id, token);
        pd_audit(r->srv, s->id, r->key.id, "ports.public", json_pack("{s:b}", "public", pub));
        json_t *o = json_pack("{s:s, s:b, s:s, s:s?}", "id", s->id, "public", pub, "domain",
                              r->srv->cfg.domain ? r->srv->cfg.domain : "localhost", "port_token",
                              k == 0 ? token : NULL);
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
        char token[PD_E2B_TOKEN_LEN + 1];
        int k = pd_ports_token(r->srv, s->id, token);
        json_t *o = json_pack("{s:s, s:b, s:s, s:s?}", "id", s->id, "public",
                              (int)__atomic_load_n(&s->ports_public, __ATOMIC_RELAXED), "domain",
                              r->srv->cfg.domain ? r->srv->cfg.domain : "localhost", "port_token",
                              k == 0 ? token : NULL);
        pd_server_sandbox_put(r->srv, s);
        return pd_reply_json(r, 200, o);
}

const struct pd_route pd_routes_ports[] = {
        { "POST", "/api/v1/sandboxes/{id}/ports/public", ports_public, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/ports", ports_info, 0, 0 },
        { 0 },
};
