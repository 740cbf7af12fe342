/* The reaper: one thread that sleeps until the earliest deadline of the
 * table and then deletes that sandbox (sandbox.timeout), or pauses it when
 * it was created with autoPause. Deadlines are CLOCK_BOOTTIME milliseconds:
 * monotonic (a wall-clock jump changes nothing) and still meaningful after
 * a server restart on the same boot, which adoption checks with the
 * kernel's boot_id. */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "server/core/mgr_int.h"

#define REAPER_MAX_SLEEP_MS 60000u

/* autoPause: at the deadline a running sandbox is paused, not deleted; its
 * resume gives it its whole configured timeout again. 0 if it was paused
 * (or is no longer expired); <0 to fall back to deletion. */
static int auto_pause(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        pthread_mutex_lock(&srv->lock);
        bool expired = s->deadline_boot_ms && s->deadline_boot_ms <= pd_boot_ms();
        pthread_mutex_unlock(&srv->lock);
        if (s->state == PD_SB_DELETED || !expired) {
                pthread_mutex_unlock(&s->lock);
                return 0;
        }
        bool disk = false;
        int r = pd_sb_next(s->id, s->state, PD_EV_AUTO_PAUSE, err);
        if (r >= 0 && (r = pd_sandbox_pause_mode(s->sb, e->auto_pause_files ? PD_PAUSE_FILES : PD_PAUSE_DEFAULT, &disk,
                                                 err)) == 0) {
                e->paused_remaining_ms = (uint64_t)s->timeout_s * 1000u;
                pd_mgr_set_deadline(srv, e, 0);
                r = pd_mgr_transition(srv, e, disk ? PD_EV_AUTO_PAUSE_DISK : PD_EV_AUTO_PAUSE, NULL, err);
        }
        pthread_mutex_unlock(&s->lock);
        if (r >= 0)
                pd_log("info", "sandbox paused at its deadline (autoPause) sandbox=%s", s->id);
        return r < 0 ? r : 0;
}

void *pd_mgr_reaper_main(void *arg)
{
        struct pd_server *srv = arg;
        struct mgr *m = M(srv);
        pthread_mutex_lock(&srv->lock);
        while (!m->stopping) {
                uint64_t now = pd_boot_ms(), earliest = UINT64_MAX;
                struct pd_srv_sandbox *expired = NULL;
                for (size_t i = 0; i < srv->n_sandboxes; i++) {
                        struct pd_srv_sandbox *s = srv->sandboxes[i];
                        if (!pd_mgr_visible(s) || !s->deadline_boot_ms)
                                continue;
                        if (s->deadline_boot_ms <= now) {
                                expired = s;
                                break;
                        }
                        if (s->deadline_boot_ms < earliest)
                                earliest = s->deadline_boot_ms;
                }
                if (expired) {
                        expired->refs++;
                        pthread_mutex_unlock(&srv->lock);
                        struct pd_error err = { 0 };
                        if (E(expired)->auto_pause && auto_pause(srv, expired, &err) == 0)
                                ;       /* paused, or its deadline moved meanwhile */
                        else if (pd_mgr_delete(srv, expired, PD_EV_TIMEOUT, true, &err) < 0)
                                pd_log("warn", "timeout: %s", err.msg);
                        pd_server_sandbox_put(srv, expired);
                        pthread_mutex_lock(&srv->lock);
                        continue;
                }
                if (now >= m->next_audit_prune_ms) {
                        m->next_audit_prune_ms = now + AUDIT_PRUNE_EVERY_MS;
                        pthread_mutex_unlock(&srv->lock);
                        pd_audit_prune(srv);
                        pthread_mutex_lock(&srv->lock);
                        continue;
                }
                if (m->next_audit_prune_ms - now < earliest - now)
                        earliest = m->next_audit_prune_ms;
                /* Sleep until the earliest deadline. The wait is on
                 * CLOCK_MONOTONIC, which stops during suspend while
                 * BOOTTIME runs on: cap it, and recompute on waking. */
                uint64_t wait_ms = earliest == UINT64_MAX ? REAPER_MAX_SLEEP_MS : earliest - now;
                if (wait_ms > REAPER_MAX_SLEEP_MS)
                        wait_ms = REAPER_MAX_SLEEP_MS;
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                uint64_t ns = (uint64_t)ts.tv_nsec + wait_ms * 1000000u;
                ts.tv_sec += (time_t)(ns / 1000000000u);
                ts.tv_nsec = (long)(ns % 1000000000u);
                pthread_cond_timedwait(&m->reaper_cond, &srv->lock, &ts);
        }
        pthread_mutex_unlock(&srv->lock);
        return NULL;
}
