/* PROTOTYPE ONLY (bench/uplink_relay_proto.py): a socket-level TCP uplink,
 * measured against slirp4netns and the host directly. Not built by meson,
 * not used by paddock (docs/network.md, "A socket-level TCP uplink").
 *
 *   tcp_relay_proto NETNS_PIN PORT UID    (PORT 0: any; printed: "ready PORT")
 *
 * Opens a listening socket inside the network namespace NETNS_PIN (the
 * router's: nftables there redirects sandboxes' TCP to PORT), comes back
 * to its own namespace (the host's), drops to UID, and for each accepted
 * connection reads the original destination (SO_ORIGINAL_DST), refuses
 * the host's loopback and its own addresses, connects from the host's
 * namespace as an ordinary socket and relays both ways with splice(2).
 * IPv4 only; a thread per direction. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct half {
        int from, to;
};

static int copy_mode;   /* $TCP_RELAY_COPY=1: read/write instead of splice (to compare) */

static void *pump(void *arg)
{
        struct half *h = arg;
        int p[2];
        if (copy_mode) {
                enum { BUF = 256 << 10 };       /* not on the 64 KiB stack */
                char *buf = malloc(BUF);
                ssize_t n;
                while (buf && (n = read(h->from, buf, BUF)) > 0)
                        for (ssize_t o = 0; o < n;) {
                                ssize_t m = write(h->to, buf + o, (size_t)(n - o));
                                if (m <= 0)
                                        goto copied;
                                o += m;
                        }
copied:
                free(buf);
        } else if (pipe2(p, O_CLOEXEC) == 0) {
                fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
                for (;;) {
                        ssize_t n = splice(h->from, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE);
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
        shutdown(h->to, SHUT_WR);
        shutdown(h->from, SHUT_RD);
        return NULL;
}

/* The host's own IPv4 addresses, read again at most once a second (a
 * netlink dump per connection costs more than the connect itself). */
static pthread_mutex_t own_mu = PTHREAD_MUTEX_INITIALIZER;
static struct in_addr own[64];
static int n_own = -1;
static time_t own_at;

static int host_own(struct in_addr a)
{
        if ((ntohl(a.s_addr) >> 24) == 127 || (ntohl(a.s_addr) >> 24) == 0 || a.s_addr == INADDR_BROADCAST ||
            (ntohl(a.s_addr) >> 28) >= 14)      /* multicast, reserved */
                return 1;
        int hit = 0;
        pthread_mutex_lock(&own_mu);
        time_t now = time(NULL);
        if (n_own < 0 || now != own_at) {
                struct ifaddrs *ifa;
                if (getifaddrs(&ifa) == 0) {
                        n_own = 0;
                        for (struct ifaddrs *i = ifa; i && n_own < 64; i = i->ifa_next)
                                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
                                        own[n_own++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
                        freeifaddrs(ifa);
                        own_at = now;
                } else {
                        n_own = -1;
                }
        }
        if (n_own < 0)
                hit = 1;        /* unknown: refused */
        for (int i = 0; i < n_own && !hit; i++)
                hit = own[i].s_addr == a.s_addr;
        pthread_mutex_unlock(&own_mu);
        return hit;
}

static void *conn(void *arg)
{
        int c = (int)(long)arg, u = -1, relayed = 0;
        struct sockaddr_in dst;
        socklen_t len = sizeof dst;
        struct sockaddr_in here;
        socklen_t hlen = sizeof here;
        /* not redirected (a sandbox that connected to the listener itself:
         * its "original" destination is the listener) or the host's own:
         * refused */
        if (getsockopt(c, SOL_IP, SO_ORIGINAL_DST, &dst, &len) < 0 || host_own(dst.sin_addr) ||
            getsockname(c, (struct sockaddr *)&here, &hlen) < 0 ||
            (dst.sin_addr.s_addr == here.sin_addr.s_addr && dst.sin_port == here.sin_port))
                goto out;
        u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (u < 0 || connect(u, (struct sockaddr *)&dst, sizeof dst) < 0)
                goto out;
        int one = 1;
        setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct half up = { c, u }, down = { u, c };
        pthread_t t;
        if (pthread_create(&t, NULL, pump, &up) != 0)
                goto out;
        pump(&down);
        pthread_join(t, NULL);
        relayed = 1;
out:
        if (!relayed) {
                /* refused, unreachable, or no thread: the sandbox sees a
                 * reset, not an orderly close */
                struct linger l = { 1, 0 };
                setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        }
        if (u >= 0)
                close(u);
        close(c);
        return NULL;
}

int main(int argc, char **argv)
{
        if (argc != 4)
                return 2;
        copy_mode = getenv("TCP_RELAY_COPY") && !strcmp(getenv("TCP_RELAY_COPY"), "1");
        int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), ns = open(argv[1], O_RDONLY | O_CLOEXEC);
        if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET) < 0)
                return perror("netns"), 1;
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
        if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1024) < 0)
                return perror("listen"), 1;
        socklen_t alen = sizeof a;
        getsockname(l, (struct sockaddr *)&a, &alen);
        if (setns(self, CLONE_NEWNET) < 0)
                return perror("setns back"), 1;
        unsigned uid = (unsigned)atoi(argv[3]);
        if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0 ||
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return perror("drop"), 1;
        printf("ready %u\n", ntohs(a.sin_port));
        fflush(stdout);
        for (;;) {
                int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                        continue;
                pthread_t t;
                pthread_attr_t at;
                pthread_attr_init(&at);
                pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
                pthread_attr_setstacksize(&at, 64 << 10);
                if (pthread_create(&t, &at, conn, (void *)(long)c) != 0)
                        close(c);
        }
}
