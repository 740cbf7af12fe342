/* libFuzzer target: paddock-netd's strict proxy reads the first bytes a
 * sandbox sends on a connection to learn the name it wants: a TLS
 * ClientHello's SNI or an HTTP/1 Host (src/net/netd/sni.c). Hostile input.
 *
 * Both parsers see every prefix length the proxy may call them with (it
 * calls again as more bytes arrive), and the answer must be a clean,
 * NUL-terminated name that fits. */
#include <stdlib.h>
#include <string.h>

#include "net/netd/sni.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static void one(int (*fn)(const uint8_t *, size_t, char *, size_t, const char **), const uint8_t *b, size_t n)
{
        char out[256];
        const char *why = NULL;
        memset(out, 0x5a, sizeof out);
        int r = fn(b, n, out, sizeof out, &why);
        CHECK(r == SNI_NEED_MORE || r == SNI_FOUND || r == SNI_NONE || r == SNI_BAD);
        if (r == SNI_FOUND)
                CHECK(memchr(out, 0, sizeof out) != NULL);
        if (r == SNI_BAD && why)
                CHECK(strlen(why) < 1024);
        /* a small output buffer must be refused, never overrun */
        char small[8];
        (void)fn(b, n, small, sizeof small, &why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a copy of exactly size bytes: ASan sees any read past the end */
        uint8_t *b = malloc(size ? size : 1);
        if (!b)
                return 0;
        memcpy(b, data, size);
        one(netd_tls_sni, b, size);
        one(netd_http_host, b, size);
        /* and a shorter prefix, as when the first read was partial */
        if (size > 1) {
                one(netd_tls_sni, b, size / 2);
                one(netd_http_host, b, size / 2);
        }
        free(b);
        return 0;
}
