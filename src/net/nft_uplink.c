/* The one rule of a user-mode uplink's netns (uplink.h), table inet paddock
 * there: a TCP segment from the router that is not a SYN (nor a RST) and
 * belongs to no connection this netns knows is answered with a reset.
 *
 * Why: when the uplink process dies, the host sockets behind its
 * connections die with it, but the sandboxes' ends stay open; the process
 * that replaces it silently ignores segments of connections it never saw,
 * so a sandbox would retransmit for many minutes. The supervisor flushes
 * this netns's conntrack table when the process dies (uplink_main.c), so
 * the next segment of every such connection matches here and the sandbox
 * gets a reset it accepts (its sequence number is the segment's ack).
 *
 * And for slirp4netns, a masquerade out of its tap: libslirp answers only
 * addresses of its own virtual network (10.0.2.0/24), not the router's
 * transit address. pasta answers whatever address spoke to it. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "net/nft_int.h"

#define CT_BIT(x) (1u << ((x) + 1))     /* NF_CT_STATE_BIT (bit 0 = invalid) */
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

/* pasta (2023-03) resets a connection when a retransmitted SYN reaches it
 * while its own connect() on the host is still pending: any SYN the far
 * end lost (the host's kernel resends it after a second, as the sandbox's
 * does) became a refused or reset connection (measured: 8 of 20 with half
 * the SYNs lost, none direct). pasta needs only the first SYN: it answers
 * when its host socket connects. So a SYN is passed once: its source,
 * ports, destination and initial sequence number go into a set (2 min,
 * the kernel's whole SYN retry budget), and a SYN found there is dropped.
 * A new connection on the same ports has another sequence number. */
#define SYN_TTL_MS 130000
#define SYN_SET_SIZE 65536
#define T_IPV4 7
#define T_IPV6 8
#define T_SERVICE 13
#define T_MARK 19                       /* a 32-bit integer: the sequence number */
#define TYPE_BITS 6

static void syn_match(struct nftnl_rule *r, const char *rt_ifname, int family)
{
        char ifn[IFNAMSIZ] = { 0 };
        uint8_t nfp = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6, tcp = IPPROTO_TCP, syn = TCP_SYN;
        strncpy(ifn, rt_ifname, IFNAMSIZ - 1);
        pd_nft_e_meta(r, NFT_META_IIFNAME, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, ifn, IFNAMSIZ);
        pd_nft_e_meta(r, NFT_META_NFPROTO, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &nfp, 1);
        pd_nft_e_meta(r, NFT_META_L4PROTO, NFT_REG_1);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_EQ, &tcp, 1);
        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 13, 1, NFT_REG_1);
        pd_nft_e_mask_eq(r, NFT_REG_1, TCP_SYN | TCP_ACK, syn);
        /* the key: saddr . sport . daddr . dport . seq, each field in whole
         * 32-bit registers */
        uint32_t alen = family == AF_INET ? 4 : 16, w = alen / 4, reg = NFT_REG32_00;
        pd_nft_e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? 12 : 8, alen, reg);
        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 2, reg + w);
        pd_nft_e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? 16 : 24, alen, reg + w + 1);
        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, reg + 2 * w + 1);
        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 4, 4, reg + 2 * w + 2);
}

static void syn_once(struct pd_nft_tx *tx, const char *rt_ifname, int family)
{
        const char *name = family == AF_INET ? "synseen4" : "synseen6";
        uint32_t alen = family == AF_INET ? 4 : 16, t = family == AF_INET ? T_IPV4 : T_IPV6;
        struct nftnl_set *set = pd_nft_set_named(name);
        if (set) {
                uint32_t type = t;
                type = type << TYPE_BITS | T_SERVICE;
                type = type << TYPE_BITS | t;
                type = type << TYPE_BITS | T_SERVICE;
                type = type << TYPE_BITS | T_MARK;
                nftnl_set_set_u32(set, NFTNL_SET_KEY_TYPE, type);
                nftnl_set_set_u32(set, NFTNL_SET_KEY_LEN, 2 * alen + 12);
                nftnl_set_set_u32(set, NFTNL_SET_FLAGS, NFT_SET_TIMEOUT | NFT_SET_EVAL);
                nftnl_set_set_u64(set, NFTNL_SET_TIMEOUT, SYN_TTL_MS);
                nftnl_set_set_u32(set, NFTNL_SET_DESC_SIZE, SYN_SET_SIZE);
        }
        pd_nft_tx_set(tx, NFT_MSG_NEWSET, set);
        /* seen: drop */
        struct nftnl_rule *r = pd_nft_rule_new("forward");
        if (r) {
                syn_match(r, rt_ifname, family);
                pd_nft_e_lookup(r, NFT_REG32_00, name, -1);
                pd_nft_e_counter(r);
                pd_nft_e_verdict(r, NF_DROP);
        }
        pd_nft_tx_rule(tx, r);
        /* not seen: remember, pass on */
        r = pd_nft_rule_new("forward");
        if (r) {
                syn_match(r, rt_ifname, family);
                pd_nft_e_dynset_add(r, NFT_REG32_00, name);
        }
        pd_nft_tx_rule(tx, r);
}

int pd_nft_uplink_init(struct pd_nft *n, const char *rt_ifname, const char *tap_ifname, bool pasta,
                       struct pd_error *err)
{
        if (!rt_ifname || strlen(rt_ifname) >= IFNAMSIZ || !tap_ifname || strlen(tap_ifname) >= IFNAMSIZ)
                return pd_error_setx(err, EINVAL, "bad interface name");
        struct pd_nft_tx tx;
        int r = pd_nft_tx_begin(n, &tx, err);
        if (r < 0)
                return r;
        pd_nft_tx_table(&tx, NFT_MSG_NEWTABLE);
        pd_nft_tx_table(&tx, NFT_MSG_DELTABLE);
        pd_nft_tx_table(&tx, NFT_MSG_NEWTABLE);
        pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, "forward", "filter", NF_INET_FORWARD, 0, NF_ACCEPT);
        struct nftnl_rule *rr = pd_nft_rule_new("forward");
        if (rr) {
                char ifn[IFNAMSIZ] = { 0 };
                uint8_t tcp = IPPROTO_TCP;
                strncpy(ifn, rt_ifname, IFNAMSIZ - 1);
                pd_nft_e_meta(rr, NFT_META_IIFNAME, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, ifn, IFNAMSIZ);
                pd_nft_e_meta(rr, NFT_META_L4PROTO, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &tcp, 1);
                pd_nft_e_payload(rr, NFT_PAYLOAD_TRANSPORT_HEADER, 13, 1, NFT_REG_1);
                pd_nft_e_mask_zero(rr, NFT_REG_1, TCP_SYN | TCP_RST);
                pd_nft_e_ct_state(rr, CT_BIT(IP_CT_NEW) | 1u /* invalid */);
                pd_nft_e_counter(rr);
                pd_nft_e_reject_tcp(rr);
        }
        pd_nft_tx_rule(&tx, rr);
        if (pasta) {
                syn_once(&tx, rt_ifname, AF_INET);
                syn_once(&tx, rt_ifname, AF_INET6);
        }
        /* pasta (2023-03) answers a refused connect with a RST that has
         * the right ack number but not the ACK flag, which a connecting
         * socket ignores (RFC 793): it would wait for its timeout instead
         * of getting ECONNREFUSED. The flag is set here. A RST to an
         * established connection is judged by its sequence number only,
         * so the flag changes nothing there. */
        rr = pasta ? pd_nft_rule_new("forward") : NULL;
        if (rr) {
                char ifn[IFNAMSIZ] = { 0 };
                uint8_t tcp = IPPROTO_TCP, rst = TCP_RST;
                strncpy(ifn, tap_ifname, IFNAMSIZ - 1);
                pd_nft_e_meta(rr, NFT_META_IIFNAME, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, ifn, IFNAMSIZ);
                pd_nft_e_meta(rr, NFT_META_L4PROTO, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &tcp, 1);
                pd_nft_e_payload(rr, NFT_PAYLOAD_TRANSPORT_HEADER, 13, 1, NFT_REG_1);
                pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, &rst, 1);
                pd_nft_e_add_tcp_flag(rr, TCP_ACK);
        }
        if (pasta)
                pd_nft_tx_rule(&tx, rr);
        if (!pasta) {
                char ifn[IFNAMSIZ] = { 0 };
                strncpy(ifn, tap_ifname, IFNAMSIZ - 1);
                pd_nft_tx_chain(&tx, NFT_MSG_NEWCHAIN, "postrouting", "nat", NF_INET_POST_ROUTING, 100, -1);
                rr = pd_nft_rule_new("postrouting");
                if (rr) {
                        pd_nft_e_meta(rr, NFT_META_OIFNAME, NFT_REG_1);
                        pd_nft_e_cmp(rr, NFT_REG_1, NFT_CMP_EQ, ifn, IFNAMSIZ);
                        pd_nft_e_masq(rr);
                }
                pd_nft_tx_rule(&tx, rr);
        }
        r = pd_nft_tx_commit(&tx, err);
        return r < 0 ? pd_error_prefix(err, "uplink netns nftables") : 0;
}
