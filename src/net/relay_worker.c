/* The relay's worker (relay.h): connects out from the host's netns as the
 * uplink's unprivileged uid for each tuple the gate sends, answers the
 * gate with the outcome, accepts the redirected connection on the router's
 * listener, matches it to its outbound socket by the tuple, and copies
 * bytes both ways with splice(2), a thread per connection. The control
 * (gate channel, connects, accepts) is one epoll loop. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "net/relay.h"
#include "lib/util.h"

#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

#define MAX_CONN 4096                   /* outbound sockets pending or awaiting accept */
#define CONNECT_MS 60000                /* then the gate drops the SYN */
#define READY_MS 10000                  /* connected, the sandbox's SYN not yet accepted */
#define PIPE_SZ (1 << 20)

enum { FREE = 0, CONNECTING, READY };

struct conn {
        int state, fd;
        uint64_t at;
        struct pd_relay_req key;
};

static struct conn tab[MAX_CONN];
static int chan_fd = -1;

#define logf_(...) pd_uplink_log("relay", __VA_ARGS__)

/* ---- what the relay never connects to (defence in depth: the router
 * already dropped these; nft_relay.c) ---- */

static struct {
        int family;
        uint8_t a[16];
} own[128];
static int n_own = -1;
static uint64_t own_at;

static void read_own(void)
{
        struct ifaddrs *ifa;
        if (getifaddrs(&ifa) < 0) {
                n_own = -1;
                return;
        }
        n_own = 0;
        for (struct ifaddrs *i = ifa; i && n_own < (int)PD_ARRAY_SIZE(own); i = i->ifa_next) {
                if (!i->ifa_addr)
                        continue;
                if (i->ifa_addr->sa_family == AF_INET) {
                        own[n_own].family = AF_INET;
                        memcpy(own[n_own++].a, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
                } else if (i->ifa_addr->sa_family == AF_INET6) {
                        own[n_own].family = AF_INET6;
                        memcpy(own[n_own++].a, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
                }
        }
        freeifaddrs(ifa);
}

static bool refused(const struct pd_relay_req *k)
{
        const uint8_t *a = k->dst;
        if (k->family == AF_INET) {
                if (a[0] == 127 || a[0] == 0 || a[0] >= 224)   /* loopback, this net, multicast, reserved */
                        return true;
        } else {
                static const uint8_t zero[16], v4m[12] = { [10] = 0xff, [11] = 0xff };
                if (!memcmp(a, zero, 15) || a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) ||
                    !memcmp(a, v4m, 12))        /* ::, ::1, multicast, link-local, v4-mapped */
                        return true;
        }
        /* the host's own addresses, read again at most once a second (a
         * dump per connect would cost more than the connect) */
        uint64_t now = pd_now_ms();
        if (n_own < 0 || now - own_at >= 1000) {
                read_own();
                own_at = now;
        }
        if (n_own < 0)
                return true;    /* unknown: refused */
        for (int i = 0; i < n_own; i++)
                if (own[i].family == k->family && !memcmp(own[i].a, a, k->family == AF_INET ? 4 : 16))
                        return true;
        return false;
}

/* ---- the gate's requests ---- */

static void answer(uint32_t id, int err)
{
        struct pd_relay_res r = { .id = id, .err = err };
        if (send(chan_fd, &r, sizeof r, MSG_NOSIGNAL) != sizeof r)
                logf_("answer to the gate: %s", strerror(errno));
}

static struct conn *slot(void)
{
        for (int i = 0; i < MAX_CONN; i++)
                if (tab[i].state == FREE)
                        return &tab[i];
        return NULL;
}

static void drop(int ep, struct conn *c)
{
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->state = FREE;
}

static void on_request(int ep, const struct pd_relay_req *k)
{
        if (refused(k)) {
                answer(k->id, EPERM);
                return;
        }
        struct conn *c = slot();
        if (!c) {
                answer(k->id, EAGAIN);  /* dropped: the sandbox retransmits */
                return;
        }
        union {
                struct sockaddr_in v4;
                struct sockaddr_in6 v6;
        } sa = { 0 };
        socklen_t len;
        if (k->family == AF_INET) {
                sa.v4.sin_family = AF_INET;
                memcpy(&sa.v4.sin_addr, k->dst, 4);
                sa.v4.sin_port = k->dport;
                len = sizeof sa.v4;
        } else {
                sa.v6.sin6_family = AF_INET6;
                memcpy(&sa.v6.sin6_addr, k->dst, 16);
                sa.v6.sin6_port = k->dport;
                len = sizeof sa.v6;
        }
        int fd = socket(k->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                answer(k->id, EAGAIN);
                return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->key = *k;
        c->at = pd_now_ms();
        if (connect(fd, (struct sockaddr *)&sa, len) == 0) {
                c->state = READY;
                answer(k->id, 0);
                return;
        }
        if (errno != EINPROGRESS) {
                int e = errno;
                close(fd);
                c->state = FREE;
                answer(k->id, e);
                return;
        }
        c->state = CONNECTING;
        struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
                close(fd);
                c->state = FREE;
                answer(k->id, EAGAIN);
        }
}

static void on_connected(int ep, struct conn *c)
{
        int e = 0;
        socklen_t len = sizeof e;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
                e = errno;
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        if (e) {
                close(c->fd);
                c->state = FREE;
        } else {
                c->state = READY;
                c->at = pd_now_ms();
        }
        answer(c->key.id, e);
}

/* ---- relayed connections ---- */

struct half {
        int from, to;
};

static void pump(const struct half *h)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) == 0) {
                (void)fcntl(p[1], F_SETPIPE_SZ, PIPE_SZ);
                for (;;) {
                        ssize_t n = splice(h->from, NULL, p[1], NULL, PIPE_SZ, SPLICE_F_MOVE);
                        if (n <= 0)
                                break;
                        while (n > 0) {
                                ssize_t m = splice(p[0], NULL, h->to, NULL, (size_t)n, SPLICE_F_MOVE);
                                if (m <= 0)
                                        goto out;
                                n -= m;
                        }
                }
out:
                close(p[0]);
                close(p[1]);
        }
        /* the other side sees the end as it came: a FIN, or (after a
         * reset or an error) the shutdown of both */
        shutdown(h->to, SHUT_WR);
        shutdown(h->from, SHUT_RD);
}

static void *up_thread(void *arg)
{
        pump(arg);
        return NULL;
}

struct pair {
        int in, out;
};

static void *conn_thread(void *arg)
{
        struct pair pr = *(struct pair *)arg;
        free(arg);
        struct half up = { pr.in, pr.out }, down = { pr.out, pr.in };
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 64 << 10);
        if (pthread_create(&t, &at, up_thread, &up) == 0) {
                pump(&down);
                pthread_join(t, NULL);
        } else {
                struct linger l = { 1, 0 };
                setsockopt(pr.in, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        }
        pthread_attr_destroy(&at);
        close(pr.in);
        close(pr.out);
        return NULL;
}

static void reset_close(int fd)
{
        struct linger l = { 1, 0 };
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        close(fd);
}

static void on_accept(int ep, int l)
{
        for (;;) {
                union {
                        struct sockaddr_in v4;
                        struct sockaddr_in6 v6;
                } peer, orig;
                socklen_t plen = sizeof peer, olen = sizeof orig;
                int fd = accept4(l, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct pd_relay_req k = { 0 };
                int r;
                if (peer.v4.sin_family == AF_INET) {
                        r = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &olen);
                        k.family = AF_INET;
                        memcpy(k.src, &peer.v4.sin_addr, 4);
                        k.sport = peer.v4.sin_port;
                        memcpy(k.dst, &orig.v4.sin_addr, 4);
                        k.dport = orig.v4.sin_port;
                } else {
                        r = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &orig, &olen);
                        k.family = AF_INET6;
                        memcpy(k.src, &peer.v6.sin6_addr, 16);
                        k.sport = peer.v6.sin6_port;
                        memcpy(k.dst, &orig.v6.sin6_addr, 16);
                        k.dport = orig.v6.sin6_port;
                }
                struct conn *c = NULL;
                for (int i = 0; r == 0 && i < MAX_CONN && !c; i++)
                        if (tab[i].state == READY && tab[i].key.family == k.family &&
                            tab[i].key.sport == k.sport && tab[i].key.dport == k.dport &&
                            !memcmp(tab[i].key.src, k.src, 16) && !memcmp(tab[i].key.dst, k.dst, 16))
                                c = &tab[i];
                if (!c) {
                        /* not one the gate let through (a connection to
                         * the listener itself, or one of an earlier
                         * worker): refused */
                        reset_close(fd);
                        continue;
                }
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                int out = c->fd;
                c->state = FREE;
                /* blocking from now on: its thread waits in splice */
                (void)fcntl(out, F_SETFL, fcntl(out, F_GETFL) & ~O_NONBLOCK);
                struct pair *pr = malloc(sizeof *pr);
                pthread_t t;
                pthread_attr_t at;
                pthread_attr_init(&at);
                pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
                pthread_attr_setstacksize(&at, 64 << 10);
                if (!pr || (pr->in = fd, pr->out = out, pthread_create(&t, &at, conn_thread, pr)) != 0) {
                        free(pr);
                        reset_close(fd);
                        reset_close(out);
                }
                pthread_attr_destroy(&at);
        }
        (void)ep;
}

static void expire(int ep)
{
        uint64_t now = pd_now_ms();
        for (int i = 0; i < MAX_CONN; i++) {
                if (tab[i].state == CONNECTING && now - tab[i].at > CONNECT_MS) {
                        uint32_t id = tab[i].key.id;
                        drop(ep, &tab[i]);
                        answer(id, ETIMEDOUT);
                } else if (tab[i].state == READY && now - tab[i].at > READY_MS) {
                        reset_close(tab[i].fd);
                        tab[i].state = FREE;
                }
        }
}

int pd_relay_worker_run(int chan, int l4, int l6)
{
        chan_fd = chan;
        int ep = epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0)
                return -errno;
        static int tag_chan, tag_l4, tag_l6;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_chan };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, chan, &ev) < 0)
                return -errno;
        ev.data.ptr = &tag_l4;
        (void)fcntl(l4, F_SETFL, fcntl(l4, F_GETFL) | O_NONBLOCK);
        if (epoll_ctl(ep, EPOLL_CTL_ADD, l4, &ev) < 0)
                return -errno;
        if (l6 >= 0) {
                ev.data.ptr = &tag_l6;
                (void)fcntl(l6, F_SETFL, fcntl(l6, F_GETFL) | O_NONBLOCK);
                if (epoll_ctl(ep, EPOLL_CTL_ADD, l6, &ev) < 0)
                        return -errno;
        }
        logf_("ready");
        for (;;) {
                struct epoll_event evs[64];
                int n = epoll_wait(ep, evs, 64, 1000);
                if (n < 0 && errno != EINTR)
                        return -errno;
                for (int i = 0; i < n; i++) {
                        void *p = evs[i].data.ptr;
                        if (p == &tag_chan) {
                                struct pd_relay_req k;
                                ssize_t got = recv(chan, &k, sizeof k, MSG_DONTWAIT);
                                if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
                                        return 0;       /* the gate is gone */
                                if (got == sizeof k && (k.family == AF_INET || k.family == AF_INET6))
                                        on_request(ep, &k);
                        } else if (p == &tag_l4) {
                                on_accept(ep, l4);
                        } else if (p == &tag_l6) {
                                on_accept(ep, l6);
                        } else {
                                on_connected(ep, p);
                        }
                }
                expire(ep);
        }
}
