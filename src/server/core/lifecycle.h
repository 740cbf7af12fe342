/* A server sandbox's lifecycle: its states, the events that move it, and
 * the one table that says, for each (state, event), where it goes, what
 * the store keeps and what the audit log says (lifecycle_table.c).
 *
 *   creating ──created──▶ running ◀──resume, auto_resume── paused, paused_disk
 *      │                   │  ▲                  ▲
 *   create_failed          │  └──── pause, auto_pause (memory or disk)
 *      ▼                   ├──agent_died──▶ failed   (also from paused)
 *   deleted ◀──delete, timeout── running, paused, paused_disk, failed
 *
 * Adoption after a restart starts each sandbox in the state its record
 * names and then applies lost (agent gone or unusable: failed) or revived
 * (paused to disk and found again after a reboot).
 *
 * Pure: no server, no store, no locks. pd_sb_apply does the bookkeeping
 * through the effect callbacks its caller passes; the caller holds the
 * sandbox's lock (core/lifecycle.c). */
#pragma once
#include <stdbool.h>

#include "lib/error.h"

enum pd_sb_state {
        PD_SB_CREATING,         /* slot reserved while the tier builds it; invisible */
        PD_SB_RUNNING,
        PD_SB_PAUSED,           /* stopped with its memory resident (freezer) */
        PD_SB_PAUSED_DISK,      /* stopped, saved to disk, its memory released */
        PD_SB_FAILED,           /* its agent is gone; the record stays until deleted */
        PD_SB_DELETED,          /* destroyed and forgotten; only references remain */
        PD_SB__MAX,
};

enum pd_sb_event {
        PD_EV_CREATED,
        PD_EV_CREATE_FAILED,
        PD_EV_PAUSE,            /* memory kept */
        PD_EV_PAUSE_DISK,
        PD_EV_AUTO_PAUSE,       /* the reaper, at the deadline of an autoPause sandbox */
        PD_EV_AUTO_PAUSE_DISK,
        PD_EV_RESUME,
        PD_EV_AUTO_RESUME,      /* traffic to a port of an autoResume sandbox (api/ports.c) */
        PD_EV_SET_TIMEOUT,
        PD_EV_SET_PORTS,        /* its ports made public or private */
        PD_EV_AGENT_DIED,       /* the watcher saw the agent exit */
        PD_EV_LOST,             /* adoption: gone or unusable after a restart */
        PD_EV_REVIVED,          /* adoption: paused to disk, found after a reboot */
        PD_EV_DELETE,
        PD_EV_TIMEOUT,          /* the reaper, at the deadline */
        PD_EV__MAX,
};

/* What a transition does to the sandbox's row in the store. */
enum pd_sb_persist {
        PD_PERSIST_NONE,
        PD_PERSIST_PUT,         /* write the row (with the new state) */
        PD_PERSIST_DELETE,      /* remove the row */
};

#define PD_SB_SAME PD_SB__MAX   /* a transition's "to": the state does not change */

struct pd_sb_transition {
        unsigned from;                  /* bit mask of the states it may start in */
        enum pd_sb_state to;            /* or PD_SB_SAME */
        enum pd_sb_persist persist;
        bool must_persist;              /* a store failure undoes it (else: logged, carried on) */
        const char *audit;              /* audit log event, NULL = none */
        const char *verb;               /* for refusals: "sandbox X is paused: cannot <verb>" */
};

/* The table's row for ev (NULL if ev is out of range). */
const struct pd_sb_transition *pd_sb_transition(enum pd_sb_event ev);
/* The state ev leads to from `from`, or -errno with err set: -ENOENT when
 * the sandbox is deleted (callers answer 404), -EBUSY naming the state when
 * the table has no such transition, -EINVAL for values out of range. */
int pd_sb_next(const char *id, enum pd_sb_state from, enum pd_sb_event ev, struct pd_error *err);

/* The bookkeeping of one transition, done by the caller's callbacks in
 * this order: persist (the row with the new state, or its removal), then
 * set_state (publish), then audit. */
struct pd_sb_effects {
        int (*persist)(void *ctx, enum pd_sb_state to, struct pd_error *err);
        int (*unpersist)(void *ctx, struct pd_error *err);
        void (*set_state)(void *ctx, enum pd_sb_state to);
        void (*audit)(void *ctx, const char *event);
        /* a store failure the transition carries on after */
        void (*persist_failed)(void *ctx, const struct pd_error *err);
};

/* Apply ev to a sandbox in state *state: refuse it (pd_sb_next's errors,
 * nothing changed), or persist, set *state, publish and audit as the table
 * says. A must_persist transition whose store write fails changes nothing
 * and returns the store's error. */
int pd_sb_apply(const char *id, enum pd_sb_state *state, enum pd_sb_event ev, const struct pd_sb_effects *fx,
                void *ctx, struct pd_error *err);

/* Names for messages and logs: "running", "paused to disk", ... */
const char *pd_sb_state_name(enum pd_sb_state s);
const char *pd_sb_event_name(enum pd_sb_event ev);
/* Paused either way. */
static inline bool pd_sb_is_paused(enum pd_sb_state s)
{
        return s == PD_SB_PAUSED || s == PD_SB_PAUSED_DISK;
}

/* The store keeps the API's words ("running", "paused", "failed") and
 * whether a pause went to disk; the other states are never stored. */
const char *pd_sb_state_store_name(enum pd_sb_state s);
enum pd_sb_state pd_sb_state_from_store(const char *name, bool paused_disk);

/* What may be done to a sandbox in a given state besides transitions. */
enum pd_sb_op {
        PD_OP_AGENT,            /* a connection to its agent: processes, files, exec */
        PD_OP_PORTS,            /* relay to a port inside */
        PD_OP_SNAPSHOT,         /* snapshot or fork */
        PD_OP_STATS,
        PD_OP__MAX,
};
/* 0 if allowed, else -ENOENT (deleted) or -EBUSY with a message. */
int pd_sb_can(const char *id, enum pd_sb_state s, enum pd_sb_op op, struct pd_error *err);
