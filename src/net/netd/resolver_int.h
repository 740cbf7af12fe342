/* Internals shared by resolver.c (sockets, queries, upstream) and
 * answer.c (filtering and pinning an upstream answer). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "net/netd/dns.h"
#include "net/netd/netd.h"

#define TTL_MAX 3600
#define PIN_GRACE_S 30          /* a client connects just after its answer expires */

struct tcp_conn;

/* where a reply goes */
struct reply_to {
        struct tcp_conn *tcp;           /* or UDP: */
        int udp_fd;
        struct sockaddr_storage peer;
        socklen_t peer_len;
        struct netd_addr local;         /* the address the query was sent to */
};

#define UPSTREAM_TRIES 3

struct netd_pending;

/* One try upstream: its own socket (random port) and id. Earlier tries stay
 * open, so a slow upstream's first answer still counts after a retry. */
struct netd_attempt {
        struct netd_ev ev;              /* K_UPSTREAM, in epoll */
        int fd;                         /* UDP socket connected to the upstream */
        uint16_t id;
        struct netd_pending *p;
};

struct netd_pending {
        struct netd_ev ev;              /* kill/free only, never in epoll */
        struct netd_attempt att[UPSTREAM_TRIES];
        struct netd_sandbox *sb;
        struct dns_query q;
        char name[PD_NETPOL_NAME_MAX + 1];
        /* the deciding rule, copied: a live policy change frees the old
         * rules while the query is upstream */
        struct pd_netpol_rule rule_copy;
        const struct pd_netpol_rule *rule;      /* &rule_copy or NULL */
        unsigned tries;
        uint64_t deadline_ms;
        struct reply_to to;
        struct netd_pending *next;
};

void netd_dns_send_reply(struct netd *d, struct reply_to *to, const uint8_t *msg, size_t len);
void netd_dns_reply_rcode(struct netd *d, struct reply_to *to, const struct dns_query *q,
                          uint8_t rcode);
void netd_dns_audit(struct netd_sandbox *sb, const struct dns_query *q, const char *name,
                    bool allow, const struct pd_netpol_rule *rule, const char *reason);
/* Filter an upstream answer by the policy, pin, audit, reply. */
void netd_dns_answer(struct netd *d, struct netd_pending *p, const struct dns_answer *a);
