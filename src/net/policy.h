/* The network policy of one sandbox: a mode and a list of rules, parsed from
 * JSON (the server's `network` field, netd's control API) or from CLI
 * strings (`paddock run --allow/--deny`), and the matching functions the
 * resolver (paddock-netd) and the nft programming (nft.c) use.
 *
 * Semantics (docs/network.md is the reference):
 *  - mode none: loopback only; rules are refused.
 *  - mode policy: only what an allow rule names; everything else dropped.
 *  - mode open: the public internet, minus the built-in "never" list
 *    (pd_netpol_builtin_deny: metadata, loopback, link-local, RFC1918,
 *    CGNAT, ULA, multicast) and the user's deny rules.
 *  - A rule: allow|deny x target x ports x proto. Target is a CIDR (v4/v6)
 *    or a domain: exact ("pypi.org") or wildcard ("*.pypi.org" = any name
 *    strictly below pypi.org, not pypi.org itself).
 *  - Between CIDR rules: deny wins over allow, whatever the prefix lengths.
 *  - Between domain rules: deny wins over allow, except that an EXACT allow
 *    beats a WILDCARD deny ("deny:*.corp.com" + "allow:git.corp.com").
 *  - Domain allow vs CIDR deny: an address answered for a name is pinned
 *    (reachable for its TTL) when the name's allow rule is exact; for a
 *    wildcard allow, addresses inside a deny CIDR or the built-in list are
 *    dropped from the answer (DNS rebinding). Metadata, loopback and
 *    link-local addresses are never pinned from DNS, even for an exact
 *    name: only a CIDR allow inside them opens them.
 *  - The built-in list is lifted only by an allow CIDR contained in the
 *    built-in range (allow 10.1.0.0/16 opens that part of 10/8; allow
 *    0.0.0.0/0 opens none of it).
 *  - Deny rules on domains take no ports: a denied name does not resolve.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

#define PD_NETPOL_MAX_RULES 16384       /* rules per sandbox */
#define PD_NETPOL_NAME_MAX 253          /* DNS name, text form, no final dot */
#define PD_NETPOL_RULE_TEXT_MAX 512     /* one CLI rule string */

enum pd_netpol_mode {
        PD_NETPOL_NONE = 0,
        PD_NETPOL_OPEN,
        PD_NETPOL_POLICY,
};

enum pd_netpol_action { PD_NETPOL_ALLOW = 0, PD_NETPOL_DENY = 1 };

enum pd_netpol_kind { PD_NETPOL_CIDR = 0, PD_NETPOL_DOMAIN = 1 };

struct pd_netpol_rule {
        uint8_t action;                 /* enum pd_netpol_action */
        uint8_t kind;                   /* enum pd_netpol_kind */
        uint8_t proto;                  /* IPPROTO_TCP, IPPROTO_UDP, 0 = both */
        uint8_t prefix;                 /* CIDR: 0..32 / 0..128 */
        int family;                     /* CIDR: AF_INET / AF_INET6 */
        uint8_t addr[16];               /* CIDR: network order, host bits 0 */
        bool wildcard;                  /* DOMAIN: "*.suffix" */
        char domain[PD_NETPOL_NAME_MAX + 1]; /* DOMAIN: lowercase, no "*." and
                                                no final dot */
        uint16_t port_lo, port_hi;      /* host order; 0..65535 = any */
};

struct pd_netpol {
        enum pd_netpol_mode mode;
        /* Host/SNI proxy on tcp 80/443. Default: on when a domain rule is in
         * force (pd_netpol_finish sets it unless "strict" was given). */
        bool strict;
        bool strict_set;                /* "strict" given explicitly */
        uint32_t conn_per_sec;          /* new connections/s, 0 = no limit */
        uint64_t bytes_per_sec;         /* each direction, 0 = no limit */
        size_t n_rules;
        struct pd_netpol_rule *rules;   /* owned; pd_netpol_free */
};

/* An all-zero struct is mode none with no rules. */
void pd_netpol_free(struct pd_netpol *p);
int pd_netpol_copy(struct pd_netpol *dst, const struct pd_netpol *src, struct pd_error *err);

const char *pd_netpol_mode_name(enum pd_netpol_mode m);
int pd_netpol_mode_parse(const char *s, enum pd_netpol_mode *out, struct pd_error *err);

/* One CLI rule: ACTION:TARGET[:PORTS[/PROTO]]
 *   ACTION  allow | deny
 *   TARGET  CIDR or address (1.2.3.0/24, 1.2.3.4, 2001:db8::/32; an IPv6
 *           target followed by ports goes in brackets: [2001:db8::/32]:443),
 *           domain (pypi.org) or wildcard (*.pypi.org)
 *   PORTS   * | N | N-M                PROTO tcp | udp | any (default any)
 * Examples: allow:*.pypi.org:443/tcp  deny:10.0.0.0/8  allow:[::1]:53/udp
 * Address forms other than dotted decimal and RFC 4291 text are refused
 * (no "010.1", "167772161", "::ffff:1.2.3.4"). */
int pd_netpol_rule_parse(const char *s, struct pd_netpol_rule *out, struct pd_error *err);
/* The canonical CLI string of a rule (round-trips through rule_parse). */
int pd_netpol_rule_format(const struct pd_netpol_rule *r, char *buf, size_t size);

/* Append a parsed rule (checks mode none, max rules, domain-deny ports). */
int pd_netpol_add_rule(struct pd_netpol *p, const struct pd_netpol_rule *r, struct pd_error *err);
/* After adding rules: checks (mode none takes no rules, limits) and the
 * strict default. Call once before use. */
int pd_netpol_finish(struct pd_netpol *p, struct pd_error *err);

/* JSON form (docs/network.md):
 *   {"mode":"policy", "rules":["allow:*.pypi.org:443/tcp", {"action":"deny",
 *    "cidr":"10.0.0.0/8"}, {"action":"allow","domain":"x.org","ports":"443",
 *    "proto":"tcp"}], "allow":["pypi.org"], "deny":["10.0.0.0/8"],
 *    "strict":true, "conn_per_sec":100, "bytes_per_sec":1048576}
 * "allow"/"deny" take targets (with optional :ports/proto) as shorthand.
 * Unknown keys are refused. The result has been through pd_netpol_finish.
 * json is a jansson json_t * (void * keeps jansson out of this header). */
int pd_netpol_from_json(const void *json, struct pd_netpol *out, struct pd_error *err);
int pd_netpol_from_json_str(const char *s, size_t len, struct pd_netpol *out,
                            struct pd_error *err);
/* A new json_t * (caller json_decref's) / a malloc'd compact string. */
void *pd_netpol_to_json(const struct pd_netpol *p);
char *pd_netpol_to_json_str(const struct pd_netpol *p);

/* Normalise a DNS name for matching: lowercase, one final dot removed,
 * labels 1..63 of [a-z0-9-_], total <= 253. Refuses IP literals in any
 * form (dotted, decimal "167772161", octal "0177.1", hex, IPv6). */
int pd_netpol_name_normalize(const char *in, char *out, size_t size, struct pd_error *err);
/* True if s is an IP literal in any form inet_aton or getaddrinfo would
 * accept ("1.2.3.4", "0x7f.1", "017700000001", "::ffff:1.2.3.4", ...). */
bool pd_netpol_is_ip_literal(const char *s);

/* The verdict for a DNS name (already normalised). Returns PD_NETPOL_ALLOW
 * or PD_NETPOL_DENY; *rule (may be NULL) is the deciding rule or NULL for
 * the mode's default. Open mode allows names no rule denies, except the
 * metadata names (metadata.google.internal, ...) unless allowed exactly. */
int pd_netpol_match_name(const struct pd_netpol *p, const char *name,
                         const struct pd_netpol_rule **rule);

/* A cloud metadata service name (metadata.google.internal, ...): denied
 * in every mode unless an exact allow names it. */
bool pd_netpol_is_metadata_name(const char *name);

/* The allow rules that grant a name (its pins take their ports/proto from
 * these). Returns how many were written to out (at most max). */
size_t pd_netpol_name_grants(const struct pd_netpol *p, const char *name,
                             const struct pd_netpol_rule **out, size_t max);

/* May an address answered for an allowed name (granted by rule) be pinned?
 * See the header comment. Returns true/false; *why gets a short reason
 * when false ("deny rule", "metadata", "private", ...). */
bool pd_netpol_pin_ok(const struct pd_netpol *p, const struct pd_netpol_rule *grant,
                      int family, const void *addr, const char **why);

/* The verdict for a connection to an address (CIDR rules and the mode):
 * deny rule > allow rule > built-in list > mode. proto 0 = any. *rule gets
 * the deciding rule or NULL. Used by the strict proxy and in tests; the
 * kernel enforces the same order in nft. */
int pd_netpol_match_addr(const struct pd_netpol *p, int family, const void *addr,
                         uint8_t proto, uint16_t port, const struct pd_netpol_rule **rule);

/* Built-in "never" list: ranges open mode never reaches and wildcard names
 * never pin. *never_dns: also never pinned for an exact name. */
struct pd_netpol_builtin {
        int family;
        uint8_t addr[16];
        uint8_t prefix;
        bool never_dns;                 /* metadata, loopback, link-local */
        const char *what;
};
const struct pd_netpol_builtin *pd_netpol_builtin_deny(size_t *n);
/* Is the address in the built-in list? Returns the entry or NULL. */
const struct pd_netpol_builtin *pd_netpol_builtin_match(int family, const void *addr);

/* Does a domain rule match a normalised name? (exact, or strictly below
 * for a wildcard) */
bool pd_netpol_domain_match(const struct pd_netpol_rule *r, const char *name);
/* Does a CIDR cover the address? */
bool pd_netpol_cidr_match(int family, const uint8_t *net, uint8_t prefix, int afamily,
                          const void *addr);
