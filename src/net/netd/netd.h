/* paddock-netd internals: one daemon per router netns (netd_client.h has
 * its command line and control protocol). Single-threaded epoll loop. */
#pragma once
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/error.h"
#include "net/policy.h"
#include "net/netd_client.h"
#include "net/nft.h"

#define NETD_MAX_UPSTREAMS 4
#define NETD_MAX_PINNED_NAMES 4096      /* per sandbox, oldest evicted */
#define NETD_MAX_PINS_PER_NAME 16
#define NETD_MAX_PROXY_PER_SANDBOX 256  /* one sandbox cannot starve the others */
#define NETD_MAX_DNS_TCP_PER_SANDBOX 32
#define NETD_DEFAULT_MAX_PINS 8192     /* live nft pins per sandbox: kernel memory */
#define NETD_AUDIT_RATE 200             /* lines/s per sandbox, then a summary */
#define NETD_AUDIT_BURST 2000
#define NETD_DROP_WINDOW_MS 1000        /* kernel drops alike in this window: one line */

/* What an epoll event's data.ptr points at: every registered object starts
 * with this, so the loop dispatches on kind. */
enum netd_kind { K_CONTROL_LISTEN, K_CONTROL, K_DNS_UDP, K_DNS_TCP_LISTEN, K_DNS_TCP,
                 K_UPSTREAM, K_PROXY_LISTEN, K_PROXY_CLIENT, K_PROXY_UPSTREAM, K_NFLOG };

struct netd_ev {
        enum netd_kind kind;
        bool dead;                      /* closed during this batch; freed after */
        void (*free_fn)(struct netd_ev *ev);   /* closes fds, frees */
        struct netd_ev *dead_next;
};

struct netd_addr {
        int family;
        uint8_t a[16];
};

/* An address the resolver answered for a name, for the strict proxy. */
struct netd_pin {
        struct netd_addr addr;
        uint64_t expires_ms;
};

struct netd_pinned_name {
        char name[PD_NETPOL_NAME_MAX + 1];
        unsigned n;
        struct netd_pin pins[NETD_MAX_PINS_PER_NAME];
};

struct netd_sandbox {
        char id[PD_NFT_KEY_MAX + 1];
        char iface[32];
        struct netd_addr addrs[PD_NETD_MAX_ADDRS];
        unsigned n_addrs;
        struct pd_netpol policy;
        int audit_fd;
        unsigned n_proxy, n_dns_tcp;    /* open connections (per-sandbox caps) */
        double audit_tokens;            /* audit lines allowed now (bucket) */
        uint64_t audit_refill_ms;
        uint64_t audit_suppressed;
        /* the last kernel drop written (nflog.c) and its repeats since */
        const char *drop_kind, *drop_proto;
        struct netd_addr drop_dst;
        uint16_t drop_port;
        uint64_t drop_first_ms, drop_repeats;
        struct netd_cache *cache;       /* cache.c */
        uint64_t *pin_expiry;           /* max_pins slots: when each live nft pin ends */
        struct netd_pinned_name *names; /* ring of NETD_MAX_PINNED_NAMES */
        unsigned n_names, next_name;
        struct netd_sandbox *next;
};

struct netd {
        int epfd;
        struct pd_nft *nft;             /* NULL: pinning off (tests without nft) */
        struct sockaddr_storage upstream[NETD_MAX_UPSTREAMS];
        socklen_t upstream_len[NETD_MAX_UPSTREAMS];
        unsigned n_upstreams;
        struct pd_netpol_builtin never[64];     /* --never extras */
        unsigned n_never;
        unsigned max_pins;              /* live pins per sandbox (--max-pins) */
        uint16_t dns_port, proxy_port;
        struct netd_sandbox *sandboxes;
        struct netd_ev *dead_head;      /* killed this batch */
        struct netd_pending *pending;   /* upstream queries in flight */
        unsigned n_pending;
        struct netd_ev *nflog;          /* nflog.c's socket (NULL: none); only epoll knew it */
};

/* main.c */
int netd_watch(struct netd *d, int fd, uint32_t events, struct netd_ev *ev);
int netd_rewatch(struct netd *d, int fd, uint32_t events, struct netd_ev *ev);
struct netd_sandbox *netd_sandbox_by_addr(struct netd *d, const struct sockaddr *sa);
struct netd_sandbox *netd_sandbox_by_id(struct netd *d, const char *id);
void netd_addr_from_sa(const struct sockaddr *sa, struct netd_addr *out, uint16_t *port);
const char *netd_addr_str(const struct netd_addr *a, char *buf, size_t size);
bool netd_never(const struct netd *d, const struct netd_addr *a);

/* control.c */
int netd_control_listen(struct netd *d, const char *path, struct pd_error *err);
void netd_control_event(struct netd *d, struct netd_ev *ev, uint32_t events);
void netd_sandbox_free(struct netd *d, struct netd_sandbox *sb);

/* audit.c: one JSON line. Fields NULL/0 are left out. */
struct netd_audit {
        const char *kind;               /* event net.<kind>: dns, pin, answer, connect, close, policy, deny */
        bool allow;
        const char *name;
        const struct netd_addr *addr;
        uint16_t port;
        const char *proto;
        const char *qtype;
        const struct pd_netpol_rule *rule;
        const char *reason;
        const char *rule_kind;          /* kernel drops: which drop rule (nft.h) */
        uint64_t repeats;               /* kernel drops: same packets counted */
        uint32_t ttl;
        bool bytes;                     /* close records: bytes each way */
        uint64_t bytes_out, bytes_in;   /* sandbox -> internet, back */
        uint64_t duration_ms;
};
void netd_audit(struct netd_sandbox *sb, const struct netd_audit *a);

/* nflog.c: kernel drops (nft.h PD_NFT_LOG_*) as audit lines */
int netd_nflog_listen(struct netd *d, struct pd_error *err);
void netd_nflog_event(struct netd *d, struct netd_ev *ev, uint32_t events);
void netd_nflog_tick(struct netd *d, uint64_t now);

/* pins.c: what the resolver answered, for the strict proxy */
void netd_pins_remember(struct netd_sandbox *sb, const char *name, const struct netd_addr *a,
                        uint32_t ttl_s);
bool netd_pins_has(struct netd_sandbox *sb, const char *name, const struct netd_addr *a);
void netd_pins_forget_all(struct netd_sandbox *sb);
/* Room for n more kernel pins (at most d->max_pins live per sandbox)? */
bool netd_pins_budget(struct netd *d, struct netd_sandbox *sb, size_t n);
/* Count n kernel pins lasting ttl_s (after a successful pd_nft_pin). */
void netd_pins_charge(struct netd *d, struct netd_sandbox *sb, size_t n, uint32_t ttl_s);
/* When the pin of (name, a) expires (CLOCK_MONOTONIC ms), 0 if none. */
uint64_t netd_pins_expiry(struct netd_sandbox *sb, const char *name, const struct netd_addr *a);

/* cache.c: raw upstream answers per sandbox, for their TTL */
struct dns_answer;
bool netd_cache_get(struct netd_sandbox *sb, const char *name, uint16_t qtype,
                    struct dns_answer *out);
void netd_cache_put(struct netd_sandbox *sb, const char *name, uint16_t qtype,
                    const struct dns_answer *a);
void netd_cache_free(struct netd_sandbox *sb);

/* resolver.c */
int netd_dns_listen(struct netd *d, struct pd_error *err);
void netd_dns_event(struct netd *d, struct netd_ev *ev, uint32_t events);
void netd_dns_tick(struct netd *d, uint64_t now_ms);
/* a sandbox went away: drop its pending queries */
void netd_dns_forget(struct netd *d, struct netd_sandbox *sb);

/* proxy.c */
int netd_proxy_listen(struct netd *d, struct pd_error *err);
void netd_proxy_event(struct netd *d, struct netd_ev *ev, uint32_t events);
void netd_proxy_tick(struct netd *d, uint64_t now_ms);
void netd_proxy_forget(struct netd *d, struct netd_sandbox *sb);

/* mark an object dead: its free_fn runs after the batch (redis ae.c's
 * deferred deletion: any callback may kill any object) */
void netd_kill(struct netd *d, struct netd_ev *ev);
