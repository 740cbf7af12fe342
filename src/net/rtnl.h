/* rtnetlink through libmnl: links, addresses and routes in a given network
 * namespace, several requests per sendmsg() (no `ip` processes). */
#pragma once
#include <stdint.h>
#include <netinet/in.h>

#include "lib/error.h"

struct pd_rtnl;         /* a NETLINK_ROUTE socket bound to one netns */

/* netns_fd -1 = the caller's netns. Only the calling thread enters. */
int pd_rtnl_open(int netns_fd, struct pd_rtnl **out, struct pd_error *err);
void pd_rtnl_close(struct pd_rtnl *rt);

/* Requests are queued and sent together by pd_rtnl_flush, which returns
 * the first error any of them got (all are attempted). */
/* A veth pair: `name` (ifindex `index`, 0 = kernel picks) in this socket's
 * netns, and `peer` (ifindex peer_index) in the netns of peer_ns_fd. */
void pd_rtnl_veth(struct pd_rtnl *rt, const char *name, int index, const char *peer,
                  int peer_index, int peer_ns_fd);
void pd_rtnl_addr(struct pd_rtnl *rt, int ifindex, int family, const void *addr, int prefix);
void pd_rtnl_up(struct pd_rtnl *rt, int ifindex);
void pd_rtnl_mtu(struct pd_rtnl *rt, int ifindex, unsigned mtu);
/* Default route via gw out of ifindex (onlink). */
void pd_rtnl_default_route(struct pd_rtnl *rt, int family, const void *gw, int ifindex);
/* Move a link (by index, of this netns) into another netns and rename it. */
void pd_rtnl_move(struct pd_rtnl *rt, int ifindex, int ns_fd, const char *newname);
/* A macvlan (bridge mode) named name (ifindex index, 0 = kernel picks) on
 * top of parent_index of this socket's netns, created in the netns of
 * ns_fd (its name never appears in this one). */
void pd_rtnl_macvlan(struct pd_rtnl *rt, const char *name, int index, int parent_index, int ns_fd);
void pd_rtnl_del(struct pd_rtnl *rt, const char *name);
int pd_rtnl_flush(struct pd_rtnl *rt, struct pd_error *err);

/* ifindex of name in this socket's netns, or -ENODEV. */
int pd_rtnl_index(struct pd_rtnl *rt, const char *name, struct pd_error *err);

/* Wait up to timeout_ms (0 = just look) for a default route of family
 * (AF_INET, AF_INET6) in the netns of netns_fd: 1 if there is one, 0 if
 * not (rtnl_route.c). Waits on the kernel's route notifications, not by
 * polling. */
int pd_rtnl_wait_default_route(int netns_fd, int family, int timeout_ms, struct pd_error *err);
