/* Host connections: framing, request dispatch, buffered output. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"

/* The kernel doubles it: 512 KiB in flight, two whole output frames. More
 * would not be lost either, but would stretch how far a writer runs ahead
 * of a FOLLOW reader that does not read (tests/integration/agent). */
#define AG_SNDBUF (256 << 10)

static void conn_process(struct agent *ag, struct ag_conn *c);
static void on_conn(struct agent *ag, struct ag_handler *hd, uint32_t events);

int ag_get_u32(const struct ag_req *r, uint16_t tag, uint32_t *v)
{
        struct pd_attr a;
        if (!pd_msg_find(r->payload, r->h->len, tag, &a))
                return 0;
        if (!pd_attr_u32(&a, v))
                return pd_error_setx(r->err, EINVAL, "attribute %u must be 4 bytes, got %" PRIu32,
                                     tag, a.len);
        return 1;
}

int ag_get_u64(const struct ag_req *r, uint16_t tag, uint64_t *v)
{
        struct pd_attr a;
        if (!pd_msg_find(r->payload, r->h->len, tag, &a))
                return 0;
        if (!pd_attr_u64(&a, v))
                return pd_error_setx(r->err, EINVAL, "attribute %u must be 8 bytes, got %" PRIu32,
                                     tag, a.len);
        return 1;
}

int ag_get_str(const struct ag_req *r, uint16_t tag, char *out, size_t size)
{
        struct pd_attr a;
        if (!pd_msg_find(r->payload, r->h->len, tag, &a))
                return 0;
        if (memchr(a.data, '\0', a.len))
                return pd_error_setx(r->err, EINVAL, "attribute %u contains a NUL byte", tag);
        if (!pd_attr_str(&a, out, size))
                return pd_error_setx(r->err, ENAMETOOLONG, "attribute %u too long (%" PRIu32 " bytes)",
                                     tag, a.len);
        return 1;
}

int ag_missing(struct pd_error *err, const char *what)
{
        return pd_error_setx(err, EINVAL, "missing attribute %s", what);
}

void ag_conn_accept(struct agent *ag)
{
        for (;;) {
                int fd = accept4(ag->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                if (ag->nconns >= AG_MAX_CONNS) {
                        close(fd);
                        continue;
                }
                /* room for whole output frames in the kernel: fewer
                 * partial writes and wake-ups on a fast stream (charged
                 * only while bytes are queued; capped by net.core.wmem_max) */
                int sndbuf = AG_SNDBUF;
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
                struct ag_conn *c = calloc(1, sizeof *c);
                if (!c) {
                        close(fd);
                        continue;
                }
                if (ag_ev_add(ag, &c->h, fd, EPOLLIN, on_conn) < 0) {
                        close(fd);
                        free(c);
                        continue;
                }
                c->want_in = true;
                c->next = ag->conns;
                ag->conns = c;
                ag->nconns++;
        }
}

void ag_conn_kill(struct agent *ag, struct ag_conn *c)
{
        if (c->dead)
                return;
        c->dead = true;
        ag_ev_close(ag, &c->h);
        /* release what other objects point at now, memory after the batch */
        ag_attach_conn_free(ag, c);
        ag_fileio_conn_free(ag, c);
        ag_watch_conn_free(ag, c);
        ag_tunnel_conn_free(ag, c);
}

void ag_conns_reap(struct agent *ag)
{
        for (struct ag_conn **pp = &ag->conns; *pp;) {
                struct ag_conn *c = *pp;
                if (!c->dead) {
                        pp = &c->next;
                        continue;
                }
                *pp = c->next;
                ag->nconns--;
                ag_buf_free(&c->in);
                ag_buf_free(&c->out);
                free(c->exit_sent);
                free(c);
        }
}

int ag_conn_send2(struct agent *ag, struct ag_conn *c, uint16_t type, uint16_t flags,
                  uint32_t id, uint32_t aux, const void *p1, size_t n1, const void *p2, size_t n2)
{
        if (c->dead)
                return -EPIPE;
        struct pd_frame_hdr h = { .len = (uint32_t)(n1 + n2), .type = type, .flags = flags,
                                  .id = id, .aux = aux };
        uint8_t hb[PD_FRAME_HDR_LEN];
        pd_frame_hdr_encode(&h, hb);
        c->produced++;
        if (ag_buf_append(&c->out, hb, sizeof hb) < 0 || ag_buf_append(&c->out, p1, n1) < 0 ||
            ag_buf_append(&c->out, p2, n2) < 0) {
                /* a torn frame would desynchronise the stream: give up on it */
                ag_conn_kill(ag, c);
                return -ENOMEM;
        }
        return 0;
}

int ag_conn_send_iov(struct agent *ag, struct ag_conn *c, uint16_t type, uint32_t id, uint32_t aux,
                     const struct iovec *parts, size_t nparts)
{
        if (c->dead)
                return -EPIPE;
        if (nparts > 3)
                return -EINVAL;
        size_t len = 0;
        for (size_t i = 0; i < nparts; i++)
                len += parts[i].iov_len;
        struct pd_frame_hdr h = { .len = (uint32_t)len, .type = type, .id = id, .aux = aux };
        uint8_t hb[PD_FRAME_HDR_LEN];
        pd_frame_hdr_encode(&h, hb);
        struct iovec iov[4] = { { .iov_base = hb, .iov_len = sizeof hb } };
        memcpy(&iov[1], parts, nparts * sizeof *parts);
        size_t niov = 1 + nparts, sent = 0;
        c->produced++;
        if (!ag_buf_used(&c->out)) {
                struct msghdr mh = { .msg_iov = iov, .msg_iovlen = niov };
                ssize_t n;
                do
                        n = sendmsg(c->h.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
                while (n < 0 && errno == EINTR);
                if (n < 0 && errno != EAGAIN) {
                        ag_conn_kill(ag, c);
                        return -EPIPE;
                }
                sent = n > 0 ? (size_t)n : 0;
        }
        /* the rest of the frame is queued whole: a torn frame would
         * desynchronise the stream */
        for (size_t i = 0; i < niov; i++) {
                size_t l = iov[i].iov_len;
                if (sent >= l) {
                        sent -= l;
                        continue;
                }
                if (ag_buf_append(&c->out, (const uint8_t *)iov[i].iov_base + sent, l - sent) < 0) {
                        ag_conn_kill(ag, c);
                        return -ENOMEM;
                }
                sent = 0;
        }
        return 0;
}

int ag_conn_send(struct agent *ag, struct ag_conn *c, uint16_t type, uint16_t flags,
                 uint32_t id, uint32_t aux, const void *payload, size_t len)
{
        return ag_conn_send2(ag, c, type, flags, id, aux, payload, len, NULL, 0);
}

void ag_conn_send_error(struct agent *ag, struct ag_conn *c, uint32_t id, const struct pd_error *err)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_str(&m, PD_A_MESSAGE, err->msg);
        ag_conn_send(ag, c, PD_T_ERROR, 0, id, (uint32_t)(err->code > 0 ? err->code : EIO),
                     m.buf, m.failed ? 0 : m.len);
        pd_msg_free(&m);
}

/* Write out what the socket takes. 0, or -1 when the connection died. */
static int conn_flush(struct agent *ag, struct ag_conn *c)
{
        while (ag_buf_used(&c->out)) {
                ssize_t n = send(c->h.fd, c->out.data + c->out.head, ag_buf_used(&c->out),
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        ag_conn_kill(ag, c);
                        return -1;
                }
                ag_buf_consume(&c->out, (size_t)n);
        }
        return 0;
}

void ag_conn_pump(struct agent *ag, struct ag_conn *c)
{
        if (c->dead)
                return;
        bool more = false;
        for (int round = 0;; round++) {
                size_t before = ag_buf_used(&c->out);
                uint64_t made = c->produced;    /* frames sent straight to the socket leave out empty */
                bool tried = false;
                if (!c->closing && before < AG_OUT_LOW) {
                        ag_attach_generate(ag, c);
                        ag_fread_generate(ag, c);
                        tried = true;
                }
                bool produced = ag_buf_used(&c->out) > before || c->produced != made;
                if (conn_flush(ag, c) < 0)
                        return;
                if (ag_buf_used(&c->out))
                        break;          /* socket full: EPOLLOUT brings us back */
                if (tried && !produced)
                        break;          /* generators have nothing more now */
                if (round == 64) {
                        more = true;    /* let other fds run; EPOLLOUT brings us back */
                        break;
                }
        }
        if (c->closing && !ag_buf_used(&c->out)) {
                ag_conn_kill(ag, c);
                return;
        }
        if (ag_buf_used(&c->out) < AG_OUT_HIGH) {
                ag_watch_resume(ag, c);
                ag_tunnel_resume(ag, c);
        }
        if (c->dead)
                return;
        uint32_t ev = 0;
        if (c->want_in && !c->closing && ag_buf_used(&c->out) < AG_OUT_HIGH)
                ev |= EPOLLIN;
        if (ag_buf_used(&c->out) || more)
                ev |= EPOLLOUT;
        ag_ev_mod(ag, &c->h, ev);
}

/* Close after the queued frames (an ERROR) are written. */
static void conn_close_after(struct ag_conn *c)
{
        c->closing = true;
        c->want_in = false;
}

static int on_hello(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t v = 0;
        int k = ag_get_u32(r, PD_A_VERSION, &v);
        if (k < 0)
                return k;
        if (k == 0)
                return ag_missing(r->err, "VERSION");
        if (v != PD_PROTO_VERSION) {
                pd_error_setx(r->err, EPROTONOSUPPORT,
                              "protocol version %" PRIu32 " not supported: agent speaks version %u",
                              v, PD_PROTO_VERSION);
                ag_conn_send_error(ag, c, r->h->id, r->err);
                conn_close_after(c);
                return AG_DONE;
        }
        c->hello = true;
        pd_msg_put_u32(r->reply, PD_A_VERSION, PD_PROTO_VERSION);
        pd_msg_put_str(r->reply, PD_A_AGENT, "paddock-agent " PD_VERSION);
        ag_conn_send(ag, c, PD_T_HELLO, 0, r->h->id, 0, r->reply->buf, r->reply->len);
        return AG_DONE;
}

static int on_ping(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        pd_msg_put_u64(r->reply, PD_A_TIME_NS, pd_now_ns());
        return 0;
}

static int on_shutdown(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        ag_proc_kill_all(ag);
        ag_conn_send(ag, c, PD_T_REPLY, 0, r->h->id, 0, NULL, 0);
        /* flush the reply (blocking, bounded by what is queued) and leave */
        struct ag_conn *x = c;
        while (ag_buf_used(&x->out)) {
                ssize_t n = send(x->h.fd, x->out.data + x->out.head, ag_buf_used(&x->out),
                                 MSG_NOSIGNAL);
                if (n < 0 && errno == EAGAIN) {
                        struct epoll_event e;
                        int ep = epoll_create1(EPOLL_CLOEXEC);
                        struct epoll_event add = { .events = EPOLLOUT };
                        epoll_ctl(ep, EPOLL_CTL_ADD, x->h.fd, &add);
                        epoll_wait(ep, &e, 1, 1000);
                        close(ep);
                        continue;
                }
                if (n <= 0)
                        break;
                ag_buf_consume(&x->out, (size_t)n);
        }
        ag->quit = true;
        return AG_DONE;
}

typedef int (*req_fn)(struct agent *, struct ag_conn *, struct ag_req *);

static req_fn handler_of(uint16_t type)
{
        switch (type) {
        case PD_T_HELLO: return on_hello;
        case PD_T_PING: return on_ping;
        case PD_T_SHUTDOWN: return on_shutdown;
        case PD_T_LIST: return ag_req_list;
        case PD_T_SPAWN: return ag_req_spawn;
        case PD_T_SIGNAL: return ag_req_signal;
        case PD_T_STDIN_CLOSE: return ag_req_stdin_close;
        case PD_T_RESIZE: return ag_req_resize;
        case PD_T_ATTACH: return ag_req_attach;
        case PD_T_DETACH: return ag_req_detach;
        case PD_T_FILE_STAT: return ag_req_file_stat;
        case PD_T_FILE_LIST: return ag_req_file_list;
        case PD_T_FILE_MKDIR: return ag_req_file_mkdir;
        case PD_T_FILE_MOVE: return ag_req_file_move;
        case PD_T_FILE_REMOVE: return ag_req_file_remove;
        case PD_T_FILE_READ: return ag_req_file_read;
        case PD_T_FILE_WRITE: return ag_req_file_write;
        case PD_T_WATCH: return ag_req_watch;
        case PD_T_UNWATCH: return ag_req_unwatch;
        case PD_T_TUNNEL_OPEN: return ag_req_tunnel_open;
        default: return NULL;
        }
}

/* One complete frame. Returns AG_BLOCKED to keep it for later. */
static int conn_frame(struct agent *ag, struct ag_conn *c, const struct pd_frame_hdr *h,
                      const uint8_t *payload)
{
        struct pd_error err = { 0 };
        if (!c->hello && h->type != PD_T_HELLO) {
                const char *tn = pd_frame_type_name(h->type);
                pd_error_setx(&err, EPROTO, "%s before HELLO", tn ? tn : "frame");
                ag_conn_send_error(ag, c, h->id, &err);
                conn_close_after(c);
                return 0;
        }
        switch (h->type) {
        case PD_T_STDIN: {
                struct ag_req r = { .h = h, .payload = payload, .err = &err };
                int k = ag_req_stdin(ag, c, &r);
                if (k == AG_BLOCKED)
                        return k;
                return 0;   /* data frames get no reply; errors are dropped */
        }
        case PD_T_DATA: {
                if (ag_fwrite_data(ag, c, h, payload))
                        return 0;
                int k = ag_tunnel_data(ag, c, h, payload);
                return k == AG_BLOCKED ? k : 0;
        }
        case PD_T_TUNNEL_CLOSE:
                ag_tunnel_close_req(ag, c, h);
                return 0;
        }
        /* control payloads must be well-formed attribute lists */
        struct pd_msg_iter it;
        struct pd_attr a;
        pd_msg_iter_init(&it, payload, h->len);
        while (pd_msg_next(&it, &a))
                ;
        req_fn fn = handler_of(h->type);
        if (it.error) {
                pd_error_setx(&err, EPROTO, "malformed attribute list");
        } else if (!fn) {
                const char *tn = pd_frame_type_name(h->type);
                if (tn)
                        pd_error_setx(&err, EINVAL, "%s is not a request", tn);
                else
                        pd_error_setx(&err, EINVAL, "unknown frame type %u", h->type);
        } else {
                struct pd_msg reply;
                pd_msg_init(&reply);
                struct ag_req r = { .h = h, .payload = payload, .reply = &reply, .err = &err };
                int k = fn(ag, c, &r);
                if (k == AG_BLOCKED) {
                        pd_msg_free(&reply);
                        return k;
                }
                if (k == 0 && reply.failed)
                        k = pd_error_setx(&err, EMSGSIZE, "reply too large");
                if (k == 0)
                        ag_conn_send(ag, c, PD_T_REPLY, 0, h->id, 0, reply.buf, reply.len);
                pd_msg_free(&reply);
                if (k >= 0)
                        return 0;
        }
        if (!err.code)
                pd_error_setx(&err, EIO, "request failed");
        ag_conn_send_error(ag, c, h->id, &err);
        return 0;
}

/* Handle every complete frame in c->in. */
static void conn_process(struct agent *ag, struct ag_conn *c)
{
        while (!c->dead && !c->closing && !ag->quit) {
                size_t avail = ag_buf_used(&c->in);
                if (avail < PD_FRAME_HDR_LEN)
                        break;
                const uint8_t *p = c->in.data + c->in.head;
                struct pd_frame_hdr h;
                pd_frame_hdr_decode(p, &h);
                if (avail < PD_FRAME_HDR_LEN + h.len)
                        break;
                int k = conn_frame(ag, c, &h, p + PD_FRAME_HDR_LEN);
                if (k == AG_BLOCKED) {
                        c->want_in = false;
                        break;
                }
                ag_buf_consume(&c->in, PD_FRAME_HDR_LEN + h.len);
                c->want_in = true;
        }
}

/* Check every complete header in c->in against the cap before its payload
 * is buffered further. -1 (connection killed) on a violation. */
static int conn_check(struct agent *ag, struct ag_conn *c)
{
        size_t off = c->in.head;
        while (c->in.len - off >= PD_FRAME_HDR_LEN) {
                struct pd_frame_hdr h;
                pd_frame_hdr_decode(c->in.data + off, &h);
                uint32_t cap = c->hello ? PD_FRAME_MAX : PD_FRAME_PREHELLO_MAX;
                if (h.len > cap) {
                        ag_conn_kill(ag, c);
                        return -1;
                }
                if (c->in.len - off - PD_FRAME_HDR_LEN < h.len)
                        break;
                off += PD_FRAME_HDR_LEN + h.len;
        }
        return 0;
}

static int conn_reserve(struct ag_conn *c, size_t chunk)
{
        size_t used = ag_buf_used(&c->in);
        if (c->in.head && c->in.len + chunk > c->in.cap) {
                memmove(c->in.data, c->in.data + c->in.head, used);
                c->in.len = used;
                c->in.head = 0;
        }
        if (c->in.len + chunk <= c->in.cap)
                return 0;
        size_t cap = c->in.cap ? c->in.cap : 4096;
        while (cap < c->in.len + chunk)
                cap *= 2;
        uint8_t *d = realloc(c->in.data, cap);
        if (!d)
                return -ENOMEM;
        c->in.data = d;
        c->in.cap = cap;
        return 0;
}

/* Read and handle frames. Before HELLO, read exactly up to the end of the
 * current frame; after it, a bounded read-ahead. At most 16 reads per call
 * so other fds get their turn; the rest waits in the socket, and EPOLLIN
 * (level-triggered) brings us back for it. Every read is followed by
 * handling what it completed: frames left in c->in after the last read
 * would wait for an EPOLLIN that never comes once the peer has sent
 * everything (a STDIN_CLOSE stuck there left `paddock run -- sha256sum`
 * waiting for EOF for good). */
static void conn_read(struct agent *ag, struct ag_conn *c)
{
        for (int rounds = 0;; rounds++) {
                if (conn_check(ag, c) < 0)
                        return;
                conn_process(ag, c);
                if (c->dead || !c->want_in || c->closing || ag->quit || rounds == 16)
                        return;
                size_t used = ag_buf_used(&c->in), want;
                if (used < PD_FRAME_HDR_LEN) {
                        want = PD_FRAME_HDR_LEN - used;
                } else {
                        struct pd_frame_hdr h;
                        pd_frame_hdr_decode(c->in.data + c->in.head, &h);
                        want = PD_FRAME_HDR_LEN + h.len - used;
                }
                size_t chunk = c->hello && want < 65536 ? 65536 : want;
                if (conn_reserve(c, chunk) < 0) {
                        ag_conn_kill(ag, c);
                        return;
                }
                ssize_t n = recv(c->h.fd, c->in.data + c->in.len, chunk, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                ag_conn_kill(ag, c);
                        return;
                }
                if (n == 0) {
                        ag_conn_kill(ag, c);
                        return;
                }
                c->in.len += (size_t)n;
        }
}

static void on_conn(struct agent *ag, struct ag_handler *hd, uint32_t events)
{
        struct ag_conn *c = ag_container_of(hd, struct ag_conn, h);
        if (events & (EPOLLERR | EPOLLHUP)) {
                if (!(events & EPOLLIN)) {
                        ag_conn_kill(ag, c);
                        return;
                }
        }
        if (events & EPOLLIN)
                conn_read(ag, c);
        ag_conn_pump(ag, c);
}

void ag_conns_kick(struct agent *ag)
{
        for (struct ag_conn *c = ag->conns; c; c = c->next) {
                if (c->dead || c->want_in || c->closing)
                        continue;
                conn_process(ag, c);
                if (c->want_in)
                        conn_read(ag, c);
                ag_conn_pump(ag, c);
        }
}
