/* Per-sandbox cgroups, v2 (unified) or v1 (one hierarchy per controller).
 * Layout:  <root>/paddock-<instance>/<id>/{agent,work}
 *   agent: paddock-agent alone, with small limits of its own, so an OOM kill
 *          or fork bomb in the workload never takes it down (DESIGN §5);
 *   work:  every process the agent spawns, with the sandbox's limits.
 * The sandbox level holds the cpu limit and the freezer. In v1 only the
 * memory and pids hierarchies need the split (fewer directories to make and
 * remove on every start), and v1 memory has no sandbox level: there agent
 * and work are <id>.agent and <id>.work beside where <id> would be (a memory
 * cgroup with no limit of its own cost the kernel ~10-200 KiB per sandbox,
 * growing with the number of sandboxes: see pd_cgroup_init). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroupfs.h"
#include "lib/error.h"

#define PD_CG_MAX_CTRL 6
#define PD_AGENT_MEMORY (256ull << 20)
#define PD_AGENT_PIDS 256u

/* What a sandbox asks for; pd_cgroup_create turns it into the typed limits
 * of each level (jail/cgroup_limits.h) and writes them with the same writer
 * paddock-oci uses. */
struct pd_cgroup_limits {
        uint64_t memory_bytes;
        uint32_t pids;
        uint32_t millicpus;
        /* The agent's own memory limit (0: PD_AGENT_MEMORY). Files the agent
         * writes for the file API land on the tmpfs writable layer and are
         * charged to the agent, so this must cover that layer's size. */
        uint64_t agent_memory_bytes;
};

struct pd_cgroup {
        int version;                    /* 1 or 2; 0 = none */
        char rel[128];                  /* "paddock-<instance>/<id>" */
        unsigned n;                     /* hierarchies used */
        /* .split: has agent/ and work/ below the sandbox level; v1 cpu,
         * cpuacct, freezer act on the sandbox level only, so the agent
         * sits there itself */
        struct pd_cg_hier h[PD_CG_MAX_CTRL];
};

struct pd_cgroup_stats {
        uint64_t memory_peak;           /* bytes, workload */
        uint64_t memory_current;
        uint64_t cpu_ns;                /* whole sandbox */
        uint64_t oom_kills;             /* workload */
        uint64_t pids_max_events;       /* forks refused by the pids limit */
        uint64_t pids_current;
};

/* Detect the hierarchy (v2 if /sys/fs/cgroup is cgroup2, else v1) and fill cg. */
int pd_cgroup_init(struct pd_cgroup *cg, const char *instance, const char *id, struct pd_error *err);
int pd_cgroup_create(struct pd_cgroup *cg, const struct pd_cgroup_limits *lim, struct pd_error *err);
/* Open the cgroup.procs files of leaf ("agent" or "work") for writing; fds[]
 * gets one fd per hierarchy; returns how many. all: every hierarchy the
 * sandbox is in (leaf where it splits, the sandbox level elsewhere: v1
 * cpu, cpuacct, freezer), for a process that is not the agent's child
 * (QEMU, runsc). !all: the split hierarchies only, for the agent's own
 * children: they inherit the sandbox level from the agent, and each fd is
 * one more cgroup write per spawned command (a global kernel lock in v1). */
int pd_cgroup_open_procs(const struct pd_cgroup *cg, const char *leaf, bool all, int *fds, int max,
                         struct pd_error *err);
int pd_cgroup_attach(const struct pd_cgroup *cg, const char *leaf, pid_t pid, struct pd_error *err);
/* The directory of leaf ("agent", "work"; NULL: the sandbox level) in
 * hierarchy i, relative to its mount: the sandbox level where the
 * hierarchy does not split. */
const char *pd_cgroup_path(char *buf, size_t size, const struct pd_cgroup *cg, unsigned i, const char *leaf);
int pd_cgroup_stats(const struct pd_cgroup *cg, struct pd_cgroup_stats *st);
int pd_cgroup_freeze(const struct pd_cgroup *cg, bool frozen, struct pd_error *err);
/* Kill what is left and remove the directories. Missing is fine. */
int pd_cgroup_destroy(struct pd_cgroup *cg, struct pd_error *err);
void pd_cgroup_close(struct pd_cgroup *cg);
/* Remove every cgroup under paddock-<instance> (paddock gc). */
int pd_cgroup_gc(const char *instance, struct pd_error *err);
