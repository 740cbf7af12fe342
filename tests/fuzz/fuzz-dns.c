/* libFuzzer target: paddock-netd's DNS wire parsers (src/net/netd/dns.c).
 * Queries come from the sandbox; responses from an upstream the sandbox can
 * steer (it chooses the names): both are hostile.
 *
 * The input is parsed as a query (and the reply header and upstream query
 * built from it), then as a response to its own question (a copy with the
 * header turned into a query's gives the question to match), and every
 * record kept is appended to an answer as netd does. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/netd/dns.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > DNS_MAX_MSG)
                return 0;               /* netd reads at most this */
        struct dns_query q;
        static uint8_t out[DNS_MAX_MSG];
        int rc = dns_parse_query(data, size, &q);
        if (rc == 0) {
                CHECK(strlen(q.name) < sizeof q.name && q.qname_len <= DNS_NAME_WIRE_MAX);
                size_t n = dns_build_reply_hdr(&q, DNS_RCODE_NXDOMAIN, 0, out, sizeof out);
                CHECK(n <= sizeof out);
                n = dns_build_upstream(&q, 0x4242, out, sizeof out);
                CHECK(n <= sizeof out);
                if (n) {
                        struct dns_query q2;
                        /* what netd sends upstream parses as the same question */
                        CHECK(dns_parse_query(out, n, &q2) == 0 && !strcmp(q2.name, q.name) &&
                              q2.qtype == q.qtype && q2.qclass == q.qclass);
                }
        }
        /* as a response: the question it repeats, as a query */
        if (size >= DNS_HDR) {
                static uint8_t copy[DNS_MAX_MSG];
                memcpy(copy, data, size);
                copy[2] &= 0x07;        /* QR=0, opcode QUERY */
                memset(copy + 6, 0, 6); /* no answer, authority, additional */
                struct dns_query rq;
                if (dns_parse_query(copy, size, &rq) == 0) {
                        static struct dns_answer a;
                        if (dns_parse_response(data, size, &rq, &a) == 0) {
                                CHECK(a.n <= DNS_MAX_RRS);
                                size_t len = dns_build_reply_hdr(&rq, a.rcode, (uint16_t)a.n, out, sizeof out);
                                for (unsigned i = 0; i < a.n && len; i++) {
                                        size_t l2 = dns_append_rr(out, len, sizeof out, &a.rr[i]);
                                        CHECK(l2 == 0 || (l2 > len && l2 <= sizeof out));
                                        if (l2)
                                                len = l2;
                                }
                        }
                }
        }
        size_t off = DNS_HDR < size ? DNS_HDR : 0;
        char name[DNS_NAME_WIRE_MAX + 1];
        int ok;
        if (dns_read_name(data, size, &off, name, &ok) == 0)
                CHECK(off <= size && strlen(name) <= DNS_NAME_WIRE_MAX);
        char tn[16];
        (void)dns_type_name(size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0, tn, sizeof tn);
        return 0;
}
