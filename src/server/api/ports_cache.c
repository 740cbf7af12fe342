/* Idle upstream connections of the port relay (ports_cache.h).
 *
 * Why safe: an entry is an open agent connection, bound to the agent of
 * the sandbox it was made for; it is found by that sandbox's id and its
 * pd_sandbox (a sandbox deleted, and its id ever reused, has another, and
 * its old agent's connection is dead). The request's auth and the
 * sandbox's state (paused: resumed or refused) are checked before the
 * cache is asked, as for a fresh connection. An entry is kept at most
 * IDLE_MS, so a service's own idle timeout (seconds, typically) does not
 * close it under a request, and a paused or deleted sandbox's entries go
 * within that time; before use it must have received nothing (a closed
 * tunnel, a dead agent or stray bytes: dropped). At most SLOTS entries in
 * all. A sandbox that leaves the running state (paused, deleted) loses its
 * entries at once through the lifecycle's stop hook (core/sb_hooks.h), so
 * the service inside sees its connection closed then, not at the next
 * request that happens to sweep the table. */
#include <pthread.h>
#include <string.h>

#include "server/api/ports_cache.h"
#include "server/core/server.h"
#include "lib/util.h"

#define SLOTS 16
#define IDLE_MS 1000

struct slot {
        bool used;
        char id[PD_ID_LEN + 1];
        const void *sb;
        unsigned port;
        uint32_t tid;
        uint64_t at_ms;
        struct pd_client cl;
};

static struct slot slots[SLOTS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void slot_drop(struct slot *sl)
{
        pd_client_close(&sl->cl);
        sl->used = false;
}

static void expire_locked(uint64_t now)
{
        for (unsigned i = 0; i < SLOTS; i++)
                if (slots[i].used && now - slots[i].at_ms > IDLE_MS)
                        slot_drop(&slots[i]);
}

void pd_ports_cache_put(const struct pd_srv_sandbox *s, unsigned port, struct pd_client *cl, uint32_t tid)
{
        /* nothing of the request may follow it: no watch on a sandbox
         * that may be gone by the next use, no frame callback */
        cl->watch = (struct pd_client_watch){ .hup_fd = -1, .stop_fd = -1 };
        cl->on_frame = NULL;
        cl->frame_ctx = NULL;
        uint64_t now = pd_now_ms();
        pthread_mutex_lock(&mu);
        expire_locked(now);
        struct slot *sl = NULL;
        for (unsigned i = 0; i < SLOTS && !sl; i++)
                if (!slots[i].used)
                        sl = &slots[i];
        if (sl) {
                *sl = (struct slot){ .used = true, .sb = s->sb, .port = port, .tid = tid, .at_ms = now, .cl = *cl };
                memcpy(sl->id, s->id, sizeof sl->id);
                pd_client_init(cl);
        }
        pthread_mutex_unlock(&mu);
        pd_client_close(cl);    /* no room: closed */
        /* a request that was under way when its sandbox was paused or
         * deleted comes here after the stop hook has run: checked after
         * the insert (the state is published before the hook), so one of
         * the two always drops it */
        if (sl && pd_srv_sandbox_state(s) != PD_SB_RUNNING)
                pd_ports_cache_drop_sandbox(s);
}

bool pd_ports_cache_take(const struct pd_srv_sandbox *s, unsigned port, struct pd_client *out, uint32_t *tid)
{
        for (;;) {
                struct slot got = { 0 };
                uint64_t now = pd_now_ms();
                pthread_mutex_lock(&mu);
                expire_locked(now);
                for (unsigned i = 0; i < SLOTS; i++) {
                        struct slot *sl = &slots[i];
                        if (sl->used && sl->port == port && sl->sb == s->sb && !strcmp(sl->id, s->id)) {
                                got = *sl;
                                sl->used = false;
                                break;
                        }
                }
                pthread_mutex_unlock(&mu);
                if (!got.used)
                        return false;
                struct pd_frame_hdr h;
                const uint8_t *p;
                if (pd_client_next_nowait(&got.cl, &h, &p) != 0) {
                        /* the service closed, the agent died, or bytes
                         * nobody asked for: not for this request */
                        pd_client_close(&got.cl);
                        continue;
                }
                *out = got.cl;
                *tid = got.tid;
                return true;
        }
}

void pd_ports_cache_drop_sandbox(const struct pd_srv_sandbox *s)
{
        struct pd_client gone[SLOTS];
        unsigned n = 0;
        pthread_mutex_lock(&mu);
        for (unsigned i = 0; i < SLOTS; i++) {
                struct slot *sl = &slots[i];
                if (sl->used && sl->sb == s->sb && !strcmp(sl->id, s->id)) {
                        gone[n++] = sl->cl;
                        sl->used = false;
                }
        }
        pthread_mutex_unlock(&mu);
        /* closed outside the lock: the agent's end may take a moment */
        for (unsigned i = 0; i < n; i++)
                pd_client_close(&gone[i]);
}
