/* The cgroup filesystem: which hierarchies this host mounts, and what both
 * users of cgroups do with a cgroup directory in them. The users are the
 * sandbox tiers' layout (jail/cgroup.c: paddock-<instance>/<id>/{agent,work}
 * in the memory, pids, cpu, cpuacct and freezer hierarchies) and
 * paddock-oci's containers (src/oci/cgroup.c: linux.cgroupsPath in every
 * hierarchy, as runc does). Limits are written by jail/cgroup_limits.h.
 *
 * v2: one unified tree at /sys/fs/cgroup. v1: one tree per mount of
 * cgroupfs, each with its controllers ("cpu,cpuacct") or a name
 * ("name=systemd"); a cgroup2 mount beside them (hybrid) is not used, as
 * before. Every operation is relative to the O_PATH fd of a hierarchy's
 * root; a cgroup's path is relative to it ("paddock-x/id", "a/b"). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/error.h"

enum pd_cg_ctrl {
        PD_CG_CPU, PD_CG_CPUACCT, PD_CG_CPUSET, PD_CG_MEMORY, PD_CG_DEVICES, PD_CG_FREEZER,
        PD_CG_NET_CLS, PD_CG_NET_PRIO, PD_CG_BLKIO, PD_CG_PERF_EVENT, PD_CG_HUGETLB, PD_CG_PIDS,
        PD_CG_RDMA, PD_CG_MISC, PD_CG_IO,
        _PD_CG_CTRL_MAX
};
#define PD_CG_BIT(c) (1u << (c))
#define PD_CG_ALL ((1u << _PD_CG_CTRL_MAX) - 1)
/* pd_cg_discover's want: every hierarchy, named ones (no controller) too. */
#define PD_CG_EVERY 0xffffffffu

/* The name the kernel gives a controller ("memory"). */
const char *pd_cg_ctrl_name(enum pd_cg_ctrl c);

struct pd_cg_hier {
        char name[32];                  /* v1: its first controller or "name=..."; v2: "unified" */
        char mnt[96];                   /* its mount point */
        int rootfd;                     /* O_PATH of the mount point */
        uint32_t ctrls;                 /* PD_CG_BIT()s; v2: PD_CG_ALL */
        bool v2;
        bool split;                     /* jail/cgroup.c's layout: has agent/ and work/ */
        bool flat;                      /* jail/cgroup.c's layout: ... as <id>.agent, <id>.work beside <id> */
};

/* Fill h[0..max) with the hierarchies that have any controller in want (or
 * every one: PD_CG_EVERY), in mount order, one entry per hierarchy even
 * where it is mounted twice; *version gets 2 or 1. Returns how many (0: no
 * cgroupfs at all), or -errno. */
int pd_cg_discover(struct pd_cg_hier *h, unsigned max, uint32_t want, int *version, struct pd_error *err);
void pd_cg_close(struct pd_cg_hier *h, unsigned n);
/* Index of the first hierarchy with controller c, or -1. */
int pd_cg_find(const struct pd_cg_hier *h, unsigned n, enum pd_cg_ctrl c);

/* mkdir -p of path in h; the leaf is tried first (the parents usually
 * exist). A new v1 cpuset inherits its parent's cpus and mems (it refuses
 * tasks while empty). v2: delegate, if set ("+memory +pids"), is written to
 * the cgroup.subtree_control of every directory made on the way. */
int pd_cg_mkdir(const struct pd_cg_hier *h, const char *path, const char *delegate, struct pd_error *err);
/* Write val to <path>/<file>; the error names the file. */
int pd_cg_write(const struct pd_cg_hier *h, const char *path, const char *file, const char *val,
                struct pd_error *err);
/* Read <path>/<file> into buf (NUL-terminated): its length or -errno. */
ssize_t pd_cg_read(const struct pd_cg_hier *h, const char *path, const char *file, char *buf, size_t size);
/* Move pid into path. */
int pd_cg_attach(const struct pd_cg_hier *h, const char *path, pid_t pid, struct pd_error *err);
/* The processes in path (*out: malloc'd, free it). _at: in the cgroup
 * directory dirfd, what names it in errors. */
int pd_cg_procs(const struct pd_cg_hier *h, const char *path, pid_t **out, size_t *n, struct pd_error *err);
int pd_cg_procs_at(int dirfd, const char *what, pid_t **out, size_t *n, struct pd_error *err);

/* Freeze or thaw path (h: the v1 freezer hierarchy, or v2's) and, when
 * freezing, return once every task is frozen: v2 waits for "frozen 1" in
 * cgroup.events (an event); v1 freezes sleeping tasks within the write and
 * has no event for the rest (see cgroupfs.c). ETIMEDOUT after timeout_ms. */
int pd_cg_freeze(const struct pd_cg_hier *h, const char *path, bool frozen, int timeout_ms, struct pd_error *err);
/* Whether path is frozen: v1 freezer.state says FROZEN; v2 cgroup.freeze
 * is 1 (asked to freeze: pd_cg_freeze waited for the rest). */
bool pd_cg_frozen(const struct pd_cg_hier *h, const char *path);

/* Remove path and every cgroup below it, killing what runs there and
 * waiting (on events: pidfds, v2's cgroup.events) until it is gone; up to
 * timeout_ms. A missing path is fine. A frozen v1 cgroup's tasks cannot
 * die: thaw it first. */
int pd_cg_remove(const struct pd_cg_hier *h, const char *path, int timeout_ms, struct pd_error *err);
