/* Unit tests for the jail's cgroup layer: the typed limits writer
 * (src/jail/cgroup_limits.c) against directories standing in for v1 and v2
 * hierarchies, and the waits (src/jail/cgroup_wait.c) against real cgroups
 * where this host has them (root, v1 freezer and pids or v2). TAP. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/cgroup_limits.h"
#include "jail/cgroupfs.h"
#include "lib/util.h"
#include "tap.h"



/* ---- the writer, on stand-in hierarchies ---- */

static char tmp[PATH_MAX];
static char warned[4096];

static void warn(void *ctx, const char *what, const char *why)
{
        (void)ctx;
        size_t n = strlen(warned);
        snprintf(warned + n, sizeof warned - n, "%s: %s\n", what, why);
}

/* A stand-in hierarchy <tmp>/<name> with a cgroup "c" holding empty files. */
static struct pd_cg_hier fake(const char *name, uint32_t ctrls, bool v2, const char *const *files)
{
        struct pd_cg_hier h = { .ctrls = ctrls, .v2 = v2 };
        snprintf(h.name, sizeof h.name, "%s", name);
        snprintf(h.mnt, sizeof h.mnt, "%s/%s", tmp, name);
        mkdir(h.mnt, 0755);
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/c", h.mnt);
        mkdir(p, 0755);
        for (; *files; files++) {
                snprintf(p, sizeof p, "%s/c/%s", h.mnt, *files);
                close(open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        }
        h.rootfd = open(h.mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
        return h;
}

static bool reads(const struct pd_cg_hier *h, const char *file, const char *want)
{
        char buf[256];
        if (pd_cg_read(h, "c", file, buf, sizeof buf) < 0)
                return false;
        buf[strcspn(buf, "\n")] = '\0';
        if (strcmp(buf, want))
                printf("# %s: '%s', want '%s'\n", file, buf, want);
        return !strcmp(buf, want);
}

static void test_writer_v1(void)
{
        static const char *const mem_files[] = { "memory.limit_in_bytes", "memory.soft_limit_in_bytes",
                                                 "memory.kmem.tcp.limit_in_bytes", NULL };
        static const char *const cpu_files[] = { "cpu.shares", "cpu.cfs_period_us", "cpu.cfs_quota_us", NULL };
        static const char *const pids_files[] = { "pids.max", NULL };
        struct pd_cg_hier h[3] = {
                fake("memory", PD_CG_BIT(PD_CG_MEMORY), false, mem_files),
                fake("cpu,cpuacct", PD_CG_BIT(PD_CG_CPU) | PD_CG_BIT(PD_CG_CPUACCT), false, cpu_files),
                fake("pids", PD_CG_BIT(PD_CG_PIDS), false, pids_files),
        };
        struct pd_cg_hugepage huge = { "2MB", 4194304 };
        struct pd_cg_limits l = {
                .set = PD_CG_SET_MEM_LIMIT | PD_CG_SET_MEM_SWAP | PD_CG_SET_MEM_KERNEL_TCP | PD_CG_SET_CPU_SHARES |
                       PD_CG_SET_CPU_QUOTA | PD_CG_SET_CPU_PERIOD | PD_CG_SET_PIDS,
                .memory = { .limit = 100 << 20, .swap = 200 << 20, .kernel_tcp = 5 },
                .cpu = { .shares = 512, .quota = 50000, .period = 100000 },
                .pids = 0,
                .hugepages = &huge,
                .n_hugepages = 1,
        };
        struct pd_error err = { 0 };
        warned[0] = '\0';
        int r = pd_cg_apply(h, 3, "c", &l, warn, NULL, &err);
        ok(r == 0, "v1: apply");
        if (r < 0)
                printf("# %s\n", err.msg);
        ok(reads(&h[0], "memory.limit_in_bytes", "104857600") && reads(&h[0], "memory.kmem.tcp.limit_in_bytes", "5"),
           "v1: memory limit and kernelTCP in the memory hierarchy");
        ok(reads(&h[0], "memory.soft_limit_in_bytes", ""), "v1: what is not set is not written");
        ok(reads(&h[1], "cpu.shares", "512") && reads(&h[1], "cpu.cfs_quota_us", "50000") &&
                   reads(&h[1], "cpu.cfs_period_us", "100000"),
           "v1: cpu shares, quota, period in the cpu hierarchy");
        ok(reads(&h[2], "pids.max", "max"), "v1: a pids limit of 0 is none");
        ok(strstr(warned, "memory.swap: ") != NULL, "v1: swap without swap accounting is reported, not fatal");
        ok(strstr(warned, "hugepageLimits: no hugetlb cgroup controller on this host") != NULL,
           "v1: a limit of a controller the host lacks is reported");

        struct pd_cg_kv kv = { "memory.high", "1G" };
        struct pd_cg_limits u = { .unified = &kv, .n_unified = 1 };
        ok(pd_cg_apply(h, 3, "c", &u, warn, NULL, &err) == -EINVAL && strstr(err.msg, "needs cgroup v2"),
           "v1: unified refused");

        unlinkat(h[0].rootfd, "c/memory.limit_in_bytes", 0);
        struct pd_cg_limits m = { .set = PD_CG_SET_MEM_LIMIT, .memory.limit = 1 << 20 };
        ok(pd_cg_apply(h, 3, "c", &m, NULL, NULL, &err) == -ENOENT && strstr(err.msg, "memory.limit_in_bytes"),
           "v1: a memory limit that cannot be written fails the call, naming the file");
        pd_cg_close(h, 3);
}

static void test_writer_v2(void)
{
        static const char *const files[] = { "memory.max", "memory.swap.max", "cpu.weight", "cpu.max", "pids.max",
                                              "memory.high", NULL };
        struct pd_cg_hier h = fake("unified", PD_CG_ALL, true, files);
        struct pd_cg_kv kv = { "memory.high", "1G" };
        struct pd_cg_device dev = { .allow = false, .type = 'a', .major = -1, .minor = -1, .access = "rwm" };
        struct pd_cg_limits l = {
                .set = PD_CG_SET_MEM_LIMIT | PD_CG_SET_MEM_SWAP | PD_CG_SET_CPU_SHARES | PD_CG_SET_CPU_PERIOD |
                       PD_CG_SET_PIDS | PD_CG_SET_NET_CLASSID,
                .memory = { .limit = 100, .swap = 300 },
                .cpu = { .shares = 1024, .period = 50000 },
                .pids = 5,
                .net.classid = 7,
                .devices = &dev,
                .n_devices = 1,
                .unified = &kv,
                .n_unified = 1,
        };
        struct pd_error err = { 0 };
        warned[0] = '\0';
        int r = pd_cg_apply(&h, 1, "c", &l, warn, NULL, &err);
        ok(r == 0, "v2: apply");
        if (r < 0)
                printf("# %s\n", err.msg);
        ok(reads(&h, "memory.max", "100") && reads(&h, "memory.swap.max", "200"),
           "v2: swap.max is swap alone (memory + swap less memory)");
        ok(reads(&h, "cpu.weight", "39"), "v2: shares 1024 become weight 39");
        ok(reads(&h, "cpu.max", "max 50000"), "v2: a period without a quota is no limit at that period");
        ok(reads(&h, "pids.max", "5") && reads(&h, "memory.high", "1G"), "v2: pids and a unified file");
        ok(strstr(warned, "network.classID: cgroup v2 has no net_cls") && strstr(warned, "devices: not enforced"),
           "v2: net_cls and device rules reported");

        struct pd_cg_limits q = { .set = PD_CG_SET_CPU_QUOTA | PD_CG_SET_CPU_SHARES | PD_CG_SET_MEM_SWAP |
                                         PD_CG_SET_MEM_LIMIT,
                                  .cpu = { .quota = 25000, .shares = 2 }, .memory = { .limit = 0, .swap = -1 } };
        /* fresh files: a regular file is not truncated by a write as a cgroup file is */
        struct pd_cg_hier h2 = fake("unified2", PD_CG_ALL, true, files);
        ok(pd_cg_apply(&h2, 1, "c", &q, NULL, NULL, &err) == 0 && reads(&h2, "cpu.max", "25000 100000") &&
                   reads(&h2, "cpu.weight", "1") && reads(&h2, "memory.max", "max") && reads(&h2, "memory.swap.max", "max"),
           "v2: default period, the smallest weight, no memory or swap limit");

        struct pd_cg_kv bad = { "../cgroup.procs", "1" };
        struct pd_cg_limits b = { .unified = &bad, .n_unified = 1 };
        ok(pd_cg_apply(&h, 1, "c", &b, NULL, NULL, &err) == -EINVAL && strstr(err.msg, "bad key"),
           "v2: a unified key that leaves the cgroup refused");
        pd_cg_close(&h, 1);
        pd_cg_close(&h2, 1);
}

/* ---- the waits, on this host's cgroups ---- */

/* A child that starts once go is written to (after it is in its cgroup,
 * so everything it forks is there too). */
static pid_t spawn(int kind, int *go)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        pid_t pid = fork();
        if (pid != 0) {
                close(p[0]);
                *go = p[1];
                return pid;
        }
        char c;
        close(p[1]);
        if (read(p[0], &c, 1) != 1)
                _exit(1);
        if (kind == 0)
                for (;;)
                        ;               /* busy: freezing it needs its CPU's way back to user space */
        /* a process that keeps forking children that sleep */
        for (int i = 0; i < 64; i++)
                if (fork() == 0)
                        for (;;)
                                pause();
        for (;;)
                pause();
}

static bool gone(const struct pd_cg_hier *h, const char *path)
{
        struct stat st;
        return fstatat(h->rootfd, path, &st, 0) < 0 && errno == ENOENT;
}

static void test_waits(void)
{
        struct pd_cg_hier hs[16];
        int version;
        struct pd_error err = { 0 };
        int n = geteuid() == 0 ? pd_cg_discover(hs, 16, PD_CG_EVERY, &version, &err) : 0;
        int fz = n > 0 ? pd_cg_find(hs, (unsigned)n, PD_CG_FREEZER) : -1;
        int pi = n > 0 ? pd_cg_find(hs, (unsigned)n, PD_CG_PIDS) : -1;
        if (fz < 0 || pi < 0) {
                const char *why = geteuid() ? "not root" : "no freezer or pids cgroup controller";
                tap_skip("freeze waits until frozen", why);
                tap_skip("remove kills a forking tree and waits", why);
                if (n > 0)
                        pd_cg_close(hs, (unsigned)n);
                return;
        }
        char path[64];
        snprintf(path, sizeof path, "pd-unit-%d", (int)getpid());

        /* freeze: a busy process; the call returns once it is frozen */
        int go;
        pid_t busy = spawn(0, &go);
        bool made = pd_cg_mkdir(&hs[fz], path, NULL, &err) == 0 && pd_cg_attach(&hs[fz], path, busy, &err) == 0;
        made = made && write(go, "g", 1) == 1;
        close(go);
        int r = made ? pd_cg_freeze(&hs[fz], path, true, 10000, &err) : -1;
        ok(r == 0 && pd_cg_frozen(&hs[fz], path), "freeze waits until frozen");
        if (r < 0)
                printf("# %s\n", err.msg);
        ok(pd_cg_freeze(&hs[fz], path, false, 10000, &err) == 0 && !pd_cg_frozen(&hs[fz], path), "thaw");
        ok(pd_cg_remove(&hs[fz], path, 10000, &err) == 0 && gone(&hs[fz], path),
           "remove kills the process and removes the cgroup");
        int st = 0;
        ok(waitpid(busy, &st, 0) == busy && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the process was killed");

        /* remove: a process that forks 64 children, and a sub-cgroup */
        pid_t tree = spawn(1, &go);
        char child[96];
        snprintf(child, sizeof child, "%s/sub", path);
        made = pd_cg_mkdir(&hs[pi], child, NULL, &err) == 0 && pd_cg_attach(&hs[pi], child, tree, &err) == 0;
        made = made && write(go, "g", 1) == 1;
        close(go);
        r = made ? pd_cg_remove(&hs[pi], path, 10000, &err) : -1;
        ok(r == 0 && gone(&hs[pi], path), "remove kills a forking tree in a sub-cgroup and waits");
        if (r < 0)
                printf("# %s\n", err.msg);
        ok(waitpid(tree, &st, 0) == tree && WIFSIGNALED(st), "the tree's root was killed");
        ok(pd_cg_remove(&hs[pi], path, 1000, &err) == 0, "removing what is gone is fine");
        /* whatever failed above: leave nothing */
        kill(busy, SIGKILL);
        kill(tree, SIGKILL);
        (void)pd_cg_remove(&hs[fz], path, 1000, NULL);
        (void)pd_cg_remove(&hs[pi], path, 1000, NULL);
        pd_cg_close(hs, (unsigned)n);
}

/* v2 on this host: /sys/fs/cgroup itself, or the cgroup2 mount beside v1
 * (hybrid; freeze, kill and cgroup.events are cgroup2's core, there without
 * any controller). */
static bool v2_hier(struct pd_cg_hier *h)
{
        static const char *const mnts[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
        for (size_t i = 0; i < sizeof mnts / sizeof mnts[0]; i++) {
                struct statfs sf;
                if (statfs(mnts[i], &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
                        continue;
                *h = (struct pd_cg_hier){ .ctrls = PD_CG_ALL, .v2 = true };
                snprintf(h->mnt, sizeof h->mnt, "%s", mnts[i]);
                h->rootfd = open(mnts[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
                return h->rootfd >= 0;
        }
        return false;
}

static void test_waits_v2(void)
{
        struct pd_cg_hier h;
        if (geteuid() != 0 || !v2_hier(&h)) {
                const char *why = geteuid() ? "not root" : "no cgroup2 mount";
                tap_skip("v2: freeze waits for cgroup.events", why);
                tap_skip("v2: remove kills through cgroup.kill and waits for populated 0", why);
                return;
        }
        struct pd_error err = { 0 };
        char path[64], child[96];
        snprintf(path, sizeof path, "pd-unit-%d", (int)getpid());
        snprintf(child, sizeof child, "%s/sub", path);
        int go;
        pid_t busy = spawn(0, &go);
        bool made = pd_cg_mkdir(&h, path, NULL, &err) == 0 && pd_cg_attach(&h, path, busy, &err) == 0;
        made = made && write(go, "g", 1) == 1;
        close(go);
        int r = made ? pd_cg_freeze(&h, path, true, 10000, &err) : -1;
        char ev[256] = "";
        pd_cg_read(&h, path, "cgroup.events", ev, sizeof ev);
        ok(r == 0 && strstr(ev, "frozen 1") && pd_cg_frozen(&h, path), "v2: freeze waits for cgroup.events");
        if (r < 0)
                printf("# %s\n", err.msg);
        ok(pd_cg_remove(&h, path, 10000, &err) == 0 && gone(&h, path), "v2: remove kills a frozen cgroup");
        int st = 0;
        ok(waitpid(busy, &st, 0) == busy && WIFSIGNALED(st), "v2: the process was killed");

        pid_t tree = spawn(1, &go);
        made = pd_cg_mkdir(&h, child, NULL, &err) == 0 && pd_cg_attach(&h, child, tree, &err) == 0;
        made = made && write(go, "g", 1) == 1;
        close(go);
        r = made ? pd_cg_remove(&h, path, 10000, &err) : -1;
        ok(r == 0 && gone(&h, path), "v2: remove kills through cgroup.kill and waits for populated 0");
        if (r < 0)
                printf("# %s\n", err.msg);
        ok(waitpid(tree, &st, 0) == tree && WIFSIGNALED(st), "v2: the tree's root was killed");
        kill(busy, SIGKILL);
        kill(tree, SIGKILL);
        (void)pd_cg_remove(&h, path, 1000, NULL);
        pd_cg_close(&h, 1);
}

static void rm_tree(const char *dir)
{
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
        snprintf(tmp, sizeof tmp, "/tmp/pd-test-cgroup-XXXXXX");
        if (!mkdtemp(tmp)) {
                perror("mkdtemp");
                return 1;
        }
        test_writer_v1();
        test_writer_v2();
        rm_tree(tmp);
        test_waits();
        test_waits_v2();
        return tap_done();
}
