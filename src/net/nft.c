/* The rule-set layout of a router netns (see nft.h for the picture): the
 * router-wide table and base chains, and per-sandbox chains and sets, each
 * change one atomic transaction. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <net/if.h>

#include "net/nft_int.h"

#define PRIO_FILTER 0
#define CT_BIT(x) (1u << ((x) + 1)) /* NF_CT_STATE_BIT (bit 0 = invalid) */
#define PRIO_GUARD (-300)      /* before conntrack (-200) */
#define PRIO_DSTNAT (-100)
#define PRIO_SRCNAT 100

int pd_nft_key_check(const char *key)
{
        size_t n = key ? strlen(key) : 0;
        if (n < 1 || n > PD_NFT_KEY_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!((key[i] >= 'a' && key[i] <= 'z') || (key[i] >= '0' && key[i] <= '9')))
                        return -EINVAL;
        return 0;
}

static int check_names(const char *key, const char *ifname, struct pd_error *err)
{
        if (pd_nft_key_check(key) < 0)
                return pd_error_setx(err, EINVAL, "bad sandbox key for nftables");
        if (ifname && (!*ifname || strlen(ifname) >= IFNAMSIZ))
                return pd_error_setx(err, EINVAL, "bad interface name '%s'", ifname);
        return 0;
}

static void name(char *buf, size_t size, const char *prefix, const char *key)
{
        snprintf(buf, size, "%s_%s", prefix, key);
}

static struct nftnl_rule *rule_iif_prefix(const char *chain, int oif)
{
        struct nftnl_rule *r = pd_nft_rule_new(chain);
        if (!r)
                return NULL;
        pd_nft_e_meta(r, oif ? NFT_META_OIFNAME : NFT_META_IIFNAME, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, "pd", 2);
        return r;
}

/* NULL in, NULL out (pd_nft_tx_rule turns it into a failed transaction) */
static struct nftnl_rule *rule_l4_dport(struct nftnl_rule *r, uint8_t proto, uint16_t port)
{
        uint16_t be = htons(port);
        if (!r)
                return NULL;
        pd_nft_e_meta(r, NFT_META_L4PROTO, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &proto, 1);
        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &be, 2);
        return r;
}

static struct nftnl_rule *verdict_rule(struct nftnl_rule *r, int verdict, int counter)
{
        if (!r)
                return NULL;
        if (counter)
                pd_nft_e_counter(r);
        pd_nft_e_verdict(r, verdict);
        return r;
}

/* nfproto == family, then daddr . l4proto [. dport] -> lookup set */
static void lookup_daddr(struct nftnl_rule *r, int family, const char *set, int with_port)
{
        uint8_t nfp = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
        pd_nft_e_meta(r, NFT_META_NFPROTO, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &nfp, 1);
        if (family == AF_INET) {
                pd_nft_e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, NFT_REG_1);
                pd_nft_e_meta(r, NFT_META_L4PROTO, NFT_REG32_01);
                if (with_port)
                        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG32_02);
        } else {
                pd_nft_e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 16, NFT_REG_1);
                pd_nft_e_meta(r, NFT_META_L4PROTO, NFT_REG32_04);
                if (with_port)
                        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG32_05);
        }
        pd_nft_e_lookup(r, NFT_REG_1, set, -1);
}

static void map_rule(struct pd_nft_tx *tx, const char *chain, uint32_t meta, const char *map)
{
        struct nftnl_rule *r = pd_nft_rule_new(chain);
        if (!r) {
                tx->oom = 1;
                return;
        }
        pd_nft_e_meta(r, meta, NFT_REG_1);
        pd_nft_e_lookup(r, NFT_REG_1, map, NFT_REG_VERDICT);
        pd_nft_tx_rule(tx, r);
}

static struct nftnl_set *verdict_map(const char *mapname)
{
        struct nftnl_set *s = pd_nft_set_named(mapname);
        if (!s)
                return NULL;
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, 41);   /* ifname */
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, IFNAMSIZ);
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_MAP);
        nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
        nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 0);
        return s;
}

static void log_chain(struct pd_nft_tx *tx, const char *chain, const char *key, const char *kind);
static struct nftnl_rule *router_logged_drop(struct nftnl_rule *r, const char *kind);

int pd_nft_router_init(struct pd_nft *n, const struct pd_nft_router_cfg *cfg, struct pd_error *err)
{
        if (cfg->n_open_deny > PD_NFT_OPEN_DENY_MAX || cfg->n_hard_deny > PD_NFT_OPEN_DENY_MAX)
                return pd_error_setx(err, E2BIG, "more than %d never-reached ranges", PD_NFT_OPEN_DENY_MAX);
        if (cfg->uplink_ifname && strlen(cfg->uplink_ifname) >= IFNAMSIZ)
                return pd_error_setx(err, EINVAL, "bad uplink name");

        struct pd_nft_tx tx;
        int r = pd_nft_tx_begin(n, &tx, err);
        if (r < 0)
                return r;
        /* add + delete + add: start from an empty table in one transaction */
        pd_nft_tx_table(&tx, NFT_MSG_NEWTABLE);
        pd_nft_tx_table(&tx, NFT_MSG_DELTABLE);
        pd_nft_tx_table(&tx, NFT_MSG_NEWTABLE);
        pd_nft_tx_set(&tx, NFT_MSG_NEWSET, verdict_map("sbmap"));
        pd_nft_tx_set(&tx, NFT_MSG_NEWSET, verdict_map("inmap"));
        pd_nft_tx_set(&tx, NFT_MSG_NEWSET, verdict_map("natmap"));
        static const int fams[2] = { AF_INET, AF_INET6 };
        for (int f = 0; f < 2; f++) {
                const char *sname = fams[f] == AF_INET ? "open_deny4" : "open_deny6";
                pd_nft_tx_set(&tx, NFT_MSG_NEWSET, pd_nft_set_new_addrproto(sname, fams[f]));
                struct nftnl_set *s = pd_nft_set_named(sname);
                if (s && (r = pd_nft_elems_add_addrproto(s, fams[f], cfg->open_deny, cfg->n_open_deny, err)) < 0) {
                        nftnl_set_free(s);
                        pd_nft_tx_abort(&tx);
                        return r;
                }
                pd_nft_tx_elems(&tx, NFT_MSG_NEWSETELEM, s);
                const char *hname = fams[f] == AF_INET ? "hard4" : "hard6";
                pd_nft_tx_set(&tx, NFT_MSG_NEWSET, pd_nft_set_new_addrproto(hname, fams[f]));
                size_t nf = 0;
                for (size_t i = 0; i < cfg->n_hard_deny; i++)
                        nf += cfg->hard_deny[i].family == fams[f];
                if (!nf)
                        continue;       /* empty: no element message */
                s = pd_nft_set_named(hname);
                if (s && (r = pd_nft_elems_add_addrproto(s, fams[f], cfg->hard_deny, cfg->n_hard_deny, err)) < 0) {
                        nftnl_set_free(s);
                        pd_nft_tx_abort(&tx);
                        return r;
                }
                pd_nft_tx_elems(&tx, NFT_MSG_NEWSETELEM, s);
        }
        struct nftnl_set *ok = pd_nft_set_named("src4ok");
        if (ok) {
                nftnl_set_set_u32(ok, NFTNL_SET_KEY_TYPE, 41 << 6 | 7);        /* ifname . ipv4_addr */
                nftnl_set_set_u32(ok, NFTNL_SET_KEY_LEN, IFNAMSIZ + 4);
        }
        pd_nft_tx_set(&tx, NFT_MSG_NEWSET, ok);
        ok = pd_nft_set_named("src6ok");
        if (ok) {
                nftnl_set_set_u32(ok, NFTNL_SET_KEY_TYPE, 41 << 6 | 8);        /* ifname . ipv6_addr */
                nftnl_set_set_u32(ok, NFTNL_SET_KEY_LEN, IFNAMSIZ + 16);
        }
        pd_nft_tx_set(&tx, NFT_MSG_NEWSET, ok);
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, "guard", "filter", NF_INET_PRE_ROUTING, PRIO_GUARD, NF_ACCEPT);
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, "forward", "filter", NF_INET_FORWARD, PRIO_FILTER, NF_DROP);
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, "input", "filter", NF_INET_LOCAL_IN, PRIO_FILTER, NF_DROP);
        static const char *const router_kinds[4] = { "spoof", "peer", "router", "never" };
        for (int k = 0; k < 4; k++) {
                char chain[32];
                snprintf(chain, sizeof chain, "lg%s", router_kinds[k]);
                log_chain(&tx, chain, "-", router_kinds[k]);
        }
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, "prerouting", "nat", NF_INET_PRE_ROUTING, PRIO_DSTNAT, -1);
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, "postrouting", "nat", NF_INET_POST_ROUTING, PRIO_SRCNAT, -1);

        /* guard: a sandbox speaks with its own IPv4 address or not at all */
        struct nftnl_rule *rr = rule_iif_prefix("guard", 0);
        if (rr) {
                uint8_t v4 = NFPROTO_IPV4;
                pd_nft_e_meta(rr, NFT_META_NFPROTO, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &v4, 1);
                pd_nft_e_meta(rr, NFT_META_IIFNAME, NFT_REG_1);
                pd_nft_e_payload(rr, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG32_04);
                pd_nft_e_lookup(rr, NFT_REG_1, "src4ok", -1);
                verdict_rule(rr, NF_ACCEPT, 0);
        }
        pd_nft_tx_rule(&tx, rr);
        /* IPv6 (behind an uplink that has it, router_setup.c): the
         * sandbox's own address (src6ok holds it only then), and
         * link-local ICMPv6, which neighbour discovery with the router
         * needs */
        rr = rule_iif_prefix("guard", 0);
        if (rr) {
                uint8_t v6 = NFPROTO_IPV6;
                pd_nft_e_meta(rr, NFT_META_NFPROTO, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &v6, 1);
                pd_nft_e_meta(rr, NFT_META_IIFNAME, NFT_REG_1);
                pd_nft_e_payload(rr, NFT_PAYLOAD_NETWORK_HEADER, 8, 16, NFT_REG32_04);
                pd_nft_e_lookup(rr, NFT_REG_1, "src6ok", -1);
                verdict_rule(rr, NF_ACCEPT, 0);
        }
        pd_nft_tx_rule(&tx, rr);
        rr = rule_iif_prefix("guard", 0);
        if (rr) {
                uint8_t v6 = NFPROTO_IPV6, icmp6 = IPPROTO_ICMPV6;
                uint8_t mask[2] = { 0xff, 0xc0 }, ll[2] = { 0xfe, 0x80 };
                pd_nft_e_meta(rr, NFT_META_NFPROTO, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &v6, 1);
                pd_nft_e_meta(rr, NFT_META_L4PROTO, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &icmp6, 1);
                pd_nft_e_payload(rr, NFT_PAYLOAD_NETWORK_HEADER, 8, 2, NFT_REG_1);
                pd_nft_e_mask_cmp(rr, NFT_REG_1, mask, ll, 2);
                verdict_rule(rr, NF_ACCEPT, 0);
        }
        pd_nft_tx_rule(&tx, rr);
        pd_nft_tx_rule(&tx, router_logged_drop(rule_iif_prefix("guard", 0), "spoof"));

        /* What the uplink sends that conntrack cannot place (pasta emits
         * a segment without flags at times) is dropped before anything
         * else sees it: passed on, it made sandboxes reset their own HTTPS
         * connections. */
        if (cfg->uplink_ifname) {
                static const char *const chains[2] = { "forward", "input" };
                for (int i = 0; i < 2; i++) {
                        char ifn[IFNAMSIZ] = { 0 };
                        strncpy(ifn, cfg->uplink_ifname, IFNAMSIZ - 1);
                        rr = pd_nft_rule_new(chains[i]);
                        if (rr) {
                                pd_nft_e_meta(rr, NFT_META_IIFNAME, NFT_REG_1);
                                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, ifn, IFNAMSIZ);
                                pd_nft_e_ct_state(rr, 1u);      /* invalid */
                                verdict_rule(rr, NF_DROP, 1);
                        }
                        pd_nft_tx_rule(&tx, rr);
                }
        }

        /* forward: the hard never set, whatever the sandbox's rules say */
        for (int f = 0; f < 2; f++) {
                rr = rule_iif_prefix("forward", 0);
                if (rr)
                        lookup_daddr(rr, fams[f], fams[f] == AF_INET ? "hard4" : "hard6", 0);
                pd_nft_tx_rule(&tx, router_logged_drop(rr, "never"));
        }

        /* forward: sandbox to sandbox never; then each sandbox's chain */
        rr = rule_iif_prefix("forward", 0);
        if (rr) {
                pd_nft_e_meta(rr, NFT_META_OIFNAME, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, "pd", 2);
        }
        pd_nft_tx_rule(&tx, router_logged_drop(rr, "peer"));
        map_rule(&tx, "forward", NFT_META_IIFNAME, "sbmap");
        map_rule(&tx, "forward", NFT_META_OIFNAME, "inmap");
        rr = pd_nft_rule_new("forward");
        if (rr) {
                pd_nft_e_ct_state(rr, CT_BIT(IP_CT_ESTABLISHED) | CT_BIT(IP_CT_RELATED));
                verdict_rule(rr, NF_ACCEPT, 0);
        }
        pd_nft_tx_rule(&tx, rr);
        rr = pd_nft_rule_new("forward");
        pd_nft_tx_rule(&tx, rr ? verdict_rule(rr, NF_DROP, 1) : NULL);

        /* input: the router answers sandboxes on DNS and the proxy port only,
         * and nothing unsolicited from the uplink */
        rr = pd_nft_rule_new("input");
        if (rr) {
                pd_nft_e_meta(rr, NFT_META_IIFNAME, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, "lo\0", 3);
                verdict_rule(rr, NF_ACCEPT, 0);
        }
        pd_nft_tx_rule(&tx, rr);
        uint16_t dns = cfg->dns_port ? cfg->dns_port : 53;
        pd_nft_tx_rule(&tx, verdict_rule(rule_l4_dport(rule_iif_prefix("input", 0), IPPROTO_UDP, dns), NF_ACCEPT, 0));
        pd_nft_tx_rule(&tx, verdict_rule(rule_l4_dport(rule_iif_prefix("input", 0), IPPROTO_TCP, dns), NF_ACCEPT, 0));
        if (cfg->proxy_port)
                pd_nft_tx_rule(&tx, verdict_rule(rule_l4_dport(rule_iif_prefix("input", 0), IPPROTO_TCP,
                                                               cfg->proxy_port), NF_ACCEPT, 0));
        if (cfg->relay_port)
                pd_nft_relay_input_rule(&tx, cfg->relay_port);
        /* IPv6 neighbour solicitation and advertisement, from sandboxes
         * and from the uplink (conntrack leaves them untracked) */
        for (uint8_t type = 135; type <= 136; type++) {
                uint8_t icmp6 = IPPROTO_ICMPV6;
                rr = pd_nft_rule_new("input");
                if (rr) {
                        pd_nft_e_meta(rr, NFT_META_L4PROTO, NFT_REG_1);
                        pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &icmp6, 1);
                        pd_nft_e_payload(rr, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, NFT_REG_1);
                        pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &type, 1);
                        verdict_rule(rr, NF_ACCEPT, 0);
                }
                pd_nft_tx_rule(&tx, rr);
        }
        pd_nft_tx_rule(&tx, router_logged_drop(rule_iif_prefix("input", 0), "router"));
        rr = pd_nft_rule_new("input");
        if (rr) {
                pd_nft_e_ct_state(rr, CT_BIT(IP_CT_ESTABLISHED) | CT_BIT(IP_CT_RELATED));
                verdict_rule(rr, NF_ACCEPT, 0);
        }
        pd_nft_tx_rule(&tx, rr);

        map_rule(&tx, "prerouting", NFT_META_IIFNAME, "natmap");
        if (cfg->relay_port)
                pd_nft_relay_rules(&tx, cfg->relay_port, cfg->relay_queue);
        if (cfg->uplink_ifname) {
                char ifn[IFNAMSIZ] = { 0 };
                strncpy(ifn, cfg->uplink_ifname, IFNAMSIZ - 1);
                rr = pd_nft_rule_new("postrouting");
                if (rr) {
                        pd_nft_e_meta(rr, NFT_META_OIFNAME, NFT_REG_1);
                        pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, ifn, IFNAMSIZ);
                        pd_nft_e_masq(rr);
                }
                pd_nft_tx_rule(&tx, rr);
        }
        r = pd_nft_tx_commit(&tx, err);
        return r < 0 ? pd_error_prefix(err, "router nftables") : 0;
}

int pd_nft_router_fini(struct pd_nft *n, struct pd_error *err)
{
        struct pd_nft_tx tx;
        int r = pd_nft_tx_begin(n, &tx, err);
        if (r < 0)
                return r;
        pd_nft_tx_table(&tx, NFT_MSG_NEWTABLE);
        pd_nft_tx_table(&tx, NFT_MSG_DELTABLE);
        return pd_nft_tx_commit(&tx, err);
}

/* Logged-drop chains of a sandbox (nft.h): lg<n>_<key>, n the kind's
 * index here. */
enum { L_RATE, L_DENY, L_NEVER, L_RESOLVER, L_DEFAULT, L_COUNT };
static const char *const log_kinds[L_COUNT] = { "rate", "deny", "never", "resolver", "default" };

static void log_chain_name(char *buf, size_t size, int kind, const char *key)
{
        snprintf(buf, size, "lg%d_%s", kind, key);
}

/* Turn r (its match built) into "count, goto the logged-drop chain". */
static struct nftnl_rule *logged_drop(struct nftnl_rule *r, int kind, const char *key)
{
        char chain[96];
        if (!r)
                return NULL;
        log_chain_name(chain, sizeof chain, kind, key);
        pd_nft_e_counter(r);
        pd_nft_e_goto(r, chain);
        return r;
}

/* The rules of the logged-drop chains: "limit over -> drop", then
 * "log -> drop". The limit keeps a flood from costing more than a few
 * netlink messages a second; the counting is in the jumping rule. */
static void log_chain(struct pd_nft_tx *tx, const char *chain, const char *key, const char *kind)
{
        char prefix[128];
        /* made here, not only at add: a sandbox added by an older paddock
         * (no such chains) gets them at its next change */
        pd_nft_tx_chain(tx, NFT_MSG_NEWCHAIN, chain, NULL, 0, 0, -1);
        pd_nft_tx_flush_chain(tx, chain);
        struct nftnl_rule *ru = pd_nft_rule_new(chain);
        if (ru)
                pd_nft_e_limit(ru, PD_NFT_LOG_RATE, PD_NFT_LOG_BURST, 0);
        pd_nft_tx_rule(tx, ru ? verdict_rule(ru, NF_DROP, 0) : NULL);
        snprintf(prefix, sizeof prefix, PD_NFT_LOG_PREFIX "%s:%s", key, kind);
        ru = pd_nft_rule_new(chain);
        if (ru)
                pd_nft_e_log(ru, PD_NFT_LOG_GROUP, prefix, PD_NFT_LOG_SNAPLEN);
        pd_nft_tx_rule(tx, ru ? verdict_rule(ru, NF_DROP, 0) : NULL);
}

static void program_log_chains(struct pd_nft_tx *tx, const char *key)
{
        char chain[96];
        for (int k = 0; k < L_COUNT; k++) {
                log_chain_name(chain, sizeof chain, k, key);
                log_chain(tx, chain, key, log_kinds[k]);
        }
}

/* Router-wide drops of what came in on a sandbox veth (nft.h): the key
 * is "-", netd finds the sandbox by the packet's input interface. */
static struct nftnl_rule *router_logged_drop(struct nftnl_rule *r, const char *kind)
{
        char chain[32];
        if (!r)
                return NULL;
        snprintf(chain, sizeof chain, "lg%s", kind);
        pd_nft_e_counter(r);
        pd_nft_e_goto(r, chain);
        return r;
}

/* Set kinds of a sandbox: allow, deny, pins (timeouts), lift (allows
 * inside a never-reached range). */
enum { K_ALLOW, K_DENY, K_PIN, K_LIFT, K_COUNT };
static const char *const kinds[K_COUNT] = { "a", "d", "p", "l" };

static void set_name(char *buf, size_t size, int kind, int family, const char *key)
{
        snprintf(buf, size, "%s%d_%s", kinds[kind], family == AF_INET ? 4 : 6, key);
}

static bool inside_never(const struct pd_nft_rules *rules, const struct pd_nft_cidr *c)
{
        for (size_t i = 0; i < rules->n_never; i++) {
                const struct pd_nft_cidr *nv = &rules->never[i];
                if (nv->family != c->family || nv->prefix > c->prefix)
                        continue;
                unsigned bits = nv->prefix, full = bits / 8, rem = bits % 8;
                if (memcmp(nv->addr, c->addr, full))
                        continue;
                if (rem && ((nv->addr[full] ^ c->addr[full]) & (uint8_t)(0xff << (8 - rem))))
                        continue;
                return true;
        }
        return false;
}

static int fill_set(struct pd_nft_tx *tx, const char *setname, int family, const struct pd_nft_cidr *c,
                    size_t n, struct pd_error *err)
{
        struct nftnl_set *s = pd_nft_set_named(setname);
        if (!s)
                return pd_error_set(err, ENOMEM, "nft set");
        int r = pd_nft_elems_add_cidrs(s, family, c, n, 0, err);
        if (r <= 0) {
                nftnl_set_free(s);      /* error, or no elements */
                return r;
        }
        pd_nft_tx_elems(tx, NFT_MSG_NEWSETELEM, s);
        return 0;
}

/* The rules of sb_<key>, sn_<key>, si_<key> and the contents of the CIDR
 * sets, appended to tx after flushing what was there. */
static int program_sandbox(struct pd_nft_tx *tx, const char *key, const struct pd_nft_rules *rules,
                           bool flush_pins, struct pd_error *err)
{
        char sb[96], sn[96], si[96], set[96];
        name(sb, sizeof sb, "sb", key);
        name(sn, sizeof sn, "sn", key);
        name(si, sizeof si, "si", key);
        if (rules->n_allow > PD_NFT_MAX_ENTRIES || rules->n_deny > PD_NFT_MAX_ENTRIES)
                return pd_error_setx(err, E2BIG, "more than %d CIDR rules", PD_NFT_MAX_ENTRIES);
        pd_nft_tx_flush_chain(tx, sb);
        pd_nft_tx_flush_chain(tx, sn);
        pd_nft_tx_flush_chain(tx, si);
        program_log_chains(tx, key);
        static const int fams[2] = { AF_INET, AF_INET6 };
        for (int f = 0; f < 2; f++)
                for (int k = 0; k < K_COUNT; k++) {
                        if (k == K_PIN && !flush_pins)
                                continue;
                        set_name(set, sizeof set, k, fams[f], key);
                        pd_nft_tx_elems(tx, NFT_MSG_DELSETELEM, pd_nft_set_named(set));
                }
        /* split allows: inside a never-reached range (lift) or not */
        struct pd_nft_cidr *lift = calloc(rules->n_allow + 1, sizeof *lift);
        struct pd_nft_cidr *allow = calloc(rules->n_allow + 1, sizeof *allow);
        size_t n_lift = 0, n_allow = 0;
        int r = 0;
        struct nftnl_rule *ru;
        if (!lift || !allow) {
                r = pd_error_set(err, ENOMEM, "nft rules");
                goto out;
        }
        for (size_t i = 0; i < rules->n_allow; i++) {
                if (inside_never(rules, &rules->allow[i]))
                        lift[n_lift++] = rules->allow[i];
                else
                        allow[n_allow++] = rules->allow[i];
        }
        for (int f = 0; f < 2; f++) {
                set_name(set, sizeof set, K_ALLOW, fams[f], key);
                if ((r = fill_set(tx, set, fams[f], allow, n_allow, err)) < 0)
                        goto out;
                set_name(set, sizeof set, K_LIFT, fams[f], key);
                if ((r = fill_set(tx, set, fams[f], lift, n_lift, err)) < 0)
                        goto out;
                set_name(set, sizeof set, K_DENY, fams[f], key);
                if ((r = fill_set(tx, set, fams[f], rules->deny, rules->n_deny, err)) < 0)
                        goto out;
        }
        /* relayed TCP (nft_relay.c) is judged by this chain from
         * prerouting; what must keep the packet path leaves it first */
        pd_nft_relay_sandbox_rules(tx, sb, rules->bytes_per_sec != 0, rules->strict_port != 0);
        if (rules->bytes_per_sec) {
                ru = pd_nft_rule_new(sb);
                if (ru)
                        pd_nft_e_limit(ru, rules->bytes_per_sec, 0, 1);
                pd_nft_tx_rule(tx, ru ? verdict_rule(ru, NF_DROP, 0) : NULL);
                ru = pd_nft_rule_new(si);
                if (ru)
                        pd_nft_e_limit(ru, rules->bytes_per_sec, 0, 1);
                pd_nft_tx_rule(tx, ru ? verdict_rule(ru, NF_DROP, 0) : NULL);
        }
        ru = pd_nft_rule_new(sb);
        if (ru)
                pd_nft_e_ct_state(ru, CT_BIT(IP_CT_ESTABLISHED) | CT_BIT(IP_CT_RELATED));
        pd_nft_tx_rule(tx, ru ? verdict_rule(ru, NF_ACCEPT, 0) : NULL);
        if (rules->conn_per_sec) {
                ru = pd_nft_rule_new(sb);
                if (ru) {
                        pd_nft_e_ct_state(ru, CT_BIT(IP_CT_NEW));
                        pd_nft_e_limit(ru, rules->conn_per_sec, rules->conn_per_sec, 0);
                }
                pd_nft_tx_rule(tx, logged_drop(ru, L_RATE, key));
        }
        /* pins, denies, lifts, never-reached ranges (nft.h explains) */
        static const int order[3] = { K_PIN, K_DENY, K_LIFT };
        for (int o = 0; o < 3; o++)
                for (int f = 0; f < 2; f++) {
                        set_name(set, sizeof set, order[o], fams[f], key);
                        ru = pd_nft_rule_new(sb);
                        if (ru)
                                lookup_daddr(ru, fams[f], set, 1);
                        pd_nft_tx_rule(tx, order[o] == K_DENY ? logged_drop(ru, L_DENY, key)
                                                              : verdict_rule(ru, NF_ACCEPT, 0));
                }
        for (int f = 0; f < 2; f++) {
                ru = pd_nft_rule_new(sb);
                if (ru)
                        lookup_daddr(ru, fams[f], fams[f] == AF_INET ? "open_deny4" : "open_deny6", 0);
                pd_nft_tx_rule(tx, logged_drop(ru, L_NEVER, key));
        }
        for (int f = 0; f < 2; f++) {
                set_name(set, sizeof set, K_ALLOW, fams[f], key);
                ru = pd_nft_rule_new(sb);
                if (ru) {
                        lookup_daddr(ru, fams[f], set, 1);
                        verdict_rule(ru, NF_ACCEPT, 0);
                }
                pd_nft_tx_rule(tx, ru);
        }
        if (rules->mode == PD_NFT_MODE_OPEN) {
                /* DNS only through paddock's resolver (and DoT nowhere),
                 * unless an allow rule above named it */
                static const uint16_t dns_ports[2] = { 53, 853 };
                for (int p = 0; p < 2; p++) {
                        pd_nft_tx_rule(tx, logged_drop(rule_l4_dport(pd_nft_rule_new(sb), IPPROTO_UDP, dns_ports[p]), L_RESOLVER, key));
                        pd_nft_tx_rule(tx, logged_drop(rule_l4_dport(pd_nft_rule_new(sb), IPPROTO_TCP, dns_ports[p]), L_RESOLVER, key));
                }
        }
        ru = pd_nft_rule_new(sb);
        pd_nft_tx_rule(tx, rules->mode == PD_NFT_MODE_OPEN ? (ru ? verdict_rule(ru, NF_ACCEPT, 1) : NULL)
                                                            : logged_drop(ru, L_DEFAULT, key));
        if (rules->strict_port) {
                pd_nft_e_redirect(ru = rule_l4_dport(pd_nft_rule_new(sn), IPPROTO_TCP, 80), rules->strict_port);
                pd_nft_tx_rule(tx, ru);
                pd_nft_e_redirect(ru = rule_l4_dport(pd_nft_rule_new(sn), IPPROTO_TCP, 443), rules->strict_port);
                pd_nft_tx_rule(tx, ru);
        }
out:
        free(lift);
        free(allow);
        return r;
}

static void map_elem(struct pd_nft_tx *tx, int msg, const char *map, const char *ifname, const char *chain)
{
        struct nftnl_set *s = pd_nft_set_named(map);
        struct nftnl_set_elem *e = nftnl_set_elem_alloc();
        if (!s || !e) {
                tx->oom = 1;
                if (s)
                        nftnl_set_free(s);
                if (e)
                        nftnl_set_elem_free(e);
                return;
        }
        char ifn[IFNAMSIZ] = { 0 };
        strncpy(ifn, ifname, IFNAMSIZ - 1);
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, ifn, IFNAMSIZ);
        if (msg == NFT_MSG_NEWSETELEM) {
                nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, NFT_JUMP);
                nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
        }
        nftnl_set_elem_add(s, e);
        pd_nft_tx_elems(tx, msg, s);
}

static void src_elem(struct pd_nft_tx *tx, int msg, const char *ifname, const uint8_t src4[4])
{
        struct nftnl_set *s = pd_nft_set_named("src4ok");
        struct nftnl_set_elem *e = nftnl_set_elem_alloc();
        if (!s || !e) {
                tx->oom = 1;
                if (s)
                        nftnl_set_free(s);
                if (e)
                        nftnl_set_elem_free(e);
                return;
        }
        uint8_t k[IFNAMSIZ + 4] = { 0 };
        strncpy((char *)k, ifname, IFNAMSIZ - 1);
        memcpy(k + IFNAMSIZ, src4, 4);
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, k, sizeof k);
        nftnl_set_elem_add(s, e);
        pd_nft_tx_elems(tx, msg, s);
}

int pd_nft_sandbox_src6(struct pd_nft *n, const char *ifname, const uint8_t src6[16], bool add,
                        struct pd_error *err)
{
        int r = check_names("x", ifname, err);
        if (r < 0)
                return r;
        struct pd_nft_tx tx;
        if ((r = pd_nft_tx_begin(n, &tx, err)) < 0)
                return r;
        struct nftnl_set *s = pd_nft_set_named("src6ok");
        struct nftnl_set_elem *e = nftnl_set_elem_alloc();
        if (!s || !e) {
                if (s)
                        nftnl_set_free(s);
                if (e)
                        nftnl_set_elem_free(e);
                pd_nft_tx_abort(&tx);
                return pd_error_set(err, ENOMEM, "nft element");
        }
        uint8_t k[IFNAMSIZ + 16] = { 0 };
        strncpy((char *)k, ifname, IFNAMSIZ - 1);
        memcpy(k + IFNAMSIZ, src6, 16);
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, k, sizeof k);
        nftnl_set_elem_add(s, e);
        pd_nft_tx_elems(&tx, add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM, s);
        r = pd_nft_tx_commit(&tx, err);
        if (r == -ENOENT && !add)
                return 0;       /* not there: a sandbox without IPv6 */
        return r < 0 ? pd_error_prefix(err, "IPv6 source of %s", ifname) : 0;
}

int pd_nft_sandbox_add(struct pd_nft *n, const char *key, const char *ifname, const uint8_t src4[4],
                       const struct pd_nft_rules *rules, struct pd_error *err)
{
        int r = check_names(key, ifname, err);
        if (r < 0)
                return r;
        char sb[96], sn[96], si[96], set[96];
        name(sb, sizeof sb, "sb", key);
        name(sn, sizeof sn, "sn", key);
        name(si, sizeof si, "si", key);
        struct pd_nft_tx tx;
        if ((r = pd_nft_tx_begin(n, &tx, err)) < 0)
                return r;
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, sb, NULL, 0, 0, -1);
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, sn, NULL, 0, 0, -1);
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, si, NULL, 0, 0, -1);
        for (int f = AF_INET; f; f = f == AF_INET ? AF_INET6 : 0)
                for (int k = 0; k < K_COUNT; k++) {
                        set_name(set, sizeof set, k, f, key);
                        pd_nft_tx_set(&tx, NFT_MSG_NEWSET, pd_nft_set_new_concat(set, f, k == K_PIN));
                }
        if ((r = program_sandbox(&tx, key, rules, true, err)) < 0) {
                pd_nft_tx_abort(&tx);
                return r;
        }
        src_elem(&tx, NFT_MSG_NEWSETELEM, ifname, src4);
        map_elem(&tx, NFT_MSG_NEWSETELEM, "sbmap", ifname, sb);
        map_elem(&tx, NFT_MSG_NEWSETELEM, "inmap", ifname, si);
        map_elem(&tx, NFT_MSG_NEWSETELEM, "natmap", ifname, sn);
        r = pd_nft_tx_commit(&tx, err);
        return r < 0 ? pd_error_prefix(err, "sandbox %s nftables", key) : 0;
}

int pd_nft_sandbox_apply(struct pd_nft *n, const char *key, const char *ifname,
                         const struct pd_nft_rules *rules, bool flush_pins, struct pd_error *err)
{
        int r = check_names(key, ifname, err);
        if (r < 0)
                return r;
        struct pd_nft_tx tx;
        if ((r = pd_nft_tx_begin(n, &tx, err)) < 0)
                return r;
        if ((r = program_sandbox(&tx, key, rules, flush_pins, err)) < 0) {
                pd_nft_tx_abort(&tx);
                return r;
        }
        r = pd_nft_tx_commit(&tx, err);
        return r < 0 ? pd_error_prefix(err, "sandbox %s nftables", key) : 0;
}

/* One small transaction per object, ENOENT ignored: removal must finish
 * even when an earlier, interrupted removal did part of it. The order
 * matters: a chain is busy while a map entry jumps to it, a set while a
 * rule looks it up. */
int pd_nft_sandbox_del(struct pd_nft *n, const char *key, const char *ifname, const uint8_t src4[4],
                       struct pd_error *err)
{
        int r = check_names(key, ifname, err);
        if (r < 0)
                return r;
        char chains[3][96], set[96], lg[96];
        name(chains[0], sizeof chains[0], "sb", key);
        name(chains[1], sizeof chains[1], "sn", key);
        name(chains[2], sizeof chains[2], "si", key);
        static const char *const maps[3] = { "sbmap", "natmap", "inmap" };
        struct pd_nft_tx tx;
        /* Usually everything is there: one transaction. */
        if ((r = pd_nft_tx_begin(n, &tx, err)) < 0)
                return r;
        src_elem(&tx, NFT_MSG_DELSETELEM, ifname, src4);
        for (int i = 0; i < 3; i++)
                map_elem(&tx, NFT_MSG_DELSETELEM, maps[i], ifname, NULL);
        for (int i = 0; i < 3; i++)
                pd_nft_tx_flush_chain(&tx, chains[i]);
        for (int i = 0; i < 3; i++)
                pd_nft_tx_chain(&tx, NFT_MSG_DELCHAIN, chains[i], NULL, 0, 0, -1);
        for (int k = 0; k < L_COUNT; k++) {
                log_chain_name(lg, sizeof lg, k, key);
                pd_nft_tx_flush_chain(&tx, lg);
                pd_nft_tx_chain(&tx, NFT_MSG_DELCHAIN, lg, NULL, 0, 0, -1);
        }
        for (int i = 0; i < 2 * K_COUNT; i++) {
                set_name(set, sizeof set, i % K_COUNT, i < K_COUNT ? AF_INET : AF_INET6, key);
                pd_nft_tx_set(&tx, NFT_MSG_DELSET, pd_nft_set_named(set));
        }
        struct pd_error e1 = { 0 };
        if (pd_nft_tx_commit(&tx, &e1) == 0)
                return 0;
        /* Part of it is gone (an interrupted removal): object by object. */
        int first = 0;
        for (int step = 0; step < 1 + 3 + 3 + 3 + 2 * L_COUNT + 2 * K_COUNT; step++) {
                struct pd_error e2 = { 0 };
                if ((r = pd_nft_tx_begin(n, &tx, err)) < 0)
                        return r;
                if (step == 0) {
                        src_elem(&tx, NFT_MSG_DELSETELEM, ifname, src4);
                } else if (step < 4) {
                        map_elem(&tx, NFT_MSG_DELSETELEM, maps[step - 1], ifname, NULL);
                } else if (step < 7) {
                        pd_nft_tx_flush_chain(&tx, chains[step - 4]);
                } else if (step < 10) {
                        pd_nft_tx_chain(&tx, NFT_MSG_DELCHAIN, chains[step - 7], NULL, 0, 0, -1);
                } else if (step < 10 + 2 * L_COUNT) {
                        int k = (step - 10) / 2;
                        log_chain_name(lg, sizeof lg, k, key);
                        if ((step - 10) % 2 == 0)
                                pd_nft_tx_flush_chain(&tx, lg);
                        else
                                pd_nft_tx_chain(&tx, NFT_MSG_DELCHAIN, lg, NULL, 0, 0, -1);
                } else {
                        int i = step - 10 - 2 * L_COUNT;
                        set_name(set, sizeof set, i % K_COUNT, i < K_COUNT ? AF_INET : AF_INET6, key);
                        pd_nft_tx_set(&tx, NFT_MSG_DELSET, pd_nft_set_named(set));
                }
                r = pd_nft_tx_commit(&tx, &e2);
                if (r < 0 && r != -ENOENT && !first) {
                        first = r;
                        *err = e2;
                }
        }
        return first < 0 ? pd_error_prefix(err, "remove sandbox %s from nftables", key) : 0;
}

int pd_nft_pin(struct pd_nft *n, const char *key, const struct pd_nft_pin *pins, size_t n_pins,
               struct pd_error *err)
{
        int r = check_names(key, NULL, err);
        if (r < 0)
                return r;
        char set4[96], set6[96];
        snprintf(set4, sizeof set4, "p4_%s", key);
        snprintf(set6, sizeof set6, "p6_%s", key);
        struct nftnl_set *s4 = pd_nft_set_named(set4), *s6 = pd_nft_set_named(set6);
        if (!s4 || !s6) {
                if (s4)
                        nftnl_set_free(s4);
                if (s6)
                        nftnl_set_free(s6);
                return pd_error_set(err, ENOMEM, "nft pin");
        }
        int has4 = 0, has6 = 0;
        for (size_t i = 0; i < n_pins; i++) {
                if (pins[i].family != AF_INET && pins[i].family != AF_INET6)
                        continue;
                if (pins[i].port_lo > pins[i].port_hi)
                        continue;
                pd_nft_elems_add_pin(pins[i].family == AF_INET ? s4 : s6, &pins[i]);
                *(pins[i].family == AF_INET ? &has4 : &has6) = 1;
        }
        struct pd_nft_tx tx;
        if ((r = pd_nft_tx_begin(n, &tx, err)) < 0) {
                nftnl_set_free(s4);
                nftnl_set_free(s6);
                return r;
        }
        if (has4)
                pd_nft_tx_elems(&tx, NFT_MSG_NEWSETELEM, s4);
        else
                nftnl_set_free(s4);
        if (has6)
                pd_nft_tx_elems(&tx, NFT_MSG_NEWSETELEM, s6);
        else
                nftnl_set_free(s6);
        r = pd_nft_tx_commit(&tx, err);
        /* An identical pin already there: the address is reachable, which is
         * what was asked (its timeout is not extended on older kernels). */
        if (r == -EEXIST)
                r = 0;
        return r < 0 ? pd_error_prefix(err, "pin for sandbox %s", key) : 0;
}

int pd_nft_unpin_all(struct pd_nft *n, const char *key, struct pd_error *err)
{
        int r = check_names(key, NULL, err);
        if (r < 0)
                return r;
        char set[96];
        struct pd_nft_tx tx;
        if ((r = pd_nft_tx_begin(n, &tx, err)) < 0)
                return r;
        snprintf(set, sizeof set, "p4_%s", key);
        pd_nft_tx_elems(&tx, NFT_MSG_DELSETELEM, pd_nft_set_named(set));
        snprintf(set, sizeof set, "p6_%s", key);
        pd_nft_tx_elems(&tx, NFT_MSG_DELSETELEM, pd_nft_set_named(set));
        return pd_nft_tx_commit(&tx, err);
}
