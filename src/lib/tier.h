/* The tier-driver interface (DESIGN §2). Every isolation tier implements
 * these operations; nothing above this interface knows which tier it talks
 * to. A driver may leave an operation NULL when the tier cannot do it; the
 * sandbox layer then answers ENOTSUP with a message naming the tier.
 * Tiers are looked up in one table (lib/tier_list.h, lib/tier.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/spec.h"
#include "lib/tier_list.h"

struct pd_sandbox;
struct pd_state;
struct pd_record;
struct pd_netpol;

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
        PD_PAUSE_FILES,         /* keep the filesystem only: processes end, resume is a fresh boot
                                   (E2B's keepMemory: false) */
};

/* What a tier can do beyond the basics, for the layers above to decide
 * without naming tiers. */
#define PD_TIER_PAUSE_DISK      (1u << 0)       /* pause_to_disk works; resumes after a reboot */
#define PD_TIER_SNAPSHOT_MEMORY (1u << 1)       /* snapshots and forks carry memory, not files only:
                                                   its snapshots start on this tier only */
#define PD_TIER_OWN_TEMPLATES   (1u << 2)       /* starts from its own base template or its own
                                                   snapshots only (an image, not any tree) */
#define PD_TIER_POOL_WARMUP     (1u << 3)       /* a fresh sandbox runs its first command slowly:
                                                   warm pools run one before handing it out */
#define PD_TIER_POLICY_FILE     (1u << 4)       /* takes spec.policy_file (per-path / per-address rules) */

/* A sandbox's network as its tier reports it (net_info). */
struct pd_net_info {
        char *policy_json;              /* the policy in force, docs/network.md (malloc'd) */
        bool have_drops;
        uint64_t dropped_packets, dropped_bytes;        /* what the kernel dropped so far */
        /* what egress can do here (docs/network.md, "The default uplink"):
         * the uplink, the resolvers, and why nothing leaves ("" when it can) */
        bool have_egress;
        char egress_uplink[32];
        char egress_resolvers[256];
        char egress_problem[384];
};

/* Facts about one sandbox that only its tier knows (describe). */
struct pd_tier_info {
        char accel[8];                  /* a guest's CPU: "kvm", "tcg"; "" if not a guest */
};

struct pd_tier_ops {
        const char *name;
        unsigned caps;          /* PD_TIER_* */
        /* What encloses the code on this tier, one line (`paddock tiers`,
         * GET /api/v1/tiers). */
        const char *isolates;
        /* Can this host run it: 1 (why says with what: Landlock ABI, runsc
         * and platform, QEMU and guest kernel) or 0 (why says what is
         * missing). NULL: always. Cheap: no sandbox is started. */
        int (*host_check)(char *why, size_t size);
        /* The least memory limit a sandbox of the tier can start with
         * (0: no floor of its own): refused up front, with this figure,
         * rather than a guest that never boots. */
        uint64_t memory_min;
        /* Bytes of tier-private state (sb->tier_data) the sandbox layer
         * allocates, zeroed, with every sandbox object of this tier: the
         * jail's handles (cgroup, uid range) live there, not in struct
         * pd_sandbox. */
        size_t data_size;
        /* Add to / read back from the sandbox's record (<dir>/record) what
         * teardown by another process needs (gc, a new server); load also
         * reopens handles (cgroups). NULL: nothing of its own. */
        void (*save)(const struct pd_sandbox *sb, struct pd_record *rec);
        void (*load)(struct pd_sandbox *sb, const struct pd_record *rec);
        /* Release the handles this object holds (not the sandbox): fds. */
        void (*close)(struct pd_sandbox *sb);
        /* Remove whatever of this state dir's the tier may have left that
         * the records missed (a crash between steps): cgroups, uid ranges,
         * saved guests. pd_gc calls each distinct gc once. */
        int (*gc)(struct pd_state *st, struct pd_error *err);
        /* The network in force (-ENOENT: the sandbox has none), and a live
         * change of its policy (new connections follow it at once). NULL
         * where the tier has no network of its own (mode none only). */
        int (*net_info)(struct pd_sandbox *sb, struct pd_net_info *out, struct pd_error *err);
        int (*net_update)(struct pd_sandbox *sb, const struct pd_netpol *pol, struct pd_error *err);
        /* NULL: nothing to tell (struct pd_tier_info zeroed). */
        void (*describe)(const struct pd_sandbox *sb, struct pd_tier_info *out);
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
        /* Keep the filesystem only: every process ends, the memory is
         * released; resume boots the sandbox afresh on that filesystem.
         * NULL where the tier cannot. */
        int (*pause_files)(struct pd_sandbox *sb, struct pd_error *err);
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
        /* End every process of the sandbox and nothing more: its mounts,
         * network, cgroups and directory (with the record) stay for
         * destroy, which may run later, from another thread or another
         * process (a server answers a delete after stop and tears down
         * after the answer; a crash leaves a stray that adoption or gc
         * finishes). NULL: destroy does it all, at once. */
        int (*stop)(struct pd_sandbox *sb, struct pd_error *err);
        /* Kill everything and remove every trace; safe on a half-built
         * sandbox, and after stop. */
        int (*destroy)(struct pd_sandbox *sb, struct pd_error *err);
        int (*stats)(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err);
        /* Re-attach to a sandbox created by an earlier process, from its record. */
        int (*adopt)(struct pd_sandbox *sb, struct pd_error *err);
};

/* pd_tier_process (src/tiers/process.c), pd_tier_container and
 * pd_tier_supervised (src/tiers/container.c + src/jail/supervisor_launch.c),
 * pd_tier_microvm (src/tiers/microvm.c + src/vm/): one per tier_list.h line. */
#define PD_TIER_EXTERN_(E, name) extern const struct pd_tier_ops pd_tier_##name;
PD_TIERS(PD_TIER_EXTERN_)
#undef PD_TIER_EXTERN_

/* The driver of a tier (NULL if out of range), and its capabilities. */
const struct pd_tier_ops *pd_tier_find(enum pd_isolation iso);
unsigned pd_tier_caps(enum pd_isolation iso);
/* 0, or -EINVAL with a message naming the tier's minimum when memory_bytes
 * is below it (the CLI's --memory and the API's memory_mb say MiB). */
int pd_tier_check_memory(enum pd_isolation iso, uint64_t memory_bytes, struct pd_error *err);
void pd_net_info_clear(struct pd_net_info *i);

/* The last figures `paddock tiers --measure` took on a state dir
 * (<state>/tiers.measured): the p50 of `paddock run --isolation T -- true`
 * in ms and when (unix seconds). Read by GET /api/v1/tiers, which measures
 * nothing itself. get: 0, or -ENOENT when the tier was never measured. */
int pd_tier_measured_save(int state_dirfd, enum pd_isolation iso, double run_p50_ms, struct pd_error *err);
int pd_tier_measured_get(int state_dirfd, enum pd_isolation iso, double *run_p50_ms, long long *when);
