/* GET /api/v1/sandboxes/{id}/processes/{pid}/pty (WebSocket, RFC 6455):
 * a pty process of the native API (POST .../processes with "pty" and
 * "stdin") carried over one WebSocket, for the console's terminal
 * (docs/api.md, "Terminal WebSocket").
 *
 *   server -> client  binary messages: the pty's output from ?from=N on
 *                     (the stream offsets of GET .../output, so a reload
 *                     reattaches and replays what is still in the ring);
 *                     a text message {"exit": code|null, "signal": n|null}
 *                     when the process ends, then a close.
 *   client -> server  binary messages: bytes for the pty's input;
 *                     text messages: {"resize": {"rows": R, "cols": C}}.
 *
 * The WebSocket is only a view: closing it leaves the process running, and
 * any number may attach to the same process. Backpressure as in
 * ports_ws.c: at most WS_HIGH bytes wait per direction, then the side that
 * produces is no longer read. A client frame larger than WS_MSG_MAX, an
 * unmasked one or a fragmented text message closes the socket (1009/1002). */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "server/api/api.h"
#include "server/api/ports.h"
#include "lib/util.h"

#define WS_HIGH (256u << 10)
#define WS_MSG_MAX (64u << 10)          /* one client frame's payload */
#define WS_IN_CAP (WS_MSG_MAX + 14)     /* room for one whole frame */
#define WS_SLICE_MS 250
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

struct pty_ws {
        struct pd_server *srv;
        struct pd_srv_sandbox *s;       /* reference held until freed */
        struct pd_client cl;
        uint32_t pid, attach_id;
        uint64_t next;                  /* the next output offset for the client */
        char key_id[17];
};

static void pty_ws_free(struct pty_ws *w)
{
        if (!w)
                return;
        pd_client_close(&w->cl);
        if (w->s)
                pd_server_sandbox_put(w->srv, w->s);
        free(w);
}

/* ---- the upgraded connection ---- */

struct relay {
        struct pty_ws *w;
        int sock;
        uint8_t *out;                   /* WebSocket frames for the client */
        size_t out_len, out_pos, out_cap;
        uint8_t in[WS_IN_CAP];          /* client bytes not yet a whole frame */
        size_t in_len;
        bool closing;                   /* a close frame is queued: send it, then end */
        const char *why;
};

static size_t out_used(const struct relay *x)
{
        return x->out_len - x->out_pos;
}

static int out_put(struct relay *x, const void *p, size_t n)
{
        if (x->out_pos == x->out_len)
                x->out_pos = x->out_len = 0;
        if (x->out_len + n > x->out_cap) {
                if (x->out_pos) {
                        memmove(x->out, x->out + x->out_pos, x->out_len - x->out_pos);
                        x->out_len -= x->out_pos;
                        x->out_pos = 0;
                }
                if (x->out_len + n > x->out_cap) {
                        size_t cap = x->out_cap ? x->out_cap : 65536;
                        while (cap < x->out_len + n)
                                cap *= 2;
                        uint8_t *b = realloc(x->out, cap);
                        if (!b)
                                return -ENOMEM;
                        x->out = b;
                        x->out_cap = cap;
                }
        }
        memcpy(x->out + x->out_len, p, n);
        x->out_len += n;
        return 0;
}

/* One unmasked server frame (FIN set). */
static int ws_send(struct relay *x, unsigned opcode, const void *p, size_t n)
{
        uint8_t h[10];
        size_t hl = 2;
        h[0] = (uint8_t)(0x80 | opcode);
        if (n < 126) {
                h[1] = (uint8_t)n;
        } else if (n <= 0xffff) {
                h[1] = 126;
                h[2] = (uint8_t)(n >> 8);
                h[3] = (uint8_t)n;
                hl = 4;
        } else {
                h[1] = 127;
                for (int i = 0; i < 8; i++)
                        h[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
                hl = 10;
        }
        int k = out_put(x, h, hl);
        return k < 0 ? k : out_put(x, p, n);
}

static void ws_close(struct relay *x, unsigned code, const char *why)
{
        if (x->closing)
                return;
        uint8_t b[2] = { (uint8_t)(code >> 8), (uint8_t)code };
        (void)ws_send(x, 8, b, 2);
        x->closing = true;
        x->why = why;
}

/* A text message from the client: {"resize": {"rows": R, "cols": C}}. */
static void control(struct relay *x, const uint8_t *p, size_t n)
{
        json_error_t je;
        json_t *j = json_loadb((const char *)p, n, 0, &je);
        json_t *rs = json_object_get(j, "resize");
        json_int_t rows = json_integer_value(json_object_get(rs, "rows"));
        json_int_t cols = json_integer_value(json_object_get(rs, "cols"));
        if (rs && rows >= 1 && rows <= 65535 && cols >= 1 && cols <= 65535)
                (void)pd_client_resize_nowait(&x->w->cl, x->w->pid, (uint32_t)rows, (uint32_t)cols);
        else
                ws_close(x, 1003, "bad control message");
        json_decref(j);
}

/* Whole client frames out of x->in. */
static int client_frames(struct relay *x)
{
        size_t pos = 0;
        while (!x->closing && x->in_len - pos >= 2) {
                const uint8_t *f = x->in + pos;
                size_t avail = x->in_len - pos;
                bool fin = f[0] & 0x80;
                unsigned op = f[0] & 0x0f;
                bool masked = f[1] & 0x80;
                uint64_t len = f[1] & 0x7f;
                size_t hl = 2;
                if (len == 126) {
                        if (avail < 4)
                                break;
                        len = (uint64_t)f[2] << 8 | f[3];
                        hl = 4;
                } else if (len == 127) {
                        if (avail < 10)
                                break;
                        len = 0;
                        for (int i = 0; i < 8; i++)
                                len = len << 8 | f[2 + i];
                        hl = 10;
                }
                if (!masked) {
                        ws_close(x, 1002, "unmasked client frame");
                        break;
                }
                if (len > WS_MSG_MAX) {
                        ws_close(x, 1009, "client frame too large");
                        break;
                }
                if (avail < hl + 4 + len)
                        break;
                uint8_t *data = (uint8_t *)f + hl + 4;
                for (uint64_t i = 0; i < len; i++)
                        data[i] ^= f[hl + i % 4];
                pos += hl + 4 + (size_t)len;
                switch (op) {
                case 0: /* continuation: only of binary messages (input) */
                case 2:
                        if (len && pd_client_stdin(&x->w->cl, x->w->pid, data, (size_t)len) < 0)
                                return -EIO;
                        break;
                case 1:
                        if (!fin)
                                ws_close(x, 1003, "fragmented text message");
                        else
                                control(x, data, (size_t)len);
                        break;
                case 8:
                        ws_close(x, 1000, "client closed");
                        break;
                case 9:
                        if (ws_send(x, 10, data, (size_t)len) < 0)
                                return -ENOMEM;
                        break;
                case 10:
                        break;
                default:
                        ws_close(x, 1002, "unknown opcode");
                }
        }
        memmove(x->in, x->in + pos, x->in_len - pos);
        x->in_len -= pos;
        return 0;
}

/* Agent frames already buffered, while the client has room. */
static int agent_frames(struct relay *x)
{
        struct pty_ws *w = x->w;
        while (!x->closing && out_used(x) < WS_HIGH) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k = pd_conn_next(&w->cl.conn, &h, &p);
                if (k <= 0)
                        return k;
                if (h.type == PD_T_OUTPUT && h.id == w->pid && h.aux == PD_STREAM_PTY) {
                        uint64_t off;
                        const uint8_t *data;
                        size_t n;
                        if (!pd_output_decode(&h, p, &off, &data, &n))
                                continue;
                        if (off < w->next) {    /* never twice */
                                uint64_t skip = w->next - off;
                                if (skip >= n)
                                        continue;
                                data += skip;
                                n -= (size_t)skip;
                                off = w->next;
                        }
                        w->next = off + n;
                        if ((k = ws_send(x, 2, data, n)) < 0)
                                return k;
                } else if (h.type == PD_T_EXIT && h.id == w->pid) {
                        struct pd_exit e;
                        pd_exit_decode(p, h.len, &e);
                        json_t *j = json_pack("{s:o, s:o}", "exit",
                                              e.has_code ? json_integer(e.code) : json_null(), "signal",
                                              e.has_signal ? json_integer(e.signo) : json_null());
                        char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
                        json_decref(j);
                        if (t && ws_send(x, 1, t, strlen(t)) < 0) {
                                free(t);
                                return -ENOMEM;
                        }
                        free(t);
                        ws_close(x, 1000, "process exited");
                } else if (h.type == PD_T_ERROR && h.id == w->attach_id) {
                        ws_close(x, 1011, "attach refused");
                }
                /* the REPLY to ATTACH, GAPs, and stdin errors (the pty
                 * closed its input) need nothing */
        }
        return 0;
}

static bool sandbox_stopped(struct relay *x)
{
        enum pd_sb_state st = pd_srv_sandbox_state(x->w->s);
        if (st == PD_SB_DELETED || pd_sb_can(x->w->s->id, st, PD_OP_PORTS, NULL) < 0) {
                x->why = "sandbox not running";
                return true;
        }
        return false;
}

static void relay_run(struct relay *x)
{
        struct pd_conn *c = &x->w->cl.conn;
        int stopfd = pd_server_stop_fd(x->w->srv);
        for (;;) {
                if (agent_frames(x) < 0 || client_frames(x) < 0) {
                        x->why = x->why ? x->why : "agent connection";
                        break;
                }
                if (pd_upgraded_send(x->sock, x->out, x->out_len, &x->out_pos) < 0) {
                        x->why = "client gone";
                        return;
                }
                if (x->closing && !out_used(x))
                        return;
                if (pd_conn_flush(c) < 0) {
                        x->why = "agent connection";
                        return;
                }
                if (sandbox_stopped(x)) {
                        ws_close(x, 1001, x->why);
                        continue;
                }
                /* a client that sends but does not read (pings) must not
                 * grow what waits for it: its bytes wait too */
                bool want_client = !x->closing && x->in_len < sizeof x->in && pd_conn_pending(c) < WS_HIGH &&
                                   out_used(x) < WS_HIGH;
                bool want_agent = !x->closing && !c->eof && out_used(x) < WS_HIGH;
                short cev = (short)((want_client ? POLLIN : 0) | (out_used(x) ? POLLOUT : 0));
                short aev = (short)((want_agent ? POLLIN : 0) | (pd_conn_pending(c) ? POLLOUT : 0));
                struct pollfd p[3] = {
                        { .fd = cev ? x->sock : -1, .events = cev },
                        { .fd = aev ? c->fd : -1, .events = aev },
                        { .fd = stopfd, .events = POLLIN },
                };
                int n = poll(p, 3, WS_SLICE_MS);
                if (n < 0 && errno != EINTR) {
                        x->why = "poll";
                        return;
                }
                if (n <= 0)
                        continue;
                if (p[2].revents) {
                        ws_close(x, 1001, "server stopping");
                        continue;
                }
                if (p[0].revents & (POLLERR | POLLNVAL)) {
                        x->why = "client gone";
                        return;
                }
                if (want_client && (p[0].revents & (POLLIN | POLLHUP))) {
                        ssize_t k = recv(x->sock, x->in + x->in_len, sizeof x->in - x->in_len, MSG_DONTWAIT);
                        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                                x->why = "client gone";
                                return;
                        }
                        if (k > 0)
                                x->in_len += (size_t)k;
                }
                if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        if (pd_conn_fill(c) < 0 || c->eof) {
                                (void)agent_frames(x);
                                ws_close(x, 1011, "agent connection lost");
                        }
                }
        }
}

static void upgraded(void *cls, struct MHD_Connection *mc, void *con_cls, const char *extra_in, size_t extra_len,
                     MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
        struct pty_ws *w = cls;
        struct relay *x = calloc(1, sizeof *x);
        if (x) {
                x->w = w;
                x->sock = sock;
                if (extra_len <= sizeof x->in) {
                        memcpy(x->in, extra_in, extra_len);
                        x->in_len = extra_len;
                        relay_run(x);
                }
                pd_log("info", "console pty closed sandbox=%s pid=%u reason=\"%s\"", w->s->id, w->pid,
                       x->why ? x->why : "closed");
                free(x->out);
                free(x);
        }
        /* w itself is freed with the request (r->route_state) */
        pd_client_close(&w->cl);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

/* ---- the handshake ---- */

/* A PD_ROUTE_STREAM_BODY route only to be told when the request is over
 * (chunk_len NULL, or the completion after the upgrade handler returned):
 * its state lives in r->route_state until then, whether the 101 went out
 * or not. */
static enum MHD_Result get_pty_ws(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        if (!chunk_len) {
                pty_ws_free(r->route_state);
                r->route_state = NULL;
                return MHD_YES;
        }
        if (*chunk_len) {
                *chunk_len = 0;         /* a GET's body: ignored */
                return MHD_YES;
        }
        const char *ver = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Version");
        const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
        if (!pd_http_upgrade_asked(r->conn, "websocket"))
                return pd_reply_error(r, 426, "upgrade_required", "this is a WebSocket endpoint (Upgrade: websocket)");
        if (!ver || strcmp(ver, "13") || !key || strlen(key) != 24)
                return pd_reply_error(r, 400, "bad_request", "Sec-WebSocket-Version 13 and a Sec-WebSocket-Key needed");
        char *end;
        errno = 0;
        unsigned long pid = strtoul(r->params[1], &end, 10);
        if (errno || *end || !pid || pid > UINT32_MAX)
                return pd_reply_error(r, 400, "bad_request", "bad pid '%.32s'", r->params[1]);
        uint64_t from = 0;
        const char *f = pd_req_query(r, "from");
        if (f) {
                errno = 0;
                from = strtoull(f, &end, 10);
                if (errno || end == f || *end)
                        return pd_reply_error(r, 400, "bad_request", "bad from '%.32s'", f);
        }
        struct pd_srv_sandbox *s = pd_route_sandbox(r, &ret);
        if (!s)
                return ret;
        struct pty_ws *w = calloc(1, sizeof *w);
        if (!w) {
                pd_server_sandbox_put(r->srv, s);
                return MHD_NO;
        }
        r->route_state = w;
        w->srv = r->srv;
        w->s = s;
        w->pid = (uint32_t)pid;
        w->next = from;
        pd_client_init(&w->cl);
        struct pd_error err = { 0 };
        int k = pd_route_agent(s, &w->cl, &err);
        if (k < 0) {
                r->route_state = NULL;
                pty_ws_free(w);
                return pd_route_reply_agent_error(r, k, &err);
        }
        pd_route_watch(&w->cl, r->srv, r->conn, s);
        struct pd_proc_list l = { 0 };
        k = pd_client_list(&w->cl, &l, &err);
        const struct pd_proc *pr = k < 0 ? NULL : pd_proc_list_find(&l, w->pid);
        bool pty = pr && pr->pty, exited = pr && pr->exited;
        pd_proc_list_free(&l);
        if (k < 0) {
                r->route_state = NULL;
                pty_ws_free(w);
                return pd_route_reply_agent_error(r, k, &err);
        }
        if (!pr) {
                r->route_state = NULL;
                pty_ws_free(w);
                return pd_reply_error(r, 404, "not_found", "no process %lu", pid);
        }
        if (!pty) {
                r->route_state = NULL;
                pty_ws_free(w);
                return pd_reply_error(r, 400, "bad_request", "process %lu has no pty", pid);
        }
        /* an exited process still replays its output, then the exit */
        (void)exited;
        if ((k = pd_client_attach_queue(&w->cl, w->pid, PD_STREAM_PTY, from, true, &w->attach_id)) < 0 ||
            (k = pd_client_flush(&w->cl, 5000)) < 0) {
                r->route_state = NULL;
                pty_ws_free(w);
                return pd_reply_error(r, 503, "unavailable", "sandbox agent unreachable");
        }
        /* Sec-WebSocket-Accept: base64(SHA-1(key + GUID)) */
        char cat[64];
        unsigned char dig[SHA_DIGEST_LENGTH];
        char accept[32];
        snprintf(cat, sizeof cat, "%s%s", key, WS_GUID);
        SHA1((const unsigned char *)cat, strlen(cat), dig);
        EVP_EncodeBlock((unsigned char *)accept, dig, sizeof dig);
        struct MHD_Response *resp = MHD_create_response_for_upgrade(upgraded, w);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Upgrade", "websocket");
        MHD_add_response_header(resp, "Connection", "Upgrade");
        MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
        pd_audit(r->srv, s->id, r->key.id, "process.attach",
                 json_pack("{s:i, s:I, s:s}", "pid", (int)pid, "from", (json_int_t)from, "via", "pty_ws"));
        /* libmicrohttpd calls the upgrade handler in this connection's
         * thread once the 101 is out, then completes the request */
        return pd_reply_response(r, 101, resp);
}

const struct pd_route pd_routes_console_pty[] = {
        { "GET", "/api/v1/sandboxes/{id}/processes/{pid}/pty", get_pty_ws, PD_ROUTE_STREAM_BODY, 0 },
        { 0 },
};
