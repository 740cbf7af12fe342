#include "lib/base64.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

/* The value of one character, -1 if none. A function, not a table filled
 * on first use: server threads decode at the same time. */
static int value(unsigned char c, enum pd_b64_mode mode)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+' || (c == '-' && mode == PD_B64_LENIENT))
                return 62;
        if (c == '/' || (c == '_' && mode == PD_B64_LENIENT))
                return 63;
        return -1;
}

ssize_t pd_b64_decode(const char *in, size_t inlen, uint8_t *out, enum pd_b64_mode mode)
{
        size_t data = inlen;
        if (mode == PD_B64_STRICT) {
                if (inlen % 4)
                        return -EINVAL;
                for (int k = 0; k < 2 && data && in[data - 1] == '='; k++)
                        data--;
        } else {
                while (data && in[data - 1] == '=')
                        data--;
        }
        if (data > (size_t)SSIZE_MAX / 3 * 4)
                return -EINVAL;
        size_t n = 0;
        uint32_t acc = 0;
        unsigned bits = 0;
        for (size_t i = 0; i < data; i++) {
                int v = value((unsigned char)in[i], mode);
                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (uint8_t)(acc >> bits);
                }
        }
        return (ssize_t)n;
}

int pd_b64_decode_alloc(const char *in, size_t inlen, enum pd_b64_mode mode, uint8_t **out, size_t *outlen)
{
        uint8_t *buf = malloc(pd_b64_decoded_max(inlen));
        if (!buf)
                return -ENOMEM;
        ssize_t n = pd_b64_decode(in, inlen, buf, mode);
        if (n < 0) {
                free(buf);
                return (int)n;
        }
        *out = buf;
        *outlen = (size_t)n;
        return 0;
}
