/* The network of a microvm guest (docs/network.md, "microvm"). QEMU runs
 * in its own netns, which the router attaches exactly like a container
 * sandbox's: a veth `eth0` holding the sandbox's address, default route
 * via the router, every nftables rule, netd's DNS pinning, the strict
 * proxy and the audit keyed on that veth and address. The guest's NIC is a
 * virtio-net whose backend is `tap0` in that same netns.
 *
 * Shape chosen: a pure L2 bridge `br0` of eth0 and tap0, with the address
 * taken off eth0 so that the guest, not QEMU's netns, owns it. The router
 * then sees the guest's frames on the veth as it sees a container's (same
 * source address, same interface), so nothing router-side knows about
 * VMs. (Routing with proxy-ARP would need a second address per sandbox
 * and a route in QEMU's netns; a bridge needs neither.) QEMU's netns has
 * no address at all afterwards: QEMU itself cannot open a socket to
 * anything, it only moves frames between the tap fd and the guest. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include "lib/util.h"
#include "vm/vm.h"
#include "proto/vmmux.h"

#define VM_NET_MTU 1500         /* the router's veths keep the default */

/* One request, waited for (a handful per guest: no batching needed). */
static int talk(struct mnl_socket *nl, struct nlmsghdr *nlh, const char *what, struct pd_error *err)
{
        static __thread uint32_t seq;
        nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
        nlh->nlmsg_seq = ++seq;
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return pd_error_set(err, errno, "%s: send", what);
        char buf[MNL_SOCKET_BUFFER_SIZE];
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
        if (n < 0)
                return pd_error_set(err, errno, "%s: receive", what);
        if (mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, mnl_socket_get_portid(nl), NULL, NULL) < 0)
                return pd_error_set(err, errno, "%s", what);
        return 0;
}

static struct nlmsghdr *link_msg(char *buf, uint16_t type, uint16_t flags, int index, const char *name)
{
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = flags;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_index = index;
        if (name)
                mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        return nlh;
}

static void set_up(struct nlmsghdr *nlh)
{
        struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
        ifm->ifi_flags = IFF_UP;
        ifm->ifi_change = IFF_UP;
}

/* In QEMU's netns (this thread entered it). */
static int wire(struct pd_error *err)
{
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!nl)
                return pd_error_set(err, errno, "rtnetlink socket");
        int r = 0;
        char buf[1024];
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                r = pd_error_set(err, errno, "bind rtnetlink socket");
                goto out;
        }
        int eth = (int)if_nametoindex("eth0"), tap = (int)if_nametoindex("tap0");
        if (!eth || !tap) {
                r = pd_error_setx(err, ENODEV, "no %s in QEMU's network namespace", eth ? "tap0" : "eth0");
                goto out;
        }
        /* no IPv6 link-local on the links made here (nothing of QEMU's
         * netns speaks; the guest's own IPv6 crosses the bridge as before).
         * /proc/sys/net is this thread's netns, QEMU's. Best effort. */
        int sfd = open("/proc/sys/net/ipv6/conf/default/disable_ipv6", O_WRONLY | O_CLOEXEC);
        if (sfd >= 0) {
                (void)!write(sfd, "1", 1);
                close(sfd);
        }
        struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, "br0");
        struct nlattr *li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
        mnl_attr_nest_end(nlh, li);
        if ((r = talk(nl, nlh, "create br0", err)) < 0)
                goto out;
        int br = (int)if_nametoindex("br0");
        if (!br) {
                r = pd_error_setx(err, ENODEV, "br0 vanished");
                goto out;
        }
        /* the sandbox's address moves to the guest: off eth0 (its default
         * route goes with it) */
        nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_DELADDR;
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
        ifa->ifa_family = AF_INET;
        ifa->ifa_index = (unsigned)eth;
        if ((r = talk(nl, nlh, "remove eth0's address", err)) < 0)
                goto out;
        nlh = link_msg(buf, RTM_NEWLINK, 0, eth, NULL);
        mnl_attr_put_u32(nlh, IFLA_MASTER, (uint32_t)br);
        if ((r = talk(nl, nlh, "eth0 into br0", err)) < 0)
                goto out;
        nlh = link_msg(buf, RTM_NEWLINK, 0, tap, NULL);
        mnl_attr_put_u32(nlh, IFLA_MASTER, (uint32_t)br);
        mnl_attr_put_u32(nlh, IFLA_MTU, VM_NET_MTU);
        set_up(nlh);
        if ((r = talk(nl, nlh, "tap0 into br0", err)) < 0)
                goto out;
        nlh = link_msg(buf, RTM_NEWLINK, 0, br, NULL);
        set_up(nlh);
        r = talk(nl, nlh, "br0 up", err);
out:
        mnl_socket_close(nl);
        return r;
}

int pd_vm_net_bridge(pid_t qemu_pid, struct pd_error *err)
{
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/ns/net", (int)qemu_pid);
        _pd_cleanup_close_ int ns = open(p, O_RDONLY | O_CLOEXEC);
        if (ns < 0)
                return pd_error_set(err, errno, "open '%s'", p);
        _pd_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self < 0)
                return pd_error_set(err, errno, "open own network namespace");
        /* only this thread enters (the server is threaded) */
        if (setns(ns, CLONE_NEWNET) < 0)
                return pd_error_set(err, errno, "enter QEMU's network namespace");
        int r = wire(err);
        if (setns(self, CLONE_NEWNET) < 0)
                abort();        /* this thread would act in the wrong netns */
        return r < 0 ? pd_error_prefix(err, "guest network") : 0;
}

void pd_vm_net_relay_arg(const uint8_t addr[4], int prefix, const uint8_t gw[4], char *buf, size_t size)
{
        /* MAC from the address: unique in the router as the address is;
         * locally administered (02:...) */
        uint8_t c[PD_MUX_NETCFG_LEN] = { 0x02, 0x70, addr[0], addr[1], addr[2], addr[3] };
        memcpy(c + 6, addr, 4);
        memcpy(c + 10, gw, 4);
        memcpy(c + 14, gw, 4);  /* netd listens on the gateway address */
        c[18] = (uint8_t)prefix;
        c[19] = VM_NET_MTU >> 8;
        c[20] = VM_NET_MTU & 0xff;
        size_t o = (size_t)snprintf(buf, size, "--net=");
        for (unsigned i = 0; i < sizeof c && o + 2 < size; i++)
                o += (size_t)snprintf(buf + o, size - o, "%02x", c[i]);
}
