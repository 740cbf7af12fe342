/* A gvisor sandbox's root stacked from layers (gvisor_int.h): a snapshot of
 * a container or supervised sandbox (its layers over its template), an
 * image template (its own layer over its store layers), or both. runsc
 * takes one directory as the root, so the launcher builds an overlay of the
 * layers there in its private mount namespace (gone with runsc's last
 * process, as the base template's binds are) and runsc's
 * --overlay2=root:memory still takes the sandbox's writes in the Sentry's
 * memory: the layers are never written.
 *
 * Owners: snapshot layers keep the ids the sandbox saw (0..65535), as
 * the host's /usr under base does; store layers are owned in the store's
 * range (PD_STORE_UID_BASE + N, template.h), so they are idmapped back to
 * N for the gofer, read-only, nosuid, nodev: root in the image is root in
 * the Sentry, as on the container tier. The upper layer is the launcher's
 * tmpfs: only runsc writes there (the spec's mount points). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"
#include "tiers/gvisor_int.h"

/* an idmapped, read-only clone of path (the store's owners as 0..65535) */
static int store_tree(const char *path, int userns, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "clone mount of '%s'", path);
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                .userns_fd = (uint64_t)userns,
        };
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
                return pd_error_set(err, errno, "idmap '%s' (does its filesystem support idmapped mounts?)", path);
        return PD_TAKE_FD(fd);
}

static int add_path(struct pd_gv_stack *s, const char *path, struct pd_error *err)
{
        if (s->n_lower == PD_GV_MAX_LOWER)
                return pd_error_setx(err, E2BIG, "more than %d layers", PD_GV_MAX_LOWER);
        struct stat st;
        if (stat(path, &st) < 0)
                return pd_error_set(err, errno, "layer '%s'", path);
        if (!S_ISDIR(st.st_mode))
                return pd_error_setx(err, ENOTDIR, "layer '%s' is not a directory", path);
        snprintf(s->lower_src[s->n_lower], PATH_MAX, "%s", path);
        s->lower_fd[s->n_lower++] = -1;
        return 0;
}

int pd_gv_stack_prepare(struct pd_sandbox *sb, const struct pd_template *t, const char *root, struct pd_gv_stack *s,
                        struct pd_error *err)
{
        int r;
        for (unsigned i = 0; i < PD_GV_MAX_LOWER; i++)
                s->lower_fd[i] = -1;
        char path[PATH_MAX];
        for (unsigned k = 0; k < t->n_stack; k++) {
                pd_snapshot_layer_path(sb->state, t->stack[k], NULL, path, sizeof path);
                if ((r = add_path(s, path, err)) < 0)
                        return pd_error_prefix(err, "snapshot '%s'", t->stack[k]);
        }
        if (!t->image) {
                if ((r = add_path(s, t->rootfs, err)) < 0)
                        return pd_error_prefix(err, "template '%s'", t->bottom);
        } else {
                char map[64];
                snprintf(map, sizeof map, "%u 0 %u\n", PD_STORE_UID_BASE, PD_STORE_ID_RANGE);
                _pd_cleanup_close_ int userns = pd_userns_make(map, map, &s->holder, err);
                if (userns < 0)
                        return pd_error_prefix(err, "template '%s'", t->bottom);
                if (s->n_lower + 1 + t->n_layers > PD_GV_MAX_LOWER)
                        return pd_error_setx(err, E2BIG, "template '%s': %u layers and %u snapshots, more than the "
                                             "%d a gvisor root stacks", t->bottom, t->n_layers + 1, t->n_stack,
                                             PD_GV_MAX_LOWER);
                for (unsigned k = 0; k <= t->n_layers; k++) {
                        if (k == 0)
                                snprintf(path, sizeof path, "%s", t->rootfs);
                        else
                                pd_template_layer_path(sb->state, t->layers[k - 1], path, sizeof path);
                        int fd = store_tree(path, userns, err);
                        if (fd < 0)
                                return pd_error_prefix(err, "template '%s'", t->bottom);
                        s->lower_src[s->n_lower][0] = '\0';
                        s->lower_fd[s->n_lower++] = fd;
                }
        }
        /* lowerdir=l0:l1:..., paths relative to the tmpfs (the child's cwd):
         * short whatever the state dir's path */
        size_t n = (size_t)snprintf(s->root_opts, sizeof s->root_opts, "lowerdir=");
        for (unsigned i = 0; i < s->n_lower; i++)
                n += (size_t)snprintf(s->root_opts + n, sizeof s->root_opts - n, "%sl%u", i ? ":" : "", i);
        snprintf(s->root_opts + n, sizeof s->root_opts - n, ",upperdir=u,workdir=w,userxattr");
        /* grafts (base's /usr ...): their snapshot layers over the host's tree */
        s->n_grafts = t->n_grafts;
        s->n_graft_lower = t->n_stack + 1;
        for (unsigned g = 0; g < t->n_grafts; g++) {
                for (unsigned k = 0; k < t->n_stack; k++)
                        pd_snapshot_layer_path(sb->state, t->stack[k], t->grafts[g].target, s->graft_src[g][k],
                                               PATH_MAX);
                snprintf(s->graft_src[g][t->n_stack], PATH_MAX, "%s", t->grafts[g].source);
                snprintf(s->graft_dst[g], sizeof s->graft_dst[g], "%s/%s", root, t->grafts[g].target);
                n = (size_t)snprintf(s->graft_opts[g], sizeof s->graft_opts[g], "lowerdir=");
                for (unsigned k = 0; k < s->n_graft_lower; k++)
                        n += (size_t)snprintf(s->graft_opts[g] + n, sizeof s->graft_opts[g] - n, "%sg%u_%u",
                                              k ? ":" : "", g, k);
                snprintf(s->graft_opts[g] + n, sizeof s->graft_opts[g] - n, ",userxattr");
        }
        return 0;
}

/* "<p><u>" or "<p><u>_<v>" into out (async-signal-safe) */
static void name(char *out, char p, unsigned u, int v)
{
        char tmp[32];
        size_t o = 0, t = 0;
        out[o++] = p;
        do
                tmp[t++] = (char)('0' + u % 10);
        while ((u /= 10));
        while (t)
                out[o++] = tmp[--t];
        if (v >= 0) {
                out[o++] = '_';
                unsigned w = (unsigned)v;
                do
                        tmp[t++] = (char)('0' + w % 10);
                while ((w /= 10));
                while (t)
                        out[o++] = tmp[--t];
        }
        out[o] = '\0';
}

static int bind_ro(const char *src, const char *dst)
{
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                return -1;
        return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

int pd_gv_stack_mount(const struct pd_gv_stack *s, const char *root)
{
        char d[40];
        if (mount("paddock-gvisor-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") < 0 ||
            chdir(root) < 0 || mkdir("u", 0755) < 0 || mkdir("w", 0755) < 0)
                return -1;
        for (unsigned i = 0; i < s->n_lower; i++) {
                name(d, 'l', i, -1);
                if (mkdir(d, 0755) < 0)
                        return -1;
                if (s->lower_fd[i] >= 0 ? move_mount(s->lower_fd[i], "", AT_FDCWD, d, MOVE_MOUNT_F_EMPTY_PATH)
                                        : bind_ro(s->lower_src[i], d))
                        return -1;
        }
        for (unsigned g = 0; g < s->n_grafts; g++)
                for (unsigned k = 0; k < s->n_graft_lower; k++) {
                        name(d, 'g', g, (int)k);
                        if (mkdir(d, 0755) < 0 || bind_ro(s->graft_src[g][k], d) < 0)
                                return -1;
                }
        /* over the tmpfs, which stays our cwd: the relative layer paths
         * resolve in it */
        if (mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV, s->root_opts) < 0)
                return -1;
        for (unsigned g = 0; g < s->n_grafts; g++)
                if (mount("overlay", s->graft_dst[g], "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, s->graft_opts[g]) < 0)
                        return -1;
        return chdir("/");
}

void pd_gv_stack_close(struct pd_gv_stack *s)
{
        for (unsigned i = 0; i < s->n_lower; i++)
                if (s->lower_fd[i] >= 0) {
                        close(s->lower_fd[i]);
                        s->lower_fd[i] = -1;
                }
        pd_userns_reap(&s->holder);
}
