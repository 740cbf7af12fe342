/* Unit tests for the CIDR-rule normalization of src/net/nft_elems.c: the
 * kernel's concatenated-range sets refuse an element whose start or end
 * lies inside another one, so the elements must be pairwise disjoint and
 * cover exactly what the rules cover. Property test over random rule sets
 * (fixed seed), checked point by point. TAP. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/nft_int.h"
#include "tap.h"

struct box { uint32_t a0, a1; uint8_t proto; uint16_t p0, p1; };

/* the v4 elements of s, decoded from the key layout (addr, proto, port) */
static size_t boxes(struct nftnl_set *s, struct box *out, size_t max)
{
        size_t n = 0;
        struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
        for (struct nftnl_set_elem *e = nftnl_set_elems_iter_next(it); e && n < max;
             e = nftnl_set_elems_iter_next(it)) {
                uint32_t len, lend;
                const uint8_t *k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
                const uint8_t *ke = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &lend);
                uint32_t a0, a1;
                uint16_t p0, p1;
                memcpy(&a0, k, 4);
                memcpy(&a1, ke, 4);
                memcpy(&p0, k + 8, 2);
                memcpy(&p1, ke + 8, 2);
                out[n++] = (struct box){ ntohl(a0), ntohl(a1), k[4], ntohs(p0), ntohs(p1) };
                if (len != 12 || lend != 12 || k[4] != ke[4])
                        out[n - 1].proto = 0;   /* flagged as malformed */
        }
        nftnl_set_elems_iter_destroy(it);
        return n;
}

static int in_box(const struct box *b, uint32_t a, uint8_t proto, uint16_t p)
{
        return a >= b->a0 && a <= b->a1 && proto == b->proto && p >= b->p0 && p <= b->p1;
}

static int in_rules(const struct pd_nft_cidr *c, size_t n, uint32_t a, uint8_t proto, uint16_t p)
{
        for (size_t i = 0; i < n; i++) {
                uint32_t net, mask = c[i].prefix ? 0xffffffffu << (32 - c[i].prefix) : 0;
                memcpy(&net, c[i].addr, 4);
                net = ntohl(net);
                if ((a & mask) == (net & mask) && (!c[i].proto || c[i].proto == proto) &&
                    p >= c[i].port_lo && p <= c[i].port_hi)
                        return 1;
        }
        return 0;
}

static void random_rule(struct pd_nft_cidr *c)
{
        static const uint8_t prefixes[] = { 8, 16, 24, 28, 30, 32 };
        memset(c, 0, sizeof *c);
        c->family = AF_INET;
        /* few distinct networks, so rules nest and repeat */
        uint32_t a = 0x0a000000u | (uint32_t)(rand() % 4) << 16 | (uint32_t)(rand() % 4) << 8 | (uint32_t)(rand() % 8);
        a = htonl(a);
        memcpy(c->addr, &a, 4);
        c->prefix = prefixes[rand() % 6];
        c->proto = (uint8_t[]){ 0, IPPROTO_TCP, IPPROTO_UDP }[rand() % 3];
        static const uint16_t ports[] = { 0, 22, 80, 443, 1000, 8080, 65535 };
        uint16_t x = ports[rand() % 7], y = ports[rand() % 7];
        c->port_lo = x < y ? x : y;
        c->port_hi = x < y ? y : x;
        if (rand() % 3 == 0) {
                c->port_lo = 0;
                c->port_hi = 65535;
        }
}

static void check_set(const struct pd_nft_cidr *rules, size_t n_rules, const char *what)
{
        struct nftnl_set *s = pd_nft_set_new_concat("t", AF_INET, 0);
        struct pd_error err = { 0 };
        int r = pd_nft_elems_add_cidrs(s, AF_INET, rules, n_rules, 0, &err);
        static struct box b[20000];
        size_t n = boxes(s, b, 20000);
        int disjoint = r >= 0 && (size_t)r == n;
        for (size_t i = 0; i < n && disjoint; i++) {
                if (!b[i].proto || b[i].a0 > b[i].a1 || b[i].p0 > b[i].p1)
                        disjoint = 0;
                for (size_t j = i + 1; j < n && disjoint; j++)
                        if (b[i].proto == b[j].proto && b[i].a0 <= b[j].a1 && b[j].a0 <= b[i].a1 &&
                            b[i].p0 <= b[j].p1 && b[j].p0 <= b[i].p1)
                                disjoint = 0;
        }
        char msg[160];
        snprintf(msg, sizeof msg, "%s: %zu rules -> %zu disjoint elements", what, n_rules, n);
        ok(disjoint, "%s", msg);
        /* same coverage, probed at every rule's corners and random points */
        int same = 1;
        static const uint16_t probe_ports[] = { 0, 1, 21, 22, 23, 79, 80, 81, 443, 999, 1000, 1001, 8080, 65534, 65535 };
        static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP };
        for (size_t i = 0; i < n_rules && same; i++) {
                uint32_t net;
                memcpy(&net, rules[i].addr, 4);
                net = ntohl(net);
                uint32_t mask = rules[i].prefix ? 0xffffffffu << (32 - rules[i].prefix) : 0;
                uint32_t pts[4] = { net & mask, (net & mask) | ~mask, (net & mask) + 1, ((net & mask) | ~mask) + 1 };
                for (int k = 0; k < 4 && same; k++)
                        for (size_t q = 0; q < sizeof probe_ports / 2 && same; q++)
                                for (int pr = 0; pr < 2 && same; pr++) {
                                        int want = in_rules(rules, n_rules, pts[k], protos[pr], probe_ports[q]);
                                        int got = 0;
                                        for (size_t e = 0; e < n && !got; e++)
                                                got = in_box(&b[e], pts[k], protos[pr], probe_ports[q]);
                                        if (want != got) {
                                                printf("# %08x proto %u port %u: rules %d, elements %d\n", pts[k],
                                                       protos[pr], probe_ports[q], want, got);
                                                same = 0;
                                        }
                                }
        }
        snprintf(msg, sizeof msg, "%s: elements cover exactly what the rules cover", what);
        ok(same, "%s", msg);
        nftnl_set_free(s);
}

int main(void)
{
        struct pd_nft_cidr rules[64];
        /* hand-made: nesting, equal CIDRs, partial port overlaps */
        const char *addrs[] = { "10.0.0.0", "10.1.0.0", "10.1.2.3", "10.0.0.0", "10.1.2.3" };
        const uint8_t prefixes[] = { 8, 16, 32, 8, 32 };
        const uint16_t lo[] = { 1, 50, 0, 100, 443 }, hi[] = { 100, 200, 65535, 150, 443 };
        for (int i = 0; i < 5; i++) {
                memset(&rules[i], 0, sizeof rules[i]);
                rules[i].family = AF_INET;
                inet_pton(AF_INET, addrs[i], rules[i].addr);
                rules[i].prefix = prefixes[i];
                rules[i].port_lo = lo[i];
                rules[i].port_hi = hi[i];
        }
        check_set(rules, 5, "nested and overlapping");
        check_set(rules, 0, "no rules");
        srand(42);
        for (int round = 0; round < 40; round++) {
                size_t n = 1 + (size_t)(rand() % 40);
                for (size_t i = 0; i < n; i++)
                        random_rule(&rules[i]);
                char what[32];
                snprintf(what, sizeof what, "random set %d", round);
                check_set(rules, n, what);
        }
        /* bad input is refused, not turned into elements */
        struct nftnl_set *s = pd_nft_set_new_concat("t", AF_INET, 0);
        struct pd_error err = { 0 };
        rules[0].prefix = 33;
        ok(pd_nft_elems_add_cidrs(s, AF_INET, rules, 1, 0, &err) == -EINVAL, "prefix 33 refused");
        rules[0].prefix = 24;
        rules[0].port_lo = 10;
        rules[0].port_hi = 5;
        ok(pd_nft_elems_add_cidrs(s, AF_INET, rules, 1, 0, &err) == -EINVAL, "inverted port range refused");
        nftnl_set_free(s);
        return tap_done();
}
