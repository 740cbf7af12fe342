/* The sandbox manager's own declarations, shared by its files and nobody
 * else (manager.h is the public side):
 *
 *   manager.c    start and stop: threads, pools, the boot id
 *   registry.c   the table: entries, lookups with references, counts
 *   lifecycle.c  create, delete, pause, resume, timeouts, a dead agent:
 *                each through one transition of lifecycle.h
 *   reaper.c     the TTL thread (deletes, or pauses with autoPause)
 *   adopt.c      re-adoption of an earlier server's sandboxes, strays
 *   network.c    a sandbox's network, through its tier
 *   snapshots.c  snapshots and forks
 *   teardown.c   what is left of a deleted sandbox, removed after the answer
 *
 * Locking: s->lock (one sandbox's lifecycle) may be taken before srv->lock
 * (the table, deadlines, refs), never the other way round. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "server/core/manager.h"

#define PD_MGR_MAX_POOL_SIZE 64
/* the reaper sweeps expired audit logs this often (audit_retention.c) */
#define AUDIT_PRUNE_EVERY_MS (3600u * 1000u)

/* The table's element: the public part first, our bookkeeping after. */
struct entry {
        struct pd_srv_sandbox s;
        struct pd_spec spec;            /* limits as created */
        char isolation[16];
        uint64_t paused_remaining_ms;   /* frozen TTL while paused */
        bool auto_pause;                /* pause at the deadline instead of deleting */
        bool auto_pause_files;          /* ... keeping the filesystem only (PD_PAUSE_FILES) */
        bool auto_resume;               /* resumed by traffic to its ports */
        json_t *notes;                  /* array of strings */
};

struct mgr {
        pthread_cond_t reaper_cond;     /* with srv->lock, CLOCK_MONOTONIC */
        pthread_t reaper;
        bool reaper_started;
        bool stopping;
        int stop_efd;
        int changed_efd;                /* written when the table changes (watcher.c) */
        pthread_t watcher;
        bool watcher_started;
        uint64_t creates_total;
        uint64_t next_audit_prune_ms;   /* CLOCK_BOOTTIME (reaper.c) */
        char boot_id[40];
        struct pd_pool *pool;
        struct pd_teardown *teardown;   /* teardown.c */
};

static inline struct mgr *M(struct pd_server *srv)
{
        return srv->manager_private;
}

static inline struct entry *E(struct pd_srv_sandbox *s)
{
        return (struct entry *)s;
}

static inline uint64_t pd_wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* srv->lock held: in the table and served (not being created, not gone). */
static inline bool pd_mgr_visible(const struct pd_srv_sandbox *s)
{
        return s->state != PD_SB_CREATING && s->state != PD_SB_DELETED;
}

/* ---- registry.c ---- */
struct entry *pd_mgr_entry_new(void);
void pd_mgr_entry_free(struct entry *e);
/* srv->lock held for these three. */
int pd_mgr_table_add(struct pd_server *srv, struct entry *e);
void pd_mgr_table_remove(struct pd_server *srv, struct pd_srv_sandbox *s);
/* Tell the agent watcher to rebuild its set of pidfds. */
void pd_mgr_table_changed(struct pd_server *srv);

/* ---- lifecycle.c ---- */
/* The one way a sandbox changes state (lifecycle.h): s->lock held, or s
 * not visible yet. fields (the audit line's own, stolen) may be NULL. */
int pd_mgr_transition(struct pd_server *srv, struct entry *e, enum pd_sb_event ev, json_t *fields,
                      struct pd_error *err);
/* Destroy and forget (ev: PD_EV_DELETE or PD_EV_TIMEOUT). only_expired:
 * the reaper's call, which must not act on a deadline that moved
 * meanwhile. Caller holds a reference. */
int pd_mgr_delete(struct pd_server *srv, struct pd_srv_sandbox *s, enum pd_sb_event ev, bool only_expired,
                  struct pd_error *err);
/* Deadlines change under srv->lock (the reaper reads them there). */
void pd_mgr_set_deadline(struct pd_server *srv, struct entry *e, uint64_t deadline);

/* ---- teardown.c ---- */
/* The thread that finishes deleted sandboxes (the tier's destroy after its
 * stop). Started after adoption; stop finishes every queued teardown. */
int pd_teardown_start(struct pd_server *srv, struct pd_error *err);
void pd_teardown_stop(struct pd_server *srv);
/* Queue e (DELETED, its processes stopped) with a reference of its own;
 * false when the thread is not running (the caller destroys it now). */
bool pd_teardown_queue(struct pd_server *srv, struct entry *e);
/* Queued or running, and finished since start. */
void pd_teardown_counts(struct pd_server *srv, uint64_t *pending, uint64_t *done);

/* ---- reaper.c ---- */
void *pd_mgr_reaper_main(void *srv);

/* ---- adopt.c ---- */
/* Adopt the store's sandboxes into the table, then remove stray sandbox
 * directories no record names. */
int pd_mgr_adopt_all(struct pd_server *srv, struct pd_error *err);
