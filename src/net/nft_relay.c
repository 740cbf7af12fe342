/* The router's rules for the socket-level TCP relay (relay.h): a new TCP
 * connection from a sandbox is judged first (the hard never set, then the
 * sandbox's own chain: rules, pins, never list, connection rate), its SYN
 * is then held in NFQUEUE until the relay's own connect to the destination
 * has answered, and only then redirected to the relay's listener. Appended
 * to the router's table by pd_nft_router_init when the relay is on.
 *
 *   relayjudge  filter prerouting -150 (after conntrack, before nat):
 *               iifname pd* tcp ct state new:
 *                 fib daddr type local      -> return (the router: input decides)
 *                 fib daddr oifname pd*     -> return (a peer: forward drops it)
 *                 daddr @hard4/@hard6       -> logged drop "never"
 *                 meta mark set RELAY; iifname vmap @sbmap
 *               (sb_<key> starts with "mark RELAY [+ cond] -> mark 0, return"
 *               for what must keep the packet path: a bandwidth limit, or
 *               strict mode's ports 80/443; nft.c)
 *   relayq      filter prerouting -120:
 *                 mark REFUSE  -> reject with tcp reset    (re-injected by
 *                 mark UNREACH -> reject icmpx host-unreachable  NF_REPEAT)
 *                 mark RELAY, flags syn only -> queue (no bypass: no gate,
 *                                               no passage: fail closed)
 *                 mark RELAY  -> counted drop (a new connection not a SYN)
 *   prerouting  (nat, -100) after natmap: mark RELAY -> redirect to :port
 *   input       iifname pd* tcp dport port ct status dnat -> accept */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/rtnetlink.h>
#include <libnftnl/expr.h>

#include "net/nft_int.h"
#include "net/relay.h"

#define CT_BIT(x) (1u << ((x) + 1))

static struct nftnl_expr *ex(struct nftnl_rule *r, const char *name)
{
        struct nftnl_expr *e = nftnl_expr_alloc(name);
        if (!e)
                abort();        /* a few bytes; no partial rule */
        nftnl_rule_add_expr(r, e);
        return e;
}

static void mark_eq(struct nftnl_rule *r, uint32_t mark)
{
        pd_nft_e_meta(r, NFT_META_MARK, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &mark, sizeof mark);
}

void pd_nft_e_mark_set(struct nftnl_rule *r, uint32_t mark)
{
        struct nftnl_expr *e = ex(r, "immediate");
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
        nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &mark, sizeof mark);
        e = ex(r, "meta");
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, NFT_META_MARK);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_SREG, NFT_REG_1);
}

/* iifname pd* meta l4proto tcp ct state new */
static struct nftnl_rule *new_tcp(const char *chain)
{
        struct nftnl_rule *r = pd_nft_rule_new(chain);
        if (!r)
                return NULL;
        uint8_t tcp = IPPROTO_TCP;
        pd_nft_e_meta(r, NFT_META_IIFNAME, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, "pd", 2);
        pd_nft_e_meta(r, NFT_META_L4PROTO, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &tcp, 1);
        pd_nft_e_ct_state(r, CT_BIT(IP_CT_NEW));
        return r;
}

static void fib_daddr(struct nftnl_rule *r, uint32_t result)
{
        struct nftnl_expr *e = ex(r, "fib");
        nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_RESULT, result);
        nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
}

static void verdict(struct nftnl_rule *r, int v, int counter)
{
        if (counter)
                pd_nft_e_counter(r);
        pd_nft_e_verdict(r, v);
}

static void reject_icmpx(struct nftnl_rule *r)
{
        struct nftnl_expr *e = ex(r, "reject");
        nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
        nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, NFT_REJECT_ICMPX_HOST_UNREACH);
}

void pd_nft_relay_rules(struct pd_nft_tx *tx, uint16_t port, uint16_t queue)
{
        struct nftnl_rule *r;
        pd_nft_tx_chain(tx, NFT_MSG_NEWCHAIN, "relayjudge", "filter", NF_INET_PRE_ROUTING, -150, NF_ACCEPT);
        pd_nft_tx_chain(tx, NFT_MSG_NEWCHAIN, "relayq", "filter", NF_INET_PRE_ROUTING, -120, NF_ACCEPT);

        /* to the router itself, or to another sandbox: not relayed (the
         * input and forward chains decide as for any packet) */
        uint32_t local = RTN_LOCAL;
        if ((r = new_tcp("relayjudge"))) {
                fib_daddr(r, NFT_FIB_RESULT_ADDRTYPE);
                pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &local, sizeof local);
                verdict(r, NFT_RETURN, 0);
        }
        pd_nft_tx_rule(tx, r);
        if ((r = new_tcp("relayjudge"))) {
                fib_daddr(r, NFT_FIB_RESULT_OIFNAME);
                pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, "pd", 2);
                verdict(r, NFT_RETURN, 0);
        }
        pd_nft_tx_rule(tx, r);
        /* the hard never set, whatever the sandbox's rules say */
        static const int fams[2] = { AF_INET, AF_INET6 };
        for (int f = 0; f < 2; f++) {
                if ((r = new_tcp("relayjudge"))) {
                        uint8_t nfp = fams[f] == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
                        pd_nft_e_meta(r, NFT_META_NFPROTO, NFT_REG_1);
                        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &nfp, 1);
                        if (fams[f] == AF_INET)
                                pd_nft_e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, NFT_REG_1);
                        else
                                pd_nft_e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 16, NFT_REG_1);
                        pd_nft_e_meta(r, NFT_META_L4PROTO, fams[f] == AF_INET ? NFT_REG32_01 : NFT_REG32_04);
                        pd_nft_e_lookup(r, NFT_REG_1, fams[f] == AF_INET ? "hard4" : "hard6", -1);
                        pd_nft_e_counter(r);
                        pd_nft_e_goto(r, "lgnever");
                }
                pd_nft_tx_rule(tx, r);
        }
        /* marked, then the sandbox's own chain: its drop is final, its
         * accept ends this chain only (relayq and nat follow) */
        if ((r = new_tcp("relayjudge"))) {
                pd_nft_e_mark_set(r, PD_RELAY_MARK);
                pd_nft_e_meta(r, NFT_META_IIFNAME, NFT_REG_1);
                pd_nft_e_lookup(r, NFT_REG_1, "sbmap", NFT_REG_VERDICT);
        }
        pd_nft_tx_rule(tx, r);

        /* relayq: the gate's answers first (a verdict NF_REPEAT with one of
         * these marks runs this chain again) */
        if ((r = pd_nft_rule_new("relayq"))) {
                mark_eq(r, PD_RELAY_MARK_REFUSE);
                pd_nft_e_counter(r);
                pd_nft_e_reject_tcp(r);
        }
        pd_nft_tx_rule(tx, r);
        if ((r = pd_nft_rule_new("relayq"))) {
                mark_eq(r, PD_RELAY_MARK_UNREACH);
                pd_nft_e_counter(r);
                reject_icmpx(r);
        }
        pd_nft_tx_rule(tx, r);
        if ((r = pd_nft_rule_new("relayq"))) {
                mark_eq(r, PD_RELAY_MARK);
                /* SYN alone of syn|ack|fin|rst */
                pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 13, 1, NFT_REG_1);
                pd_nft_e_mask_eq(r, NFT_REG_1, 0x17, 0x02);
                /* the xtables NFQUEUE target through nft_compat: kernels
                 * built without nft's own queue expression (this host's:
                 * CONFIG_NFT_QUEUE unset) have it; no bypass flag: with
                 * no gate bound, the SYN is dropped (fail closed) */
                struct xt_NFQ_info_v3 info = { .queuenum = queue, .queues_total = 1, .flags = 0 };
                pd_nft_e_counter(r);
                struct nftnl_expr *e = ex(r, "target");
                nftnl_expr_set_str(e, NFTNL_EXPR_TG_NAME, "NFQUEUE");
                nftnl_expr_set_u32(e, NFTNL_EXPR_TG_REV, 3);
                void *copy = malloc(sizeof info);       /* the expression owns its info */
                if (!copy)
                        abort();
                memcpy(copy, &info, sizeof info);
                nftnl_expr_set(e, NFTNL_EXPR_TG_INFO, copy, sizeof info);
        }
        pd_nft_tx_rule(tx, r);
        if ((r = pd_nft_rule_new("relayq"))) {
                mark_eq(r, PD_RELAY_MARK);
                verdict(r, NF_DROP, 1);
        }
        pd_nft_tx_rule(tx, r);

        if ((r = pd_nft_rule_new("prerouting"))) {
                mark_eq(r, PD_RELAY_MARK);
                pd_nft_e_redirect(r, port);
        }
        pd_nft_tx_rule(tx, r);
}

void pd_nft_relay_input_rule(struct pd_nft_tx *tx, uint16_t port)
{
        struct nftnl_rule *r = pd_nft_rule_new("input");
        if (r) {
                uint8_t tcp = IPPROTO_TCP;
                uint16_t be = htons(port);
                uint32_t dnat = IPS_DST_NAT, zero = 0;
                pd_nft_e_meta(r, NFT_META_IIFNAME, NFT_REG_1);
                pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, "pd", 2);
                pd_nft_e_meta(r, NFT_META_L4PROTO, NFT_REG_1);
                pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &tcp, 1);
                pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1);
                pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &be, 2);
                struct nftnl_expr *e = ex(r, "ct");
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATUS);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
                e = ex(r, "bitwise");
                nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
                nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
                nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, sizeof dnat);
                nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &dnat, sizeof dnat);
                nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, sizeof zero);
                pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_NEQ, &zero, sizeof zero);
                pd_nft_e_verdict(r, NF_ACCEPT);
        }
        pd_nft_tx_rule(tx, r);
}

void pd_nft_relay_sandbox_rules(struct pd_nft_tx *tx, const char *sb, bool packet_path, bool strict)
{
        struct nftnl_rule *r;
        /* a bandwidth limit is enforced in forward, per packet: such a
         * sandbox keeps the packet path for every TCP connection */
        if (packet_path) {
                if ((r = pd_nft_rule_new(sb))) {
                        mark_eq(r, PD_RELAY_MARK);
                        pd_nft_e_mark_set(r, 0);
                        pd_nft_e_verdict(r, NFT_RETURN);
                }
                pd_nft_tx_rule(tx, r);
                return;
        }
        /* strict mode's 80 and 443 go to netd's proxy (natmap), which
         * judges by Host/SNI: not here */
        static const uint16_t ports[2] = { 80, 443 };
        for (int i = 0; strict && i < 2; i++) {
                if ((r = pd_nft_rule_new(sb))) {
                        uint16_t be = htons(ports[i]);
                        mark_eq(r, PD_RELAY_MARK);
                        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1);
                        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &be, 2);
                        pd_nft_e_mark_set(r, 0);
                        pd_nft_e_verdict(r, NFT_RETURN);
                }
                pd_nft_tx_rule(tx, r);
        }
}
