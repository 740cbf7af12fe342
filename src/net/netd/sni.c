/* SNI and Host extraction (sni.h). */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "net/netd/sni.h"

#define TLS_RECORD_MAX (16384 + 2048)

static unsigned g16(const uint8_t *p)
{
        return (unsigned)p[0] << 8 | p[1];
}

int netd_tls_sni(const uint8_t *b, size_t n, char *out, size_t size, const char **why)
{
        *why = NULL;
        if (n < 5)
                return SNI_NEED_MORE;
        if (b[0] != 0x16 || b[1] != 3) {
                *why = "not a TLS handshake";
                return SNI_BAD;
        }
        size_t rec = g16(b + 3);
        if (rec > TLS_RECORD_MAX) {
                *why = "TLS record too long";
                return SNI_BAD;
        }
        if (n < 5 + rec)
                return SNI_NEED_MORE;
        const uint8_t *h = b + 5, *end = h + rec;
        if (rec < 4 || h[0] != 1) {
                *why = "not a ClientHello";
                return SNI_BAD;
        }
        size_t hlen = (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
        if (hlen > rec - 4) {
                *why = "ClientHello split over records";
                return SNI_BAD;
        }
        const uint8_t *p = h + 4;
        end = p + hlen;
#define NEED(k) do { if ((size_t)(end - p) < (size_t)(k)) { *why = "truncated ClientHello"; return SNI_BAD; } } while (0)
        NEED(2 + 32 + 1);
        p += 34;
        size_t l = *p++;
        NEED(l + 2);
        p += l;                                 /* session id */
        l = g16(p);
        p += 2;
        NEED(l + 1);
        p += l;                                 /* cipher suites */
        l = *p++;
        NEED(l);
        p += l;                                 /* compression */
        if (p == end)
                return SNI_NONE;                /* no extensions */
        NEED(2);
        l = g16(p);
        p += 2;
        NEED(l);
        end = p + l;
        int found = 0;
        while (p < end) {
                NEED(4);
                unsigned type = g16(p);
                size_t elen = g16(p + 2);
                p += 4;
                NEED(elen);
                if (type == 0xfe0d) {
                        *why = "Encrypted Client Hello hides the name";
                        return SNI_BAD;
                }
                if (type == 0) {
                        const uint8_t *q = p, *qend = p + elen;
                        if (found || elen < 2 || g16(q) != elen - 2) {
                                *why = "malformed server_name";
                                return SNI_BAD;
                        }
                        q += 2;
                        while (q < qend) {
                                if (qend - q < 3) {
                                        *why = "malformed server_name";
                                        return SNI_BAD;
                                }
                                unsigned nt = q[0];
                                size_t nl = g16(q + 1);
                                q += 3;
                                if ((size_t)(qend - q) < nl) {
                                        *why = "malformed server_name";
                                        return SNI_BAD;
                                }
                                if (nt == 0) {
                                        if (found || nl == 0 || nl >= size ||
                                            memchr(q, 0, nl)) {
                                                *why = "bad or repeated host_name";
                                                return SNI_BAD;
                                        }
                                        memcpy(out, q, nl);
                                        out[nl] = '\0';
                                        found = 1;
                                }
                                q += nl;
                        }
                }
                p += elen;
        }
#undef NEED
        return found ? SNI_FOUND : SNI_NONE;
}

/* Copy host[:port] or [v6]:port without the port. */
static int host_value(const char *v, size_t n, char *out, size_t size)
{
        while (n && (*v == ' ' || *v == '\t')) {
                v++;
                n--;
        }
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
        if (n == 0)
                return SNI_NONE;
        if (v[0] == '[') {
                const char *close = memchr(v, ']', n);
                if (!close)
                        return SNI_BAD;
                v++;
                n = (size_t)(close - v);
        } else {
                const char *colon = memchr(v, ':', n);
                if (colon) {
                        for (const char *c = colon + 1; c < v + n; c++)
                                if (!isdigit((unsigned char)*c))
                                        return SNI_BAD;
                        n = (size_t)(colon - v);
                }
        }
        if (n == 0 || n >= size)
                return SNI_BAD;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)v[i] <= ' ' || v[i] == '/' || v[i] == '@' || v[i] == '\\')
                        return SNI_BAD;
        memcpy(out, v, n);
        out[n] = '\0';
        return SNI_FOUND;
}

int netd_http_host(const uint8_t *b, size_t n, char *out, size_t size, const char **why)
{
        const char *s = (const char *)b;
        *why = NULL;
        const char *hdr_end = memmem(s, n, "\r\n\r\n", 4);
        const char *eol = memmem(s, n, "\r\n", 2);
        if (!eol)
                return n > 8192 ? (*why = "request line too long", SNI_BAD) : SNI_NEED_MORE;
        /* METHOD SP target SP HTTP/1.x */
        const char *sp1 = memchr(s, ' ', (size_t)(eol - s));
        const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
        if (!sp1 || !sp2 || eol - sp2 - 1 != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
                *why = "not an HTTP/1 request";
                return SNI_BAD;
        }
        for (const char *c = s; c < sp1; c++)
                if (!isupper((unsigned char)*c)) {
                        *why = "not an HTTP/1 request";
                        return SNI_BAD;
                }
        if (sp1 - s == 7 && strncmp(s, "CONNECT", 7) == 0) {
                *why = "CONNECT refused";
                return SNI_BAD;
        }
        if (!hdr_end)
                return SNI_NEED_MORE;
        char abs_host[256] = "";
        const char *t = sp1 + 1;
        size_t tl = (size_t)(sp2 - t);
        if (tl > 7 && strncasecmp(t, "http://", 7) == 0) {
                const char *hs = t + 7, *he = hs;
                while (he < sp2 && *he != '/' && *he != '?' && *he != '#')
                        he++;
                if (host_value(hs, (size_t)(he - hs), abs_host, sizeof abs_host) != SNI_FOUND) {
                        *why = "bad absolute-form target";
                        return SNI_BAD;
                }
        } else if (tl && t[0] != '/' && !(tl == 1 && t[0] == '*')) {
                *why = "bad request target";
                return SNI_BAD;
        }
        int found = SNI_NONE;
        for (const char *line = eol + 2; line < hdr_end;) {
                const char *le = memmem(line, (size_t)(hdr_end + 2 - line), "\r\n", 2);
                if (!le)
                        break;
                if ((size_t)(le - line) > 5 && strncasecmp(line, "host:", 5) == 0) {
                        if (found != SNI_NONE) {
                                *why = "two Host headers";
                                return SNI_BAD;
                        }
                        found = host_value(line + 5, (size_t)(le - line - 5), out, size);
                        if (found == SNI_BAD) {
                                *why = "bad Host header";
                                return SNI_BAD;
                        }
                } else if (line[0] == ' ' || line[0] == '\t') {
                        *why = "folded header";
                        return SNI_BAD;
                }
                line = le + 2;
        }
        if (abs_host[0]) {
                if (found == SNI_FOUND && strcasecmp(abs_host, out) != 0) {
                        *why = "Host differs from the request target";
                        return SNI_BAD;
                }
                /* abs_host holds up to 255 chars: out may be smaller */
                size_t hl = strlen(abs_host);
                if (hl >= size) {
                        *why = "bad absolute-form target";
                        return SNI_BAD;
                }
                memcpy(out, abs_host, hl + 1);
                found = SNI_FOUND;
        }
        return found;
}
