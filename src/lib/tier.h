/* The tier-driver interface (DESIGN §2). Every isolation tier implements
 * these operations; nothing above this interface knows which tier it talks
 * to. A driver may leave an operation NULL when the tier cannot do it; the
 * sandbox layer then answers ENOTSUP with a message naming the tier. */
#pragma once
#include <stdint.h>

#include "error.h"

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

struct pd_tier_ops {
        const char *name;
        /* Build the sandbox and start its agent; on success the agent listens
         * on sb->socket_path and sb->agent_pid/agent_pidfd are set. */
        int (*create)(struct pd_sandbox *sb, struct pd_error *err);
        /* A new connection to the agent (CLOEXEC fd). */
        int (*connect)(struct pd_sandbox *sb, struct pd_error *err);
        int (*pause)(struct pd_sandbox *sb, struct pd_error *err);
        int (*resume)(struct pd_sandbox *sb, struct pd_error *err);
        int (*snapshot)(struct pd_sandbox *sb, const char *name, struct pd_error *err);
        /* Kill everything and remove every trace; safe on a half-built sandbox. */
        int (*destroy)(struct pd_sandbox *sb, struct pd_error *err);
        int (*stats)(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err);
        /* Re-attach to a sandbox created by an earlier process, from its record. */
        int (*adopt)(struct pd_sandbox *sb, struct pd_error *err);
};

extern const struct pd_tier_ops pd_tier_container;
extern const struct pd_tier_ops pd_tier_process;   /* src/tiers/process.c */
extern const struct pd_tier_ops pd_tier_supervised; /* src/tiers/container.c + src/jail/supervisor.c */
