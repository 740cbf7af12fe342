#include "image/digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

struct pd_sha256 {
        EVP_MD_CTX *ctx;
};

struct pd_sha256 *pd_sha256_new(void)
{
        struct pd_sha256 *h = calloc(1, sizeof *h);
        if (!h)
                return NULL;
        h->ctx = EVP_MD_CTX_new();
        if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
                pd_sha256_free(h);
                return NULL;
        }
        return h;
}

void pd_sha256_update(struct pd_sha256 *h, const void *p, size_t n)
{
        if (n)
                EVP_DigestUpdate(h->ctx, p, n);
}

void pd_sha256_final(struct pd_sha256 *h, char out[PD_DIGEST_HEX + 1])
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int len = 0;
        EVP_DigestFinal_ex(h->ctx, md, &len);
        static const char x[] = "0123456789abcdef";
        for (unsigned i = 0; i < 32; i++) {
                out[2 * i] = x[md[i] >> 4];
                out[2 * i + 1] = x[md[i] & 15];
        }
        out[PD_DIGEST_HEX] = '\0';
        EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL);
}

void pd_sha256_free(struct pd_sha256 *h)
{
        if (!h)
                return;
        EVP_MD_CTX_free(h->ctx);
        free(h);
}

void pd_sha256_of(const void *p, size_t n, char out[PD_DIGEST_HEX + 1])
{
        struct pd_sha256 *h = pd_sha256_new();
        if (!h) {
                memset(out, '0', PD_DIGEST_HEX);
                out[PD_DIGEST_HEX] = '\0';
                return;
        }
        pd_sha256_update(h, p, n);
        pd_sha256_final(h, out);
        pd_sha256_free(h);
}

bool pd_digest_hex_ok(const char *hex)
{
        size_t i = 0;
        for (; hex[i]; i++)
                if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
                        return false;
        return i == PD_DIGEST_HEX;
}

int pd_digest_parse(const char *digest, char hex[PD_DIGEST_HEX + 1])
{
        if (!digest || strncmp(digest, "sha256:", 7) || !pd_digest_hex_ok(digest + 7))
                return -EINVAL;
        memcpy(hex, digest + 7, PD_DIGEST_HEX + 1);
        return 0;
}
