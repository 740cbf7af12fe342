/* Matching names and addresses against a network policy (policy.h). */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "net/policy.h"
#include "lib/util.h"

#define V4(a, b, c, d) { a, b, c, d }
#define V6(...) { __VA_ARGS__ }

/* Most specific first: pd_netpol_builtin_match returns the first hit, so
 * metadata inside CGNAT/ULA reports "metadata". */
static const struct pd_netpol_builtin builtins[] = {
        { AF_INET, V4(169, 254, 169, 254), 32, true, "metadata" },
        { AF_INET, V4(100, 100, 100, 200), 32, true, "metadata" },
        { AF_INET6, V6(0xfd, 0x00, 0x0e, 0xc2, [15] = 0x54, [14] = 0x02), 128, true, "metadata" },
        { AF_INET, V4(0, 0, 0, 0), 8, true, "this-network" },
        { AF_INET, V4(127, 0, 0, 0), 8, true, "loopback" },
        { AF_INET, V4(169, 254, 0, 0), 16, true, "link-local" },
        { AF_INET, V4(224, 0, 0, 0), 4, true, "multicast" },
        { AF_INET, V4(240, 0, 0, 0), 4, true, "reserved" },
        { AF_INET, V4(10, 0, 0, 0), 8, false, "private" },
        { AF_INET, V4(172, 16, 0, 0), 12, false, "private" },
        { AF_INET, V4(192, 168, 0, 0), 16, false, "private" },
        { AF_INET, V4(100, 64, 0, 0), 10, false, "cgnat" },
        { AF_INET, V4(192, 0, 0, 0), 24, false, "ietf-special" },
        { AF_INET6, V6(0), 127, true, "unspecified/loopback" },
        { AF_INET6, V6([10] = 0xff, [11] = 0xff), 96, true, "ipv4-mapped" },
        { AF_INET6, V6(0xfe, 0x80), 10, true, "link-local" },
        { AF_INET6, V6(0xff), 8, true, "multicast" },
        { AF_INET6, V6(0xfc), 7, false, "ula" },
};

const struct pd_netpol_builtin *pd_netpol_builtin_deny(size_t *n)
{
        *n = PD_ARRAY_SIZE(builtins);
        return builtins;
}

bool pd_netpol_cidr_match(int family, const uint8_t *net, uint8_t prefix, int afamily,
                          const void *addr)
{
        const uint8_t *a = addr;
        if (family != afamily)
                return false;
        unsigned full = prefix / 8, rest = prefix % 8;
        if (memcmp(net, a, full) != 0)
                return false;
        if (rest) {
                uint8_t mask = (uint8_t)(0xff00 >> rest);
                if ((net[full] & mask) != (a[full] & mask))
                        return false;
        }
        return true;
}

/* ::ffff:a.b.c.d is the IPv4 address to the kernel: match it as one. */
static void unmap(int *family, const void **addr, uint8_t *buf)
{
        static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
        if (*family == AF_INET6 && memcmp(*addr, mapped, 12) == 0) {
                memcpy(buf, (const uint8_t *)*addr + 12, 4);
                *family = AF_INET;
                *addr = buf;
        }
}

const struct pd_netpol_builtin *pd_netpol_builtin_match(int family, const void *addr)
{
        uint8_t buf[4];
        unmap(&family, &addr, buf);
        for (size_t i = 0; i < PD_ARRAY_SIZE(builtins); i++)
                if (pd_netpol_cidr_match(builtins[i].family, builtins[i].addr, builtins[i].prefix,
                                         family, addr))
                        return &builtins[i];
        return NULL;
}

bool pd_netpol_domain_match(const struct pd_netpol_rule *r, const char *name)
{
        if (r->kind != PD_NETPOL_DOMAIN)
                return false;
        if (!r->wildcard)
                return strcmp(name, r->domain) == 0;
        size_t n = strlen(name), d = strlen(r->domain);
        return n > d + 1 && name[n - d - 1] == '.' && strcmp(name + n - d, r->domain) == 0;
}

/* Names clouds answer with their metadata service. Denied in every mode
 * unless an exact allow names them. */
static const char *const metadata_names[] = {
        "metadata.google.internal", "metadata.goog", "metadata", "instance-data",
        "instance-data.ec2.internal", "metadata.azure.internal", "metadata.tencentyun.com",
        "metadata.platformequinix.com",
};

bool pd_netpol_is_metadata_name(const char *name)
{
        for (size_t i = 0; i < PD_ARRAY_SIZE(metadata_names); i++)
                if (strcmp(name, metadata_names[i]) == 0)
                        return true;
        return false;
}

int pd_netpol_match_name(const struct pd_netpol *p, const char *name,
                         const struct pd_netpol_rule **rule)
{
        const struct pd_netpol_rule *exact_allow = NULL, *wild_deny = NULL, *wild_allow = NULL;
        const struct pd_netpol_rule *dummy;
        if (!rule)
                rule = &dummy;
        *rule = NULL;
        if (p->mode == PD_NETPOL_NONE)
                return PD_NETPOL_DENY;
        for (size_t i = 0; i < p->n_rules; i++) {
                const struct pd_netpol_rule *r = &p->rules[i];
                if (!pd_netpol_domain_match(r, name))
                        continue;
                if (r->action == PD_NETPOL_DENY && !r->wildcard) {
                        *rule = r;                      /* exact deny: final */
                        return PD_NETPOL_DENY;
                }
                if (r->action == PD_NETPOL_DENY && !wild_deny)
                        wild_deny = r;
                else if (r->action == PD_NETPOL_ALLOW && !r->wildcard && !exact_allow)
                        exact_allow = r;
                else if (r->action == PD_NETPOL_ALLOW && r->wildcard && !wild_allow)
                        wild_allow = r;
        }
        if (exact_allow) {
                *rule = exact_allow;
                return PD_NETPOL_ALLOW;
        }
        if (pd_netpol_is_metadata_name(name))
                return PD_NETPOL_DENY;
        if (wild_deny) {
                *rule = wild_deny;
                return PD_NETPOL_DENY;
        }
        if (wild_allow) {
                *rule = wild_allow;
                return PD_NETPOL_ALLOW;
        }
        return p->mode == PD_NETPOL_OPEN ? PD_NETPOL_ALLOW : PD_NETPOL_DENY;
}

size_t pd_netpol_name_grants(const struct pd_netpol *p, const char *name,
                             const struct pd_netpol_rule **out, size_t max)
{
        const struct pd_netpol_rule *decider;
        if (pd_netpol_match_name(p, name, &decider) != PD_NETPOL_ALLOW || !decider)
                return 0;
        /* the exact allows if the decider is exact (they beat wildcard
         * denies), else every wildcard allow (no deny matched) */
        size_t n = 0;
        for (size_t i = 0; i < p->n_rules && n < max; i++) {
                const struct pd_netpol_rule *r = &p->rules[i];
                if (r->action == PD_NETPOL_ALLOW && r->wildcard == decider->wildcard &&
                    pd_netpol_domain_match(r, name))
                        out[n++] = r;
        }
        return n;
}

static bool cidr_covers(const struct pd_netpol_rule *r, int family, const void *addr)
{
        return r->kind == PD_NETPOL_CIDR &&
               pd_netpol_cidr_match(r->family, r->addr, r->prefix, family, addr);
}

bool pd_netpol_pin_ok(const struct pd_netpol *p, const struct pd_netpol_rule *grant,
                      int family, const void *addr, const char **why)
{
        const char *dummy;
        uint8_t buf[4];
        if (!why)
                why = &dummy;
        *why = NULL;
        unmap(&family, &addr, buf);
        if (!grant || p->mode == PD_NETPOL_NONE) {
                *why = "no allow rule";
                return false;
        }
        const struct pd_netpol_builtin *b = pd_netpol_builtin_match(family, addr);
        if (b && b->never_dns) {
                *why = b->what;
                return false;
        }
        if (!grant->wildcard)
                return true;                    /* named explicitly */
        if (b) {
                *why = b->what;
                return false;
        }
        for (size_t i = 0; i < p->n_rules; i++)
                if (p->rules[i].action == PD_NETPOL_DENY && cidr_covers(&p->rules[i], family, addr)) {
                        *why = "deny rule";
                        return false;
                }
        return true;
}

static bool rule_ports(const struct pd_netpol_rule *r, uint8_t proto, uint16_t port)
{
        return (!r->proto || !proto || r->proto == proto) && port >= r->port_lo &&
               port <= r->port_hi;
}

/* Does an allow CIDR lie inside a built-in range (and so lift it)? */
static bool lifts(const struct pd_netpol_rule *r, const struct pd_netpol_builtin *b)
{
        return r->prefix >= b->prefix && pd_netpol_cidr_match(b->family, b->addr, b->prefix,
                                                               r->family, r->addr);
}

int pd_netpol_match_addr(const struct pd_netpol *p, int family, const void *addr,
                         uint8_t proto, uint16_t port, const struct pd_netpol_rule **rule)
{
        const struct pd_netpol_rule *dummy, *allow = NULL;
        uint8_t buf[4];
        if (!rule)
                rule = &dummy;
        *rule = NULL;
        if (p->mode == PD_NETPOL_NONE)
                return PD_NETPOL_DENY;
        unmap(&family, &addr, buf);
        const struct pd_netpol_builtin *b = pd_netpol_builtin_match(family, addr);
        for (size_t i = 0; i < p->n_rules; i++) {
                const struct pd_netpol_rule *r = &p->rules[i];
                if (!cidr_covers(r, family, addr) || !rule_ports(r, proto, port))
                        continue;
                if (r->action == PD_NETPOL_DENY) {
                        *rule = r;
                        return PD_NETPOL_DENY;
                }
                if (!allow && (!b || lifts(r, b)))
                        allow = r;
        }
        if (allow) {
                *rule = allow;
                return PD_NETPOL_ALLOW;
        }
        if (b)
                return PD_NETPOL_DENY;
        return p->mode == PD_NETPOL_OPEN ? PD_NETPOL_ALLOW : PD_NETPOL_DENY;
}
