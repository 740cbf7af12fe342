/* The egress guard of server-made pulls (egress.h). */
#include "image/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/util.h"

#define MAX_ALLOW 32
#define MAX_FWD 16
#define HEAD_MAX 16384
#define IDLE_MS 120000

struct fwd {
        int lfd;
        struct sockaddr_storage to;
        socklen_t tolen;
};

struct pd_egress {
        int orig_ns, new_ns;
        int proxy_fd;
        char url[64];
        struct fwd fwds[MAX_FWD];
        unsigned nfwd;
        char allow[MAX_ALLOW][256];
        unsigned n;
        int stop[2];
        pthread_t acceptor;
        bool running;
};

struct conn {
        struct pd_egress *g;
        int fd;
        const struct fwd *fwd;  /* NULL: the proxy */
};

/* "host[:port]" or "[v6]:port" into host and port (0: none given). */
static int split_hostport(const char *s, char *host, size_t hsz, unsigned *port)
{
        const char *colon;
        *port = 0;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || (size_t)(end - s - 1) >= hsz)
                        return -EINVAL;
                snprintf(host, hsz, "%.*s", (int)(end - s - 1), s + 1);
                colon = end[1] == ':' ? end + 1 : NULL;
        } else {
                colon = strrchr(s, ':');
                size_t hl = colon ? (size_t)(colon - s) : strlen(s);
                if (hl >= hsz || hl == 0)
                        return -EINVAL;
                snprintf(host, hsz, "%.*s", (int)hl, s);
        }
        if (colon) {
                char *e;
                unsigned long p = strtoul(colon + 1, &e, 10);
                if (*e || !p || p > 65535)
                        return -EINVAL;
                *port = (unsigned)p;
        }
        return 0;
}

static bool allowed(const struct pd_egress *g, const char *host, unsigned port)
{
        for (unsigned i = 0; i < g->n; i++) {
                char h[256];
                unsigned p;
                if (split_hostport(g->allow[i], h, sizeof h, &p) < 0 || strcasecmp(h, host))
                        continue;
                if (p ? p == port : (port == 443 || port == 80))
                        return true;
        }
        return false;
}

static int write_all(int fd, const char *b, size_t n)
{
        while (n) {
                ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -1;
                b += k;
                n -= (size_t)k;
        }
        return 0;
}

/* Copy both ways until both sides have ended (or one fails, or nothing
 * moves for IDLE_MS). */
static void splice_both(int a, int b)
{
        char buf[65536];
        bool a_open = true, b_open = true;
        while (a_open || b_open) {
                struct pollfd p[2] = { { .fd = a_open ? a : -1, .events = POLLIN },
                                       { .fd = b_open ? b : -1, .events = POLLIN } };
                int r = poll(p, 2, IDLE_MS);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return;
                for (int i = 0; i < 2; i++) {
                        if (!p[i].revents)
                                continue;
                        int from = i ? b : a, to = i ? a : b;
                        ssize_t n = recv(from, buf, sizeof buf, 0);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0) {
                                if (n < 0)
                                        return;
                                shutdown(to, SHUT_WR);
                                if (i)
                                        b_open = false;
                                else
                                        a_open = false;
                                continue;
                        }
                        if (write_all(to, buf, (size_t)n) < 0)
                                return;
                }
        }
}

static int connect_to(const char *host, unsigned port)
{
        char ps[8];
        snprintf(ps, sizeof ps, "%u", port);
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
        if (getaddrinfo(host, ps, &hints, &res) != 0)
                return -1;
        int fd = -1;
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
                fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                        close(fd);
                        fd = -1;
                }
        }
        freeaddrinfo(res);
        return fd;
}

static void refuse(int fd, unsigned status, const char *why)
{
        char msg[768];
        int n = snprintf(msg, sizeof msg,
                         "HTTP/1.1 %u %s\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n"
                         "%s\n",
                         status, status == 403 ? "Forbidden" : status == 502 ? "Bad Gateway" : "Bad Request",
                         strlen(why) + 1, why);
        (void)write_all(fd, msg, (size_t)n);
}

/* One client of the proxy: a CONNECT, or one plain-HTTP request. */
static void proxy_one(struct pd_egress *g, int fd)
{
        char head[HEAD_MAX + 1];
        size_t len = 0;
        char *end = NULL;
        while (!end && len < HEAD_MAX) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, IDLE_MS) <= 0)
                        return;
                ssize_t n = recv(fd, head + len, HEAD_MAX - len, 0);
                if (n <= 0)
                        return;
                len += (size_t)n;
                head[len] = '\0';
                end = strstr(head, "\r\n\r\n");
        }
        if (!end) {
                refuse(fd, 400, "paddock: request head too long");
                return;
        }
        char method[16], target[2048];
        if (sscanf(head, "%15s %2047s", method, target) != 2) {
                refuse(fd, 400, "paddock: malformed request");
                return;
        }
        char host[256], why[600];
        unsigned port = 0;
        bool connect_m = !strcmp(method, "CONNECT");
        const char *path = "/";
        if (connect_m) {
                if (split_hostport(target, host, sizeof host, &port) < 0 || !port) {
                        refuse(fd, 400, "paddock: CONNECT needs host:port");
                        return;
                }
        } else {
                if (strncasecmp(target, "http://", 7)) {
                        refuse(fd, 400, "paddock: only proxy requests (CONNECT, or an absolute http:// URI)");
                        return;
                }
                char hp[300];
                const char *slash = strchr(target + 7, '/');
                size_t hl = slash ? (size_t)(slash - target - 7) : strlen(target + 7);
                if (hl >= sizeof hp) {
                        refuse(fd, 400, "paddock: host too long");
                        return;
                }
                snprintf(hp, sizeof hp, "%.*s", (int)hl, target + 7);
                if (strchr(hp, '@') || split_hostport(hp, host, sizeof host, &port) < 0) {
                        refuse(fd, 400, "paddock: malformed URI");
                        return;
                }
                if (!port)
                        port = 80;
                if (slash)
                        path = slash;
        }
        if (!allowed(g, host, port)) {
                snprintf(why, sizeof why, "paddock: %.255s:%u is not a registry this server may pull from (a "
                                          "redirect to another host is refused: paddock serve --template-registry)",
                         host, port);
                refuse(fd, 403, why);
                return;
        }
        int up = connect_to(host, port);
        if (up < 0) {
                snprintf(why, sizeof why, "paddock: cannot connect to %.255s:%u", host, port);
                refuse(fd, 502, why);
                return;
        }
        char *body = end + 4;
        size_t rest = len - (size_t)(body - head);
        if (connect_m) {
                static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                if (write_all(fd, ok, sizeof ok - 1) == 0 && (!rest || write_all(up, body, rest) == 0))
                        splice_both(fd, up);
                close(up);
                return;
        }
        /* origin form, hop-by-hop headers dropped, one request: the
         * connection is closed after it (Go would send the next request,
         * perhaps for another host, on the same proxy connection) */
        char out[HEAD_MAX + 4096];
        size_t o = (size_t)snprintf(out, sizeof out, "%s %s HTTP/1.1\r\n", method, path);
        char *line = strstr(head, "\r\n") + 2;
        while (line < end + 2) {
                char *nl = strstr(line, "\r\n");
                size_t ll = (size_t)(nl - line);
                if (strncasecmp(line, "Connection:", 11) && strncasecmp(line, "Proxy-Connection:", 17) &&
                    strncasecmp(line, "Keep-Alive:", 11) && strncasecmp(line, "Proxy-Authorization:", 20) &&
                    o + ll + 2 < sizeof out - 32) {
                        memcpy(out + o, line, ll + 2);
                        o += ll + 2;
                }
                line = nl + 2;
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "Connection: close\r\n\r\n");
        if (write_all(up, out, o) == 0 && (!rest || write_all(up, body, rest) == 0))
                splice_both(fd, up);
        close(up);
}

static void *conn_main(void *arg)
{
        struct conn *c = arg;
        if (c->fwd) {
                int up = socket(c->fwd->to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (up >= 0 && connect(up, (const struct sockaddr *)&c->fwd->to, c->fwd->tolen) == 0)
                        splice_both(c->fd, up);
                if (up >= 0)
                        close(up);
        } else {
                proxy_one(c->g, c->fd);
        }
        close(c->fd);
        free(c);
        return NULL;
}

static void *accept_main(void *arg)
{
        struct pd_egress *g = arg;
        for (;;) {
                struct pollfd p[MAX_FWD + 2];
                unsigned n = 0;
                p[n++] = (struct pollfd){ .fd = g->stop[0], .events = POLLIN };
                p[n++] = (struct pollfd){ .fd = g->proxy_fd, .events = POLLIN };
                for (unsigned i = 0; i < g->nfwd; i++)
                        p[n++] = (struct pollfd){ .fd = g->fwds[i].lfd, .events = POLLIN };
                if (poll(p, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return NULL;
                }
                if (p[0].revents)
                        return NULL;
                for (unsigned i = 1; i < n; i++) {
                        if (!p[i].revents)
                                continue;
                        int fd = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
                        if (fd < 0)
                                continue;
                        struct conn *c = calloc(1, sizeof *c);
                        pthread_t t;
                        pthread_attr_t at;
                        pthread_attr_init(&at);
                        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
                        if (c) {
                                c->g = g;
                                c->fd = fd;
                                c->fwd = i == 1 ? NULL : &g->fwds[i - 2];
                        }
                        if (!c || pthread_create(&t, &at, conn_main, c) != 0) {
                                free(c);
                                close(fd);
                        }
                        pthread_attr_destroy(&at);
                }
        }
}

static int listen_on(const struct sockaddr *sa, socklen_t len)
{
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0)
                return -errno;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, sa, len) < 0 || listen(fd, 64) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

/* A forwarder for an allowed registry on loopback: inside, its address
 * and port; outside, the host's same. */
static int add_forwarders(struct pd_egress *g, const char *entry, struct pd_error *err)
{
        char host[256];
        unsigned port;
        if (split_hostport(entry, host, sizeof host, &port) < 0)
                return 0;
        struct sockaddr_storage ss = { 0 };
        socklen_t sl;
        struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        if (!strcasecmp(host, "localhost") || (inet_pton(AF_INET, host, &in4->sin_addr) == 1 &&
                                                (ntohl(in4->sin_addr.s_addr) >> 24) == 127)) {
                if (!strcasecmp(host, "localhost"))
                        in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                in4->sin_family = AF_INET;
                sl = sizeof *in4;
        } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1 && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) {
                in6->sin6_family = AF_INET6;
                sl = sizeof *in6;
        } else {
                return 0;       /* not on loopback: through the proxy */
        }
        unsigned ports[2] = { port, 0 }, np = 1;
        if (!port) {
                ports[0] = 443;
                ports[1] = 80;
                np = 2;
        }
        for (unsigned i = 0; i < np; i++) {
                if (g->nfwd == MAX_FWD)
                        return pd_error_setx(err, E2BIG, "too many registries on loopback");
                struct fwd *f = &g->fwds[g->nfwd];
                f->to = ss;
                f->tolen = sl;
                if (ss.ss_family == AF_INET)
                        ((struct sockaddr_in *)&f->to)->sin_port = htons((uint16_t)ports[i]);
                else
                        ((struct sockaddr_in6 *)&f->to)->sin6_port = htons((uint16_t)ports[i]);
                int fd = listen_on((const struct sockaddr *)&f->to, f->tolen);
                if (fd == -EADDRINUSE)
                        continue;       /* named twice */
                if (fd < 0)
                        return pd_error_set(err, -fd, "listen for registry %s in the pull's namespace", entry);
                f->lfd = fd;
                g->nfwd++;
        }
        return 0;
}

static int lo_up(struct pd_error *err)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = { 0 };
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
        int r = 0;
        if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
                r = pd_error_set(err, errno, "loopback of the pull's namespace");
        } else {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                        r = pd_error_set(err, errno, "bring up the pull's loopback");
        }
        if (s >= 0)
                close(s);
        return r;
}

void pd_egress_stop(struct pd_egress *g)
{
        if (!g)
                return;
        if (g->running) {
                (void)!write(g->stop[1], "x", 1);
                pthread_join(g->acceptor, NULL);
        }
        for (unsigned i = 0; i < g->nfwd; i++)
                close(g->fwds[i].lfd);
        if (g->proxy_fd >= 0)
                close(g->proxy_fd);
        if (g->orig_ns >= 0)
                close(g->orig_ns);
        if (g->new_ns >= 0)
                close(g->new_ns);
        if (g->stop[0] >= 0)
                close(g->stop[0]);
        if (g->stop[1] >= 0)
                close(g->stop[1]);
        free(g);
}

int pd_egress_start(const char *const *allow, unsigned n, struct pd_egress **out, struct pd_error *err)
{
        if (n > MAX_ALLOW)
                return pd_error_setx(err, E2BIG, "at most %d registries", MAX_ALLOW);
        struct pd_egress *g = calloc(1, sizeof *g);
        if (!g)
                return pd_error_set(err, ENOMEM, "egress guard");
        g->orig_ns = g->new_ns = g->proxy_fd = g->stop[0] = g->stop[1] = -1;
        for (unsigned i = 0; i < n; i++)
                snprintf(g->allow[i], sizeof g->allow[i], "%s", allow[i]);
        g->n = n;
        int r = 0;
        g->orig_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (g->orig_ns < 0) {
                r = pd_error_set(err, errno, "open this thread's network namespace");
                goto fail;
        }
        /* this thread only (a network namespace is per thread) */
        if (unshare(CLONE_NEWNET) < 0) {
                r = pd_error_set(err, errno, "a network namespace for the pull");
                goto fail;
        }
        if ((r = lo_up(err)) < 0)
                goto back;
        struct sockaddr_in px = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        for (unsigned i = 0; i < n && r == 0; i++)
                r = add_forwarders(g, allow[i], err);
        if (r < 0)
                goto back;
        if ((g->proxy_fd = listen_on((struct sockaddr *)&px, sizeof px)) < 0) {
                r = pd_error_set(err, -g->proxy_fd, "the pull's proxy");
                goto back;
        }
        socklen_t pl = sizeof px;
        getsockname(g->proxy_fd, (struct sockaddr *)&px, &pl);
        snprintf(g->url, sizeof g->url, "http://127.0.0.1:%u", (unsigned)ntohs(px.sin_port));
        g->new_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (g->new_ns < 0)
                r = pd_error_set(err, errno, "open the pull's network namespace");
back:
        if (setns(g->orig_ns, CLONE_NEWNET) < 0) {
                /* this thread cannot go home: nothing it does next would
                 * be where it thinks */
                abort();
        }
        if (r < 0)
                goto fail;
        /* the acceptor, and the connections it starts, on the host's side */
        if (pipe2(g->stop, O_CLOEXEC) < 0 || pthread_create(&g->acceptor, NULL, accept_main, g) != 0) {
                r = pd_error_set(err, errno ?: EAGAIN, "start the pull's proxy");
                goto fail;
        }
        g->running = true;
        *out = g;
        return 0;
fail:
        pd_egress_stop(g);
        return r;
}

int pd_egress_enter(struct pd_egress *g, int enter, struct pd_error *err)
{
        if (setns(enter ? g->new_ns : g->orig_ns, CLONE_NEWNET) < 0) {
                if (!enter)
                        abort();        /* as in start: never stay lost */
                return pd_error_set(err, errno, "enter the pull's network namespace");
        }
        return 0;
}

const char *pd_egress_proxy_url(const struct pd_egress *g)
{
        return g->url;
}
