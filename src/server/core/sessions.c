/* Console sessions: a small table of random tokens, each holding the API
 * key it was made from (sessions.h). The key text stays in this process's
 * memory so that each use re-validates it with pd_store_key_lookup (a
 * revoked key signs its browsers out); the browser only ever holds the
 * token. Lookups compare every slot in constant time. */
#include "server/core/sessions.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#include "server/core/store.h"
#include "server/core/tokens.h"
#include "lib/util.h"

struct session {
        char token[PD_SESSION_TOKEN_LEN + 1];   /* "" = free slot */
        char key_text[PD_KEY_TEXT_MAX];
        uint64_t expires_ms;                    /* CLOCK_MONOTONIC */
};

static struct session table[PD_SESSION_MAX];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static void wipe(struct session *s)
{
        explicit_bzero(s, sizeof *s);
}

int pd_session_create(const char *key_text, char token[PD_SESSION_TOKEN_LEN + 1], struct pd_error *err)
{
        if (strlen(key_text) >= PD_KEY_TEXT_MAX)
                return pd_error_setx(err, EINVAL, "API key too long");
        unsigned char rnd[PD_SESSION_TOKEN_LEN / 2];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
                return pd_error_set(err, errno ? errno : EIO, "getrandom");
        static const char hex[] = "0123456789abcdef";
        for (size_t i = 0; i < sizeof rnd; i++) {
                token[2 * i] = hex[rnd[i] >> 4];
                token[2 * i + 1] = hex[rnd[i] & 15];
        }
        token[PD_SESSION_TOKEN_LEN] = '\0';
        explicit_bzero(rnd, sizeof rnd);

        uint64_t now = pd_now_ms();
        pthread_mutex_lock(&table_lock);
        /* a free or expired slot, else the one closest to expiry (the oldest) */
        struct session *slot = &table[0];
        for (size_t i = 0; i < PD_SESSION_MAX; i++) {
                struct session *s = &table[i];
                if (!s->token[0] || s->expires_ms <= now) {
                        slot = s;
                        break;
                }
                if (s->expires_ms < slot->expires_ms)
                        slot = s;
        }
        wipe(slot);
        memcpy(slot->token, token, PD_SESSION_TOKEN_LEN + 1);
        snprintf(slot->key_text, sizeof slot->key_text, "%s", key_text);
        slot->expires_ms = now + (uint64_t)PD_SESSION_TTL_S * 1000;
        pthread_mutex_unlock(&table_lock);
        return 0;
}

/* The slot of token (constant time over the table), or NULL; under table_lock. */
static struct session *find(const char *token)
{
        struct session *hit = NULL;
        if (strlen(token) != PD_SESSION_TOKEN_LEN)
                return NULL;
        for (size_t i = 0; i < PD_SESSION_MAX; i++)
                if (table[i].token[0] && pd_streq_ct(table[i].token, token))
                        hit = &table[i];
        return hit;
}

bool pd_session_lookup(struct pd_server *srv, const char *token, struct pd_key *key)
{
        char key_text[PD_KEY_TEXT_MAX];
        pthread_mutex_lock(&table_lock);
        struct session *s = find(token);
        if (s && s->expires_ms <= pd_now_ms()) {
                wipe(s);
                s = NULL;
        }
        if (s)
                memcpy(key_text, s->key_text, sizeof key_text);
        pthread_mutex_unlock(&table_lock);
        if (!s)
                return false;
        bool ok = pd_store_key_lookup(srv->store, key_text, key) == 0;
        explicit_bzero(key_text, sizeof key_text);
        return ok;
}

void pd_session_delete(const char *token)
{
        pthread_mutex_lock(&table_lock);
        struct session *s = find(token);
        if (s)
                wipe(s);
        pthread_mutex_unlock(&table_lock);
}
