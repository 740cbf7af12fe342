/* Waiting for a default route to appear in a netns (rtnl.h): the user-mode
 * uplink's tap carries one once the uplink process has configured it. */
#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>

#include "net/nlsock.h"
#include "net/rtnl.h"
#include "lib/util.h"

struct want {
        int family;
        int found;
};

static int route_cb(const struct nlmsghdr *h, void *data)
{
        struct want *w = data;
        if (h->nlmsg_type != RTM_NEWROUTE)
                return MNL_CB_OK;
        const struct rtmsg *rtm = mnl_nlmsg_get_payload(h);
        if (rtm->rtm_family == w->family && rtm->rtm_dst_len == 0 && rtm->rtm_table == RT_TABLE_MAIN &&
            rtm->rtm_type == RTN_UNICAST)
                w->found = 1;
        return MNL_CB_OK;
}

/* What one recv brought (dump parts or notifications): a default route
 * sets *found, the dump's end (or an error answering it) sets *done. */
static void scan(const char *buf, ssize_t n, struct want *found, bool *done)
{
        int left = (int)n;
        for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left);
             h = mnl_nlmsg_next(h, &left)) {
                if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
                        *done = true;
                else
                        (void)route_cb(h, found);
        }
}

int pd_rtnl_wait_default_route(int netns_fd, int family, int timeout_ms, struct pd_error *err)
{
        struct mnl_socket *nl;
        int r = pd_nlsock_open(netns_fd, NETLINK_ROUTE, "rtnetlink", &nl, err);
        if (r < 0)
                return r;
        /* subscribe before the dump: a route added in between is not lost */
        int group = family == AF_INET6 ? RTNLGRP_IPV6_ROUTE : RTNLGRP_IPV4_ROUTE;
        if (setsockopt(mnl_socket_get_fd(nl), SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) < 0) {
                r = pd_error_set(err, errno, "subscribe to route changes");
                goto out;
        }
        char buf[16384];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_GETROUTE;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        nlh->nlmsg_seq = 1;
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof *rtm);
        rtm->rtm_family = (uint8_t)family;
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
                r = pd_error_set(err, errno, "rtnetlink send");
                goto out;
        }
        struct want found = { .family = family };
        uint64_t deadline = pd_now_ms() + (uint64_t)timeout_ms;
        bool dump_done = false;
        for (;;) {
                int64_t left = (int64_t)(deadline - pd_now_ms());
                if (found.found && dump_done)
                        break;
                if (dump_done && left <= 0)
                        break;
                struct pollfd pf = { .fd = mnl_socket_get_fd(nl), .events = POLLIN };
                /* the dump's answer is already queued: never wait past it */
                int pr = poll(&pf, 1, dump_done ? (int)left : 2000);
                if (pr < 0 && errno == EINTR)
                        continue;
                if (pr <= 0) {
                        if (!dump_done)
                                r = pd_error_setx(err, ETIMEDOUT, "no answer to a route dump");
                        break;
                }
                ssize_t n = recv(pf.fd, buf, sizeof buf, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == ENOBUFS)   /* notifications lost: look again */
                                continue;
                        r = pd_error_set(err, errno, "rtnetlink receive");
                        break;
                }
                scan(buf, n, &found, &dump_done);
        }
        if (r >= 0)
                r = found.found;
out:
        mnl_socket_close(nl);
        return r;
}
