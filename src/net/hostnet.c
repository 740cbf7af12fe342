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
#include <libmnl/libmnl.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include "net/hostnet.h"
#include "lib/util.h"

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

struct neigh_q {
        uint8_t addr[16];
        int ifindex;
        bool usable;
};

static int neigh_cb(const struct nlmsghdr *h, void *data)
{
        struct neigh_q *q = data;
        const struct ndmsg *nd = mnl_nlmsg_get_payload(h);
        if (h->nlmsg_type != RTM_NEWNEIGH || nd->ndm_family != AF_INET6 || nd->ndm_ifindex != q->ifindex)
                return MNL_CB_OK;
        const struct nlattr *a;
        mnl_attr_for_each(a, h, sizeof *nd) {
                if (mnl_attr_get_type(a) == NDA_DST && mnl_attr_get_payload_len(a) == 16 &&
                    !memcmp(mnl_attr_get_payload(a), q->addr, 16))
                        q->usable |= (nd->ndm_state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE |
                                                       NUD_PERMANENT | NUD_NOARP)) != 0;
        }
        return MNL_CB_OK;
}

/* Is the neighbour addr on ifindex known to answer (not FAILED, not
 * INCOMPLETE, not unknown)? One rtnetlink dump. */
static bool neigh_usable(const uint8_t addr[16], int ifindex)
{
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!nl)
                return false;
        struct neigh_q q = { .ifindex = ifindex };
        memcpy(q.addr, addr, 16);
        char buf[16384];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_GETNEIGH;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        nlh->nlmsg_seq = 1;
        struct ndmsg *nd = mnl_nlmsg_put_extra_header(nlh, sizeof *nd);
        nd->ndm_family = AF_INET6;
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == 0 && mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) >= 0) {
                unsigned portid = mnl_socket_get_portid(nl);
                for (;;) {
                        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
                        if (n <= 0 || mnl_cb_run(buf, (size_t)n, 1, portid, neigh_cb, &q) <= MNL_CB_STOP)
                                break;
                }
        }
        mnl_socket_close(nl);
        return q.usable;
}

static int hexbyte(const char *p)
{
        unsigned v;
        return sscanf(p, "%2x", &v) == 1 ? (int)v : -1;
}

bool pd_hostnet_ipv6_working(char *why, size_t whysz)
{
        FILE *f = fopen("/proc/net/ipv6_route", "re");
        if (!f) {
                snprintf(why, whysz, "the host has no IPv6");
                return false;
        }
        char line[512];
        bool route = false, ok = false;
        while (!ok && fgets(line, sizeof line, f)) {
                char dst[33], hop[33], dev[IF_NAMESIZE + 1];
                unsigned plen, flags;
                if (sscanf(line, "%32s %x %*s %*s %32s %*s %*s %*s %x %16s", dst, &plen, hop, &flags, dev) != 5)
                        continue;
                /* a default route through a gateway, not lo, not reject */
                if (plen != 0 || strspn(dst, "0") != 32 || !(flags & 0x2) || (flags & 0x200) || !strcmp(dev, "lo"))
                        continue;
                route = true;
                uint8_t gw[16];
                for (int i = 0; i < 16; i++)
                        gw[i] = (uint8_t)hexbyte(hop + 2 * i);
                int ifindex = (int)if_nametoindex(dev);
                ok = ifindex > 0 && neigh_usable(gw, ifindex);
        }
        fclose(f);
        if (!ok)
                snprintf(why, whysz, route ? "the host's IPv6 default gateway has not answered (no neighbour entry)"
                                           : "the host has no IPv6 default route");
        return ok;
}
