/* The container's cgroup, at linux.cgroupsPath in every hierarchy: cgroup v2
 * (one unified tree) or v1 (one tree per mounted hierarchy, as on this
 * project's test machines), through the jail's cgroup layer: discovery,
 * directories, the typed limits writer and the waits are jail/cgroupfs.c,
 * cgroup_limits.c and cgroup_wait.c. What is here is paddock-oci's own:
 * where the cgroup is, and that it is in every hierarchy, as runc does.
 * Resources are written once at create. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "oci/oci.h"
#include "lib/util.h"

#define MAX_HIER 16
/* pause and delete wait on the kernel's events; these bound a task stuck
 * in the kernel. */
#define FREEZE_TIMEOUT_MS 10000
#define REMOVE_TIMEOUT_MS 10000
/* v2: the controllers each new parent hands down (mkdir -p of the path). */
#define DELEGATE "+memory +pids +cpu +cpuset"

/* Found once per process: paddock-oci runs one verb on one container, and
 * the container's init (a clone) inherits what the runtime found. */
static struct pd_cg_hier hiers[MAX_HIER];
static unsigned n_hiers;
static int version = -1;

static int discover(struct pd_error *err)
{
        if (version >= 0)
                return 0;
        int v, r = pd_cg_discover(hiers, MAX_HIER, PD_CG_EVERY, &v, err);
        if (r < 0)
                return r;
        n_hiers = (unsigned)r;
        version = n_hiers ? v : 0;
        return 0;
}

unsigned oci_cgroup_hierarchies(const struct pd_cg_hier **h)
{
        *h = hiers;
        return discover(NULL) < 0 ? 0 : n_hiers;
}

int oci_cgroup_version(void)
{
        return discover(NULL) < 0 ? 0 : version;
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

static int need_hierarchies(struct pd_error *err)
{
        int r = discover(err);
        if (r < 0)
                return r;
        return n_hiers ? 0 : pd_error_setx(err, ENOENT, "no cgroup hierarchy mounted");
}

static void warn_not_applied(void *ctx, const char *what, const char *why)
{
        oci_warn("linux.resources.%s not applied: %s", what, why);
}

int oci_cgroup_enter(const char *path, pid_t pid, struct pd_error *err)
{
        int r = discover(err);
        for (unsigned i = 0; r == 0 && i < n_hiers; i++)
                r = pd_cg_attach(&hiers[i], path, pid, err);
        return r;
}

int oci_cgroup_setup(const char *path, const struct pd_cg_limits *lim, pid_t pid, struct pd_error *err)
{
        int r = need_hierarchies(err);
        if (r < 0)
                return r;
        /* Before anything is made: the one limit v1 cannot take at all. */
        if (version == 1 && lim->n_unified)
                return pd_error_setx(err, EINVAL, "linux.resources.unified needs cgroup v2; this host has v1");
        for (unsigned i = 0; i < n_hiers; i++)
                if ((r = pd_cg_mkdir(&hiers[i], path, DELEGATE, err)) < 0)
                        return r;
        if ((r = pd_cg_apply(hiers, n_hiers, path, lim, warn_not_applied, NULL, err)) < 0)
                return r;
        return pid > 0 ? oci_cgroup_enter(path, pid, err) : 0;
}

int oci_cgroup_pids(const char *path, pid_t **out, size_t *count, struct pd_error *err)
{
        *out = NULL;
        *count = 0;
        int r = need_hierarchies(err);
        if (r < 0)
                return r;
        /* Every hierarchy holds every process; pids' or freezer's if there. */
        int pick = pd_cg_find(hiers, n_hiers, PD_CG_PIDS);
        if (pick < 0)
                pick = pd_cg_find(hiers, n_hiers, PD_CG_FREEZER);
        return pd_cg_procs(&hiers[pick < 0 ? 0 : pick], path, out, count, err);
}

int oci_cgroup_freeze(const char *path, bool frozen, struct pd_error *err)
{
        int r = discover(err);
        if (r < 0)
                return r;
        int hi = pd_cg_find(hiers, n_hiers, PD_CG_FREEZER);
        if (hi < 0)
                return pd_error_setx(err, ENOTSUP, "no freezer cgroup controller");
        return pd_cg_freeze(&hiers[hi], path, frozen, FREEZE_TIMEOUT_MS, err);
}

bool oci_cgroup_frozen(const char *path)
{
        int hi = discover(NULL) < 0 ? -1 : pd_cg_find(hiers, n_hiers, PD_CG_FREEZER);
        return hi >= 0 && pd_cg_frozen(&hiers[hi], path);
}

int oci_cgroup_destroy(const char *path, struct pd_error *err)
{
        if (!path || !*path || strcmp(path, "/") == 0)
                return 0;
        int r = discover(err);
        if (r < 0)
                return r;
        /* A frozen v1 cgroup's tasks cannot die: thaw first. */
        if (oci_cgroup_frozen(path))
                oci_cgroup_freeze(path, false, NULL);
        for (unsigned i = 0; i < n_hiers; i++) {
                if ((r = pd_cg_remove(&hiers[i], path, REMOVE_TIMEOUT_MS, err)) < 0)
                        return r;
                /* Our default parent: remove it when it is empty. */
                if (strncmp(path, "/paddock-oci/", 13) == 0)
                        (void)unlinkat(hiers[i].rootfd, "paddock-oci", AT_REMOVEDIR);
        }
        return 0;
}
