/* An upstream answer, filtered by the sandbox's policy: keep the CNAME
 * chain from the question and the A/AAAA at its end that the policy lets
 * this sandbox reach, pin those in nft for their TTL, audit each address,
 * reply. */
#include <stdio.h>
#include <string.h>

#include "net/netd/resolver_int.h"
#include "lib/util.h"

/* Keep the answer's CNAME chain from the question and the A/AAAA at its
 * end that the policy lets this sandbox reach; pin those. */
void netd_dns_answer(struct netd *d, struct netd_pending *p, const struct dns_answer *a)
{
        struct netd_sandbox *sb = p->sb;
        const struct pd_netpol_rule *grants[16], *now_rule;
        /* the policy may have changed while the question was upstream: the
         * answer follows the policy in force now */
        if (pd_netpol_match_name(&sb->policy, p->name, &now_rule) != PD_NETPOL_ALLOW) {
                netd_dns_audit(sb, &p->q, p->name, false, now_rule, "denied by a policy change");
                netd_dns_reply_rcode(d, &p->to, &p->q, DNS_RCODE_NXDOMAIN);
                return;
        }
        size_t n_grants = pd_netpol_name_grants(&sb->policy, p->name, grants, 16);
        char chain[8][DNS_NAME_WIRE_MAX + 1];
        unsigned n_chain = 1;
        snprintf(chain[0], sizeof chain[0], "%s", p->q.name);
        uint8_t out[DNS_MAX_MSG];
        size_t limit = p->to.tcp ? sizeof out : 512;
        size_t len = dns_build_reply_hdr(&p->q, a->rcode, 0, out, sizeof out);
        unsigned kept = 0;
        bool truncated = a->truncated;
        struct pd_nft_pin pins[64];
        size_t n_pins = 0;
        struct { struct netd_addr addr; uint32_t ttl; } remember[DNS_MAX_RRS];
        unsigned n_remember = 0;

        for (unsigned i = 0; a->rcode == DNS_RCODE_NOERROR && i < a->n; i++) {
                struct dns_rr rr = a->rr[i];
                bool in_chain = false;
                for (unsigned c = 0; c < n_chain; c++)
                        in_chain |= strcmp(rr.owner, chain[c]) == 0;
                if (!in_chain)
                        continue;
                if (rr.ttl > TTL_MAX)
                        rr.ttl = TTL_MAX;
                if (rr.ttl == 0)
                        rr.ttl = 1;
                if (rr.type == DNS_TYPE_CNAME) {
                        if (n_chain < 8)
                                snprintf(chain[n_chain++], sizeof chain[0], "%s", rr.target);
                } else {
                        struct netd_addr ad = { .family = rr.type == DNS_TYPE_A ? AF_INET : AF_INET6 };
                        memcpy(ad.a, rr.addr, rr.type == DNS_TYPE_A ? 4 : 16);
                        const char *why = NULL;
                        const struct pd_netpol_rule *by = NULL;
                        bool keep, fresh = false, n_grants_skip = false;
                        if (netd_never(d, &ad)) {
                                keep = false;
                                why = "server or uplink address";
                        } else if (n_grants) {
                                keep = false;
                                /* pinned for this name (under this policy:
                                 * a change forgets the pins) and lasting well
                                 * past this answer: no new netlink batch */
                                fresh = netd_pins_expiry(sb, p->name, &ad) >=
                                             pd_now_ms() + (rr.ttl + PIN_GRACE_S / 2) * 1000ull;
                                /* an address whose pins do not all fit in this
                                 * batch is left out of the answer, not answered
                                 * unreachable */
                                if (!fresh && n_pins + n_grants > PD_ARRAY_SIZE(pins)) {
                                        why = "too many addresses in one answer";
                                        n_grants_skip = true;
                                }
                                for (size_t g = 0; g < n_grants && !n_grants_skip; g++)
                                        if (pd_netpol_pin_ok(&sb->policy, grants[g], ad.family, ad.a, &why)) {
                                                keep = true;
                                                by = grants[g];
                                                if (!fresh && n_pins < PD_ARRAY_SIZE(pins)) {
                                                        struct pd_nft_pin *pn = &pins[n_pins++];
                                                        memset(pn, 0, sizeof *pn);
                                                        pn->family = ad.family;
                                                        memcpy(pn->addr, ad.a, 16);
                                                        pn->proto = grants[g]->proto;
                                                        pn->port_lo = grants[g]->port_lo;
                                                        pn->port_hi = grants[g]->port_hi;
                                                        pn->ttl_s = rr.ttl + PIN_GRACE_S;
                                                }
                                        }
                                if (keep)
                                        why = NULL;
                                else if (n_grants_skip)
                                        why = "too many addresses in one answer";
                        } else {
                                /* open mode, no allow rule for the name: the
                                 * kernel's open rules decide; still never
                                 * answer the built-in ranges (rebinding) */
                                const struct pd_netpol_builtin *b =
                                        pd_netpol_builtin_match(ad.family, ad.a);
                                keep = !b;
                                why = b ? b->what : "open mode";
                        }
                        struct netd_audit au = { .kind = "pin", .allow = keep, .name = p->name,
                                                 .addr = &ad, .rule = by, .reason = why,
                                                 .ttl = rr.ttl };
                        if (keep && !by)
                                au.kind = "answer";     /* answered, not pinned */
                        netd_audit(sb, &au);
                        if (!keep)
                                continue;
                        if (by && !fresh && n_remember < DNS_MAX_RRS) {
                                remember[n_remember].addr = ad;
                                remember[n_remember++].ttl = rr.ttl + PIN_GRACE_S;
                        }
                }
                size_t nl = dns_append_rr(out, len, limit, &rr);
                if (!nl) {
                        truncated = true;
                        break;
                }
                len = nl;
                kept++;
        }
        if (n_pins && !netd_pins_budget(d, sb, n_pins)) {
                char why[96];
                snprintf(why, sizeof why, "pin limit: %u addresses pinned for this sandbox", d->max_pins);
                netd_dns_audit(sb, &p->q, p->name, false, p->rule, why);
                netd_dns_reply_rcode(d, &p->to, &p->q, DNS_RCODE_SERVFAIL);
                return;
        }
        if (n_pins && d->nft) {
                struct pd_error err = { 0 };
                if (pd_nft_pin(d->nft, sb->id, pins, n_pins, &err) < 0) {
                        netd_dns_audit(sb, &p->q, p->name, false, p->rule, err.msg);
                        netd_dns_reply_rcode(d, &p->to, &p->q, DNS_RCODE_SERVFAIL);
                        return;
                }
        }
        for (size_t i = 0; i < n_pins; i++)
                netd_pins_charge(d, sb, 1, pins[i].ttl_s);
        for (unsigned i = 0; i < n_remember; i++)
                netd_pins_remember(sb, p->name, &remember[i].addr, remember[i].ttl);
        out[6] = (uint8_t)(kept >> 8);
        out[7] = (uint8_t)kept;
        if (truncated)
                out[2] |= 0x02;
        netd_dns_audit(sb, &p->q, p->name, true, p->rule,
                  a->rcode == DNS_RCODE_NXDOMAIN ? "upstream NXDOMAIN" : NULL);
        netd_dns_send_reply(d, &p->to, out, len);
}

