#include "jail/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "lib/util.h"

#define CG_ROOT "/sys/fs/cgroup"

static const char *const v1_ctrls[] = { "memory", "pids", "cpu", "cpuacct", "freezer" };

void pd_cgroup_close(struct pd_cgroup *cg)
{
        for (unsigned i = 0; i < cg->n; i++)
                if (cg->h[i].rootfd >= 0)
                        close(cg->h[i].rootfd);
        cg->n = 0;
}

static int detect(struct pd_cgroup *cg, struct pd_error *err)
{
        struct statfs sf;
        if (statfs(CG_ROOT, &sf) < 0)
                return pd_error_set(err, errno, "statfs %s (is cgroupfs mounted?)", CG_ROOT);
        cg->n = 0;
        if (sf.f_type == CGROUP2_SUPER_MAGIC) {
                cg->version = 2;
                cg->h[0].name = "unified";
                cg->h[0].split = true;
                cg->h[0].rootfd = open(CG_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (cg->h[0].rootfd < 0)
                        return pd_error_set(err, errno, "open %s", CG_ROOT);
                cg->n = 1;
                return 0;
        }
        cg->version = 1;
        for (size_t i = 0; i < PD_ARRAY_SIZE(v1_ctrls); i++) {
                char path[128];
                snprintf(path, sizeof path, CG_ROOT "/%s", v1_ctrls[i]);
                int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0) {
                        /* memory and pids are what limits rest on: required */
                        if (i < 2) {
                                int r = pd_error_set(err, errno, "cgroup v1 controller '%s' at %s",
                                                     v1_ctrls[i], path);
                                pd_cgroup_close(cg);
                                return r;
                        }
                        continue;
                }
                cg->h[cg->n].name = v1_ctrls[i];
                cg->h[cg->n].rootfd = fd;
                cg->h[cg->n].split = i < 2;     /* memory, pids */
                cg->n++;
        }
        return 0;
}

int pd_cgroup_init(struct pd_cgroup *cg, const char *instance, const char *id, struct pd_error *err)
{
        memset(cg, 0, sizeof *cg);
        snprintf(cg->rel, sizeof cg->rel, "paddock-%s/%s", instance, id);
        return detect(cg, err);
}

static int find(const struct pd_cgroup *cg, const char *name)
{
        for (unsigned i = 0; i < cg->n; i++)
                if (!strcmp(cg->h[i].name, name) || cg->version == 2)
                        return (int)i;
        return -1;
}

/* Write s to <hierarchy>/<rel>/<sub>/<file>. */
static int cg_write(const struct pd_cgroup *cg, int hi, const char *sub, const char *file,
                    const char *s, struct pd_error *err)
{
        char path[256];
        snprintf(path, sizeof path, "%s%s%s/%s", cg->rel, sub ? "/" : "", sub ? sub : "", file);
        return pd_write_file_at(cg->h[hi].rootfd, path, s, err);
}

static ssize_t cg_read(const struct pd_cgroup *cg, int hi, const char *sub, const char *file,
                       char *buf, size_t size)
{
        char path[256];
        snprintf(path, sizeof path, "%s%s%s/%s", cg->rel, sub ? "/" : "", sub ? sub : "", file);
        return pd_read_file_at(cg->h[hi].rootfd, path, buf, size);
}

static int mkdir_at(int rootfd, const char *rel, const char *sub, struct pd_error *err)
{
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", rel, sub ? "/" : "", sub ? sub : "");
        if (mkdirat(rootfd, path, 0755) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create cgroup '%s'", path);
        return 0;
}

static int create_v2(struct pd_cgroup *cg, const struct pd_cgroup_limits *lim, struct pd_error *err)
{
        char parent[64], buf[64];
        snprintf(parent, sizeof parent, "%.*s", (int)(strchr(cg->rel, '/') - cg->rel), cg->rel);
        int r;
        if ((r = mkdir_at(cg->h[0].rootfd, parent, NULL, err)) < 0)
                return r;
        /* Delegate the controllers down to our leaves. */
        char sub[96];
        snprintf(sub, sizeof sub, "%s/cgroup.subtree_control", parent);
        (void)pd_write_file_at(cg->h[0].rootfd, "cgroup.subtree_control", "+memory +pids +cpu", NULL);
        (void)pd_write_file_at(cg->h[0].rootfd, sub, "+memory +pids +cpu", NULL);
        if ((r = mkdir_at(cg->h[0].rootfd, cg->rel, NULL, err)) < 0 ||
            (r = cg_write(cg, 0, NULL, "cgroup.subtree_control", "+memory +pids +cpu", err)) < 0 ||
            (r = mkdir_at(cg->h[0].rootfd, cg->rel, "agent", err)) < 0 ||
            (r = mkdir_at(cg->h[0].rootfd, cg->rel, "work", err)) < 0)
                return r;
        snprintf(buf, sizeof buf, "%" PRIu64, lim->memory_bytes);
        if ((r = cg_write(cg, 0, "work", "memory.max", buf, err)) < 0)
                return r;
        (void)cg_write(cg, 0, "work", "memory.swap.max", "0", NULL);
        snprintf(buf, sizeof buf, "%u", lim->pids);
        if ((r = cg_write(cg, 0, "work", "pids.max", buf, err)) < 0)
                return r;
        snprintf(buf, sizeof buf, "%u 100000", lim->millicpus * 100);
        if ((r = cg_write(cg, 0, NULL, "cpu.max", buf, err)) < 0)
                return r;
        snprintf(buf, sizeof buf, "%" PRIu64, lim->agent_memory_bytes ? lim->agent_memory_bytes : (uint64_t)PD_AGENT_MEMORY);
        if ((r = cg_write(cg, 0, "agent", "memory.max", buf, err)) < 0)
                return r;
        snprintf(buf, sizeof buf, "%u", PD_AGENT_PIDS);
        return cg_write(cg, 0, "agent", "pids.max", buf, err);
}

static int create_v1(struct pd_cgroup *cg, const struct pd_cgroup_limits *lim, struct pd_error *err)
{
        char parent[64], buf[64];
        snprintf(parent, sizeof parent, "%.*s", (int)(strchr(cg->rel, '/') - cg->rel), cg->rel);
        int r;
        for (unsigned i = 0; i < cg->n; i++) {
                int fd = cg->h[i].rootfd;
                /* The parent usually exists: try the leaf first. */
                if (mkdirat(fd, cg->rel, 0755) < 0 &&
                    ((r = mkdir_at(fd, parent, NULL, err)) < 0 || (r = mkdir_at(fd, cg->rel, NULL, err)) < 0))
                        return r;
                if (cg->h[i].split && ((r = mkdir_at(fd, cg->rel, "agent", err)) < 0 ||
                                       (r = mkdir_at(fd, cg->rel, "work", err)) < 0))
                        return r;
        }
        int mem = find(cg, "memory"), pids = find(cg, "pids"), cpu = find(cg, "cpu");
        snprintf(buf, sizeof buf, "%" PRIu64, lim->memory_bytes);
        if ((r = cg_write(cg, mem, "work", "memory.limit_in_bytes", buf, err)) < 0)
                return r;
        /* With swap accounting, forbid swap too (absent without it: fine). */
        (void)cg_write(cg, mem, "work", "memory.memsw.limit_in_bytes", buf, NULL);
        snprintf(buf, sizeof buf, "%" PRIu64, lim->agent_memory_bytes ? lim->agent_memory_bytes : (uint64_t)PD_AGENT_MEMORY);
        if ((r = cg_write(cg, mem, "agent", "memory.limit_in_bytes", buf, err)) < 0)
                return r;
        snprintf(buf, sizeof buf, "%u", lim->pids);
        if ((r = cg_write(cg, pids, "work", "pids.max", buf, err)) < 0)
                return r;
        snprintf(buf, sizeof buf, "%u", PD_AGENT_PIDS);
        if ((r = cg_write(cg, pids, "agent", "pids.max", buf, err)) < 0)
                return r;
        if (cpu >= 0) {
                snprintf(buf, sizeof buf, "%u", lim->millicpus * 100);
                if ((r = cg_write(cg, cpu, NULL, "cpu.cfs_quota_us", buf, err)) < 0)
                        return r;
        }
        return 0;
}

int pd_cgroup_create(struct pd_cgroup *cg, const struct pd_cgroup_limits *lim, struct pd_error *err)
{
        int r = cg->version == 2 ? create_v2(cg, lim, err) : create_v1(cg, lim, err);
        if (r < 0) {
                pd_error_prefix(err, "cgroup %s", cg->rel);
                pd_cgroup_destroy(cg, NULL);
        }
        return r;
}

int pd_cgroup_open_procs(const struct pd_cgroup *cg, const char *leaf, int *fds, int max,
                         struct pd_error *err)
{
        int n = 0;
        for (unsigned i = 0; i < cg->n && n < max; i++) {
                /* Unsplit hierarchies: children inherit the agent's cgroup. */
                if (!cg->h[i].split)
                        continue;
                char path[256];
                snprintf(path, sizeof path, "%s/%s/cgroup.procs", cg->rel, leaf);
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
        char buf[32];
        snprintf(buf, sizeof buf, "%d", (int)pid);
        for (unsigned i = 0; i < cg->n; i++) {
                int r = cg_write(cg, (int)i, cg->h[i].split ? leaf : NULL, "cgroup.procs", buf, err);
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

int pd_cgroup_stats(const struct pd_cgroup *cg, struct pd_cgroup_stats *st)
{
        char buf[4096];
        memset(st, 0, sizeof *st);
        if (cg->version == 2) {
                if (cg_read(cg, 0, "work", "memory.peak", buf, sizeof buf) > 0)
                        st->memory_peak = strtoull(buf, NULL, 10);
                if (cg_read(cg, 0, "work", "memory.current", buf, sizeof buf) > 0)
                        st->memory_current = strtoull(buf, NULL, 10);
                if (cg_read(cg, 0, "work", "memory.events", buf, sizeof buf) > 0)
                        st->oom_kills = key_value(buf, "oom_kill");
                if (cg_read(cg, 0, "work", "pids.events", buf, sizeof buf) > 0)
                        st->pids_max_events = key_value(buf, "max");
                if (cg_read(cg, 0, "work", "pids.current", buf, sizeof buf) > 0)
                        st->pids_current = strtoull(buf, NULL, 10);
                if (cg_read(cg, 0, NULL, "cpu.stat", buf, sizeof buf) > 0)
                        st->cpu_ns = key_value(buf, "usage_usec") * 1000;
                return 0;
        }
        int mem = find(cg, "memory"), pids = find(cg, "pids"), acct = find(cg, "cpuacct");
        if (mem >= 0) {
                if (cg_read(cg, mem, "work", "memory.max_usage_in_bytes", buf, sizeof buf) > 0)
                        st->memory_peak = strtoull(buf, NULL, 10);
                if (cg_read(cg, mem, "work", "memory.usage_in_bytes", buf, sizeof buf) > 0)
                        st->memory_current = strtoull(buf, NULL, 10);
                if (cg_read(cg, mem, "work", "memory.oom_control", buf, sizeof buf) > 0)
                        st->oom_kills = key_value(buf, "oom_kill");
        }
        if (pids >= 0) {
                if (cg_read(cg, pids, "work", "pids.events", buf, sizeof buf) > 0)
                        st->pids_max_events = key_value(buf, "max");
                if (cg_read(cg, pids, "work", "pids.current", buf, sizeof buf) > 0)
                        st->pids_current = strtoull(buf, NULL, 10);
        }
        if (acct >= 0 && cg_read(cg, acct, NULL, "cpuacct.usage", buf, sizeof buf) > 0)
                st->cpu_ns = strtoull(buf, NULL, 10);
        return 0;
}

int pd_cgroup_freeze(const struct pd_cgroup *cg, bool frozen, struct pd_error *err)
{
        int r, hi = cg->version == 2 ? 0 : find(cg, "freezer");
        if (hi < 0)
                return pd_error_setx(err, ENOTSUP, "no freezer controller on this host");
        if (cg->version == 2)
                r = cg_write(cg, 0, NULL, "cgroup.freeze", frozen ? "1" : "0", err);
        else
                r = cg_write(cg, hi, NULL, "freezer.state", frozen ? "FROZEN" : "THAWED", err);
        if (r < 0 || !frozen)
                return r;
        /* Freezing is asynchronous (v1 reports FREEZING, v2 "frozen 0"
         * until every task stopped): a pause is done when the state says so.
         * v1 has no event for it, so this is a bounded wait. */
        char buf[256];
        for (int i = 0; i < 5000; i++) {
                if (cg->version == 2) {
                        if (cg_read(cg, 0, NULL, "cgroup.events", buf, sizeof buf) > 0 &&
                            key_value(buf, "frozen") == 1)
                                return 0;
                } else if (cg_read(cg, hi, NULL, "freezer.state", buf, sizeof buf) > 0 &&
                           !strncmp(buf, "FROZEN", 6)) {
                        return 0;
                }
                struct timespec ts = { 0, 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        return pd_error_setx(err, ETIMEDOUT, "cgroup %s did not freeze within 5 s", cg->rel);
}

/* SIGKILL every process listed in <dir>/cgroup.procs. */
static void kill_procs(int dirfd)
{
        char buf[65536];
        if (pd_read_file_at(dirfd, "cgroup.procs", buf, sizeof buf) <= 0)
                return;
        for (char *p = buf; *p;) {
                char *end;
                long pid = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (pid > 0)
                        kill((pid_t)pid, SIGKILL);
                p = end;
                while (*p == '\n')
                        p++;
        }
}

/* Remove <rootfd>/<path> and its child cgroups, killing their processes. */
static int remove_tree(int rootfd, const char *path, int depth)
{
        int fd = openat(rootfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.' && depth < 8) {
                        char sub[512];
                        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
                        remove_tree(rootfd, sub, depth + 1);
                }
        /* Processes may take a moment to exit after SIGKILL: retry rmdir a
         * bounded number of times (teardown, not a hot path). */
        int r = 0;
        for (int attempt = 0; attempt < 200; attempt++) {
                if (unlinkat(rootfd, path, AT_REMOVEDIR) == 0 || errno == ENOENT) {
                        r = 0;
                        break;
                }
                r = -errno;
                if (errno != EBUSY)
                        break;
                /* cgroup v2 has cgroup.kill; v1 needs a walk of its procs */
                if (pd_write_file_at(dirfd(d), "cgroup.kill", "1", NULL) < 0)
                        kill_procs(dirfd(d));
                struct timespec ts = { 0, 5 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        closedir(d);
        return r;
}

int pd_cgroup_destroy(struct pd_cgroup *cg, struct pd_error *err)
{
        int ret = 0;
        for (unsigned i = 0; i < cg->n; i++) {
                /* Leaves first: the common case needs no directory walk. */
                char path[256];
                int fd = cg->h[i].rootfd;
                if (cg->h[i].split) {
                        snprintf(path, sizeof path, "%s/work", cg->rel);
                        if (unlinkat(fd, path, AT_REMOVEDIR) < 0 && errno != ENOENT)
                                remove_tree(fd, path, 0);
                        snprintf(path, sizeof path, "%s/agent", cg->rel);
                        if (unlinkat(fd, path, AT_REMOVEDIR) < 0 && errno != ENOENT)
                                remove_tree(fd, path, 0);
                }
                int r = remove_tree(fd, cg->rel, 0);
                if (r < 0 && ret == 0)
                        ret = pd_error_set(err, -r, "remove cgroup %s (%s)", cg->rel, cg->h[i].name);
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
                r = remove_tree(cg.h[i].rootfd, parent, 0);
                if (r < 0 && ret == 0)
                        ret = pd_error_set(err, -r, "remove cgroup %s (%s)", parent, cg.h[i].name);
        }
        pd_cgroup_close(&cg);
        return ret;
}
