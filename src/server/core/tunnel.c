/* HTTP through an agent tunnel (tunnel.h): TUNNEL_OPEN to a port inside
 * the sandbox, then one request relayed as sent and its answer streamed
 * back as it comes. Used by the port relay (api/ports.c) and E2B's code
 * interpreter (e2b/e2b_ci.c). */
#include "server/core/tunnel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto/proto.h"
#include "server/core/agent_io.h"
#include "lib/util.h"

#define CALL_TIMEOUT_MS 30000
#define RESP_HDR_MAX (16u << 10)

/* Body bytes for the client. With the answer's Content-Length known
 * (st->size), the body ends with its last byte, not when the service
 * closes the connection, which saves the client a wait for that close;
 * what comes past it is dropped. */
static void relay_body(struct pd_agent_stream *st, const void *p, size_t n)
{
        if (st->size != MHD_SIZE_UNKNOWN) {
                if (n > st->size - st->sent)
                        n = (size_t)(st->size - st->sent);
                st->sent += n;
                if (st->sent == st->size)
                        st->done = true;
        }
        if (n && pd_agent_stream_put(st, p, n) < 0) {
                st->done = true;
                st->failed = true;
        }
}

static void relay_frame(struct pd_agent_stream *st, const struct pd_frame_hdr *h, const uint8_t *p)
{
        if (h->id != st->id || st->done)
                return;
        if (h->type == PD_T_DATA) {
                relay_body(st, p, h->len);
        } else if (h->type == PD_T_TUNNEL_CLOSE || h->type == PD_T_ERROR) {
                st->done = true;
                /* short of its Content-Length: the client must not take it
                 * for the whole body */
                if (st->size != MHD_SIZE_UNKNOWN && st->sent < st->size)
                        st->failed = true;
        }
}

/* Does the answer leave the service's connection open? HTTP/1.1 unless
 * it says "Connection: close"; HTTP/1.0 only with "Connection: keep-alive". */
static bool keep_alive(const char *hb, const char *eoh)
{
        bool v11 = !strncmp(hb, "HTTP/1.1 ", 9), close = false, ka = false;
        for (const char *line = strstr(hb, "\r\n"); line && line < eoh; line = strstr(line + 2, "\r\n")) {
                const char *l = line + 2;
                if (strncasecmp(l, "Connection:", 11))
                        continue;
                size_t n = strcspn(l, "\r\n");
                for (size_t i = 11; i + 5 <= n; i++) {
                        if (!strncasecmp(l + i, "close", 5))
                                close = true;
                        if (i + 10 <= n && !strncasecmp(l + i, "keep-alive", 10))
                                ka = true;
                }
        }
        return !close && (v11 || ka);
}

/* The answer's body length, when it says so and that is all there is to
 * it: one Content-Length, no Transfer-Encoding, not to HEAD; 0 for 1xx,
 * 204 and 304, which have no body. MHD_SIZE_UNKNOWN otherwise: the body
 * then ends when the service closes (HTTP/1.0). */
static uint64_t body_length(const char *method, unsigned status, const char *hb, const char *eoh)
{
        uint64_t len = MHD_SIZE_UNKNOWN;
        if (status < 200 || status == 204 || status == 304)
                return 0;               /* no body, whatever it says */
        if (!strcmp(method, "HEAD"))
                return MHD_SIZE_UNKNOWN;        /* its length is that of a GET's body */
        for (const char *line = strstr(hb, "\r\n"); line && line < eoh; line = strstr(line + 2, "\r\n")) {
                const char *l = line + 2;
                if (!strncasecmp(l, "Transfer-Encoding:", 18))
                        return MHD_SIZE_UNKNOWN;
                if (strncasecmp(l, "Content-Length:", 15))
                        continue;
                if (len != MHD_SIZE_UNKNOWN)
                        return MHD_SIZE_UNKNOWN;        /* twice: trust neither */
                const char *v = l + 15;
                while (*v == ' ' || *v == '\t')
                        v++;
                size_t dl = strspn(v, "0123456789");
                const char *e = v + dl;
                while (*e == ' ' || *e == '\t')
                        e++;
                if (dl == 0 || dl > 15 || (*e != '\r'))
                        return MHD_SIZE_UNKNOWN;
                len = strtoull(v, NULL, 10);
        }
        return len;
}

static void relay_idle(struct pd_agent_stream *st)
{
        /* a long computation: keep waiting */
}

static void relay_fail(struct pd_agent_stream *st, int k)
{
        st->done = true;
}

/* The relay's own failures (the service never answered): 502 as JSON. */
static enum MHD_Result relay_error(struct pd_req *r, unsigned status, const char *msg)
{
        return pd_reply_json(r, status, json_pack("{s:s, s:s}", "error", msg, "message", msg));
}

static bool hop_header(const char *line, size_t n)
{
        static const char *const hop[] = { "Connection:", "Keep-Alive:", "Transfer-Encoding:", "Content-Length:",
                                           "Proxy-Connection:", "Upgrade:", "Date:", "Server:" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(hop); i++) {
                size_t l = strlen(hop[i]);
                if (n >= l && !strncasecmp(line, hop[i], l))
                        return true;
        }
        return false;
}

static enum MHD_Result relay(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, const char *head,
                             size_t head_len, const char *body, size_t body_len, bool all_headers, const char *what,
                             bool *closed_unanswered)
{
        char msg[160];
        int k = pd_client_tunnel_send(&st->cl, tid, head, head_len);
        if (k >= 0)
                k = pd_client_tunnel_send(&st->cl, tid, body, body_len);
        if (k >= 0)
                k = pd_client_flush(&st->cl, CALL_TIMEOUT_MS);
        pd_route_watch(&st->cl, r->srv, r->conn, st->s);
        /* the response head */
        char *hb = NULL;
        size_t hlen = 0;
        char *eoh = NULL;
        while (k >= 0 && !eoh) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                k = pd_client_next(&st->cl, &h, &p, 120000);
                if (k < 0)
                        break;
                if (h.id != tid)
                        continue;
                if (h.type == PD_T_TUNNEL_CLOSE || h.type == PD_T_ERROR) {
                        k = -ECONNRESET;
                        break;
                }
                if (h.type != PD_T_DATA || !h.len)
                        continue;
                if (hlen + h.len > RESP_HDR_MAX + PD_DATA_CHUNK) {
                        k = -EMSGSIZE;
                        break;
                }
                char *nb = realloc(hb, hlen + h.len + 1);
                if (!nb) {
                        k = -ENOMEM;
                        break;
                }
                hb = nb;
                memcpy(hb + hlen, p, h.len);
                hlen += h.len;
                hb[hlen] = '\0';
                eoh = strstr(hb, "\r\n\r\n");
        }
        if (closed_unanswered && hlen == 0 && k < 0 && k != -ECONNABORTED && k != -ESHUTDOWN) {
                /* not a byte of an answer: the caller may try again */
                free(hb);
                *closed_unanswered = true;
                return MHD_YES;
        }
        if (k < 0 || !eoh) {
                free(hb);
                pd_agent_stream_free(st);
                snprintf(msg, sizeof msg, "%s closed the connection", what);
                return relay_error(r, 502, msg);
        }
        unsigned status = 502;
        if (!strncmp(hb, "HTTP/1.", 7) && strlen(hb) > 12)
                status = (unsigned)strtoul(hb + 9, NULL, 10);
        if (status < 100 || status > 599)
                status = 502;
        char rct[256] = "application/json";
        for (char *line = strstr(hb, "\r\n"); line && line < eoh; line = strstr(line + 2, "\r\n")) {
                size_t ll = strcspn(line + 2, "\r\n");
                if (all_headers && ll && !hop_header(line + 2, ll)) {
                        if (pd_agent_stream_put_header(st, line + 2, ll) < 0) {
                                free(hb);
                                pd_agent_stream_free(st);
                                return MHD_NO;
                        }
                        continue;
                }
                if (!strncasecmp(line + 2, "Content-Type:", 13)) {
                        const char *v = line + 15;
                        while (*v == ' ')
                                v++;
                        size_t vl = strcspn(v, "\r\n");
                        if (vl < sizeof rct) {
                                memcpy(rct, v, vl);
                                rct[vl] = '\0';
                        }
                }
        }
        size_t body_off = (size_t)(eoh + 4 - hb);
        st->size = body_length(r->method, status, hb, eoh);
        st->keep = keep_alive(hb, eoh);
        st->sent = 0;
        if (st->size == 0)
                st->done = true;
        if (hlen > body_off)
                relay_body(st, hb + body_off, hlen - body_off);
        free(hb);
        st->on_frame = relay_frame;
        st->on_idle = relay_idle;
        st->on_fail = relay_fail;
        st->idle_ms = 30000;
        return pd_agent_stream_reply(r, st, status, all_headers ? NULL : rct);
}

enum MHD_Result pd_tunnel_http_relay(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, const char *head,
                                     size_t head_len, const char *body, size_t body_len, bool all_headers,
                                     const char *what)
{
        return relay(r, st, tid, head, head_len, body, body_len, all_headers, what, NULL);
}

enum MHD_Result pd_tunnel_http_relay_kept(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid,
                                          const char *head, size_t head_len, const char *body, size_t body_len,
                                          bool all_headers, const char *what, bool *closed_unanswered)
{
        *closed_unanswered = false;
        return relay(r, st, tid, head, head_len, body, body_len, all_headers, what, closed_unanswered);
}
