/* DNS wire format, the few pieces paddock-netd needs. Every input is
 * hostile (it comes from the sandbox, or from an upstream the sandbox can
 * steer): lengths are checked before every read, compression pointers must
 * point backwards (no loops), names are capped at 255 wire bytes and 128
 * labels. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define DNS_HDR 12
#define DNS_MAX_MSG 4096                /* what netd accepts or builds */
#define DNS_NAME_WIRE_MAX 255
#define DNS_TYPE_A 1
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_AAAA 28
#define DNS_TYPE_OPT 41
#define DNS_CLASS_IN 1
#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP 4
#define DNS_RCODE_REFUSED 5

struct dns_query {
        uint16_t id;
        uint16_t flags;
        uint8_t qname[DNS_NAME_WIRE_MAX];       /* wire form, as sent */
        size_t qname_len;
        char name[DNS_NAME_WIRE_MAX + 1];       /* text, lowercase; "" = root */
        int name_ok;                    /* 1 if every label is [A-Za-z0-9-_] */
        uint16_t qtype, qclass;
};

/* Parse a query: QR=0, opcode QUERY, one question, no answers; an EDNS OPT
 * in the additional section is tolerated. Returns 0 or a DNS rcode to
 * answer with (FORMERR, NOTIMP). */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q);

/* An error/empty reply to q: header + its question. Returns the length. */
size_t dns_build_reply_hdr(const struct dns_query *q, uint8_t rcode, uint16_t ancount,
                           uint8_t *out, size_t size);

/* Build the upstream query for q with a new id (question as the client
 * sent it, RD set, EDNS payload 1232). Returns the length. */
size_t dns_build_upstream(const struct dns_query *q, uint16_t id, uint8_t *out, size_t size);

struct dns_rr {
        char owner[DNS_NAME_WIRE_MAX + 1];      /* text, lowercase */
        uint16_t type, klass;
        uint32_t ttl;
        uint8_t addr[16];               /* A / AAAA */
        char target[DNS_NAME_WIRE_MAX + 1];     /* CNAME */
};

#define DNS_MAX_RRS 64

struct dns_answer {
        uint8_t rcode;
        int truncated;
        unsigned n;
        struct dns_rr rr[DNS_MAX_RRS];  /* only IN A, AAAA, CNAME of the answer section */
};

/* Parse an upstream response to q (same question; id checked by caller).
 * Returns 0, or -EBADMSG on anything malformed. */
int dns_parse_response(const uint8_t *msg, size_t len, const struct dns_query *q,
                       struct dns_answer *a);

/* Append one RR (owner/target text encoded uncompressed). Returns the new
 * length or 0 if it does not fit. */
size_t dns_append_rr(uint8_t *out, size_t len, size_t size, const struct dns_rr *rr);

/* Decode a (possibly compressed) name at *off into text (lowercase).
 * *off moves past it. Returns 0 or -EBADMSG; *name_ok as in dns_query. */
int dns_read_name(const uint8_t *msg, size_t len, size_t *off, char *out, int *name_ok);

const char *dns_type_name(uint16_t t, char *buf, size_t size);
