/* rtnetlink requests queued in one buffer and sent with one sendmsg();
 * each carries NLM_F_ACK and the kernel answers them in order. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "net/nlsock.h"
#include "net/rtnl.h"

#define RTNL_BUF (64u << 10)

struct pd_rtnl {
        struct mnl_socket *nl;
        uint32_t portid;
        uint32_t seq, first_seq;
        unsigned pending;
        size_t len;
        int oom;
        char buf[RTNL_BUF];
};

int pd_rtnl_open(int netns_fd, struct pd_rtnl **out, struct pd_error *err)
{
        struct pd_rtnl *rt = calloc(1, sizeof *rt);
        if (!rt)
                return pd_error_set(err, ENOMEM, "rtnl");
        int r = pd_nlsock_open(netns_fd, NETLINK_ROUTE, "rtnetlink", &rt->nl, err);
        if (r < 0) {
                free(rt);
                return r;
        }
        rt->portid = mnl_socket_get_portid(rt->nl);
        rt->seq = (uint32_t)random();
        *out = rt;
        return 0;
}

void pd_rtnl_close(struct pd_rtnl *rt)
{
        if (!rt)
                return;
        mnl_socket_close(rt->nl);
        free(rt);
}

/* Room for one request of up to 1 KiB at the end of the buffer. */
static struct nlmsghdr *req(struct pd_rtnl *rt, uint16_t type, uint16_t flags)
{
        if (rt->len + 1024 > RTNL_BUF) {
                rt->oom = 1;
                return NULL;
        }
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(rt->buf + rt->len);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        nlh->nlmsg_seq = rt->seq++;
        if (!rt->pending)
                rt->first_seq = nlh->nlmsg_seq;
        rt->pending++;
        return nlh;
}

static void done(struct pd_rtnl *rt, struct nlmsghdr *nlh)
{
        rt->len += NLMSG_ALIGN(nlh->nlmsg_len);
}

void pd_rtnl_veth(struct pd_rtnl *rt, const char *name, int index, const char *peer,
                  int peer_index, int peer_ns_fd)
{
        struct nlmsghdr *nlh = req(rt, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        if (!nlh)
                return;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_index = index;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        struct nlattr *li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
        struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        struct nlattr *p = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
        struct ifinfomsg *pifm = mnl_nlmsg_put_extra_header(nlh, sizeof *pifm);
        /* put_extra_header advanced nlmsg_len; the nested header sits in
         * the attribute's payload, as the kernel expects */
        pifm->ifi_family = AF_UNSPEC;
        pifm->ifi_index = peer_index;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
        if (peer_ns_fd >= 0)
                mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_ns_fd);
        mnl_attr_nest_end(nlh, p);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, li);
        done(rt, nlh);
}

void pd_rtnl_macvlan(struct pd_rtnl *rt, const char *name, int index, int parent_index, int ns_fd)
{
        struct nlmsghdr *nlh = req(rt, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        if (!nlh)
                return;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_index = index;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        mnl_attr_put_u32(nlh, IFLA_LINK, (uint32_t)parent_index);
        if (ns_fd >= 0)
                mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)ns_fd);
        struct nlattr *li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "macvlan");
        struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        mnl_attr_put_u32(nlh, IFLA_MACVLAN_MODE, MACVLAN_MODE_BRIDGE);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, li);
        done(rt, nlh);
}

void pd_rtnl_addr(struct pd_rtnl *rt, int ifindex, int family, const void *addr, int prefix)
{
        struct nlmsghdr *nlh = req(rt, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
        if (!nlh)
                return;
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
        ifa->ifa_family = (uint8_t)family;
        ifa->ifa_prefixlen = (uint8_t)prefix;
        ifa->ifa_index = (uint32_t)ifindex;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        size_t alen = family == AF_INET ? 4 : 16;
        mnl_attr_put(nlh, IFA_LOCAL, alen, addr);
        mnl_attr_put(nlh, IFA_ADDRESS, alen, addr);
        if (family == AF_INET6)
                mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD);
        done(rt, nlh);
}

static void setlink(struct pd_rtnl *rt, int ifindex, int ns_fd, const char *newname)
{
        struct nlmsghdr *nlh = req(rt, RTM_NEWLINK, 0);
        if (!nlh)
                return;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_index = ifindex;
        if (ns_fd < 0) {
                ifm->ifi_flags = IFF_UP;
                ifm->ifi_change = IFF_UP;
        } else {
                mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)ns_fd);
                if (newname)
                        mnl_attr_put_strz(nlh, IFLA_IFNAME, newname);
        }
        done(rt, nlh);
}

void pd_rtnl_up(struct pd_rtnl *rt, int ifindex)
{
        setlink(rt, ifindex, -1, NULL);
}

void pd_rtnl_mtu(struct pd_rtnl *rt, int ifindex, unsigned mtu)
{
        struct nlmsghdr *nlh = req(rt, RTM_NEWLINK, 0);
        if (!nlh)
                return;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_index = ifindex;
        mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
        done(rt, nlh);
}

void pd_rtnl_move(struct pd_rtnl *rt, int ifindex, int ns_fd, const char *newname)
{
        setlink(rt, ifindex, ns_fd, newname);
}

void pd_rtnl_default_route(struct pd_rtnl *rt, int family, const void *gw, int ifindex)
{
        struct nlmsghdr *nlh = req(rt, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE);
        if (!nlh)
                return;
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof *rtm);
        rtm->rtm_family = (uint8_t)family;
        rtm->rtm_dst_len = 0;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_STATIC;
        rtm->rtm_scope = RT_SCOPE_UNIVERSE;
        rtm->rtm_type = RTN_UNICAST;
        rtm->rtm_flags = RTNH_F_ONLINK;
        mnl_attr_put(nlh, RTA_GATEWAY, family == AF_INET ? 4 : 16, gw);
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
        done(rt, nlh);
}

void pd_rtnl_del(struct pd_rtnl *rt, const char *name)
{
        struct nlmsghdr *nlh = req(rt, RTM_DELLINK, 0);
        if (!nlh)
                return;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
        ifm->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        done(rt, nlh);
}

int pd_rtnl_flush(struct pd_rtnl *rt, struct pd_error *err)
{
        int first = 0;
        unsigned pending = rt->pending;
        uint32_t seq0 = rt->first_seq;
        size_t len = rt->len;
        rt->pending = 0;
        rt->len = 0;
        if (rt->oom) {
                rt->oom = 0;
                return pd_error_setx(err, ENOBUFS, "too many rtnetlink requests in one batch");
        }
        if (!pending)
                return 0;
        if (mnl_socket_sendto(rt->nl, rt->buf, len) < 0)
                return pd_error_set(err, errno, "rtnetlink send");
        unsigned acked = 0;
        char buf[MNL_SOCKET_BUFFER_SIZE];
        while (acked < pending) {
                ssize_t got = mnl_socket_recvfrom(rt->nl, buf, sizeof buf);
                if (got < 0) {
                        if (errno == EINTR)
                                continue;
                        return pd_error_set(err, errno, "rtnetlink receive");
                }
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, (int)got);
                     h = mnl_nlmsg_next(h, (int *)&got)) {
                        if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq - seq0 >= pending)
                                continue;
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                        acked++;
                        if (e->error && !first)
                                first = -e->error;
                }
        }
        if (first)
                return pd_error_set(err, first, "rtnetlink");
        return 0;
}

static int link_cb(const struct nlmsghdr *h, void *data)
{
        const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(h);
        *(int *)data = ifm->ifi_index;
        return MNL_CB_OK;
}

int pd_rtnl_index(struct pd_rtnl *rt, const char *name, struct pd_error *err)
{
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_GETLINK;
        nlh->nlmsg_flags = NLM_F_REQUEST;
        nlh->nlmsg_seq = rt->seq++;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
        ifm->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        if (mnl_socket_sendto(rt->nl, nlh, nlh->nlmsg_len) < 0)
                return pd_error_set(err, errno, "rtnetlink send");
        ssize_t got = mnl_socket_recvfrom(rt->nl, buf, sizeof buf);
        if (got < 0)
                return pd_error_set(err, errno, "rtnetlink receive");
        int index = 0;
        if (mnl_cb_run(buf, (size_t)got, nlh->nlmsg_seq, rt->portid, link_cb, &index) < 0)
                return pd_error_set(err, errno, "link '%s'", name);
        return index > 0 ? index : pd_error_setx(err, ENODEV, "no link '%s'", name);
}
