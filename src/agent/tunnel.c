/* TUNNEL: a TCP connection to 127.0.0.1:PORT inside the sandbox carried as
 * DATA frames. Each direction is bounded: we stop reading TCP while the
 * host connection is backed up, and stop reading the host connection while
 * the TCP side does not drain. TUNNEL_CLOSE is a half close in either
 * direction; the tunnel ends once both halves are closed. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"

struct ag_tunnel {
        struct ag_handler h;
        struct ag_tunnel *next;
        struct ag_conn *c;
        uint32_t id, port;
        bool connected, host_closed, tcp_eof, wr_shut;
        struct ag_buf wbuf;
};

static uint8_t tbuf[64u << 10];

static void tunnel_free(struct agent *ag, struct ag_tunnel *t)
{
        for (struct ag_tunnel **pp = &t->c->tunnels; *pp; pp = &(*pp)->next)
                if (*pp == t) {
                        *pp = t->next;
                        break;
                }
        ag_ev_close(ag, &t->h);
        ag_buf_free(&t->wbuf);
        ag_defer_free(ag, t);
}

static void tunnel_events(struct agent *ag, struct ag_tunnel *t)
{
        uint32_t ev = 0;
        if (!t->connected) {
                ev = EPOLLOUT;
        } else {
                if (!t->tcp_eof && ag_buf_used(&t->c->out) < AG_OUT_HIGH)
                        ev |= EPOLLIN;
                if (ag_buf_used(&t->wbuf))
                        ev |= EPOLLOUT;
        }
        ag_ev_mod(ag, &t->h, ev);
}

/* Write buffered host bytes to TCP. -1 when the tunnel was freed. */
static int tunnel_flush(struct agent *ag, struct ag_tunnel *t)
{
        while (ag_buf_used(&t->wbuf)) {
                ssize_t n = send(t->h.fd, t->wbuf.data + t->wbuf.head, ag_buf_used(&t->wbuf),
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0) {
                        ag_buf_consume(&t->wbuf, ag_buf_used(&t->wbuf));
                        if (!t->tcp_eof)
                                ag_conn_send(ag, t->c, PD_T_TUNNEL_CLOSE, 0, t->id, 0, NULL, 0);
                        tunnel_free(ag, t);
                        return -1;
                }
                ag_buf_consume(&t->wbuf, (size_t)n);
        }
        if (!ag_buf_used(&t->wbuf) && t->host_closed && !t->wr_shut) {
                shutdown(t->h.fd, SHUT_WR);
                t->wr_shut = true;
        }
        if (t->wr_shut && t->tcp_eof) {
                tunnel_free(ag, t);
                return -1;
        }
        return 0;
}

static void on_tunnel(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        struct ag_tunnel *t = ag_container_of(h, struct ag_tunnel, h);
        struct ag_conn *c = t->c;
        if (!t->connected) {
                int e = 0;
                socklen_t l = sizeof e;
                getsockopt(t->h.fd, SOL_SOCKET, SO_ERROR, &e, &l);
                if (e == 0 && (events & (EPOLLERR | EPOLLHUP)))
                        e = ECONNREFUSED;
                if (e) {
                        struct pd_error err;
                        pd_error_set(&err, e, "connect to 127.0.0.1:%" PRIu32, t->port);
                        ag_conn_send_error(ag, c, t->id, &err);
                        tunnel_free(ag, t);
                        ag_conn_pump(ag, c);
                        return;
                }
                t->connected = true;
                ag_conn_send(ag, c, PD_T_REPLY, 0, t->id, 0, NULL, 0);
        }
        if (events & EPOLLOUT) {
                if (tunnel_flush(ag, t) < 0) {
                        ag_conns_kick(ag);
                        ag_conn_pump(ag, c);
                        return;
                }
                ag_conns_kick(ag);
        }
        if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !t->tcp_eof) {
                for (int i = 0; i < 4 && ag_buf_used(&c->out) < AG_OUT_HIGH; i++) {
                        ssize_t n = recv(t->h.fd, tbuf, sizeof tbuf, MSG_DONTWAIT);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN)
                                break;
                        if (n <= 0) {
                                t->tcp_eof = true;
                                ag_conn_send(ag, c, PD_T_TUNNEL_CLOSE, 0, t->id, 0, NULL, 0);
                                if (n < 0 || t->wr_shut) {
                                        tunnel_free(ag, t);
                                        ag_conn_pump(ag, c);
                                        return;
                                }
                                break;
                        }
                        ag_conn_send(ag, c, PD_T_DATA, 0, t->id, 0, tbuf, (size_t)n);
                        /* ACK at once: on a connection the server keeps for
                         * the next request, a service that writes an answer's
                         * head and body apart (Nagle) would otherwise wait
                         * for our delayed ACK (40 ms) before the body */
                        int one = 1;
                        setsockopt(t->h.fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
                }
        }
        tunnel_events(ag, t);
        ag_conn_pump(ag, c);
}

int ag_req_tunnel_open(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t port;
        int k = ag_get_u32(r, PD_A_PORT, &port);
        if (k <= 0)
                return k < 0 ? k : ag_missing(r->err, "PORT");
        if (port == 0 || port > 65535)
                return pd_error_setx(r->err, EINVAL, "bad port %" PRIu32, port);
        for (struct ag_tunnel *t = c->tunnels; t; t = t->next)
                if (t->id == r->h->id)
                        return pd_error_setx(r->err, EBUSY, "tunnel id %u already in use", r->h->id);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(r->err, errno, "socket");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);     /* requests go whole */
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
                int e = errno;
                close(fd);
                return pd_error_set(r->err, e, "connect to 127.0.0.1:%" PRIu32, port);
        }
        struct ag_tunnel *t = calloc(1, sizeof *t);
        if (!t) {
                close(fd);
                return pd_error_set(r->err, ENOMEM, "tunnel");
        }
        t->c = c;
        t->id = r->h->id;
        t->port = port;
        if (ag_ev_add(ag, &t->h, fd, EPOLLOUT, on_tunnel) < 0) {
                close(fd);
                free(t);
                return pd_error_set(r->err, errno, "epoll");
        }
        t->next = c->tunnels;
        c->tunnels = t;
        return AG_DONE;         /* REPLY or ERROR once the connect completes */
}

static struct ag_tunnel *find(struct ag_conn *c, uint32_t id)
{
        for (struct ag_tunnel *t = c->tunnels; t; t = t->next)
                if (t->id == id)
                        return t;
        return NULL;
}

int ag_tunnel_data(struct agent *ag, struct ag_conn *c, const struct pd_frame_hdr *h,
                   const uint8_t *payload)
{
        struct ag_tunnel *t = find(c, h->id);
        if (!t || t->host_closed)
                return 0;
        if (ag_buf_used(&t->wbuf) >= AG_TUNNEL_BUF)
                return AG_BLOCKED;
        if (ag_buf_append(&t->wbuf, payload, h->len) < 0)
                return AG_BLOCKED;
        if (t->connected && tunnel_flush(ag, t) < 0)
                return 1;
        tunnel_events(ag, t);
        return 1;
}

int ag_tunnel_close_req(struct agent *ag, struct ag_conn *c, const struct pd_frame_hdr *h)
{
        struct ag_tunnel *t = find(c, h->id);
        if (!t)
                return 0;
        t->host_closed = true;
        if (!t->connected) {
                tunnel_free(ag, t);
                return 0;
        }
        if (tunnel_flush(ag, t) == 0)
                tunnel_events(ag, t);
        return 0;
}

void ag_tunnel_resume(struct agent *ag, struct ag_conn *c)
{
        for (struct ag_tunnel *t = c->tunnels; t; t = t->next)
                if (t->connected && !t->tcp_eof && !(t->h.events & EPOLLIN))
                        tunnel_events(ag, t);
}

void ag_tunnel_conn_free(struct agent *ag, struct ag_conn *c)
{
        while (c->tunnels)
                tunnel_free(ag, c->tunnels);
}
