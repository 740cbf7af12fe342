/* Tokens the server hands out and checks (tokens.h): HMAC-SHA256 of a
 * label with the server's secret, <state>/e2b-secret (32 random bytes,
 * 0600, made on first use; the name is historical), so tokens survive a
 * restart and need no column in the store. */
#include "server/core/tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/util.h"

static pthread_mutex_t secret_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t secret[32];
static bool secret_loaded;

static int load_secret(struct pd_server *srv)
{
        if (secret_loaded)
                return 0;
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/e2b-secret", srv->state.dir);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
                ssize_t n = read(fd, secret, sizeof secret);
                close(fd);
                if (n == (ssize_t)sizeof secret) {
                        secret_loaded = true;
                        return 0;
                }
        }
        if (RAND_bytes(secret, sizeof secret) != 1)
                return -EIO;
        char tmp[PATH_MAX + 48];
        snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        int r = pd_write_all(fd, secret, sizeof secret);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        close(fd);
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                return r;
        }
        secret_loaded = true;
        return 0;
}

int pd_token(struct pd_server *srv, const char *label, char out[PD_TOKEN_LEN + 1])
{
        pthread_mutex_lock(&secret_lock);
        int r = load_secret(srv);
        uint8_t mac[32];
        unsigned maclen = 0;
        if (r == 0 && !HMAC(EVP_sha256(), secret, sizeof secret, (const unsigned char *)label,
                            strlen(label), mac, &maclen))
                r = -EIO;
        pthread_mutex_unlock(&secret_lock);
        if (r < 0)
                return r;
        static const char hex[] = "0123456789abcdef";
        for (unsigned i = 0; i < 32; i++) {
                out[2 * i] = hex[mac[i] >> 4];
                out[2 * i + 1] = hex[mac[i] & 15];
        }
        out[PD_TOKEN_LEN] = '\0';
        return 0;
}

bool pd_streq_ct(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        unsigned char d = la != lb;
        for (size_t i = 0; i < la && i < lb; i++)
                d |= (unsigned char)(a[i] ^ b[i]);
        return d == 0;
}

int pd_ports_token(struct pd_server *srv, const char *id, char out[PD_TOKEN_LEN + 1])
{
        char label[PD_ID_LEN + 16];
        snprintf(label, sizeof label, "port:%s", id);
        return pd_token(srv, label, out);
}
