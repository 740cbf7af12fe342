/* Kernel drops in the audit log: the router's nftables log each dropped
 * packet of a sandbox (rate-limited in the kernel, nft.h PD_NFT_LOG_*) to
 * nflog group PD_NFT_LOG_GROUP with the prefix "pd:<key>:<kind>"; netd
 * subscribes to that group through nfnetlink_log and writes one "deny"
 * line per packet, or per burst of the same (kind, address, port,
 * protocol): repeats within NETD_DROP_WINDOW_MS are counted and written as
 * one line when the window ends. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include "net/netd/netd.h"
#include "lib/util.h"

struct nflog_ev {
        struct netd_ev ev;
        struct mnl_socket *nl;
};

static void nflog_free(struct netd_ev *ev)
{
        struct nflog_ev *n = (struct nflog_ev *)ev;
        mnl_socket_close(n->nl);
        free(n);
}

static int config(struct mnl_socket *nl, uint16_t group, int cmd_or_mode, struct pd_error *err)
{
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        nlh->nlmsg_seq = (uint32_t)time(NULL);
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = AF_UNSPEC;
        g->version = NFNETLINK_V0;
        g->res_id = htons(group);
        if (cmd_or_mode >= 0) {
                struct nfulnl_msg_config_cmd c = { .command = (uint8_t)cmd_or_mode };
                mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof c, &c);
        } else {
                struct nfulnl_msg_config_mode m = { .copy_range = htonl(PD_NFT_LOG_SNAPLEN),
                                                    .copy_mode = NFULNL_COPY_PACKET };
                mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof m, &m);
        }
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return pd_error_set(err, errno, "nflog config");
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
        if (n < 0)
                return pd_error_set(err, errno, "nflog config");
        if (mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, mnl_socket_get_portid(nl), NULL, NULL) < 0)
                return pd_error_set(err, errno, "nflog bind group %u", group);
        return 0;
}

int netd_nflog_listen(struct netd *d, struct pd_error *err)
{
        struct nflog_ev *n = calloc(1, sizeof *n);
        if (!n)
                return pd_error_set(err, ENOMEM, "nflog");
        n->ev.kind = K_NFLOG;
        n->ev.free_fn = nflog_free;
        /* blocking while the kernel acks the config, non-blocking after */
        n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        if (!n->nl) {
                free(n);
                return pd_error_set(err, errno, "nflog socket");
        }
        int r, fd = mnl_socket_get_fd(n->nl);
        struct timeval tv = { .tv_sec = 5 };
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        /* a burst the socket cannot hold loses log lines, never the socket */
        setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
        if (mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                r = pd_error_set(err, errno, "nflog bind");
                goto fail;
        }
        if ((r = config(n->nl, PD_NFT_LOG_GROUP, NFULNL_CFG_CMD_BIND, err)) < 0 ||
            (r = config(n->nl, PD_NFT_LOG_GROUP, -1, err)) < 0)
                goto fail;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || netd_watch(d, fd, EPOLLIN, &n->ev) < 0) {
                r = pd_error_set(err, errno, "nflog socket");
                goto fail;
        }
        d->nflog = &n->ev;
        return 0;
fail:
        mnl_socket_close(n->nl);
        free(n);
        return r;
}

/* ---- one logged packet ---- */

struct drop {
        const char *kind;               /* points into a static table */
        struct netd_addr dst;
        uint16_t port;
        const char *proto;
};

static const char *const drop_kinds[] = { "rate", "deny", "never", "resolver", "default",
                                          "spoof", "peer", "router" };

static const char *proto_name(uint8_t p)
{
        switch (p) {
        case IPPROTO_TCP: return "tcp";
        case IPPROTO_UDP: return "udp";
        case IPPROTO_ICMP: return "icmp";
        case IPPROTO_ICMPV6: return "icmpv6";
        case IPPROTO_SCTP: return "sctp";
        default: return "other";
        }
}

/* Decode the network header of a logged packet; false if it is neither a
 * whole IPv4 nor IPv6 header. */
static bool decode(const uint8_t *p, size_t len, struct drop *out, struct netd_addr *src)
{
        uint8_t l4;
        size_t off;
        if (len >= 20 && (p[0] >> 4) == 4) {
                off = (size_t)(p[0] & 0x0f) * 4;
                if (off < 20)
                        return false;
                out->dst.family = src->family = AF_INET;
                memcpy(out->dst.a, p + 16, 4);
                memcpy(src->a, p + 12, 4);
                l4 = p[9];
                /* a later fragment has no ports */
                if ((((p[6] & 0x1f) << 8) | p[7]) != 0)
                        l4 = 0;
        } else if (len >= 40 && (p[0] >> 4) == 6) {
                off = 40;
                out->dst.family = src->family = AF_INET6;
                memcpy(out->dst.a, p + 24, 16);
                memcpy(src->a, p + 8, 16);
                l4 = p[6];              /* extension headers: no port */
        } else {
                return false;
        }
        out->proto = proto_name(l4);
        if ((l4 == IPPROTO_TCP || l4 == IPPROTO_UDP || l4 == IPPROTO_SCTP) && len >= off + 4)
                out->port = (uint16_t)((p[off + 2] << 8) | p[off + 3]);
        return true;
}

static bool same_drop(const struct netd_sandbox *sb, const struct drop *x)
{
        return sb->drop_kind == x->kind && sb->drop_port == x->port && sb->drop_proto == x->proto &&
               sb->drop_dst.family == x->dst.family && !memcmp(sb->drop_dst.a, x->dst.a, 16);
}

static void write_drop(struct netd_sandbox *sb, const struct drop *x, uint64_t repeats)
{
        struct netd_audit a = { .kind = "deny", .allow = false, .addr = &x->dst, .port = x->port,
                                .proto = x->proto, .rule_kind = x->kind, .repeats = repeats };
        netd_audit(sb, &a);
}

/* The repeats counted since the last line, as one line. */
static void flush_repeats(struct netd_sandbox *sb)
{
        if (!sb->drop_repeats)
                return;
        struct drop x = { .kind = sb->drop_kind, .dst = sb->drop_dst, .port = sb->drop_port,
                          .proto = sb->drop_proto };
        write_drop(sb, &x, sb->drop_repeats);
        sb->drop_repeats = 0;
}

/* The sandbox whose veth in the router is ifindex. */
static struct netd_sandbox *by_iif(struct netd *d, uint32_t ifindex)
{
        char name[IF_NAMESIZE];
        if (!ifindex || !if_indextoname(ifindex, name))
                return NULL;
        for (struct netd_sandbox *s = d->sandboxes; s; s = s->next)
                if (!strcmp(s->iface, name))
                        return s;
        return NULL;
}

/* IPv6 a kernel sends by itself at link-up (router and neighbour
 * solicitation, MLD from :: or fe80::/10): dropped, not worth a line. */
static bool autoconf_noise(const struct netd_addr *src)
{
        static const uint8_t zero[16];
        return src->family == AF_INET6 &&
               (!memcmp(src->a, zero, 16) || (src->a[0] == 0xfe && (src->a[1] & 0xc0) == 0x80));
}

static void on_drop(struct netd *d, const char *prefix, uint32_t iif, const uint8_t *pkt, size_t len)
{
        /* "pd:<key>:<kind>", written by nft.c only; anything else is not ours */
        if (strncmp(prefix, PD_NFT_LOG_PREFIX, strlen(PD_NFT_LOG_PREFIX)))
                return;
        const char *key = prefix + strlen(PD_NFT_LOG_PREFIX);
        const char *colon = strchr(key, ':');
        if (!colon || colon == key || (size_t)(colon - key) > PD_NFT_KEY_MAX)
                return;
        char id[PD_NFT_KEY_MAX + 1];
        memcpy(id, key, (size_t)(colon - key));
        id[colon - key] = '\0';
        struct netd_sandbox *sb = strcmp(id, "-") ? netd_sandbox_by_id(d, id) : by_iif(d, iif);
        if (!sb)
                return;         /* removed meanwhile */
        struct drop x = { 0 };
        struct netd_addr src = { 0 };
        for (size_t i = 0; i < PD_ARRAY_SIZE(drop_kinds); i++)
                if (!strcmp(colon + 1, drop_kinds[i]))
                        x.kind = drop_kinds[i];
        if (!x.kind || !decode(pkt, len, &x, &src) || autoconf_noise(&src))
                return;
        uint64_t now = pd_now_ms();
        if (sb->drop_kind && same_drop(sb, &x) && now - sb->drop_first_ms < NETD_DROP_WINDOW_MS) {
                sb->drop_repeats++;
                return;
        }
        flush_repeats(sb);
        write_drop(sb, &x, 0);
        sb->drop_kind = x.kind;
        sb->drop_dst = x.dst;
        sb->drop_port = x.port;
        sb->drop_proto = x.proto;
        sb->drop_first_ms = now;
}

static int attr_cb(const struct nlattr *a, void *data)
{
        const struct nlattr **tb = data;
        int type = mnl_attr_get_type(a);
        if (type <= NFULA_MAX)
                tb[type] = a;
        return MNL_CB_OK;
}

static int msg_cb(const struct nlmsghdr *nlh, void *data)
{
        struct netd *d = data;
        if ((nlh->nlmsg_type & 0xff) != NFULNL_MSG_PACKET)
                return MNL_CB_OK;
        const struct nlattr *tb[NFULA_MAX + 1] = { 0 };
        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), attr_cb, tb) < 0)
                return MNL_CB_OK;
        if (!tb[NFULA_PREFIX] || !tb[NFULA_PAYLOAD])
                return MNL_CB_OK;
        char prefix[128];
        size_t plen = mnl_attr_get_payload_len(tb[NFULA_PREFIX]);
        if (plen == 0 || plen > sizeof prefix)
                return MNL_CB_OK;
        memcpy(prefix, mnl_attr_get_payload(tb[NFULA_PREFIX]), plen);
        prefix[plen - 1] = '\0';        /* the kernel sends it NUL-terminated */
        uint32_t iif = tb[NFULA_IFINDEX_INDEV] ? ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_INDEV])) : 0;
        on_drop(d, prefix, iif, mnl_attr_get_payload(tb[NFULA_PAYLOAD]),
                mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]));
        return MNL_CB_OK;
}

void netd_nflog_event(struct netd *d, struct netd_ev *ev, uint32_t events)
{
        struct nflog_ev *n = (struct nflog_ev *)ev;
        (void)events;
        char buf[MNL_SOCKET_BUFFER_SIZE];
        /* a bounded number of reads per wakeup: the others get their turn */
        for (int i = 0; i < 64; i++) {
                ssize_t got = mnl_socket_recvfrom(n->nl, buf, sizeof buf);
                if (got <= 0)
                        return;
                mnl_cb_run(buf, (size_t)got, 0, 0, msg_cb, d);
        }
}

void netd_nflog_tick(struct netd *d, uint64_t now)
{
        for (struct netd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
                if (sb->drop_repeats && now - sb->drop_first_ms >= NETD_DROP_WINDOW_MS) {
                        flush_repeats(sb);
                        sb->drop_kind = NULL;   /* the next one is written at once */
                }
}
