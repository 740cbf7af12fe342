/* Building a new router (router_int.h): its uplink (the default user-mode
 * one, an operator's netns, or a macvlan), the never list it adds, the
 * upstream resolvers, nftables; and the one-line account of what egress
 * can do, kept in the file "egress" for the sandboxes' network info. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/hostnet.h"
#include "net/nft.h"
#include "net/nlsock.h"
#include "net/router.h"
#include "net/router_int.h"
#include "net/rtnl.h"
#include "net/relay.h"
#include "net/uplink.h"
#include "lib/util.h"

#define NEVER_EXTRA_MAX 64              /* what the router adds to the built-in list */
#define RT_IFNAME "rt0"                 /* the router's veth, seen from a user-mode uplink's netns */

/* "IFACE:ADDR/PREFIX:GW": a macvlan (bridge) on the caller's interface IFACE,
 * created straight into the router netns (no name appears on the host),
 * with the router's own address on that network and its gateway. The
 * network and the gateway join the never list. */
static int macvlan_uplink(struct pd_router *r, const char *spec, struct pd_nft_cidr *extra, size_t *n_extra,
                          struct pd_error *err)
{
        char buf[128], *save = NULL;
        if (strlen(spec) >= sizeof buf)
                return pd_error_setx(err, EINVAL, "uplink '%.64s...': too long", spec);
        snprintf(buf, sizeof buf, "%s", spec);
        char *ifname = strtok_r(buf, ":", &save), *cidr = strtok_r(NULL, ":", &save);
        char *gw = strtok_r(NULL, ":", &save);
        uint8_t addr[4], gwa[4];
        int prefix, rc;
        if (!ifname || !cidr || !gw || strtok_r(NULL, ":", &save) || strlen(ifname) >= 16 ||
            pd_router_parse_cidr4(cidr, addr, &prefix, NULL) < 0 || prefix < 1 || prefix > 30 ||
            inet_pton(AF_INET, gw, gwa) != 1)
                return pd_error_setx(err, EINVAL,
                                     "uplink '%s': expected pasta, slirp4netns, none, netns:PATH or "
                                     "IFACE:ADDR/PREFIX:GATEWAY (e.g. eth0:192.0.2.50/24:192.0.2.1)", spec);
        struct pd_rtnl *host;
        if ((rc = pd_rtnl_open(-1, &host, err)) < 0)
                return rc;
        int parent = pd_rtnl_index(host, ifname, err);
        if (parent < 0) {
                pd_rtnl_close(host);
                return pd_error_prefix(err, "uplink interface");
        }
        pd_rtnl_macvlan(host, PD_ROUTER_UPLINK_IF, PD_ROUTER_INDEX_BASE - 1, parent, r->nsfd);
        rc = pd_rtnl_flush(host, err);
        pd_rtnl_close(host);
        if (rc < 0)
                return pd_error_prefix(err, "macvlan on '%s'", ifname);
        pd_rtnl_addr(r->rt, PD_ROUTER_INDEX_BASE - 1, AF_INET, addr, prefix);
        pd_rtnl_up(r->rt, PD_ROUTER_INDEX_BASE - 1);
        pd_rtnl_default_route(r->rt, AF_INET, gwa, PD_ROUTER_INDEX_BASE - 1);
        for (int i = 0; i < 2; i++) {
                struct pd_nft_cidr *c = &extra[(*n_extra)++];
                memset(c, 0, sizeof *c);
                c->family = AF_INET;
                memcpy(c->addr, i ? gwa : addr, 4);
                c->prefix = (uint8_t)(i ? 32 : prefix);
        }
        return 0;
}

void pd_router_addr6(const char *prefix, const uint8_t v4[4], uint8_t out[16])
{
        inet_pton(AF_INET6, prefix, out);
        memcpy(out + 12, v4, 4);
}

/* A veth from the router (up0, transit .2, default route via .1) into the
 * netns up (far end farname, transit .1); with r->ipv6 the transit's /126
 * too. mtu 0: the kernel's default. */
static int veth_uplink(struct pd_router *r, int up, const uint8_t tnet[4], int tprefix, const char *farname,
                       unsigned mtu, struct pd_error *err)
{
        uint8_t near[4], far[4];
        pd_v4_put(far, pd_v4(tnet) + 1);
        pd_v4_put(near, pd_v4(tnet) + 2);
        struct pd_rtnl *urt;
        int rc = pd_rtnl_open(up, &urt, err);
        if (rc < 0)
                return rc;
        /* a router torn down a moment ago may still have its veth
         * (netns cleanup is asynchronous): remove it first */
        struct pd_error e3;
        pd_rtnl_del(urt, farname);
        (void)pd_rtnl_flush(urt, &e3);
        pd_rtnl_veth(r->rt, PD_ROUTER_UPLINK_IF, PD_ROUTER_INDEX_BASE - 1, farname, 0, up);
        rc = pd_rtnl_flush(r->rt, err);
        int fi = rc < 0 ? rc : pd_rtnl_index(urt, farname, err);
        if (fi < 0) {
                pd_rtnl_close(urt);
                return pd_error_prefix(err, "uplink veth");
        }
        uint8_t near6[16], far6[16];
        pd_router_addr6(PD_NET_TRANSIT6, near, near6);
        pd_router_addr6(PD_NET_TRANSIT6, far, far6);
        pd_rtnl_addr(urt, fi, AF_INET, far, tprefix);
        if (r->ipv6)
                pd_rtnl_addr(urt, fi, AF_INET6, far6, 96 + tprefix);
        if (mtu)
                pd_rtnl_mtu(urt, fi, mtu);
        pd_rtnl_up(urt, fi);
        rc = pd_rtnl_flush(urt, err);
        pd_rtnl_close(urt);
        if (rc < 0)
                return pd_error_prefix(err, "uplink side of the veth");
        pd_rtnl_addr(r->rt, PD_ROUTER_INDEX_BASE - 1, AF_INET, near, tprefix);
        if (r->ipv6)
                pd_rtnl_addr(r->rt, PD_ROUTER_INDEX_BASE - 1, AF_INET6, near6, 96 + tprefix);
        if (mtu)
                pd_rtnl_mtu(r->rt, PD_ROUTER_INDEX_BASE - 1, mtu);
        pd_rtnl_up(r->rt, PD_ROUTER_INDEX_BASE - 1);
        pd_rtnl_default_route(r->rt, AF_INET, far, PD_ROUTER_INDEX_BASE - 1);
        if (r->ipv6)
                pd_rtnl_default_route(r->rt, AF_INET6, far6, PD_ROUTER_INDEX_BASE - 1);
        return 0;
}

static void cidr4(struct pd_nft_cidr *c, const uint8_t addr[4], int prefix)
{
        memset(c, 0, sizeof *c);
        c->family = AF_INET;
        memcpy(c->addr, addr, 4);
        c->prefix = (uint8_t)prefix;
}

/* "a.b.c.d/n,..." for netd's --never */
static void never_text(const struct pd_nft_cidr *c, size_t n, char *out, size_t size)
{
        size_t o = 0;
        out[0] = 0;
        for (size_t i = 0; i < n; i++) {
                /* the network (netd refuses bits past the prefix): the
                 * macvlan's entry is the router's own address with the
                 * network's prefix */
                uint8_t net[16];
                int bytes = c[i].family == AF_INET ? 4 : 16;
                for (int b = 0; b < bytes; b++) {
                        int keep = c[i].prefix - 8 * b;
                        net[b] = c[i].addr[b] & (keep >= 8 ? 0xff : keep <= 0 ? 0 : (uint8_t)(0xff << (8 - keep)));
                }
                char a[INET6_ADDRSTRLEN];
                inet_ntop(c[i].family, net, a, sizeof a);
                int w = snprintf(out + o, size - o, "%s%s/%u", o ? "," : "", a, c[i].prefix);
                if (w < 0 || (size_t)w >= size - o)
                        break;
                o += (size_t)w;
        }
}

static void write_egress(struct pd_router *r, const char *uplink, const char *ipv6_why, const char *problem)
{
        char text[4096];
        struct pd_error e2;
        /* one line each; the prose last */
        snprintf(text, sizeof text, "uplink=%s\nmtu=%u\nipv6=%d\nresolvers=%s\nnever=%s\nipv6_why=%s\nproblem=%s\n",
                 uplink, r->sb_mtu, r->ipv6, r->resolvers, r->never, ipv6_why, problem);
        (void)pd_router_file_write(r, "egress", text, &e2);
}

/* value of "key=" in text (up to the end of its line) */
static void field(const char *text, const char *key, char *out, size_t size)
{
        out[0] = 0;
        size_t kl = strlen(key);
        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
                if (!strncmp(p, key, kl) && p[kl] == '=') {
                        const char *v = p + kl + 1;
                        size_t n = strcspn(v, "\n");
                        snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), v);
                        return;
                }
        }
}

void pd_router_load_egress(struct pd_router *r)
{
        char text[4096], mtu[16], v6[8];
        if (pd_router_file_read(r, "egress", text, sizeof text) <= 0)
                return;
        field(text, "mtu", mtu, sizeof mtu);
        r->sb_mtu = (unsigned)strtoul(mtu, NULL, 10);
        field(text, "ipv6", v6, sizeof v6);
        r->ipv6 = !strcmp(v6, "1");
        field(text, "resolvers", r->resolvers, sizeof r->resolvers);
        field(text, "never", r->never, sizeof r->never);
}

int pd_router_setup(struct pd_router *r, const struct pd_router_cfg *cfg, struct pd_error *err)
{
        uint8_t tnet[4];
        int tprefix, rc;
        char dflt[32];
        pd_router_default_transit(r->instance, dflt, sizeof dflt);
        if ((rc = pd_router_parse_cidr4(cfg->transit ? cfg->transit : dflt, tnet, &tprefix, err)) < 0)
                return rc;
        if (tprefix > 30)
                return pd_error_setx(err, EINVAL, "the uplink transit subnet needs at least a /30");
        pd_rtnl_up(r->rt, 1);   /* lo */
        struct pd_nft_cidr extra[NEVER_EXTRA_MAX], *hard = NULL;
        size_t n_extra = 0, n_hard = 0;
        const char *uplink_if = NULL;
        char problem[384] = "", uplink_name[32], ipv6_why[256] = "IPv6 goes through the default uplink only";
        struct pd_uplink u;
        int usermode = pd_uplink_choose(cfg->uplink, &u, err);
        if (usermode < 0)
                return usermode;
        bool explicit_uplink = cfg->uplink && *cfg->uplink && strcmp(cfg->uplink, "auto");
        snprintf(uplink_name, sizeof uplink_name, "%s", usermode ? (u.relay ? "relay" : pd_uplink_kind_name(u.kind))
                                                  : !strncmp(cfg->uplink, "netns:", 6) ? "netns" : "macvlan");
        if (usermode && u.kind == PD_UPLINK_NONE) {
                snprintf(problem, sizeof problem, "%s", u.why);
        } else if (usermode) {
                /* IPv6 when the host's works */
                ipv6_why[0] = 0;
                if (pd_hostnet_ipv6_working(ipv6_why, sizeof ipv6_why))
                        r->ipv6 = true;
                if (r->ipv6 && (rc = pd_netns_sysctl(r->nsfd, "/proc/sys/net/ipv6/conf/all/forwarding", "1", err)) < 0)
                        return pd_error_prefix(err, "router IPv6");
                int up = pd_uplink_make_netns(r, err);
                rc = up;
                if (up >= 0) {
                        rc = veth_uplink(r, up, tnet, tprefix, RT_IFNAME, PD_UPLINK_MTU, err);
                        if (rc == 0)
                                rc = pd_uplink_config_netns(r, up, u.kind, RT_IFNAME, err);
                        if (rc == 0 && r->ipv6)
                                rc = pd_netns_sysctl(up, "/proc/sys/net/ipv6/conf/all/forwarding", "1", err);
                        close(up);
                }
                if (rc < 0 && explicit_uplink)
                        return pd_error_prefix(err, "uplink");
                if (rc < 0) {
                        /* the default uplink cannot be made here (user
                         * namespaces refused, ...): sandboxes are still
                         * created, and say why */
                        snprintf(problem, sizeof problem, "the default uplink (%s) could not be set up: %s",
                                 pd_uplink_kind_name(u.kind), err->msg);
                        pd_uplink_teardown(r);
                        struct pd_error e3;
                        pd_rtnl_del(r->rt, PD_ROUTER_UPLINK_IF);
                        (void)pd_rtnl_flush(r->rt, &e3);
                        u.kind = PD_UPLINK_NONE;
                        r->ipv6 = false;
                        snprintf(uplink_name, sizeof uplink_name, "none");
                        pd_error_clear(err);
                        goto links;
                }
                uplink_if = PD_ROUTER_UPLINK_IF;
                /* pasta needs large frames to go fast (1500: a fifteenth of
                 * the throughput); the uplink's veth and the sandboxes'
                 * veths carry them */
                r->sb_mtu = PD_UPLINK_MTU;
                /* The uplink process's sockets would reach the host's own
                 * addresses like any other destination (its services, the
                 * server's port...): no rule opens them (the hard set,
                 * with the transit and slirp's network, where 10.0.2.2 is
                 * the host). The host's networks (its LAN) join the never
                 * list, which an allow rule inside it does open. */
                hard = extra;
                cidr4(&extra[n_extra++], tnet, tprefix);
                if (u.kind == PD_UPLINK_SLIRP) {
                        uint8_t sn[4];
                        int sp;
                        (void)pd_router_parse_cidr4(PD_UPLINK_SLIRP_CIDR, sn, &sp, NULL);
                        cidr4(&extra[n_extra++], sn, sp);
                        struct pd_nft_cidr *c6 = &extra[n_extra++];
                        memset(c6, 0, sizeof *c6);
                        c6->family = AF_INET6;
                        inet_pton(AF_INET6, "fd00::", c6->addr);
                        c6->prefix = 64;        /* PD_UPLINK_SLIRP_CIDR6 */
                }
                n_extra += pd_hostnet_addrs(extra + n_extra, (NEVER_EXTRA_MAX - 4 - n_extra) / 2, false);
                n_hard = n_extra;
                n_extra += pd_hostnet_addrs(extra + n_extra, NEVER_EXTRA_MAX - 4 - n_extra, true);
        } else if (!strncmp(cfg->uplink, "netns:", 6)) {
                int up = open(cfg->uplink + 6, O_RDONLY | O_CLOEXEC);
                if (up < 0)
                        return pd_error_set(err, errno, "uplink netns '%s'", cfg->uplink + 6);
                char farname[16];
                snprintf(farname, sizeof farname, "pdu%.8s", r->instance);
                rc = veth_uplink(r, up, tnet, tprefix, farname, 0, err);
                close(up);
                if (rc < 0)
                        return rc;
                uplink_if = PD_ROUTER_UPLINK_IF;
                /* the transit is not the internet: no sandbox reaches it */
                cidr4(&extra[n_extra++], tnet, tprefix);
        } else {
                if ((rc = macvlan_uplink(r, cfg->uplink, extra, &n_extra, err)) < 0)
                        return rc;
                uplink_if = PD_ROUTER_UPLINK_IF;
        }
links:
        if ((rc = pd_rtnl_flush(r->rt, err)) < 0)
                return pd_error_prefix(err, "router links");
        /* the pool itself: a sandbox never reaches another one */
        cidr4(&extra[n_extra++], r->pool, r->pool_prefix);
        size_t nb;
        const struct pd_netpol_builtin *b = pd_netpol_builtin_deny(&nb);
        struct pd_nft_cidr deny[PD_NFT_OPEN_DENY_MAX];
        size_t n = 0;
        for (size_t i = 0; i < nb && n < PD_NFT_OPEN_DENY_MAX; i++, n++) {
                memset(&deny[n], 0, sizeof deny[n]);
                deny[n].family = b[i].family;
                memcpy(deny[n].addr, b[i].addr, 16);
                deny[n].prefix = b[i].prefix;
        }
        for (size_t i = 0; i < n_extra && n < PD_NFT_OPEN_DENY_MAX; i++)
                deny[n++] = extra[i];
        never_text(extra, n_extra, r->never, sizeof r->never);
        struct pd_nft_router_cfg nc = { .uplink_ifname = uplink_if, .open_deny = deny, .n_open_deny = n,
                                        .hard_deny = hard, .n_hard_deny = n_hard,
                                        .dns_port = 53, .proxy_port = PD_ROUTER_PROXY_PORT,
                                        .relay_port = usermode && u.relay ? PD_RELAY_PORT : 0,
                                        .relay_queue = PD_RELAY_QUEUE };
        if ((rc = pd_nft_router_init(r->nft, &nc, err)) < 0)
                return rc;

        /* netd's upstreams: the setting, else what the host uses */
        bool loopback = false, dns_forward = false;
        char why[256] = "";
        if (cfg->resolvers && *cfg->resolvers)
                snprintf(r->resolvers, sizeof r->resolvers, "%s", cfg->resolvers);
        else if (pd_hostnet_resolvers(r->resolvers, sizeof r->resolvers, &loopback, why, sizeof why) == 0 &&
                 loopback && usermode && u.kind != PD_UPLINK_NONE) {
                /* only loopback resolvers: the uplink process asks them
                 * from the host's side */
                dns_forward = u.kind == PD_UPLINK_PASTA;
                snprintf(r->resolvers, sizeof r->resolvers, "%s",
                         dns_forward ? PD_UPLINK_PASTA_DNS : PD_UPLINK_SLIRP_DNS);
        }
        if (!r->resolvers[0] && !problem[0])
                snprintf(problem, sizeof problem, "no upstream DNS resolver: %s (give --net-resolver)", why);

        /* last: the rules are in place before the process passes a packet */
        if (usermode && u.kind != PD_UPLINK_NONE) {
                /* not up in time: not recorded, pd_router_egress looks at
                 * the uplink as it is when asked */
                char late[256];
                if ((rc = pd_uplink_start(r, &u, dns_forward, late, sizeof late, err)) < 0) {
                        if (explicit_uplink)
                                return pd_error_prefix(err, "uplink");
                        /* the router works without it; sandboxes say why */
                        snprintf(problem, sizeof problem, "the default uplink (%s) could not be started: %s",
                                 pd_uplink_kind_name(u.kind), err->msg);
                        pd_error_clear(err);
                        pd_uplink_teardown(r);
                        struct pd_error e3;
                        pd_rtnl_del(r->rt, PD_ROUTER_UPLINK_IF);
                        (void)pd_rtnl_flush(r->rt, &e3);
                        snprintf(uplink_name, sizeof uplink_name, "none");
                        r->ipv6 = false;
                }
        }
        write_egress(r, uplink_name, ipv6_why, problem);
        return 0;
}

int pd_router_egress(const struct pd_state *st, struct pd_router_egress *out)
{
        memset(out, 0, sizeof *out);
        /* read only: no lock, no netlink sockets of the router (a sandbox's
         * network info asks this often) */
        struct pd_router r = { .dirfd = -1, .lockfd = -1, .nsfd = -1 };
        snprintf(r.dir, sizeof r.dir, "%s/net", st->rundir);
        snprintf(r.instance, sizeof r.instance, "%s", st->instance);
        r.dirfd = openat(st->rundirfd, "net", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r.dirfd < 0)
                return -ENOENT;
        char text[4096], pin[PATH_MAX + 16];
        snprintf(pin, sizeof pin, "%s/router", r.dir);
        int ns = pd_router_pin_open(pin);
        if (ns < 0) {
                close(r.dirfd);
                return -ENOENT;
        }
        close(ns);
        if (pd_router_file_read(&r, "egress", text, sizeof text) <= 0) {
                /* a router made before this file existed */
                snprintf(out->uplink, sizeof out->uplink, "unknown");
                close(r.dirfd);
                return 0;
        }
        field(text, "uplink", out->uplink, sizeof out->uplink);
        field(text, "resolvers", out->resolvers, sizeof out->resolvers);
        field(text, "problem", out->problem, sizeof out->problem);
        if (!out->problem[0] && (!strcmp(out->uplink, "pasta") || !strcmp(out->uplink, "slirp4netns") ||
                                  !strcmp(out->uplink, "relay")))
                (void)pd_uplink_up(&r, out->problem, sizeof out->problem);
        close(r.dirfd);
        return 0;
}
