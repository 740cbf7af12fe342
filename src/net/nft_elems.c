/* Set elements of `addr . inet_proto . inet_service` interval sets.
 *
 * The kernel's concatenated-range set (pipapo) refuses an element whose
 * start or end falls inside an existing one (ENOTEMPTY), so CIDR rules are
 * normalized first: per protocol, each CIDR keeps only the port ranges that
 * no enclosing (or equal, earlier) CIDR already covers. CIDRs are either
 * nested or disjoint, so one walk over the rules sorted by address with a
 * stack of enclosing CIDRs does it in O(n log n). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter.h>

#include "net/nft_int.h"

#define TYPE_BITS 6
#define T_IPV4 7
#define T_IPV6 8
#define T_PROTO 12
#define T_SERVICE 13

struct nftnl_set *pd_nft_set_named(const char *name)
{
        struct nftnl_set *s = nftnl_set_alloc();
        if (!s)
                return NULL;
        nftnl_set_set_str(s, NFTNL_SET_TABLE, PD_NFT_TABLE);
        nftnl_set_set_str(s, NFTNL_SET_NAME, name);
        nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
        return s;
}

struct nftnl_set *pd_nft_set_new_concat(const char *name, int family, int timeout)
{
        struct nftnl_set *s = pd_nft_set_named(name);
        if (!s)
                return NULL;
        uint32_t alen = family == AF_INET ? 4 : 16;
        uint32_t type = (((family == AF_INET ? T_IPV4 : T_IPV6) << TYPE_BITS | T_PROTO) << TYPE_BITS) | T_SERVICE;
        uint8_t fields[3] = { (uint8_t)alen, 1, 2 };
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, type);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, alen + 4 + 4);
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_INTERVAL | NFT_SET_CONCAT |
                          (timeout ? NFT_SET_TIMEOUT : 0));
        nftnl_set_set_data(s, NFTNL_SET_DESC_CONCAT, fields, sizeof fields);
        return s;
}

/* key layout: addr, then proto in a 4-byte register, then the port (network
 * order) in a 4-byte register; what the rule's payload/meta loads produce. */
static uint32_t make_key(uint8_t *key, int family, const uint8_t *addr, uint8_t proto, uint16_t port)
{
        uint32_t alen = family == AF_INET ? 4 : 16;
        memset(key, 0, alen + 8);
        memcpy(key, addr, alen);
        key[alen] = proto;
        uint16_t be = htons(port);
        memcpy(key + alen + 4, &be, 2);
        return alen + 8;
}

static int add_elem(struct nftnl_set *s, int family, const uint8_t *lo_addr, const uint8_t *hi_addr,
                    uint8_t proto, uint16_t port_lo, uint16_t port_hi, uint32_t timeout_ms)
{
        uint8_t k[24], ke[24];
        struct nftnl_set_elem *e = nftnl_set_elem_alloc();
        if (!e)
                return -ENOMEM;
        uint32_t len = make_key(k, family, lo_addr, proto, port_lo);
        make_key(ke, family, hi_addr, proto, port_hi);
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, k, len);
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY_END, ke, len);
        if (timeout_ms)
                nftnl_set_elem_set_u64(e, NFTNL_SET_ELEM_TIMEOUT, timeout_ms);
        nftnl_set_elem_add(s, e);
        return 0;
}

void pd_nft_elems_add_pin(struct nftnl_set *s, const struct pd_nft_pin *p)
{
        uint32_t ttl = p->ttl_s < 1 ? 1 : p->ttl_s > 86400 ? 86400 : p->ttl_s;
        static const uint8_t protos[2] = { IPPROTO_TCP, IPPROTO_UDP };
        for (int i = 0; i < 2; i++)
                if (!p->proto || p->proto == protos[i])
                        (void)add_elem(s, p->family, p->addr, p->addr, protos[i], p->port_lo,
                                       p->port_hi, ttl * 1000u);
}

struct node {
        uint8_t net[16], bcast[16];
        uint8_t prefix;
        uint16_t lo, hi;
        size_t piece0, n_pieces;        /* into the pieces array */
};

struct range { uint16_t lo, hi; };

static int node_cmp(const void *a, const void *b)
{
        const struct node *x = a, *y = b;
        int c = memcmp(x->net, y->net, 16);
        if (c)
                return c;
        if (x->prefix != y->prefix)
                return x->prefix < y->prefix ? -1 : 1;
        return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void mask_addr(const uint8_t *in, unsigned alen, unsigned prefix, uint8_t *net, uint8_t *bcast)
{
        memset(net, 0, 16);
        memset(bcast, 0, 16);
        for (unsigned i = 0; i < alen; i++) {
                unsigned bits = prefix > i * 8 ? prefix - i * 8 : 0;
                uint8_t m = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
                net[i] = in[i] & m;
                bcast[i] = net[i] | (uint8_t)~m;
        }
}

static int contains(const struct node *outer, const struct node *inner)
{
        return outer->prefix <= inner->prefix &&
               memcmp(outer->net, inner->net, 16) <= 0 && memcmp(inner->bcast, outer->bcast, 16) <= 0;
}

/* pieces of [lo,hi] not covered by sub (sorted, disjoint) -> out; returns count */
static size_t subtract(uint16_t lo, uint16_t hi, const struct range *sub, size_t n_sub, struct range *out)
{
        size_t n = 0;
        uint32_t cur = lo;
        for (size_t i = 0; i < n_sub && cur <= hi; i++) {
                if (sub[i].hi < cur || sub[i].lo > hi)
                        continue;
                if (sub[i].lo > cur)
                        out[n++] = (struct range){ (uint16_t)cur, (uint16_t)(sub[i].lo - 1) };
                cur = (uint32_t)sub[i].hi + 1;
        }
        if (cur <= hi)
                out[n++] = (struct range){ (uint16_t)cur, hi };
        return n;
}

static int range_cmp(const void *a, const void *b)
{
        const struct range *x = a, *y = b;
        return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int add_proto(struct nftnl_set *s, int family, uint8_t proto, const struct pd_nft_cidr *c,
                     size_t n, uint32_t timeout_ms, struct pd_error *err)
{
        unsigned alen = family == AF_INET ? 4 : 16;
        size_t m = 0;
        struct node *nodes = calloc(n ? n : 1, sizeof *nodes);
        /* every node adds at most (covering pieces + 1) pieces; the covering
         * pieces are bounded by what came before, so 2n+1 per step is plenty
         * only amortized: grow on demand instead */
        size_t cap = 2 * n + 16, used = 0;
        struct range *pieces = malloc(cap * sizeof *pieces);
        struct range *sub = NULL, *tmp = NULL;
        int r = 0, count = 0;
        if (!nodes || !pieces) {
                r = pd_error_set(err, ENOMEM, "nft elements");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                if (c[i].family != family || (c[i].proto && c[i].proto != proto))
                        continue;
                unsigned maxp = alen * 8;
                if (c[i].prefix > maxp || c[i].port_lo > c[i].port_hi) {
                        r = pd_error_setx(err, EINVAL, "bad CIDR entry (prefix %u, ports %u-%u)",
                                          c[i].prefix, c[i].port_lo, c[i].port_hi);
                        goto out;
                }
                struct node *x = &nodes[m++];
                mask_addr(c[i].addr, alen, c[i].prefix, x->net, x->bcast);
                x->prefix = c[i].prefix;
                x->lo = c[i].port_lo;
                x->hi = c[i].port_hi;
        }
        qsort(nodes, m, sizeof *nodes, node_cmp);
        size_t stack[130], depth = 0;
        for (size_t i = 0; i < m; i++) {
                struct node *x = &nodes[i];
                while (depth && !contains(&nodes[stack[depth - 1]], x))
                        depth--;
                size_t n_sub = 0;
                for (size_t d = 0; d < depth; d++)
                        n_sub += nodes[stack[d]].n_pieces;
                free(sub);
                free(tmp);
                sub = malloc((n_sub + 1) * sizeof *sub);
                tmp = malloc((n_sub + 2) * sizeof *tmp);
                if (!sub || !tmp) {
                        r = pd_error_set(err, ENOMEM, "nft elements");
                        goto out;
                }
                size_t k = 0;
                for (size_t d = 0; d < depth; d++) {
                        const struct node *a = &nodes[stack[d]];
                        memcpy(sub + k, pieces + a->piece0, a->n_pieces * sizeof *sub);
                        k += a->n_pieces;
                }
                qsort(sub, k, sizeof *sub, range_cmp);
                size_t got = subtract(x->lo, x->hi, sub, k, tmp);
                if (used + got > cap) {
                        cap = (used + got) * 2;
                        struct range *np = realloc(pieces, cap * sizeof *pieces);
                        if (!np) {
                                r = pd_error_set(err, ENOMEM, "nft elements");
                                goto out;
                        }
                        pieces = np;
                }
                memcpy(pieces + used, tmp, got * sizeof *tmp);
                x->piece0 = used;
                x->n_pieces = got;
                used += got;
                for (size_t p = 0; p < got; p++)
                        if (add_elem(s, family, x->net, x->bcast, proto, tmp[p].lo, tmp[p].hi, timeout_ms) < 0) {
                                r = pd_error_set(err, ENOMEM, "nft elements");
                                goto out;
                        } else {
                                count++;
                        }
                if (depth < 130)
                        stack[depth++] = i;
        }
out:
        free(sub);
        free(tmp);
        free(pieces);
        free(nodes);
        return r < 0 ? r : count;
}

int pd_nft_elems_add_cidrs(struct nftnl_set *s, int family, const struct pd_nft_cidr *c,
                           size_t n, uint32_t timeout_ms, struct pd_error *err)
{
        int a = add_proto(s, family, IPPROTO_TCP, c, n, timeout_ms, err);
        if (a < 0)
                return a;
        int b = add_proto(s, family, IPPROTO_UDP, c, n, timeout_ms, err);
        return b < 0 ? b : a + b;
}

struct nftnl_set *pd_nft_set_new_addrproto(const char *name, int family)
{
        struct nftnl_set *s = pd_nft_set_named(name);
        if (!s)
                return NULL;
        uint32_t alen = family == AF_INET ? 4 : 16;
        uint8_t fields[2] = { (uint8_t)alen, 1 };
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE,
                          (uint32_t)((family == AF_INET ? T_IPV4 : T_IPV6) << TYPE_BITS | T_PROTO));
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, alen + 4);
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_INTERVAL | NFT_SET_CONCAT);
        nftnl_set_set_data(s, NFTNL_SET_DESC_CONCAT, fields, sizeof fields);
        return s;
}

int pd_nft_elems_add_addrproto(struct nftnl_set *s, int family, const struct pd_nft_cidr *c,
                               size_t n, struct pd_error *err)
{
        unsigned alen = family == AF_INET ? 4 : 16;
        struct node *nodes = calloc(n ? n : 1, sizeof *nodes);
        if (!nodes)
                return pd_error_set(err, ENOMEM, "nft elements");
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                if (c[i].family != family)
                        continue;
                if (c[i].prefix > alen * 8) {
                        free(nodes);
                        return pd_error_setx(err, EINVAL, "bad CIDR prefix %u", c[i].prefix);
                }
                mask_addr(c[i].addr, alen, c[i].prefix, nodes[m].net, nodes[m].bcast);
                nodes[m++].prefix = c[i].prefix;
        }
        qsort(nodes, m, sizeof *nodes, node_cmp);
        const struct node *outer = NULL;
        for (size_t i = 0; i < m; i++) {
                if (outer && contains(outer, &nodes[i]))
                        continue;
                outer = &nodes[i];
                uint8_t k[20] = { 0 }, ke[20] = { 0 };
                memcpy(k, nodes[i].net, alen);
                memcpy(ke, nodes[i].bcast, alen);
                ke[alen] = 0xff;        /* every protocol */
                struct nftnl_set_elem *e = nftnl_set_elem_alloc();
                if (!e) {
                        free(nodes);
                        return pd_error_set(err, ENOMEM, "nft elements");
                }
                nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, k, alen + 4);
                nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY_END, ke, alen + 4);
                nftnl_set_elem_add(s, e);
        }
        free(nodes);
        return 0;
}
