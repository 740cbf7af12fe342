/* The tier-driver interface (DESIGN §2). Every isolation tier implements
 * these operations; nothing above this interface knows which tier it talks
 * to. A driver may leave an operation NULL when the tier cannot do it; the
 * sandbox layer then answers ENOTSUP with a message naming the tier. */
#pragma once
#include <stdint.h>

#include "lib/error.h"

struct pd_sandbox;

struct pd_sandbox_stats {
        uint64_t memory_current;        /* bytes, workload */
        uint64_t memory_peak;
        uint64_t cpu_ns;                /* whole sandbox */
        uint64_t pids_current;
        uint64_t pids_max_events;       /* forks refused by the pids limit */
        uint64_t oom_kills;
        uint64_t disk_used;             /* bytes in the writable layer (0 = unknown) */
};

/* How a tier pauses (pd_sandbox_pause_mode). */
enum pd_pause_mode {
        PD_PAUSE_DEFAULT,       /* the tier's own choice: to disk where it can, else in memory */
        PD_PAUSE_MEMORY,        /* stop running, keep everything resident (container: freezer) */
        PD_PAUSE_DISK,          /* save the state to disk and release the memory (microvm) */
};

/* What a tier can do beyond the basics; reported in the sandbox's info. */
#define PD_TIER_PAUSE_DISK      (1u << 0)       /* pause_to_disk works; resumes after a reboot */
#define PD_TIER_SNAPSHOT_MEMORY (1u << 1)       /* snapshots and forks carry memory, not files only */

struct pd_tier_ops {
        const char *name;
        unsigned caps;          /* PD_TIER_* */
        /* Build the sandbox and start its agent; on success the agent listens
         * on sb->socket_path and sb->agent_pid/agent_pidfd are set. */
        int (*create)(struct pd_sandbox *sb, struct pd_error *err);
        /* A new connection to the agent (CLOEXEC fd). */
        int (*connect)(struct pd_sandbox *sb, struct pd_error *err);
        /* Stop the sandbox with its memory resident (container tiers: the
         * freezer). */
        int (*pause)(struct pd_sandbox *sb, struct pd_error *err);
        /* Stop the sandbox, save its state (memory, devices, disk) to disk
         * and release its memory; resume (also from a new server process,
         * after adopt) brings it back. NULL where the tier cannot. */
        int (*pause_to_disk)(struct pd_sandbox *sb, struct pd_error *err);
        /* Undo either kind of pause. */
        int (*resume)(struct pd_sandbox *sb, struct pd_error *err);
        /* Save a named, immutable checkpoint of the sandbox's current state
         * as the template <state>/templates/<name> (name already checked
         * with pd_snapshot_name_check and free). Container tiers: the
         * filesystem (writable layer stacked on the sandbox's own
         * template); microvm: memory and disk. New sandboxes start from it
         * with spec.template_name = name. Works on a running or paused
         * sandbox; leaves it as it was. */
        int (*snapshot)(struct pd_sandbox *sb, const char *name, struct pd_error *err);
        /* Start each of dst[0..n) as an independent copy of src's current
         * state (container tiers: the filesystem; microvm: memory and
         * disk). dst come from pd_sandbox_new with src's spec and are not
         * created yet. On failure the caller destroys every dst (destroy is
         * safe on a half-built sandbox). NULL: the sandbox layer forks by
         * snapshot + create (filesystem only). */
        int (*fork)(struct pd_sandbox *src, struct pd_sandbox *const *dst, unsigned n,
                    struct pd_error *err);
        /* Kill everything and remove every trace; safe on a half-built sandbox. */
        int (*destroy)(struct pd_sandbox *sb, struct pd_error *err);
        int (*stats)(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err);
        /* Re-attach to a sandbox created by an earlier process, from its record. */
        int (*adopt)(struct pd_sandbox *sb, struct pd_error *err);
};

extern const struct pd_tier_ops pd_tier_container;
extern const struct pd_tier_ops pd_tier_process;   /* src/tiers/process.c */
extern const struct pd_tier_ops pd_tier_supervised; /* src/tiers/container.c + src/jail/supervisor_launch.c */
extern const struct pd_tier_ops pd_tier_microvm;    /* src/tiers/microvm.c + src/vm/ */
