/* paddock-netd: the DNS resolver and strict Host/SNI proxy of one router
 * network namespace (netd_client.h has the command line). One thread, one
 * epoll loop; objects killed during a batch are freed after it. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "net/netd/netd.h"
#include "lib/util.h"

int netd_watch(struct netd *d, int fd, uint32_t events, struct netd_ev *ev)
{
        struct epoll_event e = { .events = events, .data.ptr = ev };
        return epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &e);
}

int netd_rewatch(struct netd *d, int fd, uint32_t events, struct netd_ev *ev)
{
        struct epoll_event e = { .events = events, .data.ptr = ev };
        return epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &e);
}

void netd_kill(struct netd *d, struct netd_ev *ev)
{
        if (ev->dead)
                return;
        ev->dead = true;
        ev->dead_next = d->dead_head;
        d->dead_head = ev;
}

static void reap(struct netd *d)
{
        /* a free_fn may kill more objects: loop until the list stays empty */
        while (d->dead_head) {
                struct netd_ev *ev = d->dead_head;
                d->dead_head = ev->dead_next;
                if (ev->free_fn)
                        ev->free_fn(ev);
        }
}

void netd_addr_from_sa(const struct sockaddr *sa, struct netd_addr *out, uint16_t *port)
{
        memset(out, 0, sizeof *out);
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *s4 = (const void *)sa;
                out->family = AF_INET;
                memcpy(out->a, &s4->sin_addr, 4);
                if (port)
                        *port = ntohs(s4->sin_port);
        } else if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *s6 = (const void *)sa;
                out->family = AF_INET6;
                memcpy(out->a, &s6->sin6_addr, 16);
                if (port)
                        *port = ntohs(s6->sin6_port);
        }
}

const char *netd_addr_str(const struct netd_addr *a, char *buf, size_t size)
{
        if (!inet_ntop(a->family, a->a, buf, (socklen_t)size))
                snprintf(buf, size, "?");
        return buf;
}

struct netd_sandbox *netd_sandbox_by_addr(struct netd *d, const struct sockaddr *sa)
{
        struct netd_addr a;
        netd_addr_from_sa(sa, &a, NULL);
        for (struct netd_sandbox *s = d->sandboxes; s; s = s->next)
                for (unsigned i = 0; i < s->n_addrs; i++)
                        if (s->addrs[i].family == a.family && !memcmp(s->addrs[i].a, a.a, 16))
                                return s;
        return NULL;
}

struct netd_sandbox *netd_sandbox_by_id(struct netd *d, const char *id)
{
        for (struct netd_sandbox *s = d->sandboxes; s; s = s->next)
                if (strcmp(s->id, id) == 0)
                        return s;
        return NULL;
}

bool netd_never(const struct netd *d, const struct netd_addr *a)
{
        for (unsigned i = 0; i < d->n_never; i++)
                if (pd_netpol_cidr_match(d->never[i].family, d->never[i].addr, d->never[i].prefix,
                                         a->family, a->a))
                        return true;
        return false;
}

static int parse_upstreams(struct netd *d, char *s, struct pd_error *err)
{
        for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (d->n_upstreams >= NETD_MAX_UPSTREAMS)
                        return pd_error_setx(err, E2BIG, "at most %d upstreams", NETD_MAX_UPSTREAMS);
                unsigned port = 53;
                char host[INET6_ADDRSTRLEN + 2];
                snprintf(host, sizeof host, "%s", tok);
                char *colon = strrchr(host, ':');
                if (host[0] == '[') {           /* [v6]:port */
                        char *close = strchr(host, ']');
                        if (!close)
                                return pd_error_setx(err, EINVAL, "upstream '%s'", tok);
                        *close = '\0';
                        if (close[1] == ':')
                                port = (unsigned)atoi(close + 2);
                        memmove(host, host + 1, strlen(host));
                } else if (colon && strchr(host, ':') == colon) {
                        *colon = '\0';
                        port = (unsigned)atoi(colon + 1);
                }
                struct sockaddr_storage *ss = &d->upstream[d->n_upstreams];
                memset(ss, 0, sizeof *ss);
                struct sockaddr_in *s4 = (void *)ss;
                struct sockaddr_in6 *s6 = (void *)ss;
                if (port == 0 || port > 65535)
                        return pd_error_setx(err, EINVAL, "upstream '%s': bad port", tok);
                if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
                        s4->sin_family = AF_INET;
                        s4->sin_port = htons((uint16_t)port);
                        d->upstream_len[d->n_upstreams] = sizeof *s4;
                } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
                        s6->sin6_family = AF_INET6;
                        s6->sin6_port = htons((uint16_t)port);
                        d->upstream_len[d->n_upstreams] = sizeof *s6;
                } else {
                        return pd_error_setx(err, EINVAL, "upstream '%s': not an address", tok);
                }
                d->n_upstreams++;
        }
        return 0;
}

static int parse_never(struct netd *d, char *s, struct pd_error *err)
{
        for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                struct pd_netpol_rule r;
                char buf[128];
                if (d->n_never >= PD_ARRAY_SIZE(d->never))
                        return pd_error_setx(err, E2BIG, "too many --never ranges");
                snprintf(buf, sizeof buf, strchr(tok, ':') ? "deny:[%s]" : "deny:%s", tok);
                if (pd_netpol_rule_parse(buf, &r, err) < 0 || r.kind != PD_NETPOL_CIDR)
                        return pd_error_setx(err, EINVAL, "--never '%s': not a CIDR", tok);
                struct pd_netpol_builtin *b = &d->never[d->n_never++];
                b->family = r.family;
                memcpy(b->addr, r.addr, 16);
                b->prefix = r.prefix;
                b->never_dns = true;
                b->what = "server";
        }
        return 0;
}

/* netd parses what sandboxes send: once its sockets exist it keeps only
 * CAP_NET_ADMIN (pinning in nft needs it at each message) and can never
 * regain the rest (bounding set, no_new_privs). It stays uid 0 to open the
 * root-owned audit files it is handed. */
static int drop_privileges(struct pd_error *err)
{
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return pd_error_set(err, errno, "no_new_privs");
        for (int cap = 0; cap <= 63; cap++) {
                if (cap == CAP_NET_ADMIN)
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        return pd_error_set(err, errno, "drop capability %d from the bounding set", cap);
        }
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = { 0 };
        data[0].effective = data[0].permitted = 1u << CAP_NET_ADMIN;
        if (syscall(SYS_capset, &h, data) < 0)
                return pd_error_set(err, errno, "capset");
        return 0;
}

static void usage(void)
{
        fprintf(stderr, "usage: paddock-netd --control PATH [--upstream IP[:PORT][,...]] "
                        "[--dns-port N] [--proxy-port N] [--ready-fd N] [--never CIDR,...] [--max-pins N]\n");
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "control", required_argument, NULL, 'c' },
                { "upstream", required_argument, NULL, 'u' },
                { "dns-port", required_argument, NULL, 'd' },
                { "proxy-port", required_argument, NULL, 'p' },
                { "ready-fd", required_argument, NULL, 'r' },
                { "never", required_argument, NULL, 'n' },
                { "max-pins", required_argument, NULL, 'm' },
                { 0 },
        };
        /* static: what it holds lives until exit, and LeakSanitizer
         * (build-san) scans globals, not main's frame once main returned */
        static struct netd d = { .dns_port = PD_NETD_DEFAULT_DNS_PORT,
                                 .proxy_port = PD_NETD_DEFAULT_PROXY_PORT,
                                 .max_pins = NETD_DEFAULT_MAX_PINS };
        struct pd_error err = { 0 };
        const char *control = NULL;
        int ready_fd = -1, c;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'c': control = optarg; break;
                case 'u':
                        if (parse_upstreams(&d, optarg, &err) < 0)
                                goto fail;
                        break;
                case 'd': d.dns_port = (uint16_t)atoi(optarg); break;
                case 'p': d.proxy_port = (uint16_t)atoi(optarg); break;
                case 'r': ready_fd = atoi(optarg); break;
                case 'n':
                        if (parse_never(&d, optarg, &err) < 0)
                                goto fail;
                        break;
                case 'm': {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (*end || v == 0 || v > 1000000) {
                                pd_error_setx(&err, EINVAL, "--max-pins '%s': 1..1000000", optarg);
                                goto fail;
                        }
                        d.max_pins = (unsigned)v;
                        break;
                }
                default: usage(); return 2;
                }
        }
        if (!control || !d.dns_port) {
                usage();
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        d.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (sfd < 0 || d.epfd < 0) {
                pd_error_set(&err, errno, "epoll/signalfd");
                goto fail;
        }
        static struct netd_ev sig_ev = { .kind = K_CONTROL_LISTEN };  /* data.ptr NULL marks it */
        (void)sig_ev;
        struct epoll_event se = { .events = EPOLLIN, .data.ptr = NULL };
        epoll_ctl(d.epfd, EPOLL_CTL_ADD, sfd, &se);
        /* pins go into this netns's table inet paddock (router.c made it) */
        if (pd_nft_open(-1, &d.nft, &err) < 0)
                goto fail;
        if (netd_dns_listen(&d, &err) < 0 || netd_proxy_listen(&d, &err) < 0 ||
            netd_control_listen(&d, control, &err) < 0 || (d.nft && netd_nflog_listen(&d, &err) < 0))
                goto fail;
        if (drop_privileges(&err) < 0)
                goto fail;
        if (ready_fd >= 0) {
                if (pd_write_all(ready_fd, "1", 1) < 0) {
                        pd_error_set(&err, errno, "ready fd");
                        goto fail;
                }
                close(ready_fd);
        }
        for (;;) {
                struct epoll_event ev[64];
                int n = epoll_wait(d.epfd, ev, 64, 250);
                if (n < 0 && errno != EINTR) {
                        pd_error_set(&err, errno, "epoll_wait");
                        goto fail;
                }
                for (int i = 0; i < n; i++) {
                        struct netd_ev *e = ev[i].data.ptr;
                        if (!e) {
                                unlink(control);
                                pd_nft_close(d.nft);
                                return 0;       /* SIGTERM / SIGINT */
                        }
                        if (e->dead)
                                continue;
                        switch (e->kind) {
                        case K_CONTROL_LISTEN:
                        case K_CONTROL:
                                netd_control_event(&d, e, ev[i].events);
                                break;
                        case K_DNS_UDP:
                        case K_DNS_TCP_LISTEN:
                        case K_DNS_TCP:
                        case K_UPSTREAM:
                                netd_dns_event(&d, e, ev[i].events);
                                break;
                        case K_PROXY_LISTEN:
                        case K_PROXY_CLIENT:
                        case K_PROXY_UPSTREAM:
                                netd_proxy_event(&d, e, ev[i].events);
                                break;
                        case K_NFLOG:
                                netd_nflog_event(&d, e, ev[i].events);
                                break;
                        }
                }
                uint64_t now = pd_now_ms();
                netd_dns_tick(&d, now);
                netd_proxy_tick(&d, now);
                netd_nflog_tick(&d, now);
                reap(&d);
        }
fail:
        fprintf(stderr, "paddock-netd: %s\n", err.msg);
        return 1;
}
