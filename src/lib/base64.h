/* base64 decoding (RFC 4648 §4 and §5): the one decoder every part uses.
 *   PD_B64_STRICT   the standard alphabet, length a multiple of 4, at most
 *                   two '=' and only at the end: what our own encoders
 *                   (OpenSSL's EVP_EncodeBlock) write; the native API and
 *                   the CLI read it.
 *   PD_B64_LENIENT  the standard or the URL-safe alphabet, '=' padding
 *                   optional: E2B's clients send either.
 * Neither accepts whitespace. Input is untrusted: every length is checked. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum pd_b64_mode { PD_B64_STRICT, PD_B64_LENIENT };

/* How many bytes inlen characters can decode to (the size out must have). */
static inline size_t pd_b64_decoded_max(size_t inlen)
{
        return inlen / 4 * 3 + 3;
}

/* Decode in[0..inlen) into out (pd_b64_decoded_max(inlen) bytes): the
 * number of bytes, or -EINVAL. */
ssize_t pd_b64_decode(const char *in, size_t inlen, uint8_t *out, enum pd_b64_mode mode);
/* The same into a malloc'd buffer (*out, free it): 0, -EINVAL or -ENOMEM. */
int pd_b64_decode_alloc(const char *in, size_t inlen, enum pd_b64_mode mode, uint8_t **out, size_t *outlen);
