/* What a cgroup is limited to, typed, and the one writer that puts it into
 * the cgroup filesystem on v1 or v2.
 *
 * Filled by paddock-oci from config.json's linux.resources (src/oci/
 * resources.c, which validates it first) and by the sandbox tiers' layout
 * (jail/cgroup.c: memory, swap and pids of the workload and the agent, the
 * sandbox's cpu). Values keep the OCI runtime spec's units and v1 meanings
 * (swap counts memory plus swap, cpu shares are 2..262144); the writer
 * converts them for v2. A scalar is written only when its PD_CG_SET_* bit
 * is in .set, a list only when it has entries. Lists and strings are
 * borrowed: whoever fills the struct keeps them alive. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jail/cgroupfs.h"
#include "lib/error.h"

enum {
        PD_CG_SET_MEM_LIMIT = 1u << 0,
        PD_CG_SET_MEM_RESERVATION = 1u << 1,
        PD_CG_SET_MEM_SWAP = 1u << 2,
        PD_CG_SET_MEM_KERNEL = 1u << 3,
        PD_CG_SET_MEM_KERNEL_TCP = 1u << 4,
        PD_CG_SET_MEM_SWAPPINESS = 1u << 5,
        PD_CG_SET_MEM_NO_OOM_KILL = 1u << 6,
        PD_CG_SET_CPU_SHARES = 1u << 7,
        PD_CG_SET_CPU_QUOTA = 1u << 8,
        PD_CG_SET_CPU_PERIOD = 1u << 9,
        PD_CG_SET_PIDS = 1u << 10,
        PD_CG_SET_BLKIO_WEIGHT = 1u << 11,
        PD_CG_SET_NET_CLASSID = 1u << 12,
};

/* One devices-controller rule (v1 devices.allow / devices.deny). */
struct pd_cg_device {
        bool allow;
        char type;                      /* 'a' (all), 'c' or 'b' */
        int64_t major, minor;           /* -1: any ('*') */
        char access[4];                 /* some of "rwm" */
};

/* A block device and a weight or a rate (bytes or operations a second). */
struct pd_cg_blkio_dev {
        uint32_t major, minor;
        int64_t value;
};

enum pd_cg_throttle { PD_CG_READ_BPS, PD_CG_WRITE_BPS, PD_CG_READ_IOPS, PD_CG_WRITE_IOPS, _PD_CG_THROTTLE_MAX };

struct pd_cg_hugepage {
        char size[12];                  /* "2MB", "1GB": digits and a unit (it names a file) */
        int64_t limit;                  /* bytes */
};

struct pd_cg_ifprio {
        char ifname[16];
        uint32_t prio;
};

/* A v2 interface file and its value ("memory.high", "1G"). */
struct pd_cg_kv {
        const char *key, *value;
};

struct pd_cg_limits {
        uint32_t set;                   /* PD_CG_SET_* */
        struct {
                int64_t limit;          /* bytes; <= 0: none (v2 "max") */
                int64_t reservation;    /* v1 soft limit, v2 memory.low */
                int64_t swap;           /* memory + swap, bytes; < 0: none */
                int64_t kernel;         /* v1 only */
                int64_t kernel_tcp;     /* v1 only */
                uint32_t swappiness;    /* 0..100, v1 only */
        } memory;                       /* PD_CG_SET_MEM_NO_OOM_KILL: v1 oom_control */
        struct {
                uint64_t shares;        /* 2..262144 (v2: converted to a weight) */
                int64_t quota;          /* µs a period; <= 0: none */
                int64_t period;         /* µs (v2 default 100000) */
                const char *cpus;       /* cpuset lists ("0-3"); NULL or "": unchanged */
                const char *mems;
        } cpu;
        int64_t pids;                   /* <= 0: none */
        struct {
                int64_t weight;
                const struct pd_cg_blkio_dev *weight_dev;
                size_t n_weight_dev;
                const struct pd_cg_blkio_dev *throttle[_PD_CG_THROTTLE_MAX];
                size_t n_throttle[_PD_CG_THROTTLE_MAX];
        } blkio;
        const struct pd_cg_hugepage *hugepages;
        size_t n_hugepages;
        struct {
                uint32_t classid;       /* v1 net_cls */
                const struct pd_cg_ifprio *prios;       /* v1 net_prio */
                size_t n_prios;
        } net;
        const struct pd_cg_device *devices;     /* in order; v1 only */
        size_t n_devices;
        const struct pd_cg_kv *unified; /* v2 only */
        size_t n_unified;
};

/* A limit the writer could not apply where that is not fatal: the host
 * lacks the controller or the feature (swap accounting, kernel memory,
 * blkio, hugetlb, net_cls, net_prio, v2 device rules). what names the
 * field as the OCI spec does ("memory.swap", "hugepageLimits"). */
typedef void pd_cg_warn_fn(void *ctx, const char *what, const char *why);

/* Write l to the cgroup at path in the hierarchies h[0..n): v2 all of it in
 * the one tree; v1 each controller's part where that controller is. The
 * memory limit and reservation, oom_control, cpu, cpuset, pids, devices and
 * v2 unified files must take, or the call fails; the rest is reported
 * through warn (NULL: silently skipped). */
int pd_cg_apply(const struct pd_cg_hier *h, unsigned n, const char *path, const struct pd_cg_limits *l,
                pd_cg_warn_fn *warn, void *ctx, struct pd_error *err);
