/* The gvisor tier's checkpoints (docs/gvisor.md, "Pause to disk, snapshots,
 * fork"): `runsc checkpoint --image-path DIR` saves the whole Sentry (the
 * workload's memory, its processes and the writable overlay, which lives in
 * that memory) and stops the sandbox; `runsc restore` starts a Sentry from
 * it, in the same root tree. On that:
 *   pause to disk   checkpoint into <state>/gvisor/paused/<id>; resume
 *                   restores the same sandbox from it
 *   snapshot        checkpoint into <state>/templates/<name>/ (a "snapshot"
 *                   record: isolation gvisor, the tree its root was built
 *                   from); the source is restored from it at once, and
 *                   new sandboxes start from it
 *   fork            checkpoint once into <state>/gvisor/fork-<id>; the
 *                   source and each copy restored from it
 * The image is written on the state dir's disk, never the runtime dir's
 * tmpfs: the Sentry writes it, and pages of a tmpfs would be charged to its
 * memory cgroup and never reclaimed (a small limit OOM-kills the Sentry).
 *
 * The Sentry cannot save a socket backed by a host socket ("Cannot save
 * endpoint with bound host socket": tried, and the failed checkpoint killed
 * the sandbox), and the agent's channel is one. So before each checkpoint
 * the agent is told (SIGUSR1, through `runsc kill`) to close its listener
 * and every connection; it unlinks its socket last, which is how we know it
 * is done. After a restore, SIGUSR2 makes it bind again (gvisor.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/state.h"
#include "lib/template.h"
#include "lib/util.h"
#include "tiers/gvisor_int.h"

#define GV_QUIESCE_TIMEOUT_MS 10000
#define GV_IMAGE "checkpoint.img"

static void paused_dir(const struct pd_sandbox *sb, char *buf, size_t size)
{
        snprintf(buf, size, "%s/gvisor/paused/%s", sb->state->dir, sb->id);
}

/* The agent holds no host socket now: it says so with a file beside its
 * socket (the gofer will not unlink the socket itself). */
static int wait_quiet(struct pd_sandbox *sb, struct pd_error *err)
{
        char dir[PATH_MAX + 16], quiet[PATH_MAX + 16];
        snprintf(dir, sizeof dir, "%s/sock", sb->dir);
        snprintf(quiet, sizeof quiet, "%s.quiet", sb->socket_path);
        _pd_cleanup_close_ int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (ino < 0 || inotify_add_watch(ino, dir, IN_CREATE) < 0)
                return pd_error_set(err, errno, "inotify on '%s'", dir);
        uint64_t end = pd_now_ms() + GV_QUIESCE_TIMEOUT_MS;
        while (access(quiet, F_OK) < 0) {
                uint64_t now = pd_now_ms();
                if (now >= end)
                        return pd_error_setx(err, ETIMEDOUT, "the agent did not let go of its socket");
                struct pollfd p[2] = { { .fd = ino, .events = POLLIN }, { .fd = sb->agent_pidfd, .events = POLLIN } };
                if (poll(p, 2, (int)(end - now)) < 0 && errno != EINTR)
                        return pd_error_set(err, errno, "poll");
                if (p[1].revents)
                        return pd_error_setx(err, ECHILD, "the gVisor sandbox exited");
                char buf[4096];
                while (read(ino, buf, sizeof buf) > 0)
                        ;
        }
        return 0;
}

/* The socket and the marker of the Sentry that was: the restored agent
 * binds anew. */
static void clear_sock(struct pd_sandbox *sb)
{
        char quiet[PATH_MAX + 16];
        snprintf(quiet, sizeof quiet, "%s.quiet", sb->socket_path);
        unlink(quiet);
        unlink(sb->socket_path);
}

/* Save the running sandbox into directory image (created here) and end its
 * Sentry. On failure the sandbox is left running if it still can be. */
static int checkpoint(struct pd_sandbox *sb, const char *image, struct pd_error *err)
{
        if (sb->paused)
                return pd_error_setx(err, EBUSY, "sandbox %s is paused: resume it first", sb->id);
        /* runsc's netstack over a host veth: its restore would need the
         * veth wired again before it, which is not done */
        if (pd_gv(sb)->net)
                return pd_error_setx(err, ENOTSUP, "the gvisor tier cannot checkpoint a sandbox with a network "
                                                   "(pause to disk, snapshots and fork need network none)");
        if (mkdir(image, 0700) < 0)
                return pd_error_set(err, errno, "create '%s'", image);
        /* a marker the workload may have left (the directory is writable
         * from inside) would be taken for the agent's */
        char marker[PATH_MAX + 16];
        snprintf(marker, sizeof marker, "%s.quiet", sb->socket_path);
        unlink(marker);
        const char *quiet[] = { "kill", sb->id, "USR1" };
        int r = pd_gv_runsc_call(sb, quiet, 3, err);
        if (r == 0 && (r = wait_quiet(sb, err)) == 0) {
                const char *ck[] = { "checkpoint", "--image-path", image, sb->id };
                r = pd_gv_runsc_call(sb, ck, 4, err);
        }
        if (r < 0) {
                /* still running (the checkpoint never began): bind again */
                const char *wake[] = { "kill", sb->id, "USR2" };
                clear_sock(sb);
                (void)pd_gv_runsc_call(sb, wake, 3, NULL);
                (void)pd_rm_rf(image, NULL);
                return pd_error_prefix(err, "checkpoint");
        }
        /* the Sentry has exited (checkpoint stops it); the gofer with it.
         * runsc keeps the container as "stopped": gone, so a restore may
         * take its name again */
        pd_host_kill_agent(sb);
        sb->agent_start = 0;
        const char *del[] = { "delete", "--force", sb->id };
        (void)pd_gv_runsc_call(sb, del, 3, NULL);
        return 0;
}

/* Restore sb's own Sentry from image. */
static int restore_self(struct pd_sandbox *sb, const char *image, struct pd_error *err)
{
        clear_sock(sb);
        int r = pd_gv_relaunch(sb, image, err);
        if (r < 0) {
                pd_host_kill_agent(sb);
                return pd_error_prefix(err, "restore");
        }
        return pd_sandbox_save(sb, err);
}

/* The image's pages out of the page cache: the Sentry wrote them, so they
 * are charged to the sandbox's memory cgroup, which a paused-to-disk
 * sandbox should not hold (measured: docs/gvisor.md). Written back first
 * (DONTNEED drops clean pages only); best effort: a page left is only
 * reclaimable cache. */
static void drop_image_cache(const char *dir)
{
        _pd_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
        if (!d)
                return;
        dfd = -1;       /* the DIR owns it */
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_type != DT_REG)
                        continue;
                _pd_cleanup_close_ int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue;
                (void)fdatasync(fd);
                (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        }
        closedir(d);
}

int pd_gv_pause_to_disk(struct pd_sandbox *sb, struct pd_error *err)
{
        char dir[PATH_MAX], parent[PATH_MAX];
        paused_dir(sb, dir, sizeof dir);
        if (access(dir, F_OK) == 0)
                return pd_error_setx(err, EALREADY, "sandbox %s is already paused to disk", sb->id);
        snprintf(parent, sizeof parent, "%s/gvisor/paused", sb->state->dir);
        if (pd_mkdir_p(parent, 0700, err) < 0)
                return -1;
        int r = checkpoint(sb, dir, err);
        if (r < 0)
                return pd_error_prefix(err, "pause to disk");
        drop_image_cache(dir);
        sb->paused = true;
        return pd_sandbox_save(sb, err);
}

int pd_gv_resume(struct pd_sandbox *sb, struct pd_error *err)
{
        char dir[PATH_MAX];
        paused_dir(sb, dir, sizeof dir);
        if (access(dir, F_OK) < 0)
                return pd_gv_resume_memory(sb, err);
        if (access(sb->dir, F_OK) < 0)
                return pd_error_setx(err, ENOTSUP, "resume from disk: sandbox %s's runtime dir is gone (a host "
                                                   "reboot?): the gvisor tier cannot rebuild it yet", sb->id);
        int r = restore_self(sb, dir, err);
        if (r < 0)
                return pd_error_prefix(err, "resume from disk");
        (void)pd_rm_rf(dir, NULL);
        return 0;
}

int pd_gv_adopt(struct pd_sandbox *sb, struct pd_error *err)
{
        /* paused to disk: no Sentry to find, resume starts one */
        char dir[PATH_MAX];
        paused_dir(sb, dir, sizeof dir);
        if (access(dir, F_OK) == 0) {
                sb->paused = true;
                return 0;
        }
        return pd_host_adopt(sb, err);
}

void pd_gv_forget(struct pd_sandbox *sb)
{
        char dir[PATH_MAX];
        paused_dir(sb, dir, sizeof dir);
        (void)pd_rm_rf(dir, NULL);
        if (sb->template_buf[0])
                pd_snapshot_unuse(sb->state, sb->template_buf, sb->id);
}

/* The "root" record written beside a checkpoint (snapshot and fork): the
 * tree the source's root was built from. */
static int write_root(const struct pd_sandbox *src, int dirfd, const char *file, struct pd_error *err)
{
        const struct pd_gv_data *g = pd_gv(src);
        struct pd_record rec;
        pd_record_init(&rec);
        pd_record_add(&rec, "source", "%s", src->id);
        pd_record_add(&rec, "isolation", "gvisor");
        pd_record_add(&rec, "parent", "base");
        pd_record_add(&rec, "created", "%lld", (long long)time(NULL));
        if (g->root_dir[0])
                pd_record_add(&rec, "gv_root_dir", "%s", g->root_dir);
        else
                pd_record_add(&rec, "gv_root", "%s", g->root_name[0] ? g->root_name : "base");
        return pd_record_write(dirfd, file, &rec, err);
}

int pd_gv_image_root(struct pd_sandbox *sb, const char *image, char root_name[65], char root_dir[PATH_MAX],
                     struct pd_error *err)
{
        _pd_cleanup_close_ int d = open(image, O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct pd_record rec;
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/snapshot", image);
        const char *file = access(p, F_OK) == 0 ? "snapshot" : "root";
        if (d < 0 || pd_record_read(d, file, &rec, err) < 0)
                return pd_error_set(err, d < 0 ? errno : EIO, "checkpoint '%s'", image);
        root_name[0] = root_dir[0] = '\0';
        (void)pd_record_get(&rec, "gv_root", root_name, 65);
        (void)pd_record_get(&rec, "gv_root_dir", root_dir, PATH_MAX);
        if (!root_name[0] && !root_dir[0])
                return pd_error_setx(err, EINVAL, "checkpoint '%s' names no root tree", image);
        return 0;
}

int pd_gv_snapshot_image(struct pd_sandbox *sb, char *image, size_t size, struct pd_error *err)
{
        const char *name = sb->spec.template_name;
        struct pd_state *st = sb->state;
        if (!name || !strcmp(name, "base") || !pd_snapshot_is(st, name))
                return 0;
        char dir[PATH_MAX + 80], iso[32] = "";
        snprintf(dir, sizeof dir, "templates/%s", name);
        _pd_cleanup_close_ int d = openat(st->dirfd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct pd_record rec;
        if (d < 0 || pd_record_read(d, "snapshot", &rec, err) < 0)
                return pd_error_set(err, d < 0 ? errno : EIO, "snapshot '%s'", name);
        (void)pd_record_get(&rec, "isolation", iso, sizeof iso);
        /* a filesystem snapshot: its layers over its template make the
         * root (gvisor_root.c) */
        if (!iso[0] || !strcmp(iso, "container") || !strcmp(iso, "supervised"))
                return 0;
        if (strcmp(iso, "gvisor"))
                return pd_error_setx(err, ENOTSUP, "snapshot '%s' was taken on the %s tier (a memory image of "
                                                   "its own): the gvisor tier starts from its own snapshots and "
                                                   "from container and supervised ones", name, iso);
        struct pd_template t = { .n_stack = 1 };
        snprintf(t.name, sizeof t.name, "%s", name);
        snprintf(t.stack[0], sizeof t.stack[0], "%s", name);
        /* recorded as a user first: destroy (also of a failed create) forgets it */
        snprintf(sb->template_buf, sizeof sb->template_buf, "%s", name);
        int r = pd_snapshot_use(st, &t, sb->id, err);
        if (r < 0)
                return r;
        snprintf(image, size, "%s/templates/%s", st->dir, name);
        return 1;
}

int pd_gv_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err)
{
        struct pd_state *st = sb->state;
        char tdir[PATH_MAX], path[PATH_MAX + 80], tmp[PATH_MAX + 96];
        snprintf(tdir, sizeof tdir, "%s/templates", st->dir);
        snprintf(path, sizeof path, "%s/%s", tdir, name);
        if (access(path, F_OK) == 0)
                return pd_error_setx(err, EEXIST, "a template or snapshot named '%s' exists already", name);
        if (pd_mkdir_p(tdir, 0755, err) < 0)
                return -1;
        snprintf(tmp, sizeof tmp, "%s/.snap-%s-%d", tdir, name, (int)getpid());
        (void)pd_rm_rf(tmp, NULL);
        int r = checkpoint(sb, tmp, err);
        if (r < 0)
                return pd_error_prefix(err, "snapshot '%s' of sandbox %s", name, sb->id);
        /* the source goes on from the image it just saved */
        r = restore_self(sb, tmp, err);
        _pd_cleanup_close_ int tfd = r < 0 ? -1 : open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (r == 0 && tfd < 0)
                r = pd_error_set(err, errno, "open '%s'", tmp);
        if (r == 0) {
                const struct pd_gv_data *g = pd_gv(sb);
                /* the root's template is its parent: a snapshot or image
                 * template under it then cannot go while this one stays
                 * (registered below; base and directories need nothing) */
                const char *parent = !g->root_dir[0] && g->root_name[0] ? g->root_name : "base";
                struct pd_record rec;
                pd_record_init(&rec);
                pd_record_add(&rec, "parent", "%s", parent);
                pd_record_add(&rec, "source", "%s", sb->id);
                pd_record_add(&rec, "isolation", "gvisor");
                pd_record_add(&rec, "created", "%lld", (long long)time(NULL));
                if (g->root_dir[0])
                        pd_record_add(&rec, "gv_root_dir", "%s", g->root_dir);
                else
                        pd_record_add(&rec, "gv_root", "%s", g->root_name[0] ? g->root_name : "base");
                r = pd_snapshot_install(tfd, tmp, path, name, &rec, err);
                if (r == 0 && (r = pd_snapshot_register(st, name, parent, err)) < 0) {
                        (void)pd_rm_rf(path, NULL);
                        return pd_error_prefix(err, "snapshot '%s' of sandbox %s", name, sb->id);
                }
        }
        if (r < 0) {
                (void)pd_rm_rf(tmp, NULL);
                return pd_error_prefix(err, "snapshot '%s' of sandbox %s", name, sb->id);
        }
        return 0;
}

int pd_gv_fork(struct pd_sandbox *src, struct pd_sandbox *const *dst, unsigned n, struct pd_error *err)
{
        char dir[PATH_MAX], parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s/gvisor", src->state->dir);
        snprintf(dir, sizeof dir, "%s/fork-%s", parent, src->id);
        if (pd_mkdir_p(parent, 0700, err) < 0)
                return -1;
        (void)pd_rm_rf(dir, NULL);
        int r = checkpoint(src, dir, err);
        if (r < 0)
                return pd_error_prefix(err, "fork");
        _pd_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || write_root(src, dfd, "root", err) < 0)
                r = dfd < 0 ? pd_error_set(err, errno, "open '%s'", dir) : -EIO;
        /* the source first: it goes on whatever becomes of the copies */
        int rs = restore_self(src, dir, r < 0 ? NULL : err);
        if (r == 0 && rs < 0)
                r = rs;
        for (unsigned i = 0; r == 0 && i < n; i++) {
                dst[i]->die_with_parent = src->die_with_parent;
                if ((r = pd_gv_create(dst[i], dir, err)) < 0)
                        r = pd_error_prefix(err, "fork %u of %u", i + 1, n);
        }
        (void)pd_rm_rf(dir, NULL);
        return r;
}
