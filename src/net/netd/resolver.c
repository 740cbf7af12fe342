/* paddock's DNS resolver for sandboxes (UDP and TCP). It answers only
 * names the sandbox's policy allows (NXDOMAIN otherwise, and nothing is
 * sent upstream for them, so DNS cannot carry data out), forwards allowed
 * names to the upstream resolvers, keeps only A/AAAA/CNAME answers, drops
 * addresses the policy may not pin (DNS rebinding), pins the rest in the
 * sandbox's nft set for their TTL, and audits every decision. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/netd/dns.h"
#include "net/netd/netd.h"
#include "net/netd/resolver_int.h"
#include "lib/util.h"

#define UPSTREAM_TIMEOUT_MS 1500
#define MAX_PENDING 4096
#define MAX_PENDING_PER_SANDBOX 128
#define TCP_IDLE_MS 10000
#define MAX_TCP_CONNS 256

struct udp_sock {
        struct netd_ev ev;
        int fd;
        int family;
};

struct tcp_conn {
        struct netd_ev ev;
        int fd;
        struct netd_sandbox *sb;
        uint8_t buf[2 + DNS_MAX_MSG];
        size_t have;
        bool busy;                      /* a query of this connection is upstream */
        uint64_t deadline_ms;
        struct tcp_conn *next;
};

static struct udp_sock udp_socks[2];
static struct netd_ev tcp_listen_ev[2];
static int tcp_listen_fd[2] = { -1, -1 };
static struct tcp_conn *tcp_conns;
static struct netd *the_netd;           /* for free_fn callbacks */
static void tcp_process(struct netd *d, struct tcp_conn *c);
static unsigned n_tcp_conns;

static int bind_sock(struct netd *d, int family, int type, struct pd_error *err)
{
        int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(err, errno, "socket");
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_storage ss = { 0 };
        socklen_t len;
        if (family == AF_INET) {
                struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
                s4->sin_family = AF_INET;
                s4->sin_port = htons(d->dns_port);
                len = sizeof *s4;
                if (type == SOCK_DGRAM)
                        setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
        } else {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons(d->dns_port);
                len = sizeof *s6;
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
                if (type == SOCK_DGRAM)
                        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
        }
        if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
            (type == SOCK_STREAM && listen(fd, 128) < 0)) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "bind DNS port %u (%s)", d->dns_port,
                                    family == AF_INET ? "IPv4" : "IPv6");
        }
        return fd;
}

int netd_dns_listen(struct netd *d, struct pd_error *err)
{
        static const int fams[2] = { AF_INET, AF_INET6 };
        the_netd = d;
        for (int i = 0; i < 2; i++) {
                int fd = bind_sock(d, fams[i], SOCK_DGRAM, err);
                if (fd < 0)
                        return fd;
                udp_socks[i] = (struct udp_sock){ .ev = { .kind = K_DNS_UDP }, .fd = fd,
                                                  .family = fams[i] };
                if (netd_watch(d, fd, EPOLLIN, &udp_socks[i].ev) < 0)
                        return pd_error_set(err, errno, "epoll");
                fd = bind_sock(d, fams[i], SOCK_STREAM, err);
                if (fd < 0)
                        return fd;
                tcp_listen_fd[i] = fd;
                tcp_listen_ev[i].kind = K_DNS_TCP_LISTEN;
                if (netd_watch(d, fd, EPOLLIN, &tcp_listen_ev[i]) < 0)
                        return pd_error_set(err, errno, "epoll");
        }
        return 0;
}

/* ---- replies ---- */

void netd_dns_send_reply(struct netd *d, struct reply_to *to, const uint8_t *msg, size_t len)
{
        if (to->tcp) {
                struct tcp_conn *c = to->tcp;
                if (c->ev.dead)
                        return;
                uint8_t out[2 + DNS_MAX_MSG];
                out[0] = (uint8_t)(len >> 8);
                out[1] = (uint8_t)len;
                memcpy(out + 2, msg, len);
                /* small and the socket buffer is empty (one query at a time):
                 * a short write means a stuck client, which we drop */
                ssize_t w = send(c->fd, out, len + 2, MSG_NOSIGNAL);
                c->busy = false;
                if (w != (ssize_t)(len + 2))
                        netd_kill(d, &c->ev);
                else
                        netd_rewatch(d, c->fd, EPOLLIN, &c->ev);
                return;
        }
        struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
        union {
                char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
                struct cmsghdr align;
        } cbuf;
        memset(&cbuf, 0, sizeof cbuf);
        struct msghdr mh = { .msg_name = &to->peer, .msg_namelen = to->peer_len,
                             .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = cbuf.buf };
        struct cmsghdr *cm = (struct cmsghdr *)cbuf.buf;
        /* answer from the address the query went to (the router side of
         * this sandbox's veth), not whatever the routing table picks */
        if (to->local.family == AF_INET) {
                struct in_pktinfo pi = { 0 };
                memcpy(&pi.ipi_spec_dst, to->local.a, 4);
                cm->cmsg_level = IPPROTO_IP;
                cm->cmsg_type = IP_PKTINFO;
                cm->cmsg_len = CMSG_LEN(sizeof pi);
                memcpy(CMSG_DATA(cm), &pi, sizeof pi);
                mh.msg_controllen = CMSG_SPACE(sizeof pi);
        } else if (to->local.family == AF_INET6) {
                struct in6_pktinfo pi = { 0 };
                memcpy(&pi.ipi6_addr, to->local.a, 16);
                cm->cmsg_level = IPPROTO_IPV6;
                cm->cmsg_type = IPV6_PKTINFO;
                cm->cmsg_len = CMSG_LEN(sizeof pi);
                memcpy(CMSG_DATA(cm), &pi, sizeof pi);
                mh.msg_controllen = CMSG_SPACE(sizeof pi);
        } else {
                mh.msg_control = NULL;
        }
        sendmsg(to->udp_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void netd_dns_reply_rcode(struct netd *d, struct reply_to *to, const struct dns_query *q,
                          uint8_t rcode)
{
        uint8_t out[DNS_HDR + DNS_NAME_WIRE_MAX + 4];
        size_t n = dns_build_reply_hdr(q, rcode, 0, out, sizeof out);
        if (n)
                netd_dns_send_reply(d, to, out, n);
        else if (to->tcp)
                netd_kill(d, &to->tcp->ev);
}

void netd_dns_audit(struct netd_sandbox *sb, const struct dns_query *q, const char *name,
                    bool allow, const struct pd_netpol_rule *rule, const char *reason)
{
        char tb[16];
        struct netd_audit a = { .kind = "dns", .allow = allow, .name = name,
                                .qtype = dns_type_name(q->qtype, tb, sizeof tb), .rule = rule,
                                .reason = reason };
        netd_audit(sb, &a);
}

/* ---- upstream ---- */

static void close_attempts(struct netd_pending *p)
{
        for (unsigned i = 0; i < UPSTREAM_TRIES; i++)
                if (p->att[i].fd >= 0) {
                        close(p->att[i].fd);
                        p->att[i].fd = -1;
                }
}

static void pending_free(struct netd_ev *ev)
{
        struct netd_pending *p = (struct netd_pending *)ev;
        close_attempts(p);
        free(p);
}

static void pending_unlink(struct netd *d, struct netd_pending *p)
{
        for (struct netd_pending **pp = &d->pending; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        d->n_pending--;
                        break;
                }
        close_attempts(p);              /* out of epoll before the batch ends */
        netd_kill(d, &p->ev);
}

/* Send the question again, to the next upstream, from a new socket. */
static int pending_send(struct netd *d, struct netd_pending *p)
{
        if (p->tries >= UPSTREAM_TRIES)
                return -ETIMEDOUT;
        struct netd_attempt *a = &p->att[p->tries];
        unsigned u = p->tries % d->n_upstreams;
        p->tries++;
        a->fd = socket(d->upstream[u].ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (a->fd < 0)
                return -errno;
        /* a fresh socket per attempt: random source port and id, and the
         * kernel drops answers from anyone but the upstream (connected) */
        if (connect(a->fd, (struct sockaddr *)&d->upstream[u], d->upstream_len[u]) < 0)
                return -errno;
        if (getrandom(&a->id, sizeof a->id, 0) != sizeof a->id)
                a->id ^= (uint16_t)pd_now_ns();
        uint8_t out[DNS_HDR + DNS_NAME_WIRE_MAX + 4 + 11];
        size_t n = dns_build_upstream(&p->q, a->id, out, sizeof out);
        if (!n || send(a->fd, out, n, MSG_NOSIGNAL) < 0)
                return -errno ? -errno : -EINVAL;
        p->deadline_ms = pd_now_ms() + UPSTREAM_TIMEOUT_MS;
        return netd_watch(d, a->fd, EPOLLIN, &a->ev);
}

static void forward(struct netd *d, struct netd_sandbox *sb, const struct dns_query *q,
                    const char *name, const struct pd_netpol_rule *rule, struct reply_to *to)
{
        unsigned mine = 0;
        for (struct netd_pending *p = d->pending; p; p = p->next)
                mine += p->sb == sb;
        if (d->n_pending >= MAX_PENDING || mine >= MAX_PENDING_PER_SANDBOX || !d->n_upstreams) {
                netd_dns_audit(sb, q, name, false, rule, d->n_upstreams ? "too many queries in flight"
                                                                    : "no upstream resolver");
                netd_dns_reply_rcode(d, to, q, DNS_RCODE_SERVFAIL);
                return;
        }
        struct netd_pending *p = calloc(1, sizeof *p);
        if (!p) {
                netd_dns_reply_rcode(d, to, q, DNS_RCODE_SERVFAIL);
                return;
        }
        p->ev = (struct netd_ev){ .kind = K_UPSTREAM, .free_fn = pending_free };
        for (unsigned i = 0; i < UPSTREAM_TRIES; i++)
                p->att[i] = (struct netd_attempt){ .ev = { .kind = K_UPSTREAM }, .fd = -1, .p = p };
        p->sb = sb;
        p->q = *q;
        snprintf(p->name, sizeof p->name, "%s", name);
        if (rule) {
                p->rule_copy = *rule;
                p->rule = &p->rule_copy;
        }
        p->to = *to;
        p->next = d->pending;
        d->pending = p;
        d->n_pending++;
        if (pending_send(d, p) < 0) {
                netd_dns_audit(sb, q, name, false, rule, "upstream unreachable");
                netd_dns_reply_rcode(d, &p->to, q, DNS_RCODE_SERVFAIL);
                pending_unlink(d, p);
        }
}

static void upstream_event(struct netd *d, struct netd_attempt *at)
{
        struct netd_pending *p = at->p;
        if (p->ev.dead || at->fd < 0)
                return;
        uint8_t buf[DNS_MAX_MSG];
        ssize_t n = recv(at->fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n < DNS_HDR || (uint16_t)(buf[0] << 8 | buf[1]) != at->id)
                return;                 /* stray or refused: wait for the deadline */
        struct dns_answer *a = malloc(sizeof *a);
        if (!a || dns_parse_response(buf, (size_t)n, &p->q, a) < 0) {
                netd_dns_audit(p->sb, &p->q, p->name, false, p->rule, "malformed upstream answer");
                netd_dns_reply_rcode(d, &p->to, &p->q, DNS_RCODE_SERVFAIL);
        } else {
                netd_cache_put(p->sb, p->name, p->q.qtype, a);
                netd_dns_answer(d, p, a);
        }
        free(a);
        pending_unlink(d, p);
}

void netd_dns_tick(struct netd *d, uint64_t now)
{
        struct netd_pending *p = d->pending, *next;
        for (; p; p = next) {
                next = p->next;
                if (p->deadline_ms > now)
                        continue;
                if (pending_send(d, p) >= 0)
                        continue;
                netd_dns_audit(p->sb, &p->q, p->name, false, p->rule, "upstream timeout");
                netd_dns_reply_rcode(d, &p->to, &p->q, DNS_RCODE_SERVFAIL);
                pending_unlink(d, p);
        }
        for (struct tcp_conn *c = tcp_conns; c; c = c->next) {
                if (!c->ev.dead && !c->busy && c->have >= 2)
                        tcp_process(d, c);      /* pipelined queries */
                if (!c->ev.dead && !c->busy && c->deadline_ms <= now)
                        netd_kill(d, &c->ev);
        }
}

/* ---- queries ---- */

static void handle_query(struct netd *d, struct netd_sandbox *sb, const uint8_t *msg, size_t len,
                         struct reply_to *to)
{
        struct dns_query q;
        int rc = dns_parse_query(msg, len, &q);
        if (rc < 0) {
                if (to->tcp)
                        netd_kill(d, &to->tcp->ev);
                return;
        }
        if (rc > 0) {
                netd_dns_audit(sb, &q, NULL, false, NULL, "malformed query");
                netd_dns_reply_rcode(d, to, &q, (uint8_t)rc);
                return;
        }
        char name[PD_NETPOL_NAME_MAX + 1];
        struct pd_error err = { 0 };
        if (q.qclass != DNS_CLASS_IN) {
                netd_dns_audit(sb, &q, q.name, false, NULL, "class not IN");
                netd_dns_reply_rcode(d, to, &q, DNS_RCODE_REFUSED);
                return;
        }
        if (!q.name_ok || pd_netpol_name_normalize(q.name, name, sizeof name, &err) < 0) {
                netd_dns_audit(sb, &q, q.name, false, NULL, q.name_ok ? err.msg : "bad characters in name");
                netd_dns_reply_rcode(d, to, &q, DNS_RCODE_NXDOMAIN);
                return;
        }
        const struct pd_netpol_rule *rule;
        if (pd_netpol_match_name(&sb->policy, name, &rule) != PD_NETPOL_ALLOW) {
                const char *why = rule ? "deny rule" :
                                  pd_netpol_is_metadata_name(name) ? "metadata name" :
                                  "no rule allows the name";
                netd_dns_audit(sb, &q, name, false, rule, why);
                netd_dns_reply_rcode(d, to, &q, DNS_RCODE_NXDOMAIN);
                return;
        }
        if (q.qtype != DNS_TYPE_A && q.qtype != DNS_TYPE_AAAA && q.qtype != DNS_TYPE_CNAME) {
                /* the name is allowed but only addresses are served: an
                 * empty answer (NODATA), so clients fall back to A/AAAA */
                netd_dns_audit(sb, &q, name, false, rule, "query type not served");
                netd_dns_reply_rcode(d, to, &q, DNS_RCODE_NOERROR);
                return;
        }
        /* answered from this sandbox's cache: filtered, pinned and audited
         * exactly like a fresh answer */
        struct netd_pending *hit = calloc(1, sizeof *hit);
        struct dns_answer *a = hit ? malloc(sizeof *a) : NULL;
        if (a && netd_cache_get(sb, name, q.qtype, a)) {
                for (unsigned i = 0; i < UPSTREAM_TRIES; i++)
                        hit->att[i].fd = -1;
                hit->sb = sb;
                hit->q = q;
                snprintf(hit->name, sizeof hit->name, "%s", name);
                if (rule) {
                        hit->rule_copy = *rule;
                        hit->rule = &hit->rule_copy;
                }
                hit->to = *to;
                netd_dns_answer(d, hit, a);
                free(a);
                free(hit);
                return;
        }
        free(a);
        free(hit);
        forward(d, sb, &q, name, rule, to);
}

static void udp_event(struct netd *d, struct udp_sock *u)
{
        for (int budget = 0; budget < 64; budget++) {
                uint8_t buf[DNS_MAX_MSG];
                struct reply_to to = { .udp_fd = u->fd };
                union {
                        char b[CMSG_SPACE(sizeof(struct in6_pktinfo)) + 64];
                        struct cmsghdr align;
                } cbuf;
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
                struct msghdr mh = { .msg_name = &to.peer, .msg_namelen = sizeof to.peer,
                                     .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
                                     .msg_controllen = sizeof cbuf.b };
                ssize_t n = recvmsg(u->fd, &mh, MSG_DONTWAIT);
                if (n < 0)
                        return;
                to.peer_len = mh.msg_namelen;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                                struct in_pktinfo pi;
                                memcpy(&pi, CMSG_DATA(c), sizeof pi);
                                to.local.family = AF_INET;
                                memcpy(to.local.a, &pi.ipi_addr, 4);
                        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
                                struct in6_pktinfo pi;
                                memcpy(&pi, CMSG_DATA(c), sizeof pi);
                                to.local.family = AF_INET6;
                                memcpy(to.local.a, &pi.ipi6_addr, 16);
                        }
                }
                /* only known sandboxes, by source address (nft drops spoofed
                 * sources at the veth) */
                struct netd_sandbox *sb = netd_sandbox_by_addr(d, (struct sockaddr *)&to.peer);
                if (!sb)
                        continue;
                handle_query(d, sb, buf, (size_t)n, &to);
        }
}


static void tcp_free(struct netd_ev *ev)
{
        struct tcp_conn *c = (struct tcp_conn *)ev;
        /* its queries upstream answer nobody now */
        struct netd_pending *p = the_netd->pending, *next;
        for (; p; p = next) {
                next = p->next;
                if (p->to.tcp == c)
                        pending_unlink(the_netd, p);
        }
        close(c->fd);
        for (struct tcp_conn **pp = &tcp_conns; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        n_tcp_conns--;
        if (c->sb)
                c->sb->n_dns_tcp--;
        free(c);
}

static void tcp_accept(struct netd *d, int lfd)
{
        for (;;) {
                struct sockaddr_storage peer;
                socklen_t plen = sizeof peer;
                int fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct netd_sandbox *sb = netd_sandbox_by_addr(d, (struct sockaddr *)&peer);
                struct tcp_conn *c = sb && n_tcp_conns < MAX_TCP_CONNS &&
                                     sb->n_dns_tcp < NETD_MAX_DNS_TCP_PER_SANDBOX ?
                                     calloc(1, sizeof *c) : NULL;
                if (!c) {
                        close(fd);
                        continue;
                }
                c->ev = (struct netd_ev){ .kind = K_DNS_TCP, .free_fn = tcp_free };
                c->fd = fd;
                c->sb = sb;
                sb->n_dns_tcp++;
                c->deadline_ms = pd_now_ms() + TCP_IDLE_MS;
                c->next = tcp_conns;
                tcp_conns = c;
                n_tcp_conns++;
                if (netd_watch(d, fd, EPOLLIN, &c->ev) < 0)
                        netd_kill(d, &c->ev);
        }
}

/* Handle the queries buffered on c, one at a time: a query that goes
 * upstream makes c busy until its answer; what follows waits in the buffer
 * (netd_dns_tick picks it up again). */
static void tcp_process(struct netd *d, struct tcp_conn *c)
{
        while (!c->busy && !c->ev.dead && c->have >= 2) {
                size_t mlen = (size_t)c->buf[0] << 8 | c->buf[1];
                if (mlen < DNS_HDR || mlen > DNS_MAX_MSG) {
                        netd_kill(d, &c->ev);
                        return;
                }
                if (c->have < 2 + mlen)
                        return;
                uint8_t msg[DNS_MAX_MSG];
                memcpy(msg, c->buf + 2, mlen);
                memmove(c->buf, c->buf + 2 + mlen, c->have - 2 - mlen);
                c->have -= 2 + mlen;
                c->busy = true;
                c->deadline_ms = pd_now_ms() + TCP_IDLE_MS;
                netd_rewatch(d, c->fd, 0, &c->ev);
                struct reply_to to = { .tcp = c, .udp_fd = -1 };
                handle_query(d, c->sb, msg, mlen, &to);
        }
}

static void tcp_event(struct netd *d, struct tcp_conn *c, uint32_t events)
{
        if (c->busy) {
                /* interest is off while the answer is upstream, but HUP/ERR
                 * still come: the client is gone */
                if (events & (EPOLLERR | EPOLLHUP))
                        netd_kill(d, &c->ev);
                return;
        }
        if (c->have == sizeof c->buf) {
                netd_kill(d, &c->ev);           /* a full buffer and no query in it */
                return;
        }
        ssize_t n = recv(c->fd, c->buf + c->have, sizeof c->buf - c->have, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                netd_kill(d, &c->ev);
                return;
        }
        c->have += (size_t)n;
        tcp_process(d, c);
}

void netd_dns_event(struct netd *d, struct netd_ev *ev, uint32_t events)
{
        switch (ev->kind) {
        case K_DNS_UDP:
                udp_event(d, (struct udp_sock *)ev);
                break;
        case K_DNS_TCP_LISTEN:
                tcp_accept(d, tcp_listen_fd[ev == &tcp_listen_ev[1]]);
                break;
        case K_DNS_TCP:
                tcp_event(d, (struct tcp_conn *)ev, events);
                break;
        case K_UPSTREAM:
                upstream_event(d, (struct netd_attempt *)ev);
                break;
        default:
                break;
        }
}

void netd_dns_forget(struct netd *d, struct netd_sandbox *sb)
{
        struct netd_pending *p = d->pending, *next;
        for (; p; p = next) {
                next = p->next;
                if (p->sb == sb)
                        pending_unlink(d, p);
        }
        for (struct tcp_conn *c = tcp_conns; c; c = c->next)
                if (c->sb == sb) {
                        netd_kill(d, &c->ev);
                        sb->n_dns_tcp--;
                        c->sb = NULL;   /* sb is freed before this batch ends */
                }
}

