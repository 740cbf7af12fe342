/* How often one client address may fail the console's sign-in
 * (docs/console.md "Sign-in"): PD_SIGNIN_FAILS wrong keys in
 * PD_SIGNIN_WINDOW_S seconds, then 429 with Retry-After until the window
 * ends, right key or not. Keys are 160 random bits, so guessing one is
 * hopeless anyway; this keeps a page (or a script behind it) from hammering
 * the key store and filling the log. A fixed table of addresses: a slot
 * taken by another address is reused when its window is over (a busy table
 * limits less, never more than PD_SIGNIN_FAILS for one address). */
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/util.h"
#include "server/api/api.h"

#define SLOTS 256

struct slot {
        unsigned char addr[16];
        uint64_t start_ns;
        unsigned fails;
};

static struct slot slots[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The client's address as 16 bytes (IPv4 mapped), or false. */
static bool peer(struct pd_req *r, unsigned char out[16])
{
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;
        memset(out, 0, 16);
        if (sa && sa->sa_family == AF_INET) {
                out[10] = out[11] = 0xff;
                memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
                return true;
        }
        if (sa && sa->sa_family == AF_INET6) {
                memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
                return true;
        }
        return false;
}

static struct slot *slot_of(const unsigned char a[16], uint64_t now)
{
        uint32_t h = 2166136261u;
        for (int i = 0; i < 16; i++)
                h = (h ^ a[i]) * 16777619u;
        struct slot *s = &slots[h % SLOTS];
        bool over = now - s->start_ns >= (uint64_t)PD_SIGNIN_WINDOW_S * 1000000000ull;
        if (memcmp(s->addr, a, 16) || over) {
                memcpy(s->addr, a, 16);
                s->start_ns = now;
                s->fails = 0;
        }
        return s;
}

unsigned pd_signin_retry_after(struct pd_req *r)
{
        unsigned char a[16];
        if (!peer(r, a))
                return 0;
        uint64_t now = pd_now_ns();
        pthread_mutex_lock(&lock);
        struct slot *s = slot_of(a, now);
        unsigned wait = 0;
        if (s->fails >= PD_SIGNIN_FAILS)
                wait = PD_SIGNIN_WINDOW_S - (unsigned)((now - s->start_ns) / 1000000000ull);
        pthread_mutex_unlock(&lock);
        return wait ? wait : s->fails >= PD_SIGNIN_FAILS ? 1 : 0;
}

void pd_signin_failed(struct pd_req *r)
{
        unsigned char a[16];
        if (!peer(r, a))
                return;
        pthread_mutex_lock(&lock);
        slot_of(a, pd_now_ns())->fails++;
        pthread_mutex_unlock(&lock);
}
