/* The socket-level TCP relay of the default uplink (docs/network.md, "The
 * default uplink"): a sandbox's TCP connection is carried by the kernel's
 * TCP on both sides and only its bytes are copied (splice), instead of
 * every segment crossing a user-mode TCP stack (slirp4netns). UDP and
 * everything else keeps the slirp4netns path.
 *
 *   sandbox --SYN--> router: judged (relayjudge: hard never set, the
 *            sandbox's chain), held in NFQUEUE (relayq)
 *      gate (router netns, CAP_NET_ADMIN only) --tuple--> worker
 *      worker (host netns, the uplink's unprivileged uid, no capability):
 *            re-checks the destination, connect()s it, nonblocking
 *      connected: the gate accepts the SYN, nat redirects it to the
 *            listener, the worker accepts it, finds its outbound socket
 *            by the tuple, splices both ways
 *      refused: the SYN is re-injected marked REFUSE: a RST answers it,
 *            the sandbox's connect fails with ECONNREFUSED
 *      unreachable: marked UNREACH: ICMP host unreachable (EHOSTUNREACH)
 *      no answer: the SYN is dropped, retransmissions meanwhile too: the
 *            sandbox's own connect timeout decides, as on a real network
 *
 * Both run under paddock-uplink: it opens the listeners and the queue in
 * the router netns as root, forks the gate (which keeps CAP_NET_ADMIN, as
 * paddock-netd does: NFQUEUE verdicts need it at every message, and it
 * can reach only the router netns), then drops to the uplink's uid and
 * starts (and restarts) the worker, handing the gate a fresh channel to
 * each one. The gate holds no connection state a worker needs. With no
 * gate, a queued SYN is dropped (no bypass): the relay fails closed. */
#pragma once
#include <stdint.h>

#define PD_RELAY_PORT 15002             /* the listener, in the router netns */
#define PD_RELAY_QUEUE 15               /* NFQUEUE number (per netns) */
/* skb marks in the router netns (never seen outside it: a mark does not
 * cross a veth into another netns) */
#define PD_RELAY_MARK 0x70640001u        /* judged, to be relayed */
#define PD_RELAY_MARK_REFUSE 0x70640002u /* answer with a TCP reset */
#define PD_RELAY_MARK_UNREACH 0x70640003u /* answer with ICMP unreachable */

/* gate -> worker: connect this (one SOCK_SEQPACKET message) */
struct pd_relay_req {
        uint32_t id;                    /* the gate's, echoed */
        uint8_t family;                 /* AF_INET, AF_INET6 */
        uint8_t pad[3];
        uint8_t src[16], dst[16];       /* network order; v4 in [0..3] */
        uint16_t sport, dport;          /* network order */
};

/* worker -> gate: the outcome (0 connected, else an errno: ECONNREFUSED
 * and EPERM answer with a reset, EHOSTUNREACH/ENETUNREACH with ICMP,
 * anything else with silence) */
struct pd_relay_res {
        uint32_t id;
        int32_t err;
};

/* The gate's loop (relay_gate.c): nfq is a NETLINK_NETFILTER socket bound
 * to PD_RELAY_QUEUE, ctl the supervisor's channel (each message carries a
 * new worker channel as SCM_RIGHTS). Returns when ctl closes. */
/* One line on paddock-uplink's stderr (the router's uplink.log): the time,
 * "paddock-uplink", the part speaking if any ("relay", "relay gate"). */
void pd_uplink_log(const char *part, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int pd_relay_gate_run(int nfq, int ctl);
/* Bind nfq (a NETLINK_NETFILTER socket, in the router netns, by root) to
 * the queue. 0 or -errno. */
int pd_relay_gate_bind(int nfq);

/* The worker's loop (relay_worker.c): chan to the gate, the listeners
 * (l6 may be -1). Returns on a fatal error or when chan closes. */
int pd_relay_worker_run(int chan, int l4, int l6);
