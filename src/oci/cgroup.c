/* The container's cgroup, at linux.cgroupsPath in every hierarchy: cgroup v2
 * (one unified tree) or v1 (one tree per mounted controller, as on this
 * project's test machines). Resources are written once at create. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "oci/oci.h"
#include "lib/util.h"

#define MAX_HIER 16

struct hier {
        char mnt[256];
        char opts[256];         /* v1 super options: "rw,memory" */
        bool v2;
};

static int hierarchies(struct hier *h, int max)
{
        struct statfs sf;
        if (statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
                snprintf(h[0].mnt, sizeof h[0].mnt, "/sys/fs/cgroup");
                h[0].v2 = true;
                return 1;
        }
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return 0;
        char line[1024];
        int n = 0;
        while (n < max && fgets(line, sizeof line, f)) {
                /* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
                char *sep = strstr(line, " - ");
                if (!sep)
                        continue;
                char fstype[32], src[64], sopts[256], mnt[256];
                if (sscanf(sep + 3, "%31s %63s %255s", fstype, src, sopts) != 3 || strcmp(fstype, "cgroup") != 0)
                        continue;
                if (sscanf(line, "%*s %*s %*s %*s %255s", mnt) != 1)
                        continue;
                snprintf(h[n].mnt, sizeof h[n].mnt, "%s", mnt);
                snprintf(h[n].opts, sizeof h[n].opts, "%s", sopts);
                h[n].v2 = false;
                n++;
        }
        fclose(f);
        return n;
}

static bool has_ctrl(const struct hier *h, const char *ctrl)
{
        if (h->v2)
                return true;
        char buf[260];
        snprintf(buf, sizeof buf, ",%s,", h->opts);
        char want[64];
        snprintf(want, sizeof want, ",%s,", ctrl);
        return strstr(buf, want) != NULL;
}

int oci_cgroup_ctrl_dir(const char *ctrl, const char *path, char *out, size_t size)
{
        struct hier h[MAX_HIER];
        int n = hierarchies(h, MAX_HIER);
        for (int i = 0; i < n; i++)
                if (has_ctrl(&h[i], ctrl)) {
                        snprintf(out, size, "%s%s", h[i].mnt, path);
                        return 0;
                }
        return -ENOENT;
}

int oci_cgroup_version(void)
{
        struct hier h[MAX_HIER];
        int n = hierarchies(h, MAX_HIER);
        return n == 0 ? 0 : h[0].v2 ? 2 : 1;
}

int oci_cgroup_path(const struct oci_global *g, const struct oci_config *c, const char *id, char *out,
                    size_t size, struct pd_error *err)
{
        const char *p = c->cgroups_path;
        if (!p || !*p) {
                snprintf(out, size, "/paddock-oci/%s", id);
                return 0;
        }
        const char *colon = strchr(p, ':');
        if (colon) {
                /* systemd's "slice:prefix:name"; we drive cgroupfs, so it
                 * becomes the path systemd would have used. */
                char slice[256], prefix[256], name[256];
                if (sscanf(p, "%255[^:]:%255[^:]:%255s", slice, prefix, name) != 3)
                        return pd_error_setx(err, EINVAL, "cgroupsPath '%s': expected slice:prefix:name", p);
                snprintf(out, size, "/%s/%s-%s.scope", slice, prefix, name);
        } else {
                snprintf(out, size, "%s%s", p[0] == '/' ? "" : "/", p);
        }
        /* No "..": the path must stay below each hierarchy's root. */
        for (const char *s = out; (s = strstr(s, "..")) != NULL; s += 2)
                if ((s == out || s[-1] == '/') && (s[2] == '/' || s[2] == '\0'))
                        return pd_error_setx(err, EINVAL, "cgroupsPath '%s' contains '..'", p);
        return 0;
}

static int write_at(const char *dir, const char *file, const char *val, struct pd_error *err)
{
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "cgroup: open '%s'", path);
        int r = pd_write_all(fd, val, strlen(val));
        close(fd);
        if (r < 0)
                return pd_error_set(err, -r, "cgroup: write '%s' to '%s'", val, path);
        return 0;
}

static int mkdir_tree(const struct hier *h, const char *path, struct pd_error *err)
{
        char full[PATH_MAX];
        size_t base = (size_t)snprintf(full, sizeof full, "%s", h->mnt);
        snprintf(full + base, sizeof full - base, "%s", path);
        bool cpuset = !h->v2 && has_ctrl(h, "cpuset");
        for (char *s = full + base + 1; ; s++) {
                if (*s != '/' && *s != '\0')
                        continue;
                char saved = *s;
                *s = '\0';
                if (mkdir(full, 0755) == 0) {
                        if (cpuset) {
                                /* A new v1 cpuset is empty and refuses tasks
                                 * until it inherits its parent's cpus and mems. */
                                char parent[PATH_MAX], val[1024];
                                snprintf(parent, sizeof parent, "%s", full);
                                *strrchr(parent, '/') = '\0';
                                const char *files[] = { "cpuset.cpus", "cpuset.mems" };
                                for (int i = 0; i < 2; i++) {
                                        char p[PATH_MAX];
                                        snprintf(p, sizeof p, "%s/%s", parent, files[i]);
                                        if (pd_read_file_at(AT_FDCWD, p, val, sizeof val) > 0)
                                                write_at(full, files[i], val, NULL);
                                }
                        }
                        if (h->v2 && saved == '/')
                                write_at(full, "cgroup.subtree_control", "+memory +pids +cpu +cpuset", NULL);
                } else if (errno != EEXIST) {
                        return pd_error_set(err, errno, "cgroup: mkdir '%s'", full);
                }
                *s = saved;
                if (!saved)
                        break;
        }
        return 0;
}

static int num(json_t *o, const char *k, int64_t *v)
{
        json_t *x = json_object_get(o, k);
        if (!json_is_integer(x))
                return 0;
        *v = json_integer_value(x);
        return 1;
}

static int apply_v1(const struct hier *h, const char *dir, json_t *res, struct pd_error *err)
{
        char buf[128];
        int64_t v;
        int r = 0;
        json_t *mem = json_object_get(res, "memory"), *cpu = json_object_get(res, "cpu"),
               *pids = json_object_get(res, "pids");
        if (has_ctrl(h, "memory") && mem) {
                if (num(mem, "limit", &v)) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if ((r = write_at(dir, "memory.limit_in_bytes", buf, err)) < 0)
                                return r;
                }
                if (num(mem, "reservation", &v)) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if ((r = write_at(dir, "memory.soft_limit_in_bytes", buf, err)) < 0)
                                return r;
                }
                if (num(mem, "swap", &v)) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if (write_at(dir, "memory.memsw.limit_in_bytes", buf, err) < 0)
                                oci_warn("memory.swap not applied (no swap accounting here): %s", err->msg);
                }
                if (num(mem, "kernelTCP", &v)) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if (write_at(dir, "memory.kmem.tcp.limit_in_bytes", buf, err) < 0)
                                oci_warn("memory.kernelTCP not applied: %s", err->msg);
                }
                /* Since Linux 6.1 the kernel accepts and ignores a kmem limit
                 * (runc no longer sets it); written for older kernels. */
                if (num(mem, "kernel", &v)) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if (write_at(dir, "memory.kmem.limit_in_bytes", buf, err) < 0)
                                oci_warn("memory.kernel not applied: %s", err->msg);
                }
                if (num(mem, "swappiness", &v) && v >= 0 && v <= 100) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        write_at(dir, "memory.swappiness", buf, NULL);
                }
                if (json_is_true(json_object_get(mem, "disableOOMKiller")) &&
                    (r = write_at(dir, "memory.oom_control", "1", err)) < 0)
                        return r;
        }
        if (has_ctrl(h, "cpu") && cpu) {
                if (num(cpu, "shares", &v) && v > 0) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if ((r = write_at(dir, "cpu.shares", buf, err)) < 0)
                                return r;
                }
                if (num(cpu, "period", &v) && v > 0) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if ((r = write_at(dir, "cpu.cfs_period_us", buf, err)) < 0)
                                return r;
                }
                if (num(cpu, "quota", &v) && v != 0) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if ((r = write_at(dir, "cpu.cfs_quota_us", buf, err)) < 0)
                                return r;
                }
        }
        if (has_ctrl(h, "cpuset") && cpu) {
                const char *s = json_string_value(json_object_get(cpu, "cpus"));
                if (s && *s && (r = write_at(dir, "cpuset.cpus", s, err)) < 0)
                        return r;
                s = json_string_value(json_object_get(cpu, "mems"));
                if (s && *s && (r = write_at(dir, "cpuset.mems", s, err)) < 0)
                        return r;
        }
        if (has_ctrl(h, "pids") && pids && num(pids, "limit", &v)) {
                if (v > 0)
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                else
                        snprintf(buf, sizeof buf, "max");
                if ((r = write_at(dir, "pids.max", buf, err)) < 0)
                        return r;
        }
        json_t *devs = json_object_get(res, "devices");
        if (has_ctrl(h, "devices") && json_is_array(devs)) {
                size_t i;
                json_t *d;
                json_array_foreach(devs, i, d) {
                        const char *type = json_string_value(json_object_get(d, "type"));
                        const char *access = json_string_value(json_object_get(d, "access"));
                        int64_t maj = -1, min = -1;
                        num(d, "major", &maj);
                        num(d, "minor", &min);
                        char mj[24] = "*", mn[24] = "*";
                        if (maj >= 0)
                                snprintf(mj, sizeof mj, "%" PRId64, maj);
                        if (min >= 0)
                                snprintf(mn, sizeof mn, "%" PRId64, min);
                        if (!type || !*type)
                                type = "a";
                        if (!access || !*access)
                                access = "rwm";
                        snprintf(buf, sizeof buf, "%s %s:%s %s", type, mj, mn, access);
                        bool allow = json_is_true(json_object_get(d, "allow"));
                        if ((r = write_at(dir, allow ? "devices.allow" : "devices.deny", buf, err)) < 0)
                                return r;
                }
                /* The nodes every container gets (runc's list): engines such
                 * as podman send only "deny all" and count on these. */
                static const char *const dflt[] = {
                        "c *:* m", "b *:* m", "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm",
                        "c 5:0 rwm", "c 5:1 rwm", "c 5:2 rwm", "c 136:* rwm",
                };
                for (size_t k = 0; k < sizeof dflt / sizeof dflt[0]; k++)
                        if ((r = write_at(dir, "devices.allow", dflt[k], err)) < 0)
                                return r;
        }
        json_t *bio = json_object_get(res, "blockIO");
        if (has_ctrl(h, "blkio") && bio && num(bio, "weight", &v)) {
                snprintf(buf, sizeof buf, "%" PRId64, v);
                if (write_at(dir, "blkio.weight", buf, err) < 0)
                        oci_warn("blockIO.weight not applied: %s", err->msg);
        }
        return 0;
}

static int apply_v2(const char *dir, json_t *res, struct pd_error *err)
{
        char buf[128];
        int64_t v, limit = -1;
        int r;
        json_t *mem = json_object_get(res, "memory"), *cpu = json_object_get(res, "cpu"),
               *pids = json_object_get(res, "pids");
        if (mem) {
                if (num(mem, "limit", &v)) {
                        limit = v;
                        snprintf(buf, sizeof buf, v > 0 ? "%" PRId64 : "max", v);
                        if ((r = write_at(dir, "memory.max", buf, err)) < 0)
                                return r;
                }
                if (num(mem, "reservation", &v)) {
                        snprintf(buf, sizeof buf, "%" PRId64, v);
                        if ((r = write_at(dir, "memory.low", buf, err)) < 0)
                                return r;
                }
                if (num(mem, "swap", &v)) {
                        /* v1's memsw counts memory + swap; v2's swap.max swap alone. */
                        if (v < 0)
                                snprintf(buf, sizeof buf, "max");
                        else
                                snprintf(buf, sizeof buf, "%" PRId64, limit > 0 && v >= limit ? v - limit : v);
                        if (write_at(dir, "memory.swap.max", buf, err) < 0)
                                oci_warn("memory.swap not applied: %s", err->msg);
                }
        }
        if (cpu) {
                if (num(cpu, "shares", &v) && v > 0) {
                        snprintf(buf, sizeof buf, "%" PRId64, 1 + ((v - 2) * 9999) / 262142);
                        if ((r = write_at(dir, "cpu.weight", buf, err)) < 0)
                                return r;
                }
                int64_t q = 0, p = 100000;
                if (num(cpu, "quota", &q) | num(cpu, "period", &p)) {
                        if (q > 0)
                                snprintf(buf, sizeof buf, "%" PRId64 " %" PRId64, q, p);
                        else
                                snprintf(buf, sizeof buf, "max %" PRId64, p);
                        if ((r = write_at(dir, "cpu.max", buf, err)) < 0)
                                return r;
                }
                const char *s = json_string_value(json_object_get(cpu, "cpus"));
                if (s && *s && (r = write_at(dir, "cpuset.cpus", s, err)) < 0)
                        return r;
                s = json_string_value(json_object_get(cpu, "mems"));
                if (s && *s && (r = write_at(dir, "cpuset.mems", s, err)) < 0)
                        return r;
        }
        if (pids && num(pids, "limit", &v)) {
                snprintf(buf, sizeof buf, v > 0 ? "%" PRId64 : "max", v);
                if ((r = write_at(dir, "pids.max", buf, err)) < 0)
                        return r;
        }
        if (json_array_size(json_object_get(res, "devices")) > 0)
                oci_warn("linux.resources.devices: not enforced on cgroup v2 by paddock-oci (needs a BPF program); "
                         "device nodes are limited to those the config creates");
        json_t *uni = json_object_get(res, "unified");
        const char *k;
        json_t *val;
        json_object_foreach(uni, k, val) {
                if (strchr(k, '/') || strstr(k, ".."))
                        return pd_error_setx(err, EINVAL, "linux.resources.unified: bad key '%s'", k);
                if ((r = write_at(dir, k, json_string_value(val) ? json_string_value(val) : "", err)) < 0)
                        return r;
        }
        return 0;
}

int oci_cgroup_enter(const char *path, pid_t pid, struct pd_error *err)
{
        struct hier h[MAX_HIER];
        int n = hierarchies(h, MAX_HIER);
        char dir[PATH_MAX], val[32];
        snprintf(val, sizeof val, "%d", (int)pid);
        for (int i = 0; i < n; i++) {
                snprintf(dir, sizeof dir, "%s%s", h[i].mnt, path);
                int r = write_at(dir, "cgroup.procs", val, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int oci_cgroup_setup(const char *path, json_t *res, pid_t pid, struct pd_error *err)
{
        struct hier h[MAX_HIER];
        int n = hierarchies(h, MAX_HIER);
        if (n == 0)
                return pd_error_setx(err, ENOENT, "no cgroup hierarchy mounted");
        if (!h[0].v2 && json_object_size(json_object_get(res, "unified")) > 0)
                return pd_error_setx(err, EINVAL, "linux.resources.unified needs cgroup v2; this host has v1");
        char dir[PATH_MAX];
        for (int i = 0; i < n; i++) {
                int r = mkdir_tree(&h[i], path, err);
                if (r < 0)
                        return r;
                snprintf(dir, sizeof dir, "%s%s", h[i].mnt, path);
                if (res && (r = h[i].v2 ? apply_v2(dir, res, err) : apply_v1(&h[i], dir, res, err)) < 0)
                        return r;
        }
        int r = res ? oci_cgroup_apply_more(path, h[0].v2, res, err) : 0;
        if (r < 0)
                return r;
        return pid > 0 ? oci_cgroup_enter(path, pid, err) : 0;
}

int oci_cgroup_pids(const char *path, pid_t **out, size_t *count, struct pd_error *err)
{
        struct hier h[MAX_HIER];
        int n = hierarchies(h, MAX_HIER);
        *out = NULL;
        *count = 0;
        /* pids, memory or the v2 tree: any one hierarchy that has them all. */
        int pick = 0;
        for (int i = 0; i < n; i++)
                if (has_ctrl(&h[i], "pids") || has_ctrl(&h[i], "freezer")) {
                        pick = i;
                        break;
                }
        if (n == 0)
                return pd_error_setx(err, ENOENT, "no cgroup hierarchy mounted");
        char file[PATH_MAX];
        snprintf(file, sizeof file, "%s%s/cgroup.procs", h[pick].mnt, path);
        FILE *f = fopen(file, "re");
        if (!f)
                return pd_error_set(err, errno, "cgroup: open '%s'", file);
        size_t cap = 0;
        int p;
        while (fscanf(f, "%d", &p) == 1) {
                if (*count == cap) {
                        cap = cap ? cap * 2 : 32;
                        pid_t *nv = realloc(*out, cap * sizeof **out);
                        if (!nv) {
                                fclose(f);
                                return -ENOMEM;
                        }
                        *out = nv;
                }
                (*out)[(*count)++] = p;
        }
        fclose(f);
        return 0;
}

static void sleep_ms(int ms)
{
        struct timespec ts = { 0, ms * 1000000L };
        nanosleep(&ts, NULL);
}

int oci_cgroup_freeze(const char *path, bool frozen, struct pd_error *err)
{
        struct hier h[MAX_HIER];
        int n = hierarchies(h, MAX_HIER);
        char dir[PATH_MAX], buf[64];
        for (int i = 0; i < n; i++) {
                if (!has_ctrl(&h[i], "freezer"))
                        continue;
                snprintf(dir, sizeof dir, "%s%s", h[i].mnt, path);
                const char *file = h[i].v2 ? "cgroup.freeze" : "freezer.state";
                const char *want = h[i].v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
                int r = write_at(dir, file, want, err);
                if (r < 0)
                        return r;
                /* v1 passes through FREEZING; the kernel offers no event for
                 * it, so re-read with a deadline. */
                uint64_t deadline = pd_now_ms() + 10000;
                char p[PATH_MAX];
                snprintf(p, sizeof p, "%s/%s", dir, file);
                for (;;) {
                        if (pd_read_file_at(AT_FDCWD, p, buf, sizeof buf) > 0 && strncmp(buf, want, strlen(want)) == 0)
                                break;
                        if (pd_now_ms() > deadline)
                                return pd_error_setx(err, ETIMEDOUT, "cgroup '%s' did not reach %s", path, want);
                        if (!h[i].v2 && frozen)
                                write_at(dir, file, want, NULL);
                        sleep_ms(1);
                }
                return 0;
        }
        return pd_error_setx(err, ENOTSUP, "no freezer cgroup controller");
}

bool oci_cgroup_frozen(const char *path)
{
        struct hier h[MAX_HIER];
        int n = hierarchies(h, MAX_HIER);
        char p[PATH_MAX], buf[64];
        for (int i = 0; i < n; i++) {
                if (!has_ctrl(&h[i], "freezer"))
                        continue;
                snprintf(p, sizeof p, "%s%s/%s", h[i].mnt, path, h[i].v2 ? "cgroup.freeze" : "freezer.state");
                if (pd_read_file_at(AT_FDCWD, p, buf, sizeof buf) <= 0)
                        return false;
                return h[i].v2 ? buf[0] == '1' : strncmp(buf, "FROZEN", 6) == 0;
        }
        return false;
}

int oci_cgroup_destroy(const char *path, struct pd_error *err)
{
        if (!path || !*path || strcmp(path, "/") == 0)
                return 0;
        struct hier h[MAX_HIER];
        int n = hierarchies(h, MAX_HIER);
        pid_t *pids = NULL;
        size_t np = 0;
        /* A frozen cgroup's tasks cannot die: thaw first. */
        if (oci_cgroup_frozen(path))
                oci_cgroup_freeze(path, false, NULL);
        uint64_t deadline = pd_now_ms() + 10000;
        for (;;) {
                if (oci_cgroup_pids(path, &pids, &np, NULL) < 0 || np == 0)
                        break;
                for (size_t i = 0; i < np; i++)
                        kill(pids[i], SIGKILL);
                free(pids);
                pids = NULL;
                if (pd_now_ms() > deadline)
                        return pd_error_setx(err, EBUSY, "cgroup '%s': processes did not die", path);
                sleep_ms(1);
        }
        free(pids);
        char dir[PATH_MAX];
        for (int i = 0; i < n; i++) {
                snprintf(dir, sizeof dir, "%s%s", h[i].mnt, path);
                /* Killed tasks leave the cgroup a moment after they are reaped. */
                while (rmdir(dir) < 0 && errno == EBUSY && pd_now_ms() < deadline)
                        sleep_ms(1);
                if (access(dir, F_OK) == 0)
                        return pd_error_set(err, errno, "cgroup: rmdir '%s'", dir);
                /* Our default parent: remove it when it is empty. */
                if (strncmp(path, "/paddock-oci/", 13) == 0) {
                        snprintf(dir, sizeof dir, "%s/paddock-oci", h[i].mnt);
                        rmdir(dir);
                }
        }
        return 0;
}
