#include "proto/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/util.h"

#define FILL_TAIL_MIN (64u << 10)

int pd_conn_init(struct pd_conn *c, int fd)
{
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->next_id = 1;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

void pd_conn_close(struct pd_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        free(c->rbuf);
        free(c->wbuf);
        memset(c, 0, sizeof *c);
        c->fd = -1;
}

uint32_t pd_conn_new_id(struct pd_conn *c)
{
        uint32_t id = c->next_id++;
        if (c->next_id == 0)
                c->next_id = 1;
        return id;
}

static int wreserve(struct pd_conn *c, size_t extra)
{
        if (c->wpos > 0 && c->wpos == c->wlen)
                c->wpos = c->wlen = 0;
        if (c->wlen + extra <= c->wcap)
                return 0;
        if (c->wpos > 0) {      /* compact before growing */
                memmove(c->wbuf, c->wbuf + c->wpos, c->wlen - c->wpos);
                c->wlen -= c->wpos;
                c->wpos = 0;
                if (c->wlen + extra <= c->wcap)
                        return 0;
        }
        size_t cap = c->wcap ? c->wcap : 4096;
        while (cap < c->wlen + extra)
                cap *= 2;
        uint8_t *b = realloc(c->wbuf, cap);
        if (!b)
                return -ENOMEM;
        c->wbuf = b;
        c->wcap = cap;
        return 0;
}

int pd_conn_queue(struct pd_conn *c, uint16_t type, uint16_t flags, uint32_t id, uint32_t aux,
                  const void *payload, size_t len)
{
        if (len > PD_FRAME_MAX)
                return -EMSGSIZE;
        int r = wreserve(c, PD_FRAME_HDR_LEN + len);
        if (r < 0)
                return r;
        struct pd_frame_hdr h = { .len = (uint32_t)len, .type = type, .flags = flags, .id = id, .aux = aux };
        pd_frame_hdr_encode(&h, c->wbuf + c->wlen);
        if (len)
                memcpy(c->wbuf + c->wlen + PD_FRAME_HDR_LEN, payload, len);
        c->wlen += PD_FRAME_HDR_LEN + len;
        return 0;
}

int pd_conn_queue_msg(struct pd_conn *c, uint16_t type, uint32_t id, const struct pd_msg *m)
{
        if (m->failed)
                return m->failed;
        return pd_conn_queue(c, type, 0, id, 0, m->buf, m->len);
}

size_t pd_conn_pending(const struct pd_conn *c)
{
        return c->wlen - c->wpos;
}

int pd_conn_flush(struct pd_conn *c)
{
        while (c->wpos < c->wlen) {
                ssize_t n = send(c->fd, c->wbuf + c->wpos, c->wlen - c->wpos, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return -errno;
                }
                c->wpos += (size_t)n;
        }
        c->wpos = c->wlen = 0;
        return 0;
}

int pd_conn_flush_all(struct pd_conn *c, int timeout_ms)
{
        uint64_t deadline = pd_now_ms() + (uint64_t)timeout_ms;
        for (;;) {
                int r = pd_conn_flush(c);
                if (r < 0 || pd_conn_pending(c) == 0)
                        return r;
                int64_t left = (int64_t)(deadline - pd_now_ms());
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = c->fd, .events = POLLOUT };
                if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
                        return -errno;
        }
}

int pd_conn_fill(struct pd_conn *c)
{
        /* Compact consumed bytes, then make room for one maximal frame.
         * While the tail still has room, receive there instead: moving a
         * partial frame of up to 1 MiB on every fill cost as much as the
         * receive itself on a fast stream. */
        if (c->rpos > 0 && (c->rpos == c->rlen || c->rcap - c->rlen < FILL_TAIL_MIN)) {
                memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
        }
        size_t want = PD_FRAME_HDR_LEN + PD_FRAME_MAX;
        if (c->rlen == c->rcap) {
                if (c->rcap >= want)
                        return 0;       /* full: the caller must consume a frame first */
                size_t cap = c->rcap ? c->rcap * 2 : 65536;
                if (cap > want)
                        cap = want;
                uint8_t *b = realloc(c->rbuf, cap);
                if (!b)
                        return -ENOMEM;
                c->rbuf = b;
                c->rcap = cap;
        }
        for (;;) {
                ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : -errno;
                }
                if (n == 0)
                        c->eof = true;
                c->rlen += (size_t)n;
                return 0;
        }
}

int pd_conn_next(struct pd_conn *c, struct pd_frame_hdr *h, const uint8_t **payload)
{
        size_t avail = c->rlen - c->rpos;
        if (avail < PD_FRAME_HDR_LEN)
                return 0;
        pd_frame_hdr_decode(c->rbuf + c->rpos, h);
        int r = pd_frame_hdr_check(h, PD_FRAME_MAX);
        if (r < 0)
                return r;
        if (avail < PD_FRAME_HDR_LEN + h->len) {
                /* make sure a full frame fits once compacted */
                if (c->rcap < PD_FRAME_HDR_LEN + h->len) {
                        uint8_t *b = realloc(c->rbuf, PD_FRAME_HDR_LEN + PD_FRAME_MAX);
                        if (!b)
                                return -ENOMEM;
                        c->rbuf = b;
                        c->rcap = PD_FRAME_HDR_LEN + PD_FRAME_MAX;
                }
                return 0;
        }
        *payload = c->rbuf + c->rpos + PD_FRAME_HDR_LEN;
        c->rpos += PD_FRAME_HDR_LEN + h->len;
        return 1;
}

int pd_conn_wait(struct pd_conn *c, struct pd_frame_hdr *h, const uint8_t **payload, int timeout_ms)
{
        uint64_t deadline = pd_now_ms() + (uint64_t)timeout_ms;
        for (;;) {
                int r = pd_conn_next(c, h, payload);
                if (r != 0)
                        return r;
                if (c->eof)
                        return -EPIPE;
                r = pd_conn_flush(c);
                if (r < 0)
                        return r;
                int64_t left = (int64_t)(deadline - pd_now_ms());
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = c->fd, .events = POLLIN | (pd_conn_pending(c) ? POLLOUT : 0) };
                if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
                        return -errno;
                if ((r = pd_conn_fill(c)) < 0)
                        return r;
        }
}

void pd_conn_error_text(const uint8_t *payload, size_t len, char *buf, size_t size)
{
        struct pd_attr a;
        if (!pd_msg_find(payload, len, PD_A_MESSAGE, &a) || !pd_attr_str(&a, buf, size))
                snprintf(buf, size, "(no message)");
}

int pd_conn_error_errno(uint32_t aux, int dflt)
{
        return aux > 0 && aux < 4096 ? (int)aux : dflt;
}

int pd_conn_queue_hello(struct pd_conn *c, const char *client)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_VERSION, PD_PROTO_VERSION);
        pd_msg_put_str(&m, PD_A_CLIENT, client);
        int r = pd_conn_queue_msg(c, PD_T_HELLO, 0, &m);
        pd_msg_free(&m);
        return r;
}

int pd_conn_hello_answer(const struct pd_frame_hdr *h, const uint8_t *p, char *agent, size_t agent_size,
                         struct pd_error *err)
{
        if (h->type == PD_T_ERROR) {
                char msg[256];
                pd_conn_error_text(p, h->len, msg, sizeof msg);
                return pd_error_setx(err, pd_conn_error_errno(h->aux, EPROTO), "agent refused the handshake: %s", msg);
        }
        if (h->type != PD_T_HELLO)
                return pd_error_setx(err, EPROTO, "agent answered HELLO with frame type %u", h->type);
        struct pd_attr a;
        if (agent && agent_size) {
                if (!pd_msg_find(p, h->len, PD_A_AGENT, &a) || !pd_attr_str(&a, agent, agent_size))
                        snprintf(agent, agent_size, "unknown");
        }
        return 0;
}

int pd_conn_hello(struct pd_conn *c, const char *client, char *agent, size_t agent_size, struct pd_error *err)
{
        int r = pd_conn_queue_hello(c, client);
        if (r < 0)
                return pd_error_set(err, -r, "queue HELLO");
        struct pd_frame_hdr h;
        const uint8_t *p;
        r = pd_conn_wait(c, &h, &p, 10000);
        if (r < 0)
                return pd_error_set(err, -r, "agent handshake");
        return pd_conn_hello_answer(&h, p, agent, agent_size, err);
}

int pd_conn_forward_stdin(struct pd_conn *c, int fd, uint32_t pid)
{
        char buf[65536];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0) {
                struct pd_msg m;
                pd_msg_init(&m);
                pd_msg_put_u32(&m, PD_A_PID, pid);
                pd_conn_queue_msg(c, PD_T_STDIN_CLOSE, pd_conn_new_id(c), &m);
                pd_msg_free(&m);
                return 1;
        }
        pd_conn_queue(c, PD_T_STDIN, 0, pid, 0, buf, (size_t)n);
        return 0;
}
