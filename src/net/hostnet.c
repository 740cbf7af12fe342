/* The host's network, read only (hostnet.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hostnet.h"
#include "util.h"

static bool is_loopback(const char *ip)
{
        struct in6_addr a6;
        struct in_addr a4;
        if (inet_pton(AF_INET, ip, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        return inet_pton(AF_INET6, ip, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* The nameserver lines of a resolv.conf, appended to out. */
static int read_resolv(const char *path, char list[][INET6_ADDRSTRLEN], int max, int n)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return n;
        char line[512];
        while (n < max && fgets(line, sizeof line, f)) {
                char key[32], ip[128];
                if (sscanf(line, " %31s %127s", key, ip) != 2 || strcmp(key, "nameserver"))
                        continue;
                struct in6_addr a6;
                struct in_addr a4;
                /* "fe80::1%eth0": a scope the router's netns does not have */
                if (inet_pton(AF_INET, ip, &a4) != 1 && inet_pton(AF_INET6, ip, &a6) != 1)
                        continue;
                bool dup = false;
                for (int i = 0; i < n; i++)
                        dup |= !strcmp(list[i], ip);
                if (!dup)
                        snprintf(list[n++], INET6_ADDRSTRLEN, "%s", ip);
        }
        fclose(f);
        return n;
}

int pd_hostnet_resolvers(char *out, size_t size, bool *loopback, char *why, size_t whysz)
{
        char list[8][INET6_ADDRSTRLEN], up[8][INET6_ADDRSTRLEN];
        int n = read_resolv(PD_HOSTNET_RESOLV, list, 8, 0), k = 0;
        *loopback = false;
        out[0] = 0;
        why[0] = 0;
        for (int i = 0; i < n; i++) {
                if (!strcmp(list[i], "127.0.0.53")) {
                        /* systemd-resolved's stub: what it asks, itself */
                        k = read_resolv(PD_HOSTNET_RESOLVED, up, 8, k);
                        continue;
                }
                if (k < 8)
                        snprintf(up[k++], INET6_ADDRSTRLEN, "%s", list[i]);
        }
        int used = 0;
        size_t o = 0;
        for (int i = 0; i < k && used < PD_HOSTNET_MAX_RESOLVERS; i++) {
                if (is_loopback(up[i])) {
                        *loopback = true;
                        continue;
                }
                int w = snprintf(out + o, size - o, "%s%s", used ? "," : "", up[i]);
                if (w < 0 || (size_t)w >= size - o)
                        break;
                o += (size_t)w;
                used++;
        }
        if (!used) {
                if (*loopback)
                        snprintf(why, whysz, "the host's resolver is on its loopback (%s names only %s)",
                                 PD_HOSTNET_RESOLV, n ? list[0] : "");
                else if (n)
                        snprintf(why, whysz, "%s names no resolver paddock can use", PD_HOSTNET_RESOLV);
                else
                        snprintf(why, whysz, "%s names no resolver", PD_HOSTNET_RESOLV);
        }
        return used;
}

static void put(struct pd_nft_cidr *c, int family, const void *addr, int prefix)
{
        memset(c, 0, sizeof *c);
        c->family = family;
        memcpy(c->addr, addr, family == AF_INET ? 4 : 16);
        c->prefix = (uint8_t)prefix;
        /* the network, not the host, for a prefix shorter than the address */
        int bytes = family == AF_INET ? 4 : 16;
        for (int b = 0; b < bytes; b++) {
                int keep = prefix - 8 * b;
                c->addr[b] &= keep >= 8 ? 0xff : keep <= 0 ? 0 : (uint8_t)(0xff << (8 - keep));
        }
}

static int mask_len(const struct sockaddr *m, int family)
{
        const uint8_t *p = family == AF_INET ? (const uint8_t *)&((const struct sockaddr_in *)m)->sin_addr
                                             : (const uint8_t *)&((const struct sockaddr_in6 *)m)->sin6_addr;
        int bytes = family == AF_INET ? 4 : 16, len = 0;
        for (int i = 0; i < bytes; i++)
                len += __builtin_popcount(p[i]);
        return len;
}

size_t pd_hostnet_addrs(struct pd_nft_cidr *c, size_t max, bool networks)
{
        struct ifaddrs *ifa = NULL;
        if (getifaddrs(&ifa) < 0)
                return 0;
        size_t n = 0;
        for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
                if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
                        continue;
                int fam = i->ifa_addr->sa_family;
                const void *a = fam == AF_INET ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                                               : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
                if (fam == AF_INET && (ntohl(((const struct in_addr *)a)->s_addr) >> 24) == 127)
                        continue;
                if (fam == AF_INET6 && (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_LINKLOCAL(a)))
                        continue;
                int full = fam == AF_INET ? 32 : 128;
                int p = i->ifa_netmask ? mask_len(i->ifa_netmask, fam) : full;
                if (!networks)
                        put(&c[n++], fam, a, full);
                else if (p >= 8 && p < full)    /* a /0 "network" would be the internet */
                        put(&c[n++], fam, a, p);
        }
        freeifaddrs(ifa);
        return n;
}

bool pd_hostnet_ipv6_route(void)
{
        /* connect() on a datagram socket only looks the route up */
        int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return false;
        struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(53) };
        inet_pton(AF_INET6, "2001:4860:4860::8888", &sa.sin6_addr);    /* any global address */
        bool ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        return ok;
}
