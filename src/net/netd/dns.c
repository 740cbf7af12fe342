/* DNS wire format (dns.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/netd/dns.h"

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

static int label_char_ok(uint8_t c)
{
        return isalnum(c) || c == '-' || c == '_';
}

int dns_read_name(const uint8_t *msg, size_t len, size_t *off, char *out, int *name_ok)
{
        size_t pos = *off, wire = 0, text = 0, end = 0;
        unsigned labels = 0, jumps = 0;
        size_t floor_ = pos;            /* pointers must go strictly below this */
        int ok = 1;
        for (;;) {
                if (pos >= len)
                        return -EBADMSG;
                uint8_t l = msg[pos];
                if ((l & 0xc0) == 0xc0) {
                        if (pos + 1 >= len)
                                return -EBADMSG;
                        size_t target = (size_t)(l & 0x3f) << 8 | msg[pos + 1];
                        /* strictly backwards: no loops, bounded work */
                        if (target >= floor_ || ++jumps > 32)
                                return -EBADMSG;
                        if (!end)
                                end = pos + 2;
                        floor_ = target;
                        pos = target;
                        continue;
                }
                if (l & 0xc0)
                        return -EBADMSG;        /* 0x40/0x80: extended label types */
                if (l == 0) {
                        wire += 1;
                        if (!end)
                                end = pos + 1;
                        break;
                }
                if (pos + 1 + l > len || ++labels > 127)
                        return -EBADMSG;
                wire += 1u + l;
                if (wire + 1 > DNS_NAME_WIRE_MAX)
                        return -EBADMSG;
                if (text)
                        out[text++] = '.';
                for (unsigned i = 0; i < l; i++) {
                        uint8_t c = msg[pos + 1 + i];
                        if (!label_char_ok(c)) {
                                ok = 0;
                                c = '?';        /* keep the text printable */
                        }
                        out[text++] = (char)tolower(c);
                }
                pos += 1u + l;
                if (pos > floor_ && jumps == 0)
                        floor_ = pos;   /* before any jump, the floor is where we are */
        }
        out[text] = '\0';
        *off = end;
        if (name_ok)
                *name_ok = ok;
        return 0;
}

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q)
{
        memset(q, 0, sizeof *q);
        if (len < DNS_HDR)
                return -EBADMSG;
        q->id = get16(msg);
        q->flags = get16(msg + 2);
        if (q->flags & 0x8000)
                return -EBADMSG;                /* a response: ignore */
        if ((q->flags >> 11) & 0xf)
                return DNS_RCODE_NOTIMP;        /* opcode other than QUERY */
        if (get16(msg + 4) != 1 || get16(msg + 6) != 0 || get16(msg + 8) != 0 ||
            get16(msg + 10) > 1)
                return DNS_RCODE_FORMERR;
        /* the question name: no compression in a query's only question */
        size_t pos = DNS_HDR, start = pos;
        for (;;) {
                if (pos >= len)
                        return DNS_RCODE_FORMERR;
                uint8_t l = msg[pos];
                if (l & 0xc0)
                        return DNS_RCODE_FORMERR;
                if (pos + 1 + l > len || pos + 1 + l - start > DNS_NAME_WIRE_MAX)
                        return DNS_RCODE_FORMERR;
                pos += 1u + l;
                if (l == 0)
                        break;
        }
        q->qname_len = pos - start;
        memcpy(q->qname, msg + start, q->qname_len);
        size_t off = start;
        if (dns_read_name(msg, len, &off, q->name, &q->name_ok) < 0)
                return DNS_RCODE_FORMERR;
        if (pos + 4 > len)
                return DNS_RCODE_FORMERR;
        q->qtype = get16(msg + pos);
        q->qclass = get16(msg + pos + 2);
        return 0;
}

size_t dns_build_reply_hdr(const struct dns_query *q, uint8_t rcode, uint16_t ancount,
                           uint8_t *out, size_t size)
{
        if (size < DNS_HDR + q->qname_len + 4)
                return 0;
        put16(out, q->id);
        /* QR, opcode 0, RD copied, RA, rcode */
        put16(out + 2, (uint16_t)(0x8000 | (q->flags & 0x0100) | 0x0080 | (rcode & 0xf)));
        put16(out + 4, q->qname_len ? 1 : 0);
        put16(out + 6, ancount);
        put16(out + 8, 0);
        put16(out + 10, 0);
        size_t n = DNS_HDR;
        if (q->qname_len) {
                memcpy(out + n, q->qname, q->qname_len);
                n += q->qname_len;
                put16(out + n, q->qtype);
                put16(out + n + 2, q->qclass);
                n += 4;
        }
        return n;
}

size_t dns_build_upstream(const struct dns_query *q, uint16_t id, uint8_t *out, size_t size)
{
        size_t n = DNS_HDR + q->qname_len + 4 + 11;
        if (size < n)
                return 0;
        memset(out, 0, DNS_HDR);
        put16(out, id);
        put16(out + 2, 0x0100);                 /* RD */
        put16(out + 4, 1);
        put16(out + 10, 1);                     /* OPT */
        memcpy(out + DNS_HDR, q->qname, q->qname_len);
        size_t p = DNS_HDR + q->qname_len;
        put16(out + p, q->qtype);
        put16(out + p + 2, q->qclass);
        p += 4;
        out[p] = 0;                             /* root owner */
        put16(out + p + 1, DNS_TYPE_OPT);
        put16(out + p + 3, 1232);               /* UDP payload size */
        memset(out + p + 5, 0, 6);              /* ext rcode, version, flags, rdlen */
        return n;
}

int dns_parse_response(const uint8_t *msg, size_t len, const struct dns_query *q,
                       struct dns_answer *a)
{
        memset(a, 0, sizeof *a);
        if (len < DNS_HDR)
                return -EBADMSG;
        uint16_t flags = get16(msg + 2);
        if (!(flags & 0x8000) || get16(msg + 4) != 1)
                return -EBADMSG;
        a->rcode = flags & 0xf;
        a->truncated = !!(flags & 0x0200);
        unsigned an = get16(msg + 6);
        size_t off = DNS_HDR;
        char name[DNS_NAME_WIRE_MAX + 1];
        int ok;
        if (dns_read_name(msg, len, &off, name, &ok) < 0 || off + 4 > len)
                return -EBADMSG;
        if (strcmp(name, q->name) != 0 || get16(msg + off) != q->qtype ||
            get16(msg + off + 2) != q->qclass)
                return -EBADMSG;                /* not an answer to our question */
        off += 4;
        for (unsigned i = 0; i < an; i++) {
                struct dns_rr rr;
                memset(&rr, 0, sizeof rr);
                if (dns_read_name(msg, len, &off, rr.owner, &ok) < 0 || off + 10 > len)
                        return -EBADMSG;
                rr.type = get16(msg + off);
                rr.klass = get16(msg + off + 2);
                rr.ttl = (uint32_t)get16(msg + off + 4) << 16 | get16(msg + off + 6);
                size_t rdlen = get16(msg + off + 8);
                off += 10;
                if (off + rdlen > len)
                        return -EBADMSG;
                size_t rd = off;
                off += rdlen;
                if (!ok || rr.klass != DNS_CLASS_IN || a->n >= DNS_MAX_RRS)
                        continue;
                if (rr.ttl > 0x7fffffff)
                        rr.ttl = 0;             /* RFC 2181: treat as zero */
                if (rr.type == DNS_TYPE_A && rdlen == 4) {
                        memcpy(rr.addr, msg + rd, 4);
                } else if (rr.type == DNS_TYPE_AAAA && rdlen == 16) {
                        memcpy(rr.addr, msg + rd, 16);
                } else if (rr.type == DNS_TYPE_CNAME) {
                        size_t t = rd;
                        int tok;
                        if (dns_read_name(msg, off, &t, rr.target, &tok) < 0 || t != off)
                                return -EBADMSG;
                        if (!tok)
                                continue;
                } else {
                        continue;
                }
                a->rr[a->n++] = rr;
        }
        return 0;
}

/* text name -> wire; the text comes from dns_read_name with name_ok, so
 * labels are 1..63 chars and the total fits. */
static size_t put_name(uint8_t *out, size_t size, const char *name)
{
        size_t n = 0;
        const char *p = name;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t)(dot - p) : strlen(p);
                if (l == 0 || l > 63 || n + 1 + l >= size)
                        return 0;
                out[n++] = (uint8_t)l;
                memcpy(out + n, p, l);
                n += l;
                p += l + (dot ? 1 : 0);
        }
        if (n + 1 > size)
                return 0;
        out[n++] = 0;
        return n;
}

size_t dns_append_rr(uint8_t *out, size_t len, size_t size, const struct dns_rr *rr)
{
        size_t n = put_name(out + len, size - len, rr->owner);
        if (!n || len + n + 10 > size)
                return 0;
        size_t p = len + n;
        put16(out + p, rr->type);
        put16(out + p + 2, DNS_CLASS_IN);
        put16(out + p + 4, (uint16_t)(rr->ttl >> 16));
        put16(out + p + 6, (uint16_t)rr->ttl);
        p += 10;
        size_t rdlen;
        if (rr->type == DNS_TYPE_A || rr->type == DNS_TYPE_AAAA) {
                rdlen = rr->type == DNS_TYPE_A ? 4 : 16;
                if (p + rdlen > size)
                        return 0;
                memcpy(out + p, rr->addr, rdlen);
        } else {
                rdlen = put_name(out + p, size - p, rr->target);
                if (!rdlen)
                        return 0;
        }
        put16(out + p - 2, (uint16_t)rdlen);
        return p + rdlen;
}

const char *dns_type_name(uint16_t t, char *buf, size_t size)
{
        switch (t) {
        case 1: return "A";
        case 2: return "NS";
        case 5: return "CNAME";
        case 12: return "PTR";
        case 15: return "MX";
        case 16: return "TXT";
        case 28: return "AAAA";
        case 33: return "SRV";
        case 64: return "SVCB";
        case 65: return "HTTPS";
        case 255: return "ANY";
        }
        snprintf(buf, size, "TYPE%u", t);
        return buf;
}
