/* What the host's own network looks like, read (never changed) for the
 * router's defaults: the resolvers the host uses, its own addresses (which
 * the user-mode uplink would otherwise reach: they join the never list),
 * and whether its IPv6 goes anywhere. Everything is read in the caller's
 * network and mount namespaces, which are the host's for `paddock run` and
 * `paddock serve`. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "net/nft.h"

#define PD_HOSTNET_RESOLV "/etc/resolv.conf"
#define PD_HOSTNET_RESOLVED "/run/systemd/resolve/resolv.conf"
#define PD_HOSTNET_MAX_RESOLVERS 3

/* The host's upstream resolvers, "IP[,IP]" in out (at most
 * PD_HOSTNET_MAX_RESOLVERS). systemd-resolved's stub (127.0.0.53 in
 * /etc/resolv.conf) is replaced by the servers it uses itself
 * (/run/systemd/resolve/resolv.conf). Other loopback resolvers (dnsmasq,
 * unbound on 127.0.0.1) are not reachable from the router: *loopback is set
 * when the host names one, so a caller with a user-mode uplink can use the
 * uplink's DNS forwarder instead. IPv6 link-local servers (with a scope)
 * are skipped. Returns the number of resolvers (0: none usable; why says
 * why in one line). */
int pd_hostnet_resolvers(char *out, size_t size, bool *loopback, char *why, size_t whysz);

/* The host's own addresses that are not loopback or link-local, as host
 * entries (/32, /128), or with networks, as their on-link networks (the
 * LAN behind each), into c (at most max). Returns the number of entries. */
size_t pd_hostnet_addrs(struct pd_nft_cidr *c, size_t max, bool networks);

/* Does the host's IPv6 work: a default route through a gateway that has
 * answered (its neighbour entry is reachable or stale: the host has
 * exchanged packets with it)? Read from the kernel's tables only, nothing
 * is sent. why: one line when not. */
bool pd_hostnet_ipv6_working(char *why, size_t whysz);
