/* sha256 content digests ("sha256:<64 hex>") of blobs and layers, on
 * libcrypto (OpenSSL), fed incrementally while data streams past. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

#define PD_DIGEST_HEX 64

struct pd_sha256;

struct pd_sha256 *pd_sha256_new(void);
void pd_sha256_update(struct pd_sha256 *h, const void *p, size_t n);
/* Lowercase hex into out (65 bytes); the hash is reset for reuse. */
void pd_sha256_final(struct pd_sha256 *h, char out[PD_DIGEST_HEX + 1]);
void pd_sha256_free(struct pd_sha256 *h);
/* One call over a buffer. */
void pd_sha256_of(const void *p, size_t n, char out[PD_DIGEST_HEX + 1]);

/* "sha256:<64 lowercase hex>" -> hex (65 bytes): 0, or -EINVAL (other
 * algorithms included: only sha256 is accepted). */
int pd_digest_parse(const char *digest, char hex[PD_DIGEST_HEX + 1]);
bool pd_digest_hex_ok(const char *hex);
