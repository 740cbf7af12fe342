/* The network rule model: rule strings, JSON, normalised names
 * (policy.h). Matching is in policy_match.c. */
#include <arpa/inet.h>
#include <ctype.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/policy.h"
#include "lib/util.h"

void pd_netpol_free(struct pd_netpol *p)
{
        if (!p)
                return;
        free(p->rules);
        memset(p, 0, sizeof *p);
}

int pd_netpol_copy(struct pd_netpol *dst, const struct pd_netpol *src, struct pd_error *err)
{
        *dst = *src;
        dst->rules = NULL;
        if (src->n_rules) {
                dst->rules = calloc(src->n_rules, sizeof *dst->rules);
                if (!dst->rules) {
                        dst->n_rules = 0;
                        return pd_error_set(err, ENOMEM, "copy network policy");
                }
                memcpy(dst->rules, src->rules, src->n_rules * sizeof *dst->rules);
        }
        return 0;
}

static const char *const mode_names[] = {
        [PD_NETPOL_NONE] = "none", [PD_NETPOL_OPEN] = "open", [PD_NETPOL_POLICY] = "policy",
};

const char *pd_netpol_mode_name(enum pd_netpol_mode m)
{
        return (unsigned)m < PD_ARRAY_SIZE(mode_names) ? mode_names[m] : "?";
}

int pd_netpol_mode_parse(const char *s, enum pd_netpol_mode *out, struct pd_error *err)
{
        for (unsigned i = 0; i < PD_ARRAY_SIZE(mode_names); i++)
                if (s && strcmp(s, mode_names[i]) == 0) {
                        *out = i;
                        return 0;
                }
        return pd_error_setx(err, EINVAL, "network mode '%.64s': expected none, open or policy",
                             s ? s : "");
}

/* Strict decimal, no sign, no leading zeros beyond "0", bounded. */
static int parse_uint(const char *s, size_t n, unsigned long max, unsigned long *out)
{
        unsigned long v = 0;
        if (n == 0 || n > 10 || (n > 1 && s[0] == '0'))
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long)(s[i] - '0');
        }
        if (v > max)
                return -ERANGE;
        *out = v;
        return 0;
}

bool pd_netpol_is_ip_literal(const char *s)
{
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_aton(s, &a4) || inet_pton(AF_INET6, s, &a6) == 1)
                return true;
        /* what URL parsers and resolvers treat as an address: a last label
         * of digits or 0x-hex ("foo.123", "1.0x7f") */
        size_t n = strlen(s);
        if (n && s[n - 1] == '.')
                n--;
        size_t start = n;
        while (start > 0 && s[start - 1] != '.')
                start--;
        if (start == n)
                return false;
        const char *l = s + start;
        size_t ln = n - start;
        size_t i = 0;
        if (ln > 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X'))
                i = 2;
        for (; i < ln; i++)
                if (!(i >= 2 && l[0] == '0' ? isxdigit((unsigned char)l[i]) : isdigit((unsigned char)l[i])))
                        return false;
        return true;
}

int pd_netpol_name_normalize(const char *in, char *out, size_t size, struct pd_error *err)
{
        size_t n = strnlen(in, PD_NETPOL_NAME_MAX + 2);
        if (n && in[n - 1] == '.')
                n--;
        if (n == 0)
                return pd_error_setx(err, EINVAL, "empty domain name");
        if (n > PD_NETPOL_NAME_MAX || n + 1 > size)
                return pd_error_setx(err, ENAMETOOLONG, "domain name longer than %d characters",
                                     PD_NETPOL_NAME_MAX);
        size_t label = 0;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)in[i];
                if (c == '.') {
                        if (label == 0)
                                return pd_error_setx(err, EINVAL, "domain '%.*s': empty label",
                                                     (int)n, in);
                        label = 0;
                        out[i] = '.';
                        continue;
                }
                if (!(isalnum(c) || c == '-' || c == '_') || c >= 0x80)
                        return pd_error_setx(err, EINVAL,
                                             "domain '%.*s': character 0x%02x not allowed",
                                             (int)n, in, c);
                if (++label > 63)
                        return pd_error_setx(err, EINVAL, "domain '%.*s': label over 63 characters",
                                             (int)n, in);
                out[i] = (char)tolower(c);
        }
        if (label == 0)
                return pd_error_setx(err, EINVAL, "domain '%.*s': empty label", (int)n, in);
        out[n] = '\0';
        if (pd_netpol_is_ip_literal(out))
                return pd_error_setx(err, EINVAL,
                                     "'%s' is an IP address form, not a domain (write CIDRs "
                                     "as dotted decimal or IPv6 text)", out);
        return (int)n;
}

static int parse_cidr(const char *t, struct pd_netpol_rule *r, struct pd_error *err)
{
        char a[INET6_ADDRSTRLEN + 1];
        const char *slash = strchr(t, '/');
        size_t alen = slash ? (size_t)(slash - t) : strlen(t);
        if (alen == 0 || alen >= sizeof a)
                return pd_error_setx(err, EINVAL, "'%s': not an address", t);
        memcpy(a, t, alen);
        a[alen] = '\0';
        memset(r->addr, 0, sizeof r->addr);
        unsigned max;
        if (inet_pton(AF_INET, a, r->addr) == 1) {
                r->family = AF_INET;
                max = 32;
        } else if (inet_pton(AF_INET6, a, r->addr) == 1) {
                static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
                if (memcmp(r->addr, mapped, 12) == 0)
                        return pd_error_setx(err, EINVAL,
                                             "'%s': IPv4-mapped IPv6 address; write the IPv4 form", t);
                r->family = AF_INET6;
                max = 128;
        } else {
                return pd_error_setx(err, EINVAL,
                                     "'%s': not an address (dotted decimal or IPv6 text only)", t);
        }
        unsigned long pfx = max;
        if (slash && parse_uint(slash + 1, strlen(slash + 1), max, &pfx) < 0)
                return pd_error_setx(err, EINVAL, "'%s': prefix length must be 0..%u", t, max);
        r->prefix = (uint8_t)pfx;
        for (unsigned bit = (unsigned)pfx; bit < max; bit++)
                if (r->addr[bit / 8] & (0x80 >> (bit % 8)))
                        return pd_error_setx(err, EINVAL, "'%s': bits set past the /%lu prefix", t,
                                             pfx);
        r->kind = PD_NETPOL_CIDR;
        return 0;
}

static int parse_target(const char *t, struct pd_netpol_rule *r, struct pd_error *err)
{
        if (strchr(t, '/') || strchr(t, ':'))
                return parse_cidr(t, r, err);
        struct in_addr a4;
        if (inet_pton(AF_INET, t, &a4) == 1)
                return parse_cidr(t, r, err);
        r->kind = PD_NETPOL_DOMAIN;
        r->wildcard = false;
        if (t[0] == '*') {
                if (t[1] != '.')
                        return pd_error_setx(err, EINVAL, "'%s': a wildcard is '*.' then a domain", t);
                r->wildcard = true;
                t += 2;
        }
        if (strchr(t, '*'))
                return pd_error_setx(err, EINVAL, "'%s': '*' only as the first label", t);
        int n = pd_netpol_name_normalize(t, r->domain, sizeof r->domain, err);
        return n < 0 ? n : 0;
}

static int parse_ports(const char *s, struct pd_netpol_rule *r, struct pd_error *err)
{
        const char *slash = strchr(s, '/');
        size_t plen = slash ? (size_t)(slash - s) : strlen(s);
        r->proto = 0;
        if (slash) {
                const char *p = slash + 1;
                if (strcmp(p, "tcp") == 0)
                        r->proto = IPPROTO_TCP;
                else if (strcmp(p, "udp") == 0)
                        r->proto = IPPROTO_UDP;
                else if (strcmp(p, "any") != 0)
                        return pd_error_setx(err, EINVAL, "protocol '%.16s': tcp, udp or any", p);
        }
        r->port_lo = 0;
        r->port_hi = 65535;
        if ((plen == 1 && s[0] == '*') || (plen == 3 && strncmp(s, "any", 3) == 0))
                return 0;
        const char *dash = memchr(s, '-', plen);
        unsigned long lo, hi;
        if (dash) {
                if (parse_uint(s, (size_t)(dash - s), 65535, &lo) < 0 ||
                    parse_uint(dash + 1, plen - (size_t)(dash - s) - 1, 65535, &hi) < 0 || lo > hi ||
                    hi == 0)    /* 0-0 names only port 0, refused as '0' is (and written back as it) */
                        return pd_error_setx(err, EINVAL, "ports '%.*s': N, N-M (0..65535, M >= 1) or *",
                                             (int)plen, s);
        } else {
                if (parse_uint(s, plen, 65535, &lo) < 0 || lo == 0)
                        return pd_error_setx(err, EINVAL, "port '%.*s': 1..65535, N-M or *",
                                             (int)plen, s);
                hi = lo;
        }
        r->port_lo = (uint16_t)lo;
        r->port_hi = (uint16_t)hi;
        return 0;
}

int pd_netpol_rule_parse(const char *s, struct pd_netpol_rule *r, struct pd_error *err)
{
        char buf[PD_NETPOL_RULE_TEXT_MAX + 1];
        memset(r, 0, sizeof *r);
        r->port_hi = 65535;
        size_t n = strnlen(s, sizeof buf);
        if (n >= sizeof buf)
                return pd_error_setx(err, EINVAL, "rule longer than %d characters",
                                     PD_NETPOL_RULE_TEXT_MAX);
        memcpy(buf, s, n + 1);
        char *rest;
        if (strncmp(buf, "allow:", 6) == 0) {
                r->action = PD_NETPOL_ALLOW;
                rest = buf + 6;
        } else if (strncmp(buf, "deny:", 5) == 0) {
                r->action = PD_NETPOL_DENY;
                rest = buf + 5;
        } else {
                return pd_error_setx(err, EINVAL,
                                     "rule '%.64s': expected allow:TARGET[:PORTS[/PROTO]] or deny:...",
                                     s);
        }
        char *target = rest, *ports = NULL;
        if (rest[0] == '[') {
                char *close = strchr(rest, ']');
                if (!close || (close[1] != '\0' && close[1] != ':'))
                        return pd_error_setx(err, EINVAL, "rule '%.64s': unbalanced [ ]", s);
                target = rest + 1;
                *close = '\0';
                if (close[1] == ':')
                        ports = close + 2;
        } else {
                char *c1 = strchr(rest, ':');
                if (c1 && !strchr(c1 + 1, ':')) {       /* one colon: TARGET:PORTS */
                        *c1 = '\0';
                        ports = c1 + 1;
                }                                       /* more: a bare IPv6 target */
        }
        int rc = parse_target(target, r, err);
        if (rc < 0)
                return pd_error_prefix(err, "rule '%.64s'", s);
        if (ports && parse_ports(ports, r, err) < 0)
                return pd_error_prefix(err, "rule '%.64s'", s);
        if (r->kind == PD_NETPOL_DOMAIN && r->action == PD_NETPOL_DENY &&
            (r->proto || r->port_lo != 0 || r->port_hi != 65535))
                return pd_error_setx(err, EINVAL,
                                     "rule '%.64s': a domain deny takes no ports (a denied name "
                                     "does not resolve)", s);
        return 0;
}

int pd_netpol_rule_format(const struct pd_netpol_rule *r, char *buf, size_t size)
{
        char t[PD_NETPOL_NAME_MAX + 8], ports[32] = "";
        if (r->kind == PD_NETPOL_CIDR) {
                char a[INET6_ADDRSTRLEN];
                inet_ntop(r->family, r->addr, a, sizeof a);
                snprintf(t, sizeof t, r->family == AF_INET6 ? "[%s/%u]" : "%s/%u", a, r->prefix);
        } else {
                snprintf(t, sizeof t, "%s%s", r->wildcard ? "*." : "", r->domain);
        }
        bool any_port = r->port_lo == 0 && r->port_hi == 65535;
        if (!any_port || r->proto) {
                const char *proto = r->proto == IPPROTO_TCP ? "/tcp" :
                                    r->proto == IPPROTO_UDP ? "/udp" : "";
                if (any_port)
                        snprintf(ports, sizeof ports, ":*%s", proto);
                else if (r->port_lo == r->port_hi)
                        snprintf(ports, sizeof ports, ":%u%s", r->port_lo, proto);
                else
                        snprintf(ports, sizeof ports, ":%u-%u%s", r->port_lo, r->port_hi, proto);
        }
        return snprintf(buf, size, "%s:%s%s", r->action == PD_NETPOL_DENY ? "deny" : "allow", t,
                        ports);
}

int pd_netpol_add_rule(struct pd_netpol *p, const struct pd_netpol_rule *r, struct pd_error *err)
{
        if (p->n_rules >= PD_NETPOL_MAX_RULES)
                return pd_error_setx(err, E2BIG, "more than %d network rules", PD_NETPOL_MAX_RULES);
        /* grow by doubling: 16384 rules parse in linear time */
        size_t n = p->n_rules;
        if ((n & (n - 1)) == 0) {
                size_t cap = n ? n * 2 : 8;
                struct pd_netpol_rule *nr = realloc(p->rules, cap * sizeof *nr);
                if (!nr)
                        return pd_error_set(err, ENOMEM, "network rules");
                p->rules = nr;
        }
        p->rules[p->n_rules++] = *r;
        return 0;
}

int pd_netpol_finish(struct pd_netpol *p, struct pd_error *err)
{
        if (p->mode == PD_NETPOL_NONE && p->n_rules)
                return pd_error_setx(err, EINVAL,
                                     "network none takes no rules (use --net policy or --net open)");
        if ((unsigned)p->mode > PD_NETPOL_POLICY)
                return pd_error_setx(err, EINVAL, "bad network mode %d", (int)p->mode);
        if (!p->strict_set) {
                p->strict = false;
                for (size_t i = 0; i < p->n_rules; i++)
                        if (p->rules[i].kind == PD_NETPOL_DOMAIN)
                                p->strict = true;
        }
        return 0;
}
