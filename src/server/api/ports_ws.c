/* Upgrade requests (WebSocket) through the port proxy (docs/api.md, "Ports").
 *
 * The request goes to the service as HTTP/1.1 with its Upgrade, Connection
 * and Sec-WebSocket-* headers intact. The service's answer decides:
 *   - 101: the client gets a 101 with the service's headers (libmicrohttpd's
 *     upgrade response) and, once it is sent, this connection's thread relays
 *     bytes both ways between the client socket and the agent tunnel until
 *     either side closes, the sandbox is deleted or paused, or the server
 *     stops;
 *   - anything else: relayed as plain HTTP (body buffered, 1 MiB at most),
 *     and the connection closes after it.
 *
 * Backpressure: at most WS_HIGH bytes wait on either side. Past that we stop
 * reading the client socket (bytes for the sandbox) or stop reading agent
 * frames (bytes for the client); the agent in turn stops reading the
 * service's socket when its connection backs up, and stops reading ours when
 * the service does not drain. Nothing grows without bound.
 *
 * Lifetime: the relay object belongs to the port call (r->route_state) and
 * is freed with it, after the upgrade handler has returned: libmicrohttpd,
 * in thread-per-connection mode, calls the handler and then the completion
 * callback from the connection's own thread. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "server/api/ports.h"
#include "lib/util.h"

#define WS_HIGH (256u << 10)            /* bytes waiting per direction */
#define WS_READ (64u << 10)
#define OUT_CAP (WS_HIGH + PD_FRAME_MAX)      /* room for one more frame past WS_HIGH */
#define WS_SLICE_MS 250                 /* how often the sandbox's state is looked at */
#define WS_HALF_CLOSE_MS 10000          /* one side closed: how long the other may go on */
#define HEAD_MAX (16u << 10)
#define REFUSED_BODY_MAX (1u << 20)
#define ANSWER_TIMEOUT_MS 60000

struct pd_ports_ws {
        struct pd_agent_stream *st;       /* agent connection and sandbox reference */
        uint32_t tid;
        unsigned port;
        char *early;                    /* service bytes that followed its 101 head */
        size_t early_len;
        bool ran;                       /* the upgrade handler ran */
};

void pd_ports_ws_free(struct pd_ports_ws *w)
{
        if (!w)
                return;
        pd_agent_stream_free(w->st);
        free(w->early);
        free(w);
}

/* Does the comma-separated list v hold token t (any case)? */
static bool has_token(const char *v, const char *t)
{
        size_t tl = strlen(t);
        while (v && *v) {
                v += strspn(v, " \t,");
                size_t l = strcspn(v, ",");
                size_t e = l;
                while (e && (v[e - 1] == ' ' || v[e - 1] == '\t'))
                        e--;
                if (e == tl && !strncasecmp(v, t, tl))
                        return true;
                v += l;
        }
        return false;
}

bool pd_http_upgrade_asked(struct MHD_Connection *conn, const char *protocol)
{
        const char *up = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Upgrade");
        const char *co = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connection");
        return up && *up && (!protocol || !strcasecmp(up, protocol)) && has_token(co, "upgrade");
}

int pd_upgraded_send(int sock, const void *buf, size_t len, size_t *pos)
{
        while (*pos < len) {
                ssize_t n = send(sock, (const char *)buf + *pos, len - *pos, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return 0;
                if (n <= 0)
                        return -1;
                *pos += (size_t)n;
        }
        return 0;
}

bool pd_ports_is_upgrade(struct MHD_Connection *conn)
{
        return pd_http_upgrade_asked(conn, NULL);
}

/* ---- the service's answer ---- */

struct answer {
        char *buf;
        size_t len;
        size_t head_len;                /* through the blank line */
        unsigned status;
};

/* One frame of our tunnel: 1 DATA (payload in *p, *n), 0 the tunnel closed,
 * <0 an error. Frames of other ids are skipped. */
static int tunnel_frame(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, const uint8_t **p, size_t *n,
                        int timeout_ms)
{
        for (;;) {
                struct pd_frame_hdr h;
                int k = pd_client_next(&st->cl, &h, p, timeout_ms);
                if (k < 0)
                        return k;
                if (h.id != tid)
                        continue;
                if (h.type == PD_T_TUNNEL_CLOSE || h.type == PD_T_ERROR)
                        return 0;
                if (h.type == PD_T_DATA && h.len) {
                        *n = h.len;
                        return 1;
                }
        }
}

static int answer_add(struct answer *a, const void *p, size_t n, size_t max)
{
        if (n > max - a->len)
                return -EMSGSIZE;
        char *b = realloc(a->buf, a->len + n + 1);
        if (!b)
                return -ENOMEM;
        a->buf = b;
        memcpy(b + a->len, p, n);
        a->len += n;
        b[a->len] = '\0';
        return 0;
}

static int read_head(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, struct answer *a)
{
        while (!a->head_len) {
                const uint8_t *p;
                size_t n;
                int k = tunnel_frame(r, st, tid, &p, &n, ANSWER_TIMEOUT_MS);
                if (k <= 0)
                        return k < 0 ? k : -ECONNRESET;
                if ((k = answer_add(a, p, n, HEAD_MAX + PD_DATA_CHUNK)) < 0)
                        return k;
                char *eoh = strstr(a->buf, "\r\n\r\n");
                if (eoh)
                        a->head_len = (size_t)(eoh + 4 - a->buf);
                else if (a->len > HEAD_MAX)
                        return -EMSGSIZE;
        }
        a->status = 0;
        if (!strncmp(a->buf, "HTTP/1.", 7) && a->head_len > 12 && a->buf[8] == ' ')
                a->status = (unsigned)strtoul(a->buf + 9, NULL, 10);
        return a->status >= 100 && a->status <= 599 ? 0 : -EPROTO;
}

/* The value of header name in the answer's head (into out), or false. */
static bool head_value(const struct answer *a, const char *name, char *out, size_t cap)
{
        size_t nl = strlen(name);
        for (const char *line = strstr(a->buf, "\r\n"); line && line + 2 < a->buf + a->head_len - 2;
             line = strstr(line + 2, "\r\n")) {
                const char *l = line + 2;
                if (!strncasecmp(l, name, nl) && l[nl] == ':') {
                        const char *v = l + nl + 1;
                        v += strspn(v, " \t");
                        size_t vl = strcspn(v, "\r\n");
                        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                                vl--;
                        if (vl >= cap)
                                return false;
                        memcpy(out, v, vl);
                        out[vl] = '\0';
                        return true;
                }
        }
        return false;
}

/* Copy the answer's headers onto resp, less the ones that describe this hop
 * or that libmicrohttpd writes itself. */
static void copy_headers(const struct answer *a, struct MHD_Response *resp, bool upgrade)
{
        static const char *const skip[] = { "Content-Length", "Transfer-Encoding", "Keep-Alive", "Date",
                                            "Proxy-Connection", "TE", "Trailer" };
        const char *end = a->buf + a->head_len - 2;
        for (const char *line = strstr(a->buf, "\r\n"); line && line + 2 < end; line = strstr(line + 2, "\r\n")) {
                char h[4096];
                size_t ll = strcspn(line + 2, "\r\n");
                if (ll == 0 || ll >= sizeof h)
                        continue;
                memcpy(h, line + 2, ll);
                h[ll] = '\0';
                char *colon = strchr(h, ':');
                if (!colon || colon == h)
                        continue;
                *colon = '\0';
                const char *v = colon + 1 + strspn(colon + 1, " \t");
                bool drop = false;
                for (size_t i = 0; i < PD_ARRAY_SIZE(skip); i++)
                        drop |= !strcasecmp(h, skip[i]);
                /* a refused upgrade ends with the connection */
                if (!upgrade && (!strcasecmp(h, "Connection") || !strcasecmp(h, "Upgrade")))
                        drop = true;
                if (upgrade && !strcasecmp(h, "Connection") && !has_token(v, "upgrade"))
                        drop = true;
                if (!drop)
                        MHD_add_response_header(resp, h, v);
        }
        if (upgrade && !MHD_get_response_header(resp, "Connection"))
                MHD_add_response_header(resp, "Connection", "Upgrade");
}

/* Decode a complete chunked body in place; its length, or -EPROTO. */
static ssize_t dechunk(char *b, size_t n)
{
        size_t in = 0, out = 0;
        for (;;) {
                char *end;
                if (in >= n)
                        return -EPROTO;
                unsigned long long cl = strtoull(b + in, &end, 16);
                char *crlf = memmem(b + in, n - in, "\r\n", 2);
                if (end == b + in || !crlf || end > crlf)
                        return -EPROTO;
                in = (size_t)(crlf + 2 - b);
                if (cl == 0)
                        return (ssize_t)out;
                if (cl > n - in || n - in - cl < 2)
                        return -EPROTO;
                memmove(b + out, b + in, cl);
                out += cl;
                in += cl + 2;
        }
}

static bool chunked_complete(const char *b, size_t n)
{
        return n >= 5 && !memcmp(b + n - 5, "0\r\n\r\n", 5);
}

/* Not a 101: read the rest of the answer (to its length, its last chunk or
 * the tunnel's end) and relay it. */
static enum MHD_Result refused(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, unsigned port,
                               struct answer *a)
{
        char v[64];
        bool chunked = head_value(a, "Transfer-Encoding", v, sizeof v) && has_token(v, "chunked");
        long long want = -1;
        if (!chunked && head_value(a, "Content-Length", v, sizeof v)) {
                char *e;
                want = strtoll(v, &e, 10);
                if (*e || want < 0)
                        want = -1;
        }
        if (a->status == 204 || a->status == 304 || !strcmp(r->method, "HEAD"))
                want = 0;
        size_t body_max = a->head_len + REFUSED_BODY_MAX;
        int k = 0;
        for (;;) {
                size_t have = a->len - a->head_len;
                if (want >= 0 && have >= (size_t)want)
                        break;
                if (chunked && chunked_complete(a->buf + a->head_len, have))
                        break;
                const uint8_t *p;
                size_t n;
                k = tunnel_frame(r, st, tid, &p, &n, ANSWER_TIMEOUT_MS);
                if (k <= 0)
                        break;
                if ((k = answer_add(a, p, n, body_max)) < 0)
                        break;
        }
        size_t blen = a->len - a->head_len;
        if (want >= 0 && blen > (size_t)want)
                blen = (size_t)want;
        if (k < 0 || (want >= 0 && blen < (size_t)want) || (chunked && !chunked_complete(a->buf + a->head_len, blen))) {
                pd_agent_stream_free(st);
                return pd_reply_error(r, 502, "bad_gateway", "port %u: the service's answer to an upgrade "
                                      "request is incomplete or over %u bytes", port, REFUSED_BODY_MAX);
        }
        if (chunked) {
                ssize_t d = dechunk(a->buf + a->head_len, blen);
                if (d < 0) {
                        pd_agent_stream_free(st);
                        return pd_reply_error(r, 502, "bad_gateway", "bad chunked answer from the service");
                }
                blen = (size_t)d;
        }
        pd_agent_stream_free(st);         /* the tunnel is done */
        struct MHD_Response *resp = MHD_create_response_from_buffer(blen, a->buf + a->head_len, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        copy_headers(a, resp, false);
        MHD_add_response_header(resp, "Connection", "close");
        return pd_reply_response(r, a->status, resp);
}

/* ---- the upgraded connection ---- */

struct relay {
        struct pd_server *srv;
        struct pd_srv_sandbox *s;
        struct pd_client *cl;
        struct pd_conn *c;              /* cl's transport: this loop polls it itself */
        uint32_t tid;
        int sock;
        char *out;                      /* bytes for the client */
        size_t out_len, out_pos;
        bool client_eof, up_eof, shut;
        uint64_t deadline;              /* 0, or when a half-closed relay ends */
        const char *why;
};

/* Queue client bytes for the tunnel in DATA frames. */
static int to_tunnel(struct relay *x, const char *p, size_t n)
{
        return pd_client_tunnel_send(x->cl, x->tid, p, n);
}

static int to_client(struct relay *x, const void *p, size_t n)
{
        if (x->out_pos == x->out_len)
                x->out_pos = x->out_len = 0;
        if (x->out_pos && x->out_len + n > OUT_CAP) {
                memmove(x->out, x->out + x->out_pos, x->out_len - x->out_pos);
                x->out_len -= x->out_pos;
                x->out_pos = 0;
        }
        if (x->out_len + n > OUT_CAP)
                return -ENOBUFS;        /* cannot happen: frames are taken only below WS_HIGH */
        memcpy(x->out + x->out_len, p, n);
        x->out_len += n;
        return 0;
}

static size_t out_used(const struct relay *x)
{
        return x->out_len - x->out_pos;
}

/* Agent frames already buffered, while there is room for the client. */
static int drain_frames(struct relay *x)
{
        while (!x->up_eof && out_used(x) < WS_HIGH) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k = pd_conn_next(x->c, &h, &p);
                if (k <= 0)
                        return k;
                if (h.id != x->tid)
                        continue;
                if (h.type == PD_T_DATA && h.len) {
                        if ((k = to_client(x, p, h.len)) < 0)
                                return k;
                } else if (h.type == PD_T_TUNNEL_CLOSE || h.type == PD_T_ERROR) {
                        x->up_eof = true;
                }
        }
        return 0;
}

static bool sandbox_stopped(struct relay *x)
{
        enum pd_sb_state st = pd_srv_sandbox_state(x->s);
        if (st == PD_SB_DELETED) {
                x->why = "sandbox deleted";
                return true;
        }
        if (pd_sb_can(x->s->id, st, PD_OP_PORTS, NULL) < 0) {
                x->why = "sandbox not running";
                return true;
        }
        return false;
}

static void relay_run(struct relay *x)
{
        int stopfd = pd_server_stop_fd(x->srv);
        char *in = malloc(WS_READ);
        if (!in) {
                x->why = "out of memory";
                return;
        }
        for (;;) {
                if (drain_frames(x) < 0) {
                        x->why = "agent connection";
                        break;
                }
                if (pd_upgraded_send(x->sock, x->out, x->out_len, &x->out_pos) < 0) {
                        x->why = "client gone";
                        goto out;
                }
                if (x->up_eof && !out_used(x) && !x->shut) {
                        /* the service closed: so do we, after the client
                         * read everything (its EOF, or the deadline) */
                        shutdown(x->sock, SHUT_WR);
                        x->shut = true;
                        if (!x->deadline)
                                x->deadline = pd_now_ms() + WS_HALF_CLOSE_MS;
                }
                if (x->shut && x->client_eof) {
                        x->why = "closed";
                        break;
                }
                if (pd_conn_flush(x->c) < 0 && !x->up_eof) {
                        x->why = "agent connection";
                        break;
                }
                if (sandbox_stopped(x))
                        break;
                if (x->deadline && pd_now_ms() >= x->deadline) {
                        x->why = "half-closed too long";
                        break;
                }
                /* after the service closed, client bytes are read and dropped */
                bool want_client = !x->client_eof && (x->up_eof || pd_conn_pending(x->c) < WS_HIGH);
                bool want_agent = !x->up_eof && !x->c->eof && out_used(x) < WS_HIGH;
                short cev = (short)((want_client ? POLLIN : 0) | (out_used(x) ? POLLOUT : 0));
                short aev = (short)((want_agent ? POLLIN : 0) | (pd_conn_pending(x->c) && !x->up_eof ? POLLOUT : 0));
                /* fd -1 while we want nothing of it: a hang-up would
                 * otherwise wake poll at once, again and again */
                struct pollfd p[3] = {
                        { .fd = cev ? x->sock : -1, .events = cev },
                        { .fd = aev ? x->c->fd : -1, .events = aev },
                        { .fd = stopfd, .events = POLLIN },
                };
                int n = poll(p, 3, WS_SLICE_MS);
                if (n < 0 && errno != EINTR) {
                        x->why = "poll";
                        break;
                }
                if (n <= 0)
                        continue;
                if (p[2].revents) {
                        x->why = "server stopping";
                        break;
                }
                if (p[0].revents & (POLLERR | POLLNVAL)) {
                        x->why = "client gone";
                        break;
                }
                if (want_client && (p[0].revents & (POLLIN | POLLHUP))) {
                        ssize_t k = recv(x->sock, in, WS_READ, MSG_DONTWAIT);
                        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                                x->why = "client gone";
                                break;
                        }
                        if (k == 0) {
                                /* half close toward the service */
                                x->client_eof = true;
                                if (!x->up_eof)
                                        (void)pd_client_tunnel_close(x->cl, x->tid);
                                if (!x->deadline)
                                        x->deadline = pd_now_ms() + WS_HALF_CLOSE_MS;
                        } else if (k > 0 && !x->up_eof && to_tunnel(x, in, (size_t)k) < 0) {
                                x->why = "agent connection";
                                break;
                        }
                }
                if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        if (pd_conn_fill(x->c) < 0 || (x->c->eof && !x->up_eof)) {
                                /* the agent went away: deliver what came */
                                (void)drain_frames(x);
                                x->up_eof = true;
                        }
                }
        }
out:
        free(in);
}

static void upgraded(void *cls, struct MHD_Connection *mc, void *con_cls, const char *extra_in, size_t extra_len,
                     MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
        struct pd_ports_ws *w = cls;
        w->ran = true;
        struct relay x = { .srv = w->st->srv, .s = w->st->s, .cl = &w->st->cl, .c = &w->st->cl.conn, .tid = w->tid,
                           .sock = sock };
        x.out = malloc(OUT_CAP);
        if (!x.out)
                x.why = "out of memory";
        else if (to_client(&x, w->early, w->early_len) < 0 || to_tunnel(&x, extra_in, extra_len) < 0)
                x.why = "agent connection";
        else
                relay_run(&x);
        pd_log("info", "port websocket closed sandbox=%s port=%u reason=\"%s\"", x.s->id, w->port,
               x.why ? x.why : "closed");
        free(x.out);
        /* the tunnel ends with its agent connection */
        pd_client_close(&w->st->cl);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

enum MHD_Result pd_ports_ws_forward(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, const char *head,
                                    size_t head_len, const char *body, size_t body_len, unsigned port,
                                    struct pd_ports_ws **ws)
{
        *ws = NULL;
        int k = pd_client_tunnel_send(&st->cl, tid, head, head_len);
        if (k >= 0)
                k = pd_client_tunnel_send(&st->cl, tid, body, body_len);
        if (k >= 0)
                k = pd_client_flush(&st->cl, ANSWER_TIMEOUT_MS);
        pd_route_watch(&st->cl, r->srv, r->conn, st->s);
        struct answer a = { 0 };
        if (k >= 0)
                k = read_head(r, st, tid, &a);
        if (k < 0) {
                free(a.buf);
                pd_agent_stream_free(st);
                return pd_reply_error(r, 502, "bad_gateway", "port %u: the service closed the connection or "
                                      "sent no valid HTTP answer (%s)", port, strerror(-k));
        }
        if (a.status < 200 && a.status != 101) {
                /* an interim answer (we never send Expect): not relayed */
                free(a.buf);
                pd_agent_stream_free(st);
                return pd_reply_error(r, 502, "bad_gateway", "port %u: interim answer %u to an upgrade request",
                                      port, a.status);
        }
        if (a.status != 101) {
                enum MHD_Result ret = refused(r, st, tid, port, &a);
                free(a.buf);
                return ret;
        }
        struct pd_ports_ws *w = calloc(1, sizeof *w);
        struct MHD_Response *resp = w ? MHD_create_response_for_upgrade(upgraded, w) : NULL;
        if (!resp) {
                free(w);
                free(a.buf);
                pd_agent_stream_free(st);
                return MHD_NO;
        }
        w->st = st;
        w->tid = tid;
        w->port = port;
        w->early_len = a.len - a.head_len;
        if (w->early_len && !(w->early = malloc(w->early_len))) {
                MHD_destroy_response(resp);
                pd_ports_ws_free(w);
                free(a.buf);
                return MHD_NO;
        }
        if (w->early_len)
                memcpy(w->early, a.buf + a.head_len, w->early_len);
        copy_headers(&a, resp, true);
        free(a.buf);
        *ws = w;
        return pd_reply_response(r, 101, resp);
}
