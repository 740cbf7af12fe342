/* The nftables netlink plumbing: a socket opened inside a network namespace,
 * transactions (batches, committed atomically by the kernel), and small
 * expression builders. Only this file talks to the socket. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/table.h>

#include "net/nft_int.h"
#include "net/nlsock.h"

#define PD_NFT_SNDBUF (8u << 20)        /* 10,000-entry rule sets in one batch */

/* The nftables socket, made in the netns of netns_fd (nlsock.c). */
int pd_nft_open(int netns_fd, struct pd_nft **out, struct pd_error *err)
{
        struct pd_nft *n = calloc(1, sizeof *n);
        if (!n)
                return pd_error_set(err, ENOMEM, "nft");
        int r = pd_nlsock_open(netns_fd, NETLINK_NETFILTER, "netfilter netlink", &n->nl, err);
        if (r < 0) {
                free(n);
                return pd_error_prefix(err, "router nftables");
        }
        int sz = PD_NFT_SNDBUF;
        if (setsockopt(mnl_socket_get_fd(n->nl), SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) < 0)
                (void)setsockopt(mnl_socket_get_fd(n->nl), SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        n->portid = mnl_socket_get_portid(n->nl);
        n->seq = (uint32_t)getpid() << 8;
        *out = n;
        return 0;
}

void pd_nft_close(struct pd_nft *n)
{
        if (!n)
                return;
        mnl_socket_close(n->nl);
        free(n);
}

int pd_nft_tx_begin(struct pd_nft *n, struct pd_nft_tx *tx, struct pd_error *err)
{
        memset(tx, 0, sizeof *tx);
        tx->n = n;
        tx->b = nftnl_batch_alloc(1u << 18, 1u << 17);
        if (!tx->b)
                return pd_error_set(err, ENOMEM, "nft batch");
        tx->seq = n->seq;
        nftnl_batch_begin(nftnl_batch_buffer(tx->b), tx->seq++);
        if (nftnl_batch_update(tx->b) < 0)
                tx->oom = 1;
        return 0;
}

void pd_nft_tx_abort(struct pd_nft_tx *tx)
{
        if (tx->b)
                nftnl_batch_free(tx->b);
        tx->b = NULL;
}

static struct nlmsghdr *tx_hdr(struct pd_nft_tx *tx, int type, uint16_t flags)
{
        return nftnl_nlmsg_build_hdr(nftnl_batch_buffer(tx->b), (uint16_t)type, NFPROTO_INET,
                                     flags, tx->seq++);
}

static void tx_next(struct pd_nft_tx *tx)
{
        if (nftnl_batch_update(tx->b) < 0)
                tx->oom = 1;
}

static uint16_t create_flags(int type)
{
        switch (type) {
        case NFT_MSG_NEWTABLE: case NFT_MSG_NEWCHAIN: case NFT_MSG_NEWSET:
        case NFT_MSG_NEWSETELEM:
                return NLM_F_CREATE;
        case NFT_MSG_NEWRULE:
                return NLM_F_CREATE | NLM_F_APPEND;
        default:
                return 0;
        }
}

void pd_nft_tx_table(struct pd_nft_tx *tx, int msg_type)
{
        struct nftnl_table *t = nftnl_table_alloc();
        if (!t) {
                tx->oom = 1;
                return;
        }
        nftnl_table_set_str(t, NFTNL_TABLE_NAME, PD_NFT_TABLE);
        nftnl_table_nlmsg_build_payload(tx_hdr(tx, msg_type, create_flags(msg_type)), t);
        nftnl_table_free(t);
        tx_next(tx);
}

void pd_nft_tx_chain(struct pd_nft_tx *tx, int msg_type, const char *name,
                     const char *type, int hook, int prio, int policy)
{
        struct nftnl_chain *c = nftnl_chain_alloc();
        if (!c) {
                tx->oom = 1;
                return;
        }
        nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, PD_NFT_TABLE);
        nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
        if (type) {
                nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
                nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)hook);
                nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
                if (policy >= 0)
                        nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, (uint32_t)policy);
        }
        nftnl_chain_nlmsg_build_payload(tx_hdr(tx, msg_type, create_flags(msg_type)), c);
        nftnl_chain_free(c);
        tx_next(tx);
}

void pd_nft_tx_flush_chain(struct pd_nft_tx *tx, const char *name)
{
        struct nftnl_rule *r = pd_nft_rule_new(name);
        if (!r) {
                tx->oom = 1;
                return;
        }
        nftnl_rule_nlmsg_build_payload(tx_hdr(tx, NFT_MSG_DELRULE, 0), r);
        nftnl_rule_free(r);
        tx_next(tx);
}

void pd_nft_tx_rule(struct pd_nft_tx *tx, struct nftnl_rule *r)
{
        if (!r) {
                tx->oom = 1;
                return;
        }
        nftnl_rule_nlmsg_build_payload(tx_hdr(tx, NFT_MSG_NEWRULE, create_flags(NFT_MSG_NEWRULE)), r);
        nftnl_rule_free(r);
        tx_next(tx);
}

void pd_nft_tx_set(struct pd_nft_tx *tx, int msg_type, struct nftnl_set *s)
{
        if (!s) {
                tx->oom = 1;
                return;
        }
        /* the kernel wants a transaction-local id on every new set */
        if (msg_type == NFT_MSG_NEWSET)
                nftnl_set_set_u32(s, NFTNL_SET_ID, ++tx->set_id);
        nftnl_set_nlmsg_build_payload(tx_hdr(tx, msg_type, create_flags(msg_type)), s);
        nftnl_set_free(s);
        tx_next(tx);
}

void pd_nft_tx_elems(struct pd_nft_tx *tx, int msg_type, struct nftnl_set *s)
{
        if (!s) {
                tx->oom = 1;
                return;
        }
        struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
        if (!it) {
                tx->oom = 1;
                nftnl_set_free(s);
                return;
        }
        if (!nftnl_set_elems_iter_cur(it) && msg_type == NFT_MSG_DELSETELEM) {
                nftnl_set_elems_iter_destroy(it);
                /* no elements: a flush of the whole set */
                nftnl_set_elems_nlmsg_build_payload(tx_hdr(tx, msg_type, 0), s);
                tx_next(tx);
                nftnl_set_free(s);
                return;
        }
        if (!nftnl_set_elems_iter_cur(it)) {
                nftnl_set_elems_iter_destroy(it);
                nftnl_set_free(s);
                return;
        }
        /* One message per page-sized chunk of elements. */
        for (;;) {
                struct nlmsghdr *nlh = tx_hdr(tx, msg_type, create_flags(msg_type));
                int more = nftnl_set_elems_nlmsg_build_payload_iter(nlh, it);
                tx_next(tx);
                if (more <= 0)
                        break;
        }
        nftnl_set_elems_iter_destroy(it);
        nftnl_set_free(s);
}

/* Errors of a batch are queued on the socket while sendmsg() runs (the
 * kernel processes a netfilter batch synchronously in the sender's
 * context), so after sending we drain what is there without blocking. */
int pd_nft_tx_commit(struct pd_nft_tx *tx, struct pd_error *err)
{
        int r = 0;
        if (tx->oom) {
                pd_nft_tx_abort(tx);
                return pd_error_set(err, ENOMEM, "nft batch");
        }
        uint32_t seq0 = tx->n->seq;
        nftnl_batch_end(nftnl_batch_buffer(tx->b), tx->seq++);
        tx_next(tx);
        tx->n->seq = tx->seq;
        int n_iov = nftnl_batch_iovec_len(tx->b);
        struct iovec iov[n_iov > 0 ? n_iov : 1];
        nftnl_batch_iovec(tx->b, iov, (uint32_t)n_iov);
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        struct msghdr mh = { .msg_name = &sa, .msg_namelen = sizeof sa,
                             .msg_iov = iov, .msg_iovlen = (size_t)n_iov };
        int fd = mnl_socket_get_fd(tx->n->nl);
        ssize_t w = sendmsg(fd, &mh, 0);
        pd_nft_tx_abort(tx);
        if (w < 0)
                return pd_error_set(err, errno, "send nftables batch");
        char buf[MNL_SOCKET_BUFFER_SIZE];
        int first = 0;
        uint32_t bad_seq = 0;
        uint16_t bad_type = 0;
        for (;;) {
                ssize_t got = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
                if (got < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && !first)
                                first = errno;
                        break;
                }
                int left = (int)got;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left);
                     h = mnl_nlmsg_next(h, &left)) {
                        if (h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                        if (e->error && !first) {
                                first = -e->error;
                                bad_seq = e->msg.nlmsg_seq;
                                bad_type = e->msg.nlmsg_type & 0xff;
                        }
                }
        }
        if (first)
                r = pd_error_set(err, first, "nftables transaction (message %u of the batch, type %u)",
                                 bad_seq - seq0, bad_type);
        return r;
}

/* ---- expressions ---- */

struct nftnl_rule *pd_nft_rule_new(const char *chain)
{
        struct nftnl_rule *r = nftnl_rule_alloc();
        if (!r)
                return NULL;
        nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
        nftnl_rule_set_str(r, NFTNL_RULE_TABLE, PD_NFT_TABLE);
        nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
        return r;
}

static struct nftnl_expr *add(struct nftnl_rule *r, const char *name)
{
        struct nftnl_expr *e = nftnl_expr_alloc(name);
        if (!e)
                abort();        /* malloc of a few bytes; no partial rule */
        nftnl_rule_add_expr(r, e);
        return e;
}

void pd_nft_e_meta(struct nftnl_rule *r, uint32_t key, uint32_t dreg)
{
        struct nftnl_expr *e = add(r, "meta");
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
}

void pd_nft_e_cmp(struct nftnl_rule *r, uint32_t sreg, uint32_t op, const void *data, uint32_t len)
{
        struct nftnl_expr *e = add(r, "cmp");
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, sreg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

void pd_nft_e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len, uint32_t dreg)
{
        struct nftnl_expr *e = add(r, "payload");
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
}

void pd_nft_e_lookup(struct nftnl_rule *r, uint32_t sreg, const char *set, int dreg)
{
        struct nftnl_expr *e = add(r, "lookup");
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
        nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
        if (dreg >= 0)
                nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, (uint32_t)dreg);
}

void pd_nft_e_ct_state(struct nftnl_rule *r, uint32_t mask)
{
        struct nftnl_expr *e = add(r, "ct");
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
        uint32_t zero = 0;
        e = add(r, "bitwise");
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, sizeof mask);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, sizeof mask);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, sizeof zero);
        pd_nft_e_cmp(r, NFT_REG_1, NFT_CMP_NEQ, &zero, sizeof zero);
}

/* "limit rate over N/second": matches (so the next verdict applies) only
 * when the rate is exceeded. bytes != 0: a byte rate (bandwidth). */
void pd_nft_e_limit(struct nftnl_rule *r, uint64_t rate, uint32_t burst, int bytes)
{
        struct nftnl_expr *e = add(r, "limit");
        nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_RATE, rate);
        nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_UNIT, 1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_BURST, burst);
        nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_TYPE, bytes ? NFT_LIMIT_PKT_BYTES : NFT_LIMIT_PKTS);
        nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_FLAGS, NFT_LIMIT_F_INV);
}

void pd_nft_e_counter(struct nftnl_rule *r)
{
        add(r, "counter");
}

void pd_nft_e_verdict(struct nftnl_rule *r, int verdict)
{
        struct nftnl_expr *e = add(r, "immediate");
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
}

void pd_nft_e_goto(struct nftnl_rule *r, const char *chain)
{
        struct nftnl_expr *e = add(r, "immediate");
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)NFT_GOTO);
        nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
}

void pd_nft_e_log(struct nftnl_rule *r, uint16_t group, const char *prefix, uint32_t snaplen)
{
        struct nftnl_expr *e = add(r, "log");
        nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, group);
        nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOG_SNAPLEN, snaplen);
}

void pd_nft_e_masq(struct nftnl_rule *r)
{
        add(r, "masq");
}

void pd_nft_e_mask_zero(struct nftnl_rule *r, uint32_t reg, uint8_t mask)
{
        uint8_t zero = 0;
        struct nftnl_expr *e = add(r, "bitwise");
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 1);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, 1);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 1);
        pd_nft_e_cmp(r, reg, NFT_CMP_EQ, &zero, 1);
}

void pd_nft_e_add_tcp_flag(struct nftnl_rule *r, uint8_t flag)
{
        /* the 16-bit word of data offset and flags, not the flags byte
         * alone: the kernel's incremental checksum update is only right
         * for a field that starts on a 16-bit boundary */
        uint8_t mask[2] = { 0xff, 0xff }, x[2] = { 0, flag };
        pd_nft_e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 12, 2, NFT_REG_1);
        struct nftnl_expr *e = add(r, "bitwise");
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 2);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, 2);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, x, 2);         /* the caller matched it clear */
        e = add(r, "payload");
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_TRANSPORT_HEADER);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, 12);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, 2);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_CSUM_TYPE, NFT_PAYLOAD_CSUM_INET);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_CSUM_OFFSET, 16);      /* the TCP checksum */
}

void pd_nft_e_mask_cmp(struct nftnl_rule *r, uint32_t reg, const uint8_t *mask, const uint8_t *value, uint32_t len)
{
        uint8_t zero[16] = { 0 };
        struct nftnl_expr *e = add(r, "bitwise");
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, len);
        pd_nft_e_cmp(r, reg, NFT_CMP_EQ, value, len);
}

void pd_nft_e_mask_eq(struct nftnl_rule *r, uint32_t reg, uint8_t mask, uint8_t value)
{
        pd_nft_e_mask_cmp(r, reg, &mask, &value, 1);
}

void pd_nft_e_dynset_add(struct nftnl_rule *r, uint32_t sreg, const char *set)
{
        struct nftnl_expr *e = add(r, "dynset");
        nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, sreg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_ADD);
        nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, set);
}

void pd_nft_e_reject_tcp(struct nftnl_rule *r)
{
        struct nftnl_expr *e = add(r, "reject");
        nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_TCP_RST);
        nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, 0);
}

void pd_nft_e_redirect(struct nftnl_rule *r, uint16_t port)
{
        uint16_t be = htons(port);
        struct nftnl_expr *e = add(r, "immediate");
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
        nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &be, sizeof be);
        e = add(r, "redir");
        nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
}

/* ---- reading counters ---- */

struct drop_sum {
        uint64_t packets, bytes;
};

/* Per rule: its counter counts only if the rule's verdict is drop, or a
 * goto to one of the sandbox's logged-drop chains (nft.c, "lg"). */
static int rule_cb(const struct nlmsghdr *nlh, void *data)
{
        struct drop_sum *sum = data;
        struct nftnl_rule *r = nftnl_rule_alloc();
        if (!r)
                return MNL_CB_ERROR;
        if (nftnl_rule_nlmsg_parse(nlh, r) < 0) {
                nftnl_rule_free(r);
                return MNL_CB_OK;
        }
        uint64_t p = 0, b = 0;
        bool counted = false, drop = false;
        struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
        for (struct nftnl_expr *e = it ? nftnl_expr_iter_next(it) : NULL; e; e = nftnl_expr_iter_next(it)) {
                const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
                if (!strcmp(name, "counter")) {
                        p = nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_PACKETS);
                        b = nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_BYTES);
                        counted = true;
                } else if (!strcmp(name, "immediate") && nftnl_expr_is_set(e, NFTNL_EXPR_IMM_VERDICT)) {
                        uint32_t v = nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_VERDICT);
                        const char *to = nftnl_expr_is_set(e, NFTNL_EXPR_IMM_CHAIN)
                                         ? nftnl_expr_get_str(e, NFTNL_EXPR_IMM_CHAIN) : NULL;
                        drop = v == NF_DROP || (v == (uint32_t)NFT_GOTO && to && !strncmp(to, "lg", 2));
                }
        }
        if (it)
                nftnl_expr_iter_destroy(it);
        if (counted && drop) {
                sum->packets += p;
                sum->bytes += b;
        }
        nftnl_rule_free(r);
        return MNL_CB_OK;
}

int pd_nft_dropped(struct pd_nft *n, const char *key, uint64_t *packets, uint64_t *bytes,
                   struct pd_error *err)
{
        if (pd_nft_key_check(key) < 0)
                return pd_error_setx(err, EINVAL, "bad sandbox key");
        char chain[96], buf[MNL_SOCKET_BUFFER_SIZE];
        snprintf(chain, sizeof chain, "sb_%s", key);
        struct nftnl_rule *r = pd_nft_rule_new(chain);
        if (!r)
                return pd_error_set(err, ENOMEM, "nft rule");
        uint32_t seq = n->seq++;
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP, seq);
        nftnl_rule_nlmsg_build_payload(nlh, r);
        nftnl_rule_free(r);
        if (mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len) < 0)
                return pd_error_set(err, errno, "nftables dump");
        struct drop_sum sum = { 0 };
        for (;;) {
                ssize_t got = mnl_socket_recvfrom(n->nl, buf, sizeof buf);
                if (got < 0)
                        return pd_error_set(err, errno, "nftables dump");
                int rc = mnl_cb_run(buf, (size_t)got, seq, n->portid, rule_cb, &sum);
                if (rc < 0)
                        return pd_error_set(err, errno, "nftables dump of '%s'", chain);
                if (rc == MNL_CB_STOP)
                        break;
        }
        *packets = sum.packets;
        *bytes = sum.bytes;
        return 0;
}
