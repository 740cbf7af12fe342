/* The default uplink of a router: a user-mode network process (pasta, from
 * Debian's passt, or slirp4netns) whose sockets are ordinary sockets of the
 * host, so sandboxes reach what the host reaches without any change to the
 * host's network settings (no ip_forward, no host firewall rule, no route).
 *
 * Shape (docs/network.md, "The default uplink"):
 *
 *   sandbox veths -- router netns --veth-- uplink netns --tap-- pasta -- host sockets
 *                    (nft, netd, NAT)      (tap0, rt0)           (host netns)
 *
 * The uplink netns is owned by a user namespace of its own whose root is
 * one unprivileged host uid (a slot of the uid registry), so the uplink
 * process runs as that uid with capabilities over the uplink netns only:
 * it can neither change the router's rules nor act as root on the host.
 * The router's nftables rules, never list, DNS pinning, strict mode and
 * audit all stay in front of it, in the router netns, unchanged.
 *
 * paddock-uplink (uplink_main.c) supervises the process: it restarts it
 * when it dies (its tap and routes vanish with it) and makes sandboxes'
 * connections through the dead process fail with a TCP reset on their
 * next packet instead of hanging. The router owns the supervisor: its
 * teardown (paddock gc) stops it, and the uplink netns goes with it.
 *
 * Files in the router's dir: uplink-user and uplink-net (the pinned
 * namespaces), uplink.uid (the uid registry slot), uplink.pid (the
 * supervisor), uplink.log, egress (one line: what egress can do). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "lib/error.h"
#include "net/nft.h"

struct pd_router;

enum pd_uplink_kind {
        PD_UPLINK_NONE = 0,             /* no uplink: sandboxes reach the router only */
        PD_UPLINK_PASTA,
        PD_UPLINK_SLIRP,
};

#define PD_UPLINK_MTU 65520             /* sandbox veths behind a user-mode uplink */
#define PD_UPLINK_IF "tap0"             /* the process's tap, in the uplink netns */
#define PD_UPLINK_SLIRP_CIDR "10.0.2.0/24"
#define PD_UPLINK_SLIRP_DNS "10.0.2.3"
#define PD_UPLINK_SLIRP_CIDR6 "fd00::/64"     /* with --enable-ipv6; fd00::2 is the host */
/* pasta's DNS forwarder (--dns-forward): an address the uplink netns routes
 * to the tap, which pasta answers by asking the host's own resolver from
 * a host socket (loopback resolvers included). Used only when the host's
 * resolvers are all on its loopback. */
#define PD_UPLINK_PASTA_DNS "169.254.53.53"

struct pd_uplink {
        enum pd_uplink_kind kind;
        char bin[256];                  /* the program */
        /* TCP through the socket-level relay (relay.h) instead of the
         * process; slirp4netns only (UDP and the rest stay with it) */
        bool relay;
        char why[256];                  /* kind NONE by default: why */
};

/* Is spec (the router's uplink setting) a user-mode uplink? NULL, "" and
 * "auto" pick slirp4netns with the TCP relay, else pasta, else none
 * (u->why says why); "pasta" and "slirp4netns" ask for one alone (every
 * protocol through the process: the packet path), "relay" for slirp4netns
 * with the relay (an error if a program is missing);
 * "none" is no uplink. Returns 1 for these, 0 for any other setting
 * (netns:PATH, IFACE:...), -errno on error. $PADDOCK_PASTA and
 * $PADDOCK_SLIRP4NETNS override where the programs are ("" = absent). */
int pd_uplink_choose(const char *spec, struct pd_uplink *u, struct pd_error *err);

/* A program: $env if env is set and so is it ("" = absent, for tests and
 * operators who want one of them ignored), else the usual directories
 * (/usr/bin, /usr/local/bin, /bin, /usr/sbin, /sbin). */
bool pd_uplink_find_bin(const char *name, const char *env, char *out, size_t size);

/* Name of a kind ("pasta", "slirp4netns", "none"). */
const char *pd_uplink_kind_name(enum pd_uplink_kind k);

/* Make the uplink netns (and its user namespace and uid), pinned in the
 * router's dir; returns an fd on it (the caller wires the router's veth to
 * it), lock held. */
int pd_uplink_make_netns(struct pd_router *r, struct pd_error *err);
/* Configure the uplink netns once the router's veth end (rt_ifname) is in
 * it: forwarding, and the rule that resets connections the uplink process
 * no longer knows. */
int pd_uplink_config_netns(struct pd_router *r, int nsfd, enum pd_uplink_kind kind, const char *rt_ifname,
                           struct pd_error *err);
/* Start the supervisor (and so the process) and wait for its tap to carry
 * a default route. dns_forward: give pasta a DNS forwarder. A timeout is
 * not an error: the reason goes to *why and the router works without
 * egress until the supervisor gets the process up. */
int pd_uplink_start(struct pd_router *r, const struct pd_uplink *u, bool dns_forward, char *why,
                    size_t whysz, struct pd_error *err);
/* The supervisor should run but does not (killed): start it again. */
int pd_uplink_revive(struct pd_router *r, struct pd_error *err);
/* Stop the supervisor (the process dies with it), unpin the namespaces,
 * free the uid. Lock held. Nothing there is not an error. */
void pd_uplink_teardown(struct pd_router *r);
/* Is the uplink up now (supervisor alive, a default route on its tap)?
 * false with *why when not. Only for a router with a user-mode uplink. */
bool pd_uplink_up(struct pd_router *r, char *why, size_t whysz);
