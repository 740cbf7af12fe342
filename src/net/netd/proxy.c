/* The strict Host/SNI proxy: nft redirects a sandbox's tcp 80/443 here
 * (when its policy is strict). It reads the first bytes, takes the name
 * from the TLS SNI or the HTTP Host, checks name, address and port against
 * the policy (the address must have been answered for that very name:
 * shared CDN addresses and domain fronting do not pass), then connects to
 * the original destination and relays with splice(2). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/netd/netd.h"
#include "net/netd/sni.h"
#include "lib/util.h"

#define SO_ORIGINAL_DST_ 80             /* linux/netfilter_ipv4.h, ip6_tables.h */
#define PEEK_MAX 16384
#define PEEK_TIMEOUT_MS 10000
#define CONNECT_TIMEOUT_MS 10000
#define MAX_PROXY_CONNS 1024
#define PIPE_CAP 65536

struct proxy_conn {
        struct netd_ev ev;              /* client side (owns the object) */
        struct netd_ev uev;             /* upstream side */
        int cfd, ufd;
        int pcu[2], puc[2];             /* client->upstream, upstream->client */
        size_t in_cu, in_uc;
        uint64_t moved;                 /* bytes spliced, both ways (progress) */
        uint64_t out, in;               /* delivered upstream / to the sandbox */
        uint64_t relay_start_ms;
        char name[PD_NETPOL_NAME_MAX + 1];      /* SNI/Host, "" if none */
        bool c_eof, u_eof, c_shut, u_shut;
        enum { P_PEEK, P_CONNECT, P_RELAY } st;
        struct netd_sandbox *sb;
        struct netd_addr dst;
        uint16_t dport;
        uint64_t deadline_ms;
        size_t have, sent;
        uint8_t buf[PEEK_MAX + 64];     /* + room for "Connection: close" */
        struct proxy_conn *next;
};

static struct netd_ev listen_ev[2];
static int listen_fd[2] = { -1, -1 };
static struct proxy_conn *conns;
static unsigned n_conns;

int netd_proxy_listen(struct netd *d, struct pd_error *err)
{
        if (!d->proxy_port)
                return 0;
        for (int i = 0; i < 2; i++) {
                int fam = i ? AF_INET6 : AF_INET, one = 1;
                int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return pd_error_set(err, errno, "proxy socket");
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
                struct sockaddr_storage ss = { 0 };
                socklen_t len;
                if (fam == AF_INET) {
                        struct sockaddr_in *s4 = (void *)&ss;
                        s4->sin_family = AF_INET;
                        s4->sin_port = htons(d->proxy_port);
                        len = sizeof *s4;
                } else {
                        struct sockaddr_in6 *s6 = (void *)&ss;
                        s6->sin6_family = AF_INET6;
                        s6->sin6_port = htons(d->proxy_port);
                        len = sizeof *s6;
                        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
                }
                if (bind(fd, (void *)&ss, len) < 0 || listen(fd, 256) < 0) {
                        int e = errno;
                        close(fd);
                        return pd_error_set(err, e, "bind proxy port %u", d->proxy_port);
                }
                listen_fd[i] = fd;
                listen_ev[i].kind = K_PROXY_LISTEN;
                if (netd_watch(d, fd, EPOLLIN, &listen_ev[i]) < 0)
                        return pd_error_set(err, errno, "epoll");
        }
        return 0;
}

static void conn_free(struct netd_ev *ev)
{
        struct proxy_conn *c = (struct proxy_conn *)ev;
        if (c->st == P_RELAY && c->sb) {
                /* what went through an allowed connection, for the audit */
                struct netd_audit a = { .kind = "close", .allow = true,
                                        .name = c->name[0] ? c->name : NULL, .addr = &c->dst,
                                        .port = c->dport, .proto = "tcp", .bytes = true,
                                        .bytes_out = c->out, .bytes_in = c->in,
                                        .duration_ms = pd_now_ms() - c->relay_start_ms };
                netd_audit(c->sb, &a);
        }
        for (struct proxy_conn **pp = &conns; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        n_conns--;
        if (c->sb)
                c->sb->n_proxy--;
        int fds[] = { c->cfd, c->ufd, c->pcu[0], c->pcu[1], c->puc[0], c->puc[1] };
        for (size_t i = 0; i < PD_ARRAY_SIZE(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(c);
}

static void conn_kill(struct netd *d, struct proxy_conn *c)
{
        c->uev.dead = true;
        netd_kill(d, &c->ev);
}

static void audit_connect(struct proxy_conn *c, const char *name, bool allow,
                          const struct pd_netpol_rule *rule, const char *reason)
{
        struct netd_audit a = { .kind = "connect", .allow = allow, .name = name,
                                .addr = &c->dst, .port = c->dport, .proto = "tcp",
                                .rule = rule, .reason = reason };
        netd_audit(c->sb, &a);
}

static bool grant_port(const struct pd_netpol_rule *r, uint16_t port)
{
        return (!r->proto || r->proto == IPPROTO_TCP) && port >= r->port_lo && port <= r->port_hi;
}

/* The verdict for this connection, given the name it asks for (or none). */
static bool decide(struct netd *d, struct proxy_conn *c, const char *raw_name,
                   const struct pd_netpol_rule **rule, const char **why)
{
        const struct pd_netpol *p = &c->sb->policy;
        char name[PD_NETPOL_NAME_MAX + 1];
        struct pd_error err = { 0 };
        *rule = NULL;
        if (netd_never(d, &c->dst)) {
                *why = "server or uplink address";
                return false;
        }
        int av = pd_netpol_match_addr(p, c->dst.family, c->dst.a, IPPROTO_TCP, c->dport, rule);
        if (!raw_name || pd_netpol_name_normalize(raw_name, name, sizeof name, &err) < 0) {
                /* no usable name (none sent, or an IP literal): only an
                 * address rule (or open mode) lets it through */
                *why = av == PD_NETPOL_ALLOW ? "address allowed" : "no name and no address rule";
                return av == PD_NETPOL_ALLOW;
        }
        const struct pd_netpol_rule *nr;
        if (pd_netpol_match_name(p, name, &nr) != PD_NETPOL_ALLOW) {
                *rule = nr;
                *why = "name denied";
                return false;
        }
        const struct pd_netpol_rule *grants[16];
        size_t n = pd_netpol_name_grants(p, name, grants, 16);
        if (n == 0) {
                *why = av == PD_NETPOL_ALLOW ? "name and address allowed" : "address denied";
                return av == PD_NETPOL_ALLOW;
        }
        bool port_ok = false;
        for (size_t i = 0; i < n; i++)
                if (grant_port(grants[i], c->dport)) {
                        port_ok = true;
                        *rule = grants[i];
                }
        if (port_ok && netd_pins_has(c->sb, name, &c->dst)) {
                *why = "name allowed, address answered for it";
                return true;
        }
        if (av == PD_NETPOL_ALLOW && *rule == NULL)
                pd_netpol_match_addr(p, c->dst.family, c->dst.a, IPPROTO_TCP, c->dport, rule);
        if (av == PD_NETPOL_ALLOW) {
                *why = "address allowed";
                return true;
        }
        *why = port_ok ? "address was not answered for this name" : "port not allowed for this name";
        return false;
}

static void set_interest(struct netd *d, struct proxy_conn *c)
{
        uint32_t ce = 0, ue = 0;
        if (!c->c_eof && c->in_cu < PIPE_CAP)
                ce |= EPOLLIN;
        if (c->in_uc)
                ce |= EPOLLOUT;
        if (!c->u_eof && c->in_uc < PIPE_CAP)
                ue |= EPOLLIN;
        if (c->in_cu)
                ue |= EPOLLOUT;
        netd_rewatch(d, c->cfd, ce, &c->ev);
        netd_rewatch(d, c->ufd, ue, &c->uev);
}

/* Move what src has into dst through pipe p. Returns -1 on error. */
static int pump(int src, int dst, int p[2], size_t *inpipe, bool *eof, bool *shut, uint64_t *moved,
                uint64_t *delivered)
{
        for (;;) {
                bool progress = false;
                if (!*eof && *inpipe < PIPE_CAP) {
                        ssize_t n = splice(src, NULL, p[1], NULL, PIPE_CAP - *inpipe,
                                           SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                        if (n > 0) {
                                *inpipe += (size_t)n;
                                *moved += (uint64_t)n;
                                progress = true;
                        } else if (n == 0) {
                                *eof = true;
                        } else if (errno != EAGAIN && errno != EINTR) {
                                return -1;
                        }
                }
                if (*inpipe) {
                        ssize_t m = splice(p[0], NULL, dst, NULL, *inpipe,
                                           SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                        if (m > 0) {
                                *inpipe -= (size_t)m;
                                *moved += (uint64_t)m;
                                *delivered += (uint64_t)m;
                                progress = true;
                        } else if (m < 0 && errno != EAGAIN && errno != EINTR) {
                                return -1;
                        }
                }
                if (!progress)
                        break;
        }
        if (*eof && !*inpipe && !*shut) {
                shutdown(dst, SHUT_WR);
                *shut = true;
        }
        return 0;
}

static void relay(struct netd *d, struct proxy_conn *c)
{
        if (pump(c->cfd, c->ufd, c->pcu, &c->in_cu, &c->c_eof, &c->u_shut, &c->moved, &c->out) < 0 ||
            pump(c->ufd, c->cfd, c->puc, &c->in_uc, &c->u_eof, &c->c_shut, &c->moved, &c->in) < 0 ||
            (c->u_shut && c->c_shut)) {
                conn_kill(d, c);
                return;
        }
        set_interest(d, c);
}

static void start_connect(struct netd *d, struct proxy_conn *c)
{
        struct sockaddr_storage ss = { 0 };
        socklen_t len;
        if (c->dst.family == AF_INET) {
                struct sockaddr_in *s4 = (void *)&ss;
                s4->sin_family = AF_INET;
                s4->sin_port = htons(c->dport);
                memcpy(&s4->sin_addr, c->dst.a, 4);
                len = sizeof *s4;
        } else {
                struct sockaddr_in6 *s6 = (void *)&ss;
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons(c->dport);
                memcpy(&s6->sin6_addr, c->dst.a, 16);
                len = sizeof *s6;
        }
        c->ufd = socket(c->dst.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->ufd < 0 || pipe2(c->pcu, O_NONBLOCK | O_CLOEXEC) < 0 ||
            pipe2(c->puc, O_NONBLOCK | O_CLOEXEC) < 0 ||
            (connect(c->ufd, (void *)&ss, len) < 0 && errno != EINPROGRESS)) {
                conn_kill(d, c);
                return;
        }
        c->st = P_CONNECT;
        c->deadline_ms = pd_now_ms() + CONNECT_TIMEOUT_MS;
        netd_rewatch(d, c->cfd, 0, &c->ev);
        if (netd_watch(d, c->ufd, EPOLLOUT, &c->uev) < 0)
                conn_kill(d, c);
}

/* Only the first request's Host was checked: make it the last request on
 * this connection, or a keep-alive connection could carry a second request
 * for another name (fronting). Connection, Keep-Alive and Proxy-Connection
 * headers are replaced by "Connection: close"; the body bytes that followed
 * are kept. */
static void http_close_after_first(struct proxy_conn *c)
{
        uint8_t out[sizeof c->buf];
        const char *s = (const char *)c->buf;
        const char *end = memmem(s, c->have, "\r\n\r\n", 4);
        if (!end)
                return;                 /* 16 KiB of headers: refused earlier */
        const char *line = memmem(s, c->have, "\r\n", 2) + 2;
        size_t n = (size_t)(line - s);
        memcpy(out, s, n);
        while (line < end + 2) {
                const char *le = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
                size_t ll = (size_t)(le - line) + 2;
                if (strncasecmp(line, "connection:", 11) != 0 &&
                    strncasecmp(line, "keep-alive:", 11) != 0 &&
                    strncasecmp(line, "proxy-connection:", 17) != 0) {
                        memcpy(out + n, line, ll);
                        n += ll;
                }
                line = le + 2;
        }
        static const char close_hdr[] = "Connection: close\r\n\r\n";
        memcpy(out + n, close_hdr, sizeof close_hdr - 1);
        n += sizeof close_hdr - 1;
        size_t body = c->have - (size_t)(end + 4 - s);
        memcpy(out + n, end + 4, body);
        n += body;
        memcpy(c->buf, out, n);
        c->have = n;
}

static void peek_event(struct netd *d, struct proxy_conn *c)
{
        ssize_t n = recv(c->cfd, c->buf + c->have, PEEK_MAX - c->have, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        /* a client may send its request and shut its side (HTTP/1.0 tools):
         * decide on what came; the relay passes the shutdown on */
        bool eof = n == 0 && c->have > 0;
        if (n < 0 || (n == 0 && !eof)) {
                conn_kill(d, c);
                return;
        }
        c->have += (size_t)n;
        char name[300];
        const char *why = NULL;
        int r = c->buf[0] == 0x16 ? netd_tls_sni(c->buf, c->have, name, sizeof name, &why)
                                  : netd_http_host(c->buf, c->have, name, sizeof name, &why);
        if (r == SNI_NEED_MORE && c->have < PEEK_MAX && !eof)
                return;
        if (r == SNI_NEED_MORE)
                r = SNI_NONE;                   /* 16 KiB (or EOF) without a name */
        const struct pd_netpol_rule *rule = NULL;
        if (r == SNI_BAD) {
                audit_connect(c, NULL, false, NULL, why);
                conn_kill(d, c);
                return;
        }
        bool allow = decide(d, c, r == SNI_FOUND ? name : NULL, &rule, &why);
        if (r == SNI_FOUND)
                snprintf(c->name, sizeof c->name, "%s", name);
        audit_connect(c, r == SNI_FOUND ? name : NULL, allow, rule, why);
        if (!allow) {
                conn_kill(d, c);
                return;
        }
        if (c->buf[0] != 0x16)
                http_close_after_first(c);
        start_connect(d, c);
}

static void connect_event(struct netd *d, struct proxy_conn *c)
{
        int e = 0;
        socklen_t l = sizeof e;
        if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &e, &l) < 0 || e) {
                conn_kill(d, c);
                return;
        }
        while (c->sent < c->have) {
                ssize_t w = send(c->ufd, c->buf + c->sent, c->have - c->sent, MSG_NOSIGNAL);
                if (w < 0 && errno == EAGAIN)
                        return;
                if (w <= 0) {
                        conn_kill(d, c);
                        return;
                }
                c->sent += (size_t)w;
        }
        c->st = P_RELAY;
        c->out = c->sent;               /* the first bytes, read before the decision */
        c->relay_start_ms = pd_now_ms();
        relay(d, c);
}

static void accept_event(struct netd *d, int lfd)
{
        for (;;) {
                struct sockaddr_storage peer, orig;
                socklen_t plen = sizeof peer, olen = sizeof orig;
                int fd = accept4(lfd, (void *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct netd_sandbox *sb = netd_sandbox_by_addr(d, (void *)&peer);
                int lvl = peer.ss_family == AF_INET ? SOL_IP : SOL_IPV6;
                struct proxy_conn *c = NULL;
                if (sb && n_conns < MAX_PROXY_CONNS && sb->n_proxy < NETD_MAX_PROXY_PER_SANDBOX &&
                    getsockopt(fd, lvl, SO_ORIGINAL_DST_, &orig, &olen) == 0)
                        c = calloc(1, sizeof *c);
                if (!c) {
                        close(fd);
                        continue;
                }
                c->ev = (struct netd_ev){ .kind = K_PROXY_CLIENT, .free_fn = conn_free };
                c->uev = (struct netd_ev){ .kind = K_PROXY_UPSTREAM };
                c->cfd = fd;
                c->ufd = c->pcu[0] = c->pcu[1] = c->puc[0] = c->puc[1] = -1;
                c->sb = sb;
                sb->n_proxy++;
                netd_addr_from_sa((void *)&orig, &c->dst, &c->dport);
                c->deadline_ms = pd_now_ms() + PEEK_TIMEOUT_MS;
                c->next = conns;
                conns = c;
                n_conns++;
                if (netd_watch(d, fd, EPOLLIN, &c->ev) < 0)
                        conn_kill(d, c);
        }
}

void netd_proxy_event(struct netd *d, struct netd_ev *ev, uint32_t events)
{
        if (ev->kind == K_PROXY_LISTEN) {
                accept_event(d, listen_fd[ev == &listen_ev[1]]);
                return;
        }
        struct proxy_conn *c = ev->kind == K_PROXY_CLIENT ? (struct proxy_conn *)ev :
                               (struct proxy_conn *)((char *)ev - offsetof(struct proxy_conn, uev));
        if (c->ev.dead)
                return;
        switch (c->st) {
        case P_PEEK:
                peek_event(d, c);
                break;
        case P_CONNECT:
                if (ev == &c->uev)
                        connect_event(d, c);
                else if (events & (EPOLLERR | EPOLLHUP))
                        conn_kill(d, c);        /* the client left while we connect */
                break;
        case P_RELAY: {
                uint64_t before = c->moved;
                bool eofs = c->c_eof && c->u_eof;
                relay(d, c);
                /* HUP/ERR are reported whatever the interest mask: when a
                 * side hung up or failed and nothing more can move, end the
                 * connection (else the loop would spin on it) */
                if (!c->ev.dead && (events & (EPOLLERR | EPOLLHUP)) && c->moved == before &&
                    eofs == (c->c_eof && c->u_eof))
                        conn_kill(d, c);
                break;
        }
        }
}

void netd_proxy_tick(struct netd *d, uint64_t now)
{
        for (struct proxy_conn *c = conns; c; c = c->next)
                if (!c->ev.dead && c->st != P_RELAY && c->deadline_ms <= now) {
                        if (c->st == P_PEEK)
                                audit_connect(c, NULL, false, NULL, "no request within 10 s");
                        conn_kill(d, c);
                }
}

void netd_proxy_forget(struct netd *d, struct netd_sandbox *sb)
{
        for (struct proxy_conn *c = conns; c; c = c->next)
                if (c->sb == sb) {
                        conn_kill(d, c);
                        sb->n_proxy--;
                        c->sb = NULL;   /* sb is freed before this batch ends */
                }
}
