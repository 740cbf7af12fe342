/* A sandbox as the host sees it: identity, spec, where its state lives, and
 * the tier driver that owns its kernel objects. Used by `paddock run` and
 * (later) the server alike. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/spec.h"
#include "lib/state.h"
#include "lib/tier.h"

struct pd_sandbox {
        char id[PD_ID_LEN + 1];
        struct pd_state *state;
        struct pd_spec spec;
        const struct pd_tier_ops *ops;
        char dir[PATH_MAX];             /* <state>/sandboxes/<id> */
        int dirfd;
        char socket_path[PATH_MAX];     /* the agent's listening socket */
        pid_t agent_pid;
        int agent_pidfd;
        uint64_t agent_start;           /* /proc starttime, against pid reuse */
        pid_t supervisor_pid;           /* supervised tier: 0 otherwise */
        uint64_t supervisor_start;
        bool die_with_parent;           /* paddock run: the sandbox ends with the CLI */
        bool keep_stage;                /* container tiers: a host view of the writable
                                         * layer even when dying with the parent (builds) */
        /* container tier, `paddock run` of the lean binary (src/agent/inproc.h):
         * the sandbox child runs the agent's main itself instead of exec'ing
         * paddock-agent. NULL: exec it (the server, whose forks are copies of
         * a process with keys and threads, always does). */
        int (*agent_inproc)(int argc, char **argv);
        uint64_t writable_bytes;        /* effective size of the writable layer */
        /* The registered template (or snapshot) it started from, "" for a
         * host directory; kept in the record, for snapshots and forks. */
        char template_buf[65];
        bool paused;                    /* by pd_sandbox_pause*, until resume */
        bool paused_files;              /* ... keeping its filesystem only (PD_PAUSE_FILES) */
        /* the tier's own state (ops->data_size bytes, zeroed at allocation,
         * freed with the object): its jail's handles, cgroup and uid range */
        void *tier_data;
};

/* Allocate a sandbox for spec; picks the tier driver. Refuses tiers that do
 * not exist yet with a message that says so. */
int pd_sandbox_new(struct pd_state *st, const struct pd_spec *spec, struct pd_sandbox **out,
                   struct pd_error *err);
/* A sandbox whose runtime record is gone (a host reboot emptied the
 * runtime dir) under its old id, for the tier's adopt to find what it kept
 * on the state dir's disk (microvm: a guest paused to disk). */
int pd_sandbox_revive(struct pd_state *st, const char *id, const struct pd_spec *spec, struct pd_sandbox **out,
                      struct pd_error *err);
int pd_sandbox_create(struct pd_sandbox *sb, struct pd_error *err);
int pd_sandbox_connect(struct pd_sandbox *sb, struct pd_error *err);
int pd_sandbox_stats(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err);
int pd_sandbox_pause(struct pd_sandbox *sb, struct pd_error *err);
int pd_sandbox_resume(struct pd_sandbox *sb, struct pd_error *err);
/* Pause in the given mode (tier.h); *disk says whether it went to disk. */
int pd_sandbox_pause_mode(struct pd_sandbox *sb, enum pd_pause_mode mode, bool *disk, struct pd_error *err);
/* A snapshot (tier.h) named name: checks the name, refuses one taken. */
int pd_sandbox_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err);
/* n independent copies of sb's current state, created and running; dst
 * are filled with new sandboxes (freed and destroyed on failure). */
int pd_sandbox_fork(struct pd_sandbox *sb, struct pd_sandbox **dst, unsigned n, struct pd_error *err);
#define PD_FORK_MAX 64
/* Tear down (idempotent) and free. */
int pd_sandbox_destroy(struct pd_sandbox *sb, struct pd_error *err);
void pd_sandbox_free(struct pd_sandbox *sb);
/* Load a sandbox of this state dir from its record (for gc and adoption). */
int pd_sandbox_load(struct pd_state *st, const char *id, struct pd_sandbox **out, struct pd_error *err);
/* Persist what teardown needs (pids, and the tier's own: uid slot, ...) in
 * <dir>/record. */
int pd_sandbox_save(struct pd_sandbox *sb, struct pd_error *err);
/* Destroy every sandbox this state dir owns, then let every tier remove
 * what the records missed (ops->gc). */
int pd_gc(struct pd_state *st, int *destroyed, struct pd_error *err);
/* The tier's word on a sandbox's network (-ENOENT: it has none) and a live
 * change of its policy (-ENOTSUP where the tier has no network). */
int pd_sandbox_net_info(struct pd_sandbox *sb, struct pd_net_info *out, struct pd_error *err);
int pd_sandbox_net_update(struct pd_sandbox *sb, const struct pd_netpol *pol, struct pd_error *err);
/* What only its tier knows (zeroed if nothing). */
void pd_sandbox_describe(const struct pd_sandbox *sb, struct pd_tier_info *out);
