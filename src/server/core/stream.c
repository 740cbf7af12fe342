/* A streaming HTTP response fed by one agent connection (stream.h): the
 * route queues what it has, then libmicrohttpd's reader callback waits on
 * the agent (watching the sandbox, the client and the server) and hands
 * each frame to the route's on_frame, which appends the bytes to send.
 * Used by E2B's Connect streams and by the port relay. */
#include "server/core/stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/agent_io.h"

#define KEEPALIVE_DEFAULT_MS 30000
#define STREAM_BLOCK (64u << 10)

struct pd_agent_stream *pd_agent_stream_new(struct pd_req *r, struct pd_srv_sandbox *s)
{
        struct pd_agent_stream *st = calloc(1, sizeof *st);
        if (!st)
                return NULL;
        st->srv = r->srv;
        st->s = s;
        st->mc = r->conn;
        pd_client_init(&st->cl);
        st->idle_ms = KEEPALIVE_DEFAULT_MS;
        st->size = MHD_SIZE_UNKNOWN;
        return st;
}

void pd_agent_stream_free(struct pd_agent_stream *st)
{
        if (!st)
                return;
        if (st->on_free)
                st->on_free(st);
        pd_client_close(&st->cl);
        if (st->s)
                pd_server_sandbox_put(st->srv, st->s);
        free(st->buf);
        free(st->resp_headers);
        free(st);
}

int pd_agent_stream_put_header(struct pd_agent_stream *st, const char *line, size_t n)
{
        char *b = realloc(st->resp_headers, st->resp_headers_len + n + 2);
        if (!b)
                return -ENOMEM;
        st->resp_headers = b;
        memcpy(b + st->resp_headers_len, line, n);
        st->resp_headers_len += n;
        b[st->resp_headers_len++] = '\n';
        b[st->resp_headers_len] = '\0';
        return 0;
}

int pd_agent_stream_put(struct pd_agent_stream *st, const void *p, size_t n)
{
        if (st->pos == st->len)
                st->pos = st->len = 0;
        if (st->len + n > st->cap) {
                size_t c = st->cap ? st->cap : 4096;
                while (c < st->len + n)
                        c *= 2;
                char *b = realloc(st->buf, c);
                if (!b)
                        return -ENOMEM;
                st->buf = b;
                st->cap = c;
        }
        memcpy(st->buf + st->len, p, n);
        st->len += n;
        return 0;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct pd_agent_stream *st = cls;
        while (st->pos == st->len) {
                if (st->done)
                        return st->failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
                if (!pd_client_is_open(&st->cl)) {
                        st->done = true;
                        continue;
                }
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k = pd_client_next(&st->cl, &h, &p, st->idle_ms);
                if (k == -ETIMEDOUT) {
                        if (st->on_idle)
                                st->on_idle(st);
                        continue;
                }
                if (k == -ECONNABORTED)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (k < 0) {
                        /* the agent or the sandbox is gone: the caller's
                         * ending, else an incomplete body */
                        if (st->on_fail)
                                st->on_fail(st, k);
                        else
                                st->failed = true;
                        st->done = true;
                        continue;
                }
                st->on_frame(st, &h, p);
        }
        /* and what else is here already, so one chunk carries several
         * frames on a fast stream */
        while (!st->done && st->len - st->pos < max) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                if (pd_client_next_nowait(&st->cl, &h, &p) <= 0)
                        break;
                st->on_frame(st, &h, p);
        }
        size_t n = st->len - st->pos;
        if (n > max)
                n = max;
        memcpy(buf, st->buf + st->pos, n);
        st->pos += n;
        return (ssize_t)n;
}

static void stream_free_cb(void *cls)
{
        pd_agent_stream_free(cls);
}

enum MHD_Result pd_agent_stream_reply(struct pd_req *r, struct pd_agent_stream *st, unsigned status,
                                    const char *content_type)
{
        /* from here on the agent is read for this client: its hang-up, the
         * sandbox's deletion or the server's stop end the stream */
        pd_route_watch(&st->cl, st->srv, st->mc, st->s);
        struct MHD_Response *resp =
                MHD_create_response_from_callback(st->size, STREAM_BLOCK, stream_reader, st, stream_free_cb);
        if (!resp) {
                pd_agent_stream_free(st);
                return MHD_NO;
        }
        if (content_type) {
                MHD_add_response_header(resp, "Content-Type", content_type);
                MHD_add_response_header(resp, "Cache-Control", "no-store");
        }
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        for (char *line = st->resp_headers; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                char *colon = strchr(line, ':');
                if (colon) {
                        *colon = '\0';
                        const char *v = colon + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        MHD_add_response_header(resp, line, v);
                }
                if (!nl)
                        break;
                line = nl + 1;
        }
        return pd_reply_response(r, status, resp);
}
