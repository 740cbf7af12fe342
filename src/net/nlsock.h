/* A netlink socket made inside another network namespace (rtnetlink for
 * links and addresses, nfnetlink for nftables): a socket stays in the netns
 * it was created in, so the calling thread enters, creates, and returns. */
#pragma once
#include <libmnl/libmnl.h>

#include "lib/error.h"

/* netns_fd < 0: the caller's own netns. bus: NETLINK_ROUTE, NETLINK_NETFILTER.
 * what names the socket in errors ("rtnetlink", "netfilter netlink"). */
int pd_nlsock_open(int netns_fd, int bus, const char *what, struct mnl_socket **out, struct pd_error *err);

/* Write a per-netns sysctl (/proc/sys/net/...) of the netns nsfd: the
 * calling thread enters it, writes, comes back. */
int pd_netns_sysctl(int nsfd, const char *path, const char *value, struct pd_error *err);
