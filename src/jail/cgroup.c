/* The sandbox tiers' cgroup layout (cgroup.h) on the shared cgroup
 * filesystem layer (cgroupfs.h) and limits writer (cgroup_limits.h). */
#include "jail/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail/cgroup_limits.h"
#include "lib/util.h"

/* What the layout uses in v1. */
#define V1_WANT                                                                                          \
        (PD_CG_BIT(PD_CG_MEMORY) | PD_CG_BIT(PD_CG_PIDS) | PD_CG_BIT(PD_CG_CPU) | PD_CG_BIT(PD_CG_CPUACCT) | \
         PD_CG_BIT(PD_CG_FREEZER))
/* Killing a sandbox's processes and removing its cgroups: the wait ends on
 * the kernel's event; this bounds a process stuck in the kernel. */
#define REMOVE_TIMEOUT_MS 5000
#define FREEZE_TIMEOUT_MS 5000

void pd_cgroup_close(struct pd_cgroup *cg)
{
        pd_cg_close(cg->h, cg->n);
        cg->n = 0;
}

int pd_cgroup_init(struct pd_cgroup *cg, const char *instance, const char *id, struct pd_error *err)
{
        memset(cg, 0, sizeof *cg);
        snprintf(cg->rel, sizeof cg->rel, "paddock-%s/%s", instance, id);
        int r = pd_cg_discover(cg->h, PD_CG_MAX_CTRL, V1_WANT, &cg->version, err);
        if (r < 0)
                return r;
        cg->n = (unsigned)r;
        /* memory and pids are what limits rest on: required */
        static const enum pd_cg_ctrl required[] = { PD_CG_MEMORY, PD_CG_PIDS };
        for (size_t i = 0; cg->version == 1 && i < PD_ARRAY_SIZE(required); i++)
                if (pd_cg_find(cg->h, cg->n, required[i]) < 0) {
                        pd_cgroup_close(cg);
                        return pd_error_setx(err, ENOENT, "cgroup v1 controller '%s' is not mounted",
                                             pd_cg_ctrl_name(required[i]));
                }
        for (unsigned i = 0; i < cg->n; i++) {
                struct pd_cg_hier *h = &cg->h[i];
                h->split = h->v2 || (h->ctrls & (PD_CG_BIT(PD_CG_MEMORY) | PD_CG_BIT(PD_CG_PIDS)));
                /* v1 memory has no sandbox level: its agent and work
                 * cgroups are siblings. Every memory cgroup costs the kernel
                 * a per-cgroup table that grows with the number of
                 * superblocks on the host (the shrinker bitmap: ~1 KiB per
                 * 64 of them), i.e. with the number of sandboxes; the
                 * sandbox level held no limit (cpu and freezer live in
                 * their own hierarchies). Not where memory shares a
                 * hierarchy with a controller the sandbox level uses. */
                h->flat = !h->v2 && (h->ctrls & PD_CG_BIT(PD_CG_MEMORY)) &&
                          !(h->ctrls & (PD_CG_BIT(PD_CG_CPU) | PD_CG_BIT(PD_CG_CPUACCT) | PD_CG_BIT(PD_CG_FREEZER)));
        }
        return 0;
}

static int find(const struct pd_cgroup *cg, enum pd_cg_ctrl c)
{
        return pd_cg_find(cg->h, cg->n, c);
}

/* "<rel>/<leaf>" (leaf NULL: rel). */
static const char *at(char *buf, size_t size, const struct pd_cgroup *cg, const char *leaf)
{
        snprintf(buf, size, "%s%s%s", cg->rel, leaf ? "/" : "", leaf ? leaf : "");
        return buf;
}

const char *pd_cgroup_path(char *buf, size_t size, const struct pd_cgroup *cg, unsigned i, const char *leaf)
{
        const struct pd_cg_hier *h = &cg->h[i];
        if (!h->split || !leaf)
                return at(buf, size, cg, NULL);
        snprintf(buf, size, "%s%s%s", cg->rel, h->flat ? "." : "/", leaf);
        return buf;
}

static int make_dirs(struct pd_cgroup *cg, struct pd_error *err)
{
        char p[256];
        int r;
        if (cg->version == 2) {
                /* Delegate the controllers down to our leaves. */
                char parent[64];
                snprintf(parent, sizeof parent, "%.*s", (int)(strchr(cg->rel, '/') - cg->rel), cg->rel);
                struct pd_cg_hier *h = &cg->h[0];
                if ((r = pd_cg_mkdir(h, parent, NULL, err)) < 0)
                        return r;
                (void)pd_cg_write(h, "", "cgroup.subtree_control", "+memory +pids +cpu", NULL);
                (void)pd_cg_write(h, parent, "cgroup.subtree_control", "+memory +pids +cpu", NULL);
                if ((r = pd_cg_mkdir(h, cg->rel, NULL, err)) < 0 ||
                    (r = pd_cg_write(h, cg->rel, "cgroup.subtree_control", "+memory +pids +cpu", err)) < 0)
                        return r;
        }
        for (unsigned i = 0; i < cg->n; i++) {
                if (!cg->h[i].flat && (r = pd_cg_mkdir(&cg->h[i], cg->rel, NULL, err)) < 0)
                        return r;
                if (cg->h[i].split && ((r = pd_cg_mkdir(&cg->h[i], pd_cgroup_path(p, sizeof p, cg, i, "agent"), NULL, err)) < 0 ||
                                       (r = pd_cg_mkdir(&cg->h[i], pd_cgroup_path(p, sizeof p, cg, i, "work"), NULL, err)) < 0))
                        return r;
        }
        return 0;
}

/* The limits of one level (leaf NULL: the sandbox level, which flat
 * hierarchies do not have), hierarchy by hierarchy: their paths differ. */
static int apply(const struct pd_cgroup *cg, const char *leaf, const struct pd_cg_limits *l, struct pd_error *err)
{
        char p[256];
        for (unsigned i = 0; i < cg->n; i++) {
                if (!leaf && cg->h[i].flat)
                        continue;
                int r = pd_cg_apply(&cg->h[i], 1, pd_cgroup_path(p, sizeof p, cg, i, leaf), l, NULL, NULL, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int pd_cgroup_create(struct pd_cgroup *cg, const struct pd_cgroup_limits *lim, struct pd_error *err)
{
        /* The workload: memory with no swap beyond it (memory + swap =
         * memory; absent without swap accounting: fine), its pids. */
        struct pd_cg_limits work = {
                .set = PD_CG_SET_MEM_LIMIT | PD_CG_SET_MEM_SWAP | PD_CG_SET_PIDS,
                .memory = { .limit = (int64_t)lim->memory_bytes, .swap = (int64_t)lim->memory_bytes },
                .pids = lim->pids,
        };
        struct pd_cg_limits agent = {
                .set = PD_CG_SET_MEM_LIMIT | PD_CG_SET_PIDS,
                .memory.limit = (int64_t)(lim->agent_memory_bytes ? lim->agent_memory_bytes : PD_AGENT_MEMORY),
                .pids = PD_AGENT_PIDS,
        };
        /* The whole sandbox: its cpu time (period: the kernel's 100 ms). */
        struct pd_cg_limits sandbox = {
                .set = PD_CG_SET_CPU_QUOTA,
                .cpu.quota = (int64_t)lim->millicpus * 100,
        };
        int r;
        if ((r = make_dirs(cg, err)) < 0 || (r = apply(cg, "work", &work, err)) < 0 ||
            (r = apply(cg, "agent", &agent, err)) < 0 || (r = apply(cg, NULL, &sandbox, err)) < 0) {
                pd_error_prefix(err, "cgroup %s", cg->rel);
                pd_cgroup_destroy(cg, NULL);
        }
        return r;
}

int pd_cgroup_open_procs(const struct pd_cgroup *cg, const char *leaf, bool all, int *fds, int max,
                         struct pd_error *err)
{
        int n = 0;
        for (unsigned i = 0; i < cg->n; i++) {
                /* Unsplit hierarchies: the agent's children inherit its cgroup. */
                if (!cg->h[i].split && !all)
                        continue;
                if (n == max) {
                        while (n > 0)
                                close(fds[--n]);
                        return pd_error_setx(err, E2BIG, "more cgroup hierarchies than %d", max);
                }
                char dir[256], path[272];
                snprintf(path, sizeof path, "%s/cgroup.procs", pd_cgroup_path(dir, sizeof dir, cg, i, leaf));
                int fd = openat(cg->h[i].rootfd, path, O_WRONLY | O_CLOEXEC);
                if (fd < 0) {
                        int r = pd_error_set(err, errno, "open cgroup '%s' (%s)", path, cg->h[i].name);
                        while (n > 0)
                                close(fds[--n]);
                        return r;
                }
                fds[n++] = fd;
        }
        return n;
}

int pd_cgroup_attach(const struct pd_cgroup *cg, const char *leaf, pid_t pid, struct pd_error *err)
{
        char p[256];
        for (unsigned i = 0; i < cg->n; i++) {
                int r = pd_cg_attach(&cg->h[i], pd_cgroup_path(p, sizeof p, cg, i, leaf), pid, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static uint64_t key_value(const char *text, const char *key)
{
        size_t kl = strlen(key);
        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (!strncmp(p, key, kl) && p[kl] == ' ')
                        return strtoull(p + kl + 1, NULL, 10);
        return 0;
}

/* Read <rel>/<leaf>/<file> of hierarchy hi: a number, or the value of key. */
static bool stat_read(const struct pd_cgroup *cg, int hi, const char *leaf, const char *file, const char *key,
                      uint64_t *out)
{
        char p[256], buf[4096];
        if (hi < 0 || pd_cg_read(&cg->h[hi], pd_cgroup_path(p, sizeof p, cg, (unsigned)hi, leaf), file, buf, sizeof buf) <= 0)
                return false;
        *out = key ? key_value(buf, key) : strtoull(buf, NULL, 10);
        return true;
}

int pd_cgroup_stats(const struct pd_cgroup *cg, struct pd_cgroup_stats *st)
{
        memset(st, 0, sizeof *st);
        if (cg->version == 2) {
                stat_read(cg, 0, "work", "memory.peak", NULL, &st->memory_peak);
                stat_read(cg, 0, "work", "memory.current", NULL, &st->memory_current);
                stat_read(cg, 0, "work", "memory.events", "oom_kill", &st->oom_kills);
                stat_read(cg, 0, "work", "pids.events", "max", &st->pids_max_events);
                stat_read(cg, 0, "work", "pids.current", NULL, &st->pids_current);
                if (stat_read(cg, 0, NULL, "cpu.stat", "usage_usec", &st->cpu_ns))
                        st->cpu_ns *= 1000;
                return 0;
        }
        int mem = find(cg, PD_CG_MEMORY), pids = find(cg, PD_CG_PIDS), acct = find(cg, PD_CG_CPUACCT);
        stat_read(cg, mem, "work", "memory.max_usage_in_bytes", NULL, &st->memory_peak);
        stat_read(cg, mem, "work", "memory.usage_in_bytes", NULL, &st->memory_current);
        stat_read(cg, mem, "work", "memory.oom_control", "oom_kill", &st->oom_kills);
        stat_read(cg, pids, "work", "pids.events", "max", &st->pids_max_events);
        stat_read(cg, pids, "work", "pids.current", NULL, &st->pids_current);
        stat_read(cg, acct, NULL, "cpuacct.usage", NULL, &st->cpu_ns);
        return 0;
}

int pd_cgroup_freeze(const struct pd_cgroup *cg, bool frozen, struct pd_error *err)
{
        int hi = find(cg, PD_CG_FREEZER);
        if (hi < 0)
                return pd_error_setx(err, ENOTSUP, "no freezer controller on this host");
        int r = pd_cg_freeze(&cg->h[hi], cg->rel, frozen, FREEZE_TIMEOUT_MS, err);
        if (r == -ETIMEDOUT)
                pd_error_setx(err, ETIMEDOUT, "cgroup %s did not freeze within 5 s", cg->rel);
        return r;
}

int pd_cgroup_destroy(struct pd_cgroup *cg, struct pd_error *err)
{
        int ret = 0;
        char p[256];
        for (unsigned i = 0; i < cg->n; i++) {
                /* Leaves first: the common case is one rmdir each (what
                 * fails here, the sandbox level's removal walks again).
                 * Flat hierarchies have no sandbox level: their leaves'
                 * errors count; the <id> removal after them only finds
                 * what a binary before the flat layout made (a sandbox
                 * adopted across an upgrade), and missing is fine. */
                const struct pd_cg_hier *h = &cg->h[i];
                int r = 0;
                if (h->split) {
                        int rw = pd_cg_remove(h, pd_cgroup_path(p, sizeof p, cg, i, "work"), REMOVE_TIMEOUT_MS, NULL);
                        int ra = pd_cg_remove(h, pd_cgroup_path(p, sizeof p, cg, i, "agent"), REMOVE_TIMEOUT_MS, NULL);
                        if (h->flat && (r = rw < 0 ? rw : ra) < 0 && ret == 0)
                                pd_error_setx(err, -r, "remove cgroup %s.{work,agent} (%s): %s", cg->rel, h->name,
                                              strerror(-r));
                }
                int r2 = pd_cg_remove(h, cg->rel, REMOVE_TIMEOUT_MS, ret == 0 && r == 0 ? err : NULL);
                if (r == 0)
                        r = r2;
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

int pd_cgroup_gc(const char *instance, struct pd_error *err)
{
        struct pd_cgroup cg;
        int r = pd_cgroup_init(&cg, instance, "x", err);
        if (r < 0)
                return r;
        char parent[64];
        snprintf(parent, sizeof parent, "paddock-%s", instance);
        int ret = 0;
        for (unsigned i = 0; i < cg.n; i++) {
                r = pd_cg_remove(&cg.h[i], parent, REMOVE_TIMEOUT_MS, ret == 0 ? err : NULL);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        pd_cgroup_close(&cg);
        return ret;
}
