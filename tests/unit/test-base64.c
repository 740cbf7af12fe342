/* Unit tests for the one base64 decoder (src/lib/base64.c): what the
 * native API (stdin_data), the CLI (output frames) and E2B (stdin, Basic
 * auth) accept and refuse. TAP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "tap.h"


/* in decodes to want (len bytes) in mode. */
static void good(const char *in, enum pd_b64_mode mode, const char *want, size_t len, const char *what)
{
        uint8_t *out = NULL;
        size_t n = 0;
        int r = pd_b64_decode_alloc(in, strlen(in), mode, &out, &n);
        ok(r == 0 && n == len && memcmp(out, want, len) == 0, "%s", what);
        free(out);
}

static void bad(const char *in, enum pd_b64_mode mode, const char *what)
{
        uint8_t *out = NULL;
        size_t n = 0;
        ok(pd_b64_decode_alloc(in, strlen(in), mode, &out, &n) == -EINVAL && !out, "%s", what);
}

int main(void)
{
        good("", PD_B64_STRICT, "", 0, "strict: empty is zero bytes");
        good("aGVsbG8=", PD_B64_STRICT, "hello", 5, "strict: one '='");
        good("aGk=", PD_B64_STRICT, "hi", 2, "strict: two bytes");
        good("aA==", PD_B64_STRICT, "h", 1, "strict: two '='");
        good("aGVs", PD_B64_STRICT, "hel", 3, "strict: no padding needed at a multiple of 3");
        good("/+8=", PD_B64_STRICT, "\xff\xef", 2, "strict: '+' and '/'");
        good("AAEC", PD_B64_STRICT, "\0\1\2", 3, "strict: NUL bytes kept");
        bad("aGVsbG8", PD_B64_STRICT, "strict: missing padding refused");
        bad("aGk", PD_B64_STRICT, "strict: length not a multiple of 4 refused");
        bad("a===", PD_B64_STRICT, "strict: three '=' refused");
        bad("aA==aA==", PD_B64_STRICT, "strict: '=' in the middle refused");
        bad("_-8=", PD_B64_STRICT, "strict: the URL-safe alphabet refused");
        bad("aGVs bG8=", PD_B64_STRICT, "strict: whitespace refused");
        bad("aGVs\nbG8=", PD_B64_STRICT, "strict: a newline refused");
        uint8_t nul[8];
        ok(pd_b64_decode("aGV\0", 4, nul, PD_B64_STRICT) == -EINVAL, "strict: a NUL inside the length refused");

        good("aGVsbG8=", PD_B64_LENIENT, "hello", 5, "lenient: padded");
        good("aGVsbG8", PD_B64_LENIENT, "hello", 5, "lenient: unpadded");
        good("_-8", PD_B64_LENIENT, "\xff\xef", 2, "lenient: the URL-safe alphabet");
        good("/+8", PD_B64_LENIENT, "\xff\xef", 2, "lenient: the standard alphabet");
        good("dXNlcjpwdw==", PD_B64_LENIENT, "user:pw", 7, "lenient: a Basic auth value");
        bad("aGVs bG8", PD_B64_LENIENT, "lenient: whitespace refused");
        bad("aG*s", PD_B64_LENIENT, "lenient: a character outside both alphabets refused");
        bad("aA=a", PD_B64_LENIENT, "lenient: '=' before the end refused");

        /* The bound holds for every length, padded or not. */
        char in[64];
        uint8_t out[64];
        int within = 1;
        for (size_t len = 0; len < 40; len++) {
                memset(in, 'A', len);
                ssize_t n = pd_b64_decode(in, len, out, PD_B64_LENIENT);
                within &= n >= 0 && (size_t)n <= pd_b64_decoded_max(len);
        }
        ok(within, "decoded size never exceeds pd_b64_decoded_max");
        return tap_done();
}
