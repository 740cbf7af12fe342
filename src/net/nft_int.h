/* Internals shared by nft.c (the rule-set layout), nft_batch.c (socket,
 * transactions, expression helpers) and nft_elems.c (set elements). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>

#include "net/nft.h"

struct pd_nft {
        struct mnl_socket *nl;
        uint32_t portid;
        uint32_t seq;
};

/* One nftables transaction: messages appended, then committed atomically. */
struct pd_nft_tx {
        struct pd_nft *n;
        struct nftnl_batch *b;
        uint32_t seq;
        uint32_t set_id;
        int oom;
};

int pd_nft_tx_begin(struct pd_nft *n, struct pd_nft_tx *tx, struct pd_error *err);
/* Send and wait for the kernel's verdict; frees tx. */
int pd_nft_tx_commit(struct pd_nft_tx *tx, struct pd_error *err);
void pd_nft_tx_abort(struct pd_nft_tx *tx);

void pd_nft_tx_table(struct pd_nft_tx *tx, int msg_type);
void pd_nft_tx_chain(struct pd_nft_tx *tx, int msg_type, const char *name,
                     const char *type, int hook, int prio, int policy);
/* Delete every rule of a chain. */
void pd_nft_tx_flush_chain(struct pd_nft_tx *tx, const char *name);
void pd_nft_tx_rule(struct pd_nft_tx *tx, struct nftnl_rule *r); /* frees r */
void pd_nft_tx_set(struct pd_nft_tx *tx, int msg_type, struct nftnl_set *s); /* frees s */
/* Elements of s (NEWSETELEM / DELSETELEM; DELSETELEM without elements
 * flushes the set). Frees s. */
void pd_nft_tx_elems(struct pd_nft_tx *tx, int msg_type, struct nftnl_set *s);

/* Rule building. */
struct nftnl_rule *pd_nft_rule_new(const char *chain);
void pd_nft_e_meta(struct nftnl_rule *r, uint32_t key, uint32_t dreg);
void pd_nft_e_cmp(struct nftnl_rule *r, uint32_t sreg, uint32_t op, const void *data, uint32_t len);
void pd_nft_e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len, uint32_t dreg);
void pd_nft_e_lookup(struct nftnl_rule *r, uint32_t sreg, const char *set, int dreg);
void pd_nft_e_ct_state(struct nftnl_rule *r, uint32_t mask);
void pd_nft_e_limit(struct nftnl_rule *r, uint64_t rate, uint32_t burst, int bytes);
void pd_nft_e_counter(struct nftnl_rule *r);
void pd_nft_e_verdict(struct nftnl_rule *r, int verdict);
void pd_nft_e_masq(struct nftnl_rule *r);
/* "reg & mask == 0" on the one byte in reg (e.g. TCP flags) */
void pd_nft_e_mask_zero(struct nftnl_rule *r, uint32_t reg, uint8_t mask);
/* "reg & mask == value" on len bytes (at most 16) */
void pd_nft_e_mask_cmp(struct nftnl_rule *r, uint32_t reg, const uint8_t *mask, const uint8_t *value, uint32_t len);
/* "reg & mask == value" on one byte */
void pd_nft_e_mask_eq(struct nftnl_rule *r, uint32_t reg, uint8_t mask, uint8_t value);
/* "add @set { key in sreg... }" (the set's own timeout) */
void pd_nft_e_dynset_add(struct nftnl_rule *r, uint32_t sreg, const char *set);
/* Set a TCP flag the rule matched as clear (the checksum follows). */
void pd_nft_e_add_tcp_flag(struct nftnl_rule *r, uint8_t flag);
/* "reject with tcp reset" (the kernel answers the packet with a RST whose
 * sequence number is the packet's ack: the sender accepts it) */
void pd_nft_e_reject_tcp(struct nftnl_rule *r);
void pd_nft_e_goto(struct nftnl_rule *r, const char *chain);
/* log group N prefix P (nfnetlink_log), snaplen bytes of the packet */
void pd_nft_e_log(struct nftnl_rule *r, uint16_t group, const char *prefix, uint32_t snaplen);
void pd_nft_e_redirect(struct nftnl_rule *r, uint16_t port);

/* A set of `addr . inet_proto . inet_service` intervals (family AF_INET or
 * AF_INET6), optionally with timeouts. */
struct nftnl_set *pd_nft_set_new_concat(const char *name, int family, int timeout);
/* A set with just its name (for element messages). */
struct nftnl_set *pd_nft_set_named(const char *name);

/* Add the CIDR boxes of family to s as interval elements, normalized so
 * that no element overlaps another (pipapo refuses partial overlaps).
 * Returns the number of elements added. */
int pd_nft_elems_add_cidrs(struct nftnl_set *s, int family, const struct pd_nft_cidr *c,
                           size_t n, uint32_t timeout_ms, struct pd_error *err);
/* One element per proto (0 = tcp and udp) for an exact address. */
void pd_nft_elems_add_pin(struct nftnl_set *s, const struct pd_nft_pin *p);

/* `addr . inet_proto` set covering every protocol of each CIDR (open
 * mode's built-in denies); nested CIDRs are dropped (the outer covers). */
struct nftnl_set *pd_nft_set_new_addrproto(const char *name, int family);
int pd_nft_elems_add_addrproto(struct nftnl_set *s, int family, const struct pd_nft_cidr *c,
                               size_t n, struct pd_error *err);

/* The TCP relay's rules (nft_relay.c): router-wide, the input rule for its
 * port, and the head of a sandbox's chain (packet_path: a sandbox whose
 * TCP keeps the packet path; strict: its ports 80/443 go to the proxy). */
void pd_nft_e_mark_set(struct nftnl_rule *r, uint32_t mark);
void pd_nft_relay_rules(struct pd_nft_tx *tx, uint16_t port, uint16_t queue);
void pd_nft_relay_input_rule(struct pd_nft_tx *tx, uint16_t port);
void pd_nft_relay_sandbox_rules(struct pd_nft_tx *tx, const char *sb, bool packet_path, bool strict);
