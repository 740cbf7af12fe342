#include "jail/cgroupfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "lib/util.h"

#define CG_ROOT "/sys/fs/cgroup"

static const char *const ctrl_names[_PD_CG_CTRL_MAX] = {
        [PD_CG_CPU] = "cpu",         [PD_CG_CPUACCT] = "cpuacct",     [PD_CG_CPUSET] = "cpuset",
        [PD_CG_MEMORY] = "memory",   [PD_CG_DEVICES] = "devices",     [PD_CG_FREEZER] = "freezer",
        [PD_CG_NET_CLS] = "net_cls", [PD_CG_NET_PRIO] = "net_prio",   [PD_CG_BLKIO] = "blkio",
        [PD_CG_PERF_EVENT] = "perf_event", [PD_CG_HUGETLB] = "hugetlb", [PD_CG_PIDS] = "pids",
        [PD_CG_RDMA] = "rdma",       [PD_CG_MISC] = "misc",           [PD_CG_IO] = "io",
};

const char *pd_cg_ctrl_name(enum pd_cg_ctrl c)
{
        return (unsigned)c < _PD_CG_CTRL_MAX ? ctrl_names[c] : "?";
}

void pd_cg_close(struct pd_cg_hier *h, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                if (h[i].rootfd >= 0) {
                        close(h[i].rootfd);
                        h[i].rootfd = -1;
                }
}

int pd_cg_find(const struct pd_cg_hier *h, unsigned n, enum pd_cg_ctrl c)
{
        for (unsigned i = 0; i < n; i++)
                if (h[i].ctrls & PD_CG_BIT(c))
                        return (int)i;
        return -1;
}

static int open_root(struct pd_cg_hier *h, struct pd_error *err)
{
        h->rootfd = open(h->mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (h->rootfd < 0)
                return pd_error_set(err, errno, "open cgroup hierarchy '%s'", h->mnt);
        return 0;
}

/* "rw,nosuid,cpu,cpuacct" or "rw,name=systemd": the controllers, and the
 * hierarchy's name (its first controller, or name=...). */
static uint32_t parse_super_opts(char *opts, char *name, size_t size)
{
        uint32_t ctrls = 0;
        name[0] = '\0';
        for (char *save = NULL, *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                for (unsigned c = 0; c < _PD_CG_CTRL_MAX; c++)
                        if (!strcmp(t, ctrl_names[c])) {
                                ctrls |= PD_CG_BIT(c);
                                if (!name[0])
                                        snprintf(name, size, "%s", t);
                        }
                if (!strncmp(t, "name=", 5) && !name[0])
                        snprintf(name, size, "%s", t);
        }
        return ctrls;
}

int pd_cg_discover(struct pd_cg_hier *h, unsigned max, uint32_t want, int *version, struct pd_error *err)
{
        struct statfs sf;
        if (statfs(CG_ROOT, &sf) < 0)
                return pd_error_set(err, errno, "statfs %s (is cgroupfs mounted?)", CG_ROOT);
        if (sf.f_type == CGROUP2_SUPER_MAGIC) {
                *version = 2;
                if (max == 0)
                        return 0;
                h[0] = (struct pd_cg_hier){ .name = "unified", .mnt = CG_ROOT, .ctrls = PD_CG_ALL, .v2 = true };
                int r = open_root(&h[0], err);
                return r < 0 ? r : 1;
        }
        *version = 1;
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return pd_error_set(err, errno, "open /proc/self/mountinfo");
        char *line = NULL;
        size_t cap = 0;
        unsigned n = 0;
        dev_t seen[32];
        unsigned n_seen = 0;
        int r = 0;
        while (n < max && getline(&line, &cap, f) > 0) {
                /* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
                char *sep = strstr(line, " - ");
                char fstype[16], sopts[256], mnt[sizeof h->mnt];
                unsigned maj, mi;
                if (!sep || sscanf(sep + 3, "%15s %*s %255s", fstype, sopts) != 2 || strcmp(fstype, "cgroup") ||
                    sscanf(line, "%*s %*s %u:%u %*s %95s", &maj, &mi, mnt) != 3)
                        continue;
                /* The same hierarchy mounted twice is one hierarchy. */
                dev_t dev = ((dev_t)maj << 20) | mi;
                bool dup = false;
                for (unsigned k = 0; k < n_seen; k++)
                        dup |= seen[k] == dev;
                if (dup)
                        continue;
                if (n_seen < PD_ARRAY_SIZE(seen))
                        seen[n_seen++] = dev;
                struct pd_cg_hier *e = &h[n];
                *e = (struct pd_cg_hier){ .rootfd = -1 };
                e->ctrls = parse_super_opts(sopts, e->name, sizeof e->name);
                if (want != PD_CG_EVERY && !(e->ctrls & want))
                        continue;
                snprintf(e->mnt, sizeof e->mnt, "%s", mnt);
                if ((r = open_root(e, err)) < 0)
                        break;
                n++;
        }
        free(line);
        fclose(f);
        if (r < 0) {
                pd_cg_close(h, n);
                return r;
        }
        return (int)n;
}

/* "<path>/<file>" relative to the hierarchy's root. */
static int sub(char *buf, size_t size, const char *path, const char *file)
{
        while (*path == '/')
                path++;
        int n = snprintf(buf, size, "%s%s%s", *path ? path : "", *path && file ? "/" : "", file ? file : "");
        if (n < 0 || (size_t)n >= size)
                return -ENAMETOOLONG;
        if (!*buf)
                strcpy(buf, ".");
        return 0;
}

int pd_cg_write(const struct pd_cg_hier *h, const char *path, const char *file, const char *val,
                struct pd_error *err)
{
        char rel[PATH_MAX];
        if (sub(rel, sizeof rel, path, file) < 0)
                return pd_error_setx(err, ENAMETOOLONG, "cgroup path '%s' too long", path);
        _pd_cleanup_close_ int fd = openat(h->rootfd, rel, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return pd_error_set(err, errno, "open '%s/%s'", h->mnt, rel);
        int r = pd_write_all(fd, val, strlen(val));
        if (r < 0)
                return pd_error_set(err, -r, "write '%s' to '%s/%s'", val, h->mnt, rel);
        return 0;
}

ssize_t pd_cg_read(const struct pd_cg_hier *h, const char *path, const char *file, char *buf, size_t size)
{
        char rel[PATH_MAX];
        if (sub(rel, sizeof rel, path, file) < 0)
                return -ENAMETOOLONG;
        return pd_read_file_at(h->rootfd, rel, buf, size);
}

/* A new v1 cpuset is empty and refuses tasks until it has cpus and mems:
 * give it its parent's. */
static void cpuset_inherit(const struct pd_cg_hier *h, const char *rel)
{
        char parent[PATH_MAX], val[1024];
        snprintf(parent, sizeof parent, "%s", rel);
        char *slash = strrchr(parent, '/');
        if (slash)
                *slash = '\0';
        else
                strcpy(parent, ".");
        static const char *const files[] = { "cpuset.cpus", "cpuset.mems" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(files); i++)
                if (pd_cg_read(h, parent, files[i], val, sizeof val) > 0)
                        (void)pd_cg_write(h, rel, files[i], val, NULL);
}

int pd_cg_mkdir(const struct pd_cg_hier *h, const char *path, const char *delegate, struct pd_error *err)
{
        char rel[PATH_MAX];
        if (sub(rel, sizeof rel, path, NULL) < 0)
                return pd_error_setx(err, ENAMETOOLONG, "cgroup path '%s' too long", path);
        bool cpuset = !h->v2 && (h->ctrls & PD_CG_BIT(PD_CG_CPUSET));
        if (mkdirat(h->rootfd, rel, 0755) == 0) {
                if (cpuset)
                        cpuset_inherit(h, rel);
                return 0;
        }
        if (errno == EEXIST)
                return 0;
        if (errno != ENOENT)
                return pd_error_set(err, errno, "mkdir '%s/%s'", h->mnt, rel);
        for (char *s = rel;; s++) {
                if (*s != '/' && *s != '\0')
                        continue;
                char saved = *s;
                *s = '\0';
                if (mkdirat(h->rootfd, rel, 0755) == 0) {
                        if (cpuset)
                                cpuset_inherit(h, rel);
                        if (h->v2 && saved && delegate)
                                (void)pd_cg_write(h, rel, "cgroup.subtree_control", delegate, NULL);
                } else if (errno != EEXIST) {
                        return pd_error_set(err, errno, "mkdir '%s/%s'", h->mnt, rel);
                }
                *s = saved;
                if (!saved)
                        return 0;
        }
}

int pd_cg_attach(const struct pd_cg_hier *h, const char *path, pid_t pid, struct pd_error *err)
{
        char buf[32];
        snprintf(buf, sizeof buf, "%d", (int)pid);
        return pd_cg_write(h, path, "cgroup.procs", buf, err);
}

int pd_cg_procs_at(int dirfd, const char *what, pid_t **out, size_t *count, struct pd_error *err)
{
        *out = NULL;
        *count = 0;
        int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
        if (!f) {
                int e = errno;
                if (fd >= 0)
                        close(fd);
                return pd_error_set(err, e, "open '%s/cgroup.procs'", what);
        }
        size_t cap = 0;
        int p;
        while (fscanf(f, "%d", &p) == 1) {
                if (*count == cap) {
                        cap = cap ? cap * 2 : 32;
                        pid_t *nv = realloc(*out, cap * sizeof **out);
                        if (!nv) {
                                fclose(f);
                                free(*out);
                                *out = NULL;
                                *count = 0;
                                return pd_error_setx(err, ENOMEM, "read '%s/cgroup.procs'", what);
                        }
                        *out = nv;
                }
                (*out)[(*count)++] = p;
        }
        fclose(f);
        return 0;
}

int pd_cg_procs(const struct pd_cg_hier *h, const char *path, pid_t **out, size_t *n, struct pd_error *err)
{
        char rel[PATH_MAX], what[PATH_MAX + 96];
        if (sub(rel, sizeof rel, path, NULL) < 0)
                return pd_error_setx(err, ENAMETOOLONG, "cgroup path '%s' too long", path);
        snprintf(what, sizeof what, "%s/%s", h->mnt, rel);
        _pd_cleanup_close_ int dfd = openat(h->rootfd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                *out = NULL;
                *n = 0;
                return pd_error_set(err, errno, "open '%s'", what);
        }
        return pd_cg_procs_at(dfd, what, out, n, err);
}
