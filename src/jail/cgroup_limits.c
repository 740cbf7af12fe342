#include "jail/cgroup_limits.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/util.h"

struct ctx {
        const struct pd_cg_hier *h;
        const char *path;
        pd_cg_warn_fn *warn;
        void *warn_ctx;
        struct pd_error *err;
};

/* A write that must take. */
static int put(const struct ctx *c, const char *file, const char *val)
{
        return pd_cg_write(c->h, c->path, file, val, c->err);
}

/* A write that may fail: reported as what, not applied. */
static void try_put(const struct ctx *c, const char *file, const char *val, const char *what)
{
        struct pd_error e = { 0 };
        if (pd_cg_write(c->h, c->path, file, val, &e) < 0 && c->warn)
                c->warn(c->warn_ctx, what, e.msg);
}

static void warn(const struct ctx *c, const char *what, const char *why)
{
        if (c->warn)
                c->warn(c->warn_ctx, what, why);
}

static const char *i64(char *buf, size_t size, int64_t v)
{
        snprintf(buf, size, "%" PRId64, v);
        return buf;
}

/* v2 writes "max" for no limit. */
static const char *i64_or_max(char *buf, size_t size, int64_t v)
{
        return v > 0 ? i64(buf, size, v) : "max";
}

static const struct { const char *v1, *v2, *what; } throttles[_PD_CG_THROTTLE_MAX] = {
        [PD_CG_READ_BPS] = { "blkio.throttle.read_bps_device", "rbps", "blockIO.throttleReadBpsDevice" },
        [PD_CG_WRITE_BPS] = { "blkio.throttle.write_bps_device", "wbps", "blockIO.throttleWriteBpsDevice" },
        [PD_CG_READ_IOPS] = { "blkio.throttle.read_iops_device", "riops", "blockIO.throttleReadIOPSDevice" },
        [PD_CG_WRITE_IOPS] = { "blkio.throttle.write_iops_device", "wiops", "blockIO.throttleWriteIOPSDevice" },
};

static int memory_v1(const struct ctx *c, const struct pd_cg_limits *l)
{
        char b[32];
        int r;
        if ((l->set & PD_CG_SET_MEM_LIMIT) && (r = put(c, "memory.limit_in_bytes", i64(b, sizeof b, l->memory.limit))) < 0)
                return r;
        if ((l->set & PD_CG_SET_MEM_RESERVATION) &&
            (r = put(c, "memory.soft_limit_in_bytes", i64(b, sizeof b, l->memory.reservation))) < 0)
                return r;
        /* Absent without swap accounting (swapaccount=1). */
        if (l->set & PD_CG_SET_MEM_SWAP)
                try_put(c, "memory.memsw.limit_in_bytes", i64(b, sizeof b, l->memory.swap), "memory.swap");
        if (l->set & PD_CG_SET_MEM_KERNEL_TCP)
                try_put(c, "memory.kmem.tcp.limit_in_bytes", i64(b, sizeof b, l->memory.kernel_tcp), "memory.kernelTCP");
        /* Since Linux 6.1 the kernel accepts and ignores a kmem limit (runc
         * no longer sets it); written for older kernels. */
        if (l->set & PD_CG_SET_MEM_KERNEL)
                try_put(c, "memory.kmem.limit_in_bytes", i64(b, sizeof b, l->memory.kernel), "memory.kernel");
        if (l->set & PD_CG_SET_MEM_SWAPPINESS)
                (void)pd_cg_write(c->h, c->path, "memory.swappiness", i64(b, sizeof b, l->memory.swappiness), NULL);
        if ((l->set & PD_CG_SET_MEM_NO_OOM_KILL) && (r = put(c, "memory.oom_control", "1")) < 0)
                return r;
        return 0;
}

static int memory_v2(const struct ctx *c, const struct pd_cg_limits *l)
{
        char b[32];
        int r;
        if ((l->set & PD_CG_SET_MEM_LIMIT) && (r = put(c, "memory.max", i64_or_max(b, sizeof b, l->memory.limit))) < 0)
                return r;
        if ((l->set & PD_CG_SET_MEM_RESERVATION) && (r = put(c, "memory.low", i64(b, sizeof b, l->memory.reservation))) < 0)
                return r;
        if (l->set & PD_CG_SET_MEM_SWAP) {
                /* v1's memsw counts memory + swap; v2's swap.max swap alone. */
                int64_t v = l->memory.swap, lim = (l->set & PD_CG_SET_MEM_LIMIT) ? l->memory.limit : -1;
                if (v < 0)
                        snprintf(b, sizeof b, "max");
                else
                        i64(b, sizeof b, lim > 0 && v >= lim ? v - lim : v);
                try_put(c, "memory.swap.max", b, "memory.swap");
        }
        return 0;
}

static int cpu_v1(const struct ctx *c, const struct pd_cg_limits *l)
{
        char b[32];
        int r;
        if ((l->set & PD_CG_SET_CPU_SHARES) && (r = put(c, "cpu.shares", i64(b, sizeof b, (int64_t)l->cpu.shares))) < 0)
                return r;
        if ((l->set & PD_CG_SET_CPU_PERIOD) && l->cpu.period > 0 &&
            (r = put(c, "cpu.cfs_period_us", i64(b, sizeof b, l->cpu.period))) < 0)
                return r;
        if ((l->set & PD_CG_SET_CPU_QUOTA) && l->cpu.quota != 0 &&
            (r = put(c, "cpu.cfs_quota_us", i64(b, sizeof b, l->cpu.quota))) < 0)
                return r;
        return 0;
}

static int cpuset(const struct ctx *c, const struct pd_cg_limits *l)
{
        int r;
        if (l->cpu.cpus && *l->cpu.cpus && (r = put(c, "cpuset.cpus", l->cpu.cpus)) < 0)
                return r;
        if (l->cpu.mems && *l->cpu.mems && (r = put(c, "cpuset.mems", l->cpu.mems)) < 0)
                return r;
        return 0;
}

static int cpu_v2(const struct ctx *c, const struct pd_cg_limits *l)
{
        char b[64];
        int r;
        if (l->set & PD_CG_SET_CPU_SHARES) {
                /* shares 2..262144 onto weight 1..10000, as runc and crun map it */
                uint64_t s = l->cpu.shares < 2 ? 2 : l->cpu.shares;
                snprintf(b, sizeof b, "%" PRIu64, 1 + ((s - 2) * 9999) / 262142);
                if ((r = put(c, "cpu.weight", b)) < 0)
                        return r;
        }
        if (l->set & (PD_CG_SET_CPU_QUOTA | PD_CG_SET_CPU_PERIOD)) {
                int64_t q = (l->set & PD_CG_SET_CPU_QUOTA) ? l->cpu.quota : 0;
                int64_t p = (l->set & PD_CG_SET_CPU_PERIOD) ? l->cpu.period : 100000;
                if (q > 0)
                        snprintf(b, sizeof b, "%" PRId64 " %" PRId64, q, p);
                else
                        snprintf(b, sizeof b, "max %" PRId64, p);
                if ((r = put(c, "cpu.max", b)) < 0)
                        return r;
        }
        return cpuset(c, l);
}

static int pids(const struct ctx *c, const struct pd_cg_limits *l)
{
        char b[32];
        return (l->set & PD_CG_SET_PIDS) ? put(c, "pids.max", i64_or_max(b, sizeof b, l->pids)) : 0;
}

static int devices_v1(const struct ctx *c, const struct pd_cg_limits *l)
{
        for (size_t i = 0; i < l->n_devices; i++) {
                const struct pd_cg_device *d = &l->devices[i];
                char mj[24] = "*", mn[24] = "*", rule[96];
                if (d->major >= 0)
                        i64(mj, sizeof mj, d->major);
                if (d->minor >= 0)
                        i64(mn, sizeof mn, d->minor);
                snprintf(rule, sizeof rule, "%c %s:%s %s", d->type, mj, mn, d->access);
                int r = put(c, d->allow ? "devices.allow" : "devices.deny", rule);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void blkio(const struct ctx *c, const struct pd_cg_limits *l, bool v2)
{
        char b[96];
        if (l->set & PD_CG_SET_BLKIO_WEIGHT) {
                if (v2)
                        snprintf(b, sizeof b, "default %" PRId64, l->blkio.weight);
                else
                        i64(b, sizeof b, l->blkio.weight);
                try_put(c, v2 ? "io.weight" : "blkio.weight", b, "blockIO.weight");
        }
        for (size_t i = 0; i < l->blkio.n_weight_dev; i++) {
                const struct pd_cg_blkio_dev *d = &l->blkio.weight_dev[i];
                snprintf(b, sizeof b, "%" PRIu32 ":%" PRIu32 " %" PRId64, d->major, d->minor, d->value);
                try_put(c, v2 ? "io.weight" : "blkio.weight_device", b, "blockIO.weightDevice");
        }
        for (unsigned k = 0; k < _PD_CG_THROTTLE_MAX; k++)
                for (size_t i = 0; i < l->blkio.n_throttle[k]; i++) {
                        const struct pd_cg_blkio_dev *d = &l->blkio.throttle[k][i];
                        if (v2)
                                snprintf(b, sizeof b, "%" PRIu32 ":%" PRIu32 " %s=%" PRId64, d->major, d->minor,
                                         throttles[k].v2, d->value);
                        else
                                snprintf(b, sizeof b, "%" PRIu32 ":%" PRIu32 " %" PRId64, d->major, d->minor, d->value);
                        try_put(c, v2 ? "io.max" : throttles[k].v1, b, throttles[k].what);
                }
}

static void hugepages(const struct ctx *c, const struct pd_cg_limits *l, bool v2)
{
        for (size_t i = 0; i < l->n_hugepages; i++) {
                char file[64], b[32];
                snprintf(file, sizeof file, "hugetlb.%s.%s", l->hugepages[i].size, v2 ? "max" : "limit_in_bytes");
                try_put(c, file, i64(b, sizeof b, l->hugepages[i].limit), "hugepageLimits");
        }
}

static void net_cls(const struct ctx *c, const struct pd_cg_limits *l)
{
        char b[32];
        if (l->set & PD_CG_SET_NET_CLASSID)
                try_put(c, "net_cls.classid", i64(b, sizeof b, l->net.classid), "network.classID");
}

static void net_prio(const struct ctx *c, const struct pd_cg_limits *l)
{
        for (size_t i = 0; i < l->net.n_prios; i++) {
                char b[48];
                snprintf(b, sizeof b, "%s %" PRIu32, l->net.prios[i].ifname, l->net.prios[i].prio);
                try_put(c, "net_prio.ifpriomap", b, "network.priorities");
        }
}

static int unified(const struct ctx *c, const struct pd_cg_limits *l)
{
        for (size_t i = 0; i < l->n_unified; i++) {
                const char *k = l->unified[i].key;
                /* A key names a file of this cgroup, nothing else. */
                if (!*k || strchr(k, '/') || strstr(k, ".."))
                        return pd_error_setx(c->err, EINVAL, "linux.resources.unified: bad key '%s'", k);
                int r = put(c, k, l->unified[i].value);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int apply_v2(const struct ctx *c, const struct pd_cg_limits *l)
{
        int r;
        if ((r = memory_v2(c, l)) < 0 || (r = cpu_v2(c, l)) < 0 || (r = pids(c, l)) < 0)
                return r;
        if (l->n_devices)
                warn(c, "devices", "not enforced on cgroup v2 by paddock (needs a BPF program); "
                     "device nodes are limited to those the config creates");
        if ((r = unified(c, l)) < 0)
                return r;
        blkio(c, l, true);
        hugepages(c, l, true);
        if (l->set & PD_CG_SET_NET_CLASSID)
                warn(c, "network.classID", "cgroup v2 has no net_cls");
        if (l->net.n_prios)
                warn(c, "network.priorities", "cgroup v2 has no net_prio");
        return 0;
}

static int apply_v1(const struct ctx *c, const struct pd_cg_limits *l)
{
        uint32_t m = c->h->ctrls;
        int r;
        if ((m & PD_CG_BIT(PD_CG_MEMORY)) && (r = memory_v1(c, l)) < 0)
                return r;
        if ((m & PD_CG_BIT(PD_CG_CPU)) && (r = cpu_v1(c, l)) < 0)
                return r;
        if ((m & PD_CG_BIT(PD_CG_CPUSET)) && (r = cpuset(c, l)) < 0)
                return r;
        if ((m & PD_CG_BIT(PD_CG_PIDS)) && (r = pids(c, l)) < 0)
                return r;
        if ((m & PD_CG_BIT(PD_CG_DEVICES)) && (r = devices_v1(c, l)) < 0)
                return r;
        if (m & PD_CG_BIT(PD_CG_BLKIO))
                blkio(c, l, false);
        if (m & PD_CG_BIT(PD_CG_HUGETLB))
                hugepages(c, l, false);
        if (m & PD_CG_BIT(PD_CG_NET_CLS))
                net_cls(c, l);
        if (m & PD_CG_BIT(PD_CG_NET_PRIO))
                net_prio(c, l);
        return 0;
}

/* v1: what is asked of a controller this host does not mount. */
static void missing_v1(const struct ctx *c, const struct pd_cg_hier *h, unsigned n, const struct pd_cg_limits *l)
{
        static const struct { enum pd_cg_ctrl ctrl; const char *what; } need[] = {
                { PD_CG_BLKIO, "blockIO" }, { PD_CG_HUGETLB, "hugepageLimits" }, { PD_CG_NET_CLS, "network.classID" },
                { PD_CG_NET_PRIO, "network.priorities" }, { PD_CG_DEVICES, "devices" },
        };
        bool asked[] = {
                (l->set & PD_CG_SET_BLKIO_WEIGHT) || l->blkio.n_weight_dev || l->blkio.n_throttle[0] ||
                        l->blkio.n_throttle[1] || l->blkio.n_throttle[2] || l->blkio.n_throttle[3],
                l->n_hugepages > 0, (l->set & PD_CG_SET_NET_CLASSID) != 0, l->net.n_prios > 0, l->n_devices > 0,
        };
        for (size_t i = 0; i < PD_ARRAY_SIZE(need); i++)
                if (asked[i] && pd_cg_find(h, n, need[i].ctrl) < 0) {
                        char why[64];
                        snprintf(why, sizeof why, "no %s cgroup controller on this host", pd_cg_ctrl_name(need[i].ctrl));
                        warn(c, need[i].what, why);
                }
}

int pd_cg_apply(const struct pd_cg_hier *h, unsigned n, const char *path, const struct pd_cg_limits *l,
                pd_cg_warn_fn *warn_fn, void *warn_ctx, struct pd_error *err)
{
        struct ctx c = { .path = path, .warn = warn_fn, .warn_ctx = warn_ctx, .err = err };
        if (n > 0 && !h[0].v2 && l->n_unified)
                return pd_error_setx(err, EINVAL, "linux.resources.unified needs cgroup v2; this host has v1");
        for (unsigned i = 0; i < n; i++) {
                c.h = &h[i];
                int r = h[i].v2 ? apply_v2(&c, l) : apply_v1(&c, l);
                if (r < 0)
                        return r;
        }
        if (n > 0 && !h[0].v2)
                missing_v1(&c, h, n, l);
        return 0;
}
