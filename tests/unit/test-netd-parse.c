/* Unit tests for paddock-netd's parsers of hostile input: DNS wire format
 * (src/net/netd/dns.c) and TLS SNI / HTTP Host (src/net/netd/sni.c). TAP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/netd/dns.h"
#include "net/netd/sni.h"
#include "tap.h"

static const uint8_t hdr_q[12] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };

static size_t query(uint8_t *b, const char *wire, size_t wlen, uint16_t qtype)
{
        memcpy(b, hdr_q, 12);
        memcpy(b + 12, wire, wlen);
        b[12 + wlen] = (uint8_t)(qtype >> 8);
        b[13 + wlen] = (uint8_t)qtype;
        b[14 + wlen] = 0;
        b[15 + wlen] = 1;
        return 16 + wlen;
}

static void test_queries(void)
{
        uint8_t b[600];
        struct dns_query q;
        size_t n = query(b, "\x03WwW\x07" "example\x03" "com\x00", 17, 1);
        ok(dns_parse_query(b, n, &q) == 0 && strcmp(q.name, "www.example.com") == 0 &&
           q.qtype == 1 && q.name_ok, "plain query parsed, lowercased");
        ok(dns_parse_query(b, n - 1, &q) == DNS_RCODE_FORMERR, "truncated question: FORMERR");
        ok(dns_parse_query(b, 11, &q) < 0, "short header dropped");
        n = query(b, "\xc0\x0c", 2, 1);
        ok(dns_parse_query(b, n, &q) == DNS_RCODE_FORMERR, "compression in the question: FORMERR");
        n = query(b, "\x03" "a.b\x00", 5, 1);
        ok(dns_parse_query(b, n, &q) == 0 && !q.name_ok, "dot inside a label: not a usable name");
        n = query(b, "\x03" "a\0b\x00", 5, 1);
        ok(dns_parse_query(b, n, &q) == 0 && !q.name_ok, "NUL inside a label: not a usable name");
        char big[400];
        size_t k = 0;
        for (int i = 0; i < 5; i++) {
                big[k++] = 63;
                memset(big + k, 'a', 63);
                k += 63;
        }
        big[k++] = 0;
        n = query(b, big, k, 1);
        ok(dns_parse_query(b, n, &q) == DNS_RCODE_FORMERR, "name over 255 bytes: FORMERR");
        n = query(b, "\x40" "abc\x00", 5, 1);
        ok(dns_parse_query(b, n, &q) == DNS_RCODE_FORMERR, "extended label type: FORMERR");
        n = query(b, "\x00", 1, 1);
        b[2] = 0x29;                                    /* opcode UPDATE */
        ok(dns_parse_query(b, n, &q) == DNS_RCODE_NOTIMP, "other opcode: NOTIMP");
        b[2] = 0x81;
        ok(dns_parse_query(b, n, &q) < 0, "a response is not a query");
        b[2] = 0x01;
        b[5] = 2;
        ok(dns_parse_query(b, n, &q) == DNS_RCODE_FORMERR, "two questions: FORMERR");
}

static void test_names(void)
{
        char out[300];
        int nok;
        /* a pointer to itself, a pointer loop, a forward pointer */
        uint8_t self[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 12 };
        size_t off = 12;
        ok(dns_read_name(self, sizeof self, &off, out, &nok) == -EBADMSG, "self pointer refused");
        uint8_t loop[] = { 1, 'a', 0xc0, 4, 1, 'b', 0xc0, 0 };
        off = 4;
        ok(dns_read_name(loop, sizeof loop, &off, out, &nok) == -EBADMSG, "pointer loop refused");
        uint8_t fwd[] = { 0xc0, 2, 1, 'a', 0 };
        off = 0;
        ok(dns_read_name(fwd, sizeof fwd, &off, out, &nok) == -EBADMSG, "forward pointer refused");
        uint8_t good[] = { 1, 'a', 0, 1, 'b', 0xc0, 0 };
        off = 3;
        ok(dns_read_name(good, sizeof good, &off, out, &nok) == 0 && strcmp(out, "b.a") == 0 &&
           off == 7, "backward pointer followed, offset past the pointer");
        uint8_t cut[] = { 5, 'a', 'b' };
        off = 0;
        ok(dns_read_name(cut, sizeof cut, &off, out, &nok) == -EBADMSG, "label past the end refused");
        /* a long chain of backward pointers, each one label: bounded */
        uint8_t chain[200];
        size_t p = 0;
        chain[p++] = 1;
        chain[p++] = 'x';
        chain[p++] = 0;
        for (int i = 0; i < 40; i++) {
                chain[p] = 1;
                chain[p + 1] = 'y';
                chain[p + 2] = 0xc0;
                chain[p + 3] = (uint8_t)(p - 4 < p ? (i ? p - 4 : 0) : 0);
                p += 4;
        }
        off = p - 4;
        ok(dns_read_name(chain, p, &off, out, &nok) == -EBADMSG, "more than 32 jumps refused");
}

static void test_responses(void)
{
        uint8_t b[512];
        struct dns_query q;
        size_t n = query(b, "\x01" "a\x04test\x00", 8, 1);
        dns_parse_query(b, n, &q);
        /* answer: a.test CNAME b.test (compressed), b.test A 1.2.3.4, a TXT, a
         * bad-class A */
        uint8_t r[512];
        memcpy(r, b, n);
        r[2] = 0x81;
        r[3] = 0x80;
        r[7] = 4;
        size_t p = n;
        const uint8_t rr[] = {
                0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 4, 1, 'b', 0xc0, 14,
                1, 'b', 0xc0, 14, 0, 1, 0, 1, 0, 0, 1, 0, 0, 4, 1, 2, 3, 4,
                0xc0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, 2, 1, 'x',
                0xc0, 12, 0, 1, 0, 3, 0, 0, 0, 60, 0, 4, 9, 9, 9, 9,
        };
        memcpy(r + p, rr, sizeof rr);
        p += sizeof rr;
        struct dns_answer *a = malloc(sizeof *a);
        ok(dns_parse_response(r, p, &q, a) == 0 && a->n == 2, "response: CNAME and A kept, TXT and CHAOS dropped");
        ok(a->n == 2 && a->rr[0].type == 5 && strcmp(a->rr[0].target, "b.test") == 0 &&
           a->rr[1].type == 1 && a->rr[1].addr[3] == 4 && a->rr[1].ttl == 256 &&
           strcmp(a->rr[1].owner, "b.test") == 0, "response fields decoded");
        ok(dns_parse_response(r, p - 1, &q, a) == -EBADMSG, "truncated rdata refused");
        r[n + 11] = 200;                                /* rdlength past the end */
        ok(dns_parse_response(r, p, &q, a) == -EBADMSG, "rdlength past the end refused");
        r[n + 11] = 4;
        struct dns_query q2 = q;
        strcpy(q2.name, "other.test");
        ok(dns_parse_response(r, p, &q2, a) == -EBADMSG, "answer to another question refused");
        /* re-encode what was kept (the failed parses above cleared a) */
        dns_parse_response(r, p, &q, a);
        uint8_t out[512];
        size_t len = dns_build_reply_hdr(&q, 0, 2, out, sizeof out);
        len = dns_append_rr(out, len, sizeof out, &a->rr[0]);
        len = len ? dns_append_rr(out, len, sizeof out, &a->rr[1]) : 0;
        struct dns_answer *a2 = malloc(sizeof *a2);
        int prc = len ? dns_parse_response(out, len, &q, a2) : -1;
        ok(len && prc == 0 && a2->n == 2 &&
           memcmp(a2->rr, a->rr, 2 * sizeof a->rr[0]) == 0, "rebuilt reply parses back the same");
        ok(dns_append_rr(out, len, len + 5, &a->rr[1]) == 0, "append that does not fit refused");
        free(a);
        free(a2);
}

/* A ClientHello with the given extensions block. */
static size_t client_hello(uint8_t *b, const uint8_t *ext, size_t elen)
{
        size_t p = 5 + 4;
        b[p++] = 3;
        b[p++] = 3;
        memset(b + p, 7, 32);
        p += 32;
        b[p++] = 0;                                     /* session id */
        b[p++] = 0;
        b[p++] = 2;
        b[p++] = 0x13;
        b[p++] = 0x01;                                  /* one suite */
        b[p++] = 1;
        b[p++] = 0;                                     /* null compression */
        b[p++] = (uint8_t)(elen >> 8);
        b[p++] = (uint8_t)elen;
        if (elen)
                memcpy(b + p, ext, elen);
        p += elen;
        size_t hl = p - 9;
        b[5] = 1;
        b[6] = 0;
        b[7] = (uint8_t)(hl >> 8);
        b[8] = (uint8_t)hl;
        b[0] = 0x16;
        b[1] = 3;
        b[2] = 1;
        b[3] = (uint8_t)((p - 5) >> 8);
        b[4] = (uint8_t)(p - 5);
        return p;
}

static size_t sni_ext(uint8_t *e, const char *name)
{
        size_t l = strlen(name);
        e[0] = 0;
        e[1] = 0;
        e[2] = (uint8_t)((l + 5) >> 8);
        e[3] = (uint8_t)(l + 5);
        e[4] = (uint8_t)((l + 3) >> 8);
        e[5] = (uint8_t)(l + 3);
        e[6] = 0;
        e[7] = (uint8_t)(l >> 8);
        e[8] = (uint8_t)l;
        memcpy(e + 9, name, l);
        return 9 + l;
}

static void test_sni(void)
{
        uint8_t b[2048], e[512];
        char out[300];
        const char *why;
        size_t el = sni_ext(e, "www.Example.com");
        size_t n = client_hello(b, e, el);
        ok(netd_tls_sni(b, n, out, sizeof out, &why) == SNI_FOUND && strcmp(out, "www.Example.com") == 0,
           "SNI found");
        ok(netd_tls_sni(b, n - 1, out, sizeof out, &why) == SNI_NEED_MORE, "partial record: need more");
        ok(netd_tls_sni(b, 3, out, sizeof out, &why) == SNI_NEED_MORE, "partial header: need more");
        n = client_hello(b, NULL, 0);
        ok(netd_tls_sni(b, n, out, sizeof out, &why) == SNI_NONE, "no extensions: no name");
        size_t el2 = sni_ext(e + el, "evil.com");
        n = client_hello(b, e, el + el2);
        ok(netd_tls_sni(b, n, out, sizeof out, &why) == SNI_BAD, "two server_name extensions refused");
        uint8_t ech[] = { 0xfe, 0x0d, 0, 1, 0 };
        memcpy(e + el, ech, sizeof ech);
        n = client_hello(b, e, el + sizeof ech);
        ok(netd_tls_sni(b, n, out, sizeof out, &why) == SNI_BAD && strstr(why, "Encrypted"),
           "Encrypted Client Hello refused");
        el = sni_ext(e, "www.example.com");
        e[3] += 10;                                     /* extension longer than the block */
        n = client_hello(b, e, el);
        ok(netd_tls_sni(b, n, out, sizeof out, &why) == SNI_BAD, "extension past the end refused");
        el = sni_ext(e, "www.example.com");
        n = client_hello(b, e, el);
        b[8] += 1;                                      /* handshake longer than the record */
        ok(netd_tls_sni(b, n, out, sizeof out, &why) == SNI_BAD, "ClientHello split over records refused");
        b[0] = 0x17;
        ok(netd_tls_sni(b, n, out, sizeof out, &why) == SNI_BAD, "not a handshake record");
        char nul[] = "a\0b.com";
        el = sni_ext(e, "xxxxxxx");
        memcpy(e + 9, nul, 7);
        n = client_hello(b, e, el);
        ok(netd_tls_sni(b, n, out, sizeof out, &why) == SNI_BAD, "NUL in the name refused");
}

static int host(const char *req, char *out)
{
        const char *why;
        return netd_http_host((const uint8_t *)req, strlen(req), out, 300, &why);
}

static void test_http(void)
{
        char out[300];
        ok(host("GET / HTTP/1.1\r\nHost: a.example:8080\r\n\r\n", out) == SNI_FOUND &&
           strcmp(out, "a.example") == 0, "Host with port");
        ok(host("GET / HTTP/1.1\r\nhOsT:   b.example  \r\nX: y\r\n\r\n", out) == SNI_FOUND &&
           strcmp(out, "b.example") == 0, "Host case and blanks");
        ok(host("GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", out) == SNI_FOUND &&
           strcmp(out, "2001:db8::1") == 0, "bracketed IPv6 Host");
        ok(host("GET / HTTP/1.1\r\nHost: a.example\r\n", out) == SNI_NEED_MORE, "headers not finished");
        ok(host("GET / HTTP/1.0\r\n\r\n", out) == SNI_NONE, "no Host");
        ok(host("GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n", out) == SNI_BAD,
           "two Host headers refused");
        ok(host("GET http://a.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n", out) == SNI_BAD,
           "absolute target disagreeing with Host refused");
        ok(host("GET http://a.example/x HTTP/1.1\r\n\r\n", out) == SNI_FOUND && strcmp(out, "a.example") == 0,
           "absolute target without Host");
        ok(host("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n", out) == SNI_BAD,
           "CONNECT refused");
        ok(host("GET / HTTP/1.1\r\nHost: a.example\r\n folded\r\n\r\n", out) == SNI_BAD,
           "folded header refused");
        ok(host("GET / HTTP/1.1\r\nHost: a@b.example\r\n\r\n", out) == SNI_BAD, "userinfo in Host refused");
        ok(host("GET / HTTP/1.1\r\nHost: a.example:80x\r\n\r\n", out) == SNI_BAD, "bad port refused");
        ok(host("\x16\x03\x01 garbage\r\n\r\n", out) == SNI_BAD, "not HTTP refused");
        ok(host("get / HTTP/1.1\r\n\r\n", out) == SNI_BAD, "lowercase method refused");
        /* found by tests/fuzz/fuzz-sni: the absolute-form host was copied
         * into out whatever its size */
        char small[8] = "", guard[8] = "guard";
        const char *why, *abs_req = "GET http://a-long-name.example/ HTTP/1.1\r\n\r\n";
        int r = netd_http_host((const uint8_t *)abs_req, strlen(abs_req), small, sizeof small, &why);
        ok(r == SNI_BAD && strcmp(guard, "guard") == 0,
           "absolute target longer than the output buffer refused, not copied");
}

/* Random and mutated input: every parser returns, within bounds (run
 * under ASan in CI's sanitizer build to catch overreads). */
static void test_random(void)
{
        uint8_t b[700], seed_q[64];
        struct dns_query q;
        struct dns_answer *a = malloc(sizeof *a);
        char out[300];
        const char *why;
        size_t sl = query(seed_q, "\x01" "a\x04test\x00", 8, 1);
        dns_parse_query(seed_q, sl, &q);
        srandom(42);
        int bad = 0;
        for (int i = 0; i < 20000; i++) {
                size_t n = (size_t)(random() % (long)sizeof b);
                for (size_t k = 0; k < n; k++)
                        b[k] = (uint8_t)random();
                if (i % 2 && n > sl) {          /* mutate a valid prefix */
                        memcpy(b, seed_q, sl);
                        b[2] = 0x81;
                        b[random() % (long)sl] ^= (uint8_t)random();
                }
                struct dns_query qq;
                int r1 = dns_parse_query(b, n, &qq);
                int r2 = dns_parse_response(b, n, &q, a);
                int r3 = netd_tls_sni(b, n, out, sizeof out, &why);
                int r4 = netd_http_host(b, n, out, sizeof out, &why);
                bad |= r1 > 5 || r2 > 0 || r3 > 1 || r4 > 1 || (r2 == 0 && a->n > DNS_MAX_RRS);
        }
        ok(!bad, "20000 random inputs: every parser returns a defined result");
        free(a);
}

int main(void)
{
        test_random();
        test_queries();
        test_names();
        test_responses();
        test_sni();
        test_http();
        return tap_done();
}
