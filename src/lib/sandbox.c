#include "lib/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/teardown.h"
#include "lib/template.h"
#include "lib/util.h"

/* A sandbox object of tier ops (NULL: out of memory), its tier's data
 * allocated with it. */
static struct pd_sandbox *sandbox_alloc(struct pd_state *st, const char *id, const struct pd_tier_ops *ops)
{
        struct pd_sandbox *sb = calloc(1, sizeof *sb);
        if (!sb)
                return NULL;
        if (ops->data_size && !(sb->tier_data = calloc(1, ops->data_size))) {
                free(sb);
                return NULL;
        }
        sb->ops = ops;
        sb->state = st;
        sb->dirfd = -1;
        sb->agent_pidfd = -1;
        snprintf(sb->id, sizeof sb->id, "%s", id);
        snprintf(sb->dir, sizeof sb->dir, "%s/sandboxes/%s", st->rundir, id);
        snprintf(sb->socket_path, sizeof sb->socket_path, "%s/agent.sock", sb->dir);
        return sb;
}

int pd_sandbox_new(struct pd_state *st, const struct pd_spec *spec, struct pd_sandbox **out,
                   struct pd_error *err)
{
        const struct pd_tier_ops *ops = pd_tier_find(spec->isolation);
        if (!ops)
                return pd_error_setx(err, ENOTSUP,
                                     "isolation '%s' is not available in this version of paddock; "
                                     "use --isolation container (the default)",
                                     pd_isolation_name(spec->isolation));
        int r = pd_tier_check_memory(spec->isolation, spec->memory_bytes, err);
        if (r < 0)
                return r;
        char id[PD_ID_LEN + 1];
        pd_id_new(id);
        struct pd_sandbox *sb = sandbox_alloc(st, id, ops);
        if (!sb)
                return pd_error_set(err, ENOMEM, "allocate sandbox");
        sb->spec = *spec;
        *out = sb;
        return 0;
}

int pd_sandbox_revive(struct pd_state *st, const char *id, const struct pd_spec *spec, struct pd_sandbox **out,
                      struct pd_error *err)
{
        if (pd_id_check(id) < 0)
                return pd_error_setx(err, EINVAL, "invalid sandbox id");
        const struct pd_tier_ops *ops = pd_tier_find(spec->isolation);
        if (!ops)
                return pd_error_setx(err, ENOTSUP, "isolation '%s' is not available", pd_isolation_name(spec->isolation));
        struct pd_sandbox *sb = sandbox_alloc(st, id, ops);
        if (!sb)
                return pd_error_set(err, ENOMEM, "allocate sandbox");
        sb->spec = *spec;
        *out = sb;
        return 0;
}

int pd_sandbox_create(struct pd_sandbox *sb, struct pd_error *err)
{
        int r = sb->ops->create(sb, err);
        if (r < 0) {
                /* Leave nothing behind; the create error is what matters. */
                sb->ops->destroy(sb, NULL);
                return pd_error_prefix(err, "create sandbox");
        }
        return 0;
}

int pd_sandbox_connect(struct pd_sandbox *sb, struct pd_error *err)
{
        return sb->ops->connect(sb, err);
}

int pd_sandbox_stats(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err)
{
        return sb->ops->stats(sb, out, err);
}

int pd_sandbox_pause(struct pd_sandbox *sb, struct pd_error *err)
{
        if (!sb->ops->pause)
                return pd_error_setx(err, ENOTSUP, "the %s tier cannot pause", sb->ops->name);
        int r = sb->ops->pause(sb, err);
        if (r == 0)
                sb->paused = true;
        return r;
}

int pd_sandbox_resume(struct pd_sandbox *sb, struct pd_error *err)
{
        if (!sb->ops->resume)
                return pd_error_setx(err, ENOTSUP, "the %s tier cannot resume", sb->ops->name);
        int r = sb->ops->resume(sb, err);
        if (r == 0)
                sb->paused = sb->paused_files = false;
        return r;
}

int pd_sandbox_pause_mode(struct pd_sandbox *sb, enum pd_pause_mode mode, bool *disk, struct pd_error *err)
{
        bool to_disk = mode == PD_PAUSE_DISK || (mode == PD_PAUSE_DEFAULT && sb->ops->pause_to_disk);
        if (disk)
                *disk = false;
        if (mode == PD_PAUSE_FILES) {
                if (!sb->ops->pause_files)
                        return pd_error_setx(err, ENOTSUP, "the %s tier cannot pause keeping the filesystem only",
                                             sb->ops->name);
                int r = sb->ops->pause_files(sb, err);
                if (r == 0) {
                        /* nothing runs any more: for the layers above, as a
                         * pause to disk (the agent's end is expected) */
                        sb->paused = sb->paused_files = true;
                        if (disk)
                                *disk = true;
                }
                return r;
        }
        if (to_disk) {
                if (!sb->ops->pause_to_disk)
                        return pd_error_setx(err, ENOTSUP,
                                             "the %s tier cannot pause to disk (its pause keeps memory resident)",
                                             sb->ops->name);
                int r = sb->ops->pause_to_disk(sb, err);
                if (r == 0) {
                        sb->paused = true;
                        if (disk)
                                *disk = true;
                }
                return r;
        }
        return pd_sandbox_pause(sb, err);
}

int pd_sandbox_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err)
{
        if (!sb->ops->snapshot)
                return pd_error_setx(err, ENOTSUP, "the %s tier cannot take snapshots", sb->ops->name);
        int r = pd_snapshot_name_check(name, err);
        if (r < 0)
                return r;
        return sb->ops->snapshot(sb, name, err);
}

/* Fork by snapshot + create, for tiers whose state is their filesystem:
 * an unlisted snapshot the copies stack on (removed with the last of
 * them, see pd_snapshot_release). */
static int fork_by_snapshot(struct pd_sandbox *src, struct pd_sandbox *const *dst, unsigned n,
                            struct pd_error *err)
{
        char name[65];
        pd_snapshot_fork_name(src->id, name);
        int r = src->ops->snapshot(src, name, err);
        if (r < 0)
                return pd_error_prefix(err, "fork");
        for (unsigned i = 0; i < n; i++) {
                snprintf(dst[i]->template_buf, sizeof dst[i]->template_buf, "%s", name);
                dst[i]->spec.template_name = dst[i]->template_buf;
                dst[i]->spec.template_dir = NULL;
                if ((r = dst[i]->ops->create(dst[i], err)) < 0)
                        break;
        }
        /* Nothing uses it if even the first create failed. */
        pd_snapshot_release(src->state, name, NULL);
        return r < 0 ? pd_error_prefix(err, "fork") : 0;
}

int pd_sandbox_fork(struct pd_sandbox *sb, struct pd_sandbox **dst, unsigned n, struct pd_error *err)
{
        if (n == 0 || n > PD_FORK_MAX)
                return pd_error_setx(err, EINVAL, "fork count must be 1..%d, not %u", PD_FORK_MAX, n);
        if (!sb->ops->fork && !sb->ops->snapshot)
                return pd_error_setx(err, ENOTSUP, "the %s tier cannot fork", sb->ops->name);
        int r = 0;
        unsigned made = 0;
        for (; made < n; made++) {
                if ((r = pd_sandbox_new(sb->state, &sb->spec, &dst[made], err)) < 0)
                        break;
                if (sb->template_buf[0]) {
                        snprintf(dst[made]->template_buf, sizeof dst[made]->template_buf, "%s", sb->template_buf);
                        dst[made]->spec.template_name = dst[made]->template_buf;
                }
        }
        if (r == 0)
                r = sb->ops->fork ? sb->ops->fork(sb, dst, n, err) : fork_by_snapshot(sb, dst, n, err);
        if (r < 0) {
                for (unsigned i = 0; i < made; i++) {
                        dst[i]->ops->destroy(dst[i], NULL);
                        pd_sandbox_free(dst[i]);
                        dst[i] = NULL;
                }
        }
        return r;
}

int pd_sandbox_destroy(struct pd_sandbox *sb, struct pd_error *err)
{
        int r = sb->ops->destroy(sb, err);
        pd_sandbox_free(sb);
        return r;
}

void pd_sandbox_free(struct pd_sandbox *sb)
{
        if (!sb)
                return;
        if (sb->dirfd >= 0)
                close(sb->dirfd);
        if (sb->agent_pidfd >= 0)
                close(sb->agent_pidfd);
        if (sb->ops && sb->ops->close)
                sb->ops->close(sb);
        free(sb->tier_data);
        free(sb);
}

int pd_sandbox_save(struct pd_sandbox *sb, struct pd_error *err)
{
        struct pd_record rec;
        pd_record_init(&rec);
        pd_record_add(&rec, "tier", "%s", sb->ops->name);
        pd_record_add(&rec, "agent_pid", "%d", (int)sb->agent_pid);
        pd_record_add(&rec, "agent_start", "%" PRIu64, sb->agent_start);
        if (sb->supervisor_pid > 0) {
                pd_record_add(&rec, "supervisor_pid", "%d", (int)sb->supervisor_pid);
                pd_record_add(&rec, "supervisor_start", "%" PRIu64, sb->supervisor_start);
        }
        if (sb->ops->save)
                sb->ops->save(sb, &rec);
        pd_record_add(&rec, "memory", "%" PRIu64, sb->spec.memory_bytes);
        pd_record_add(&rec, "pids", "%u", sb->spec.pids);
        pd_record_add(&rec, "millicpus", "%u", sb->spec.millicpus);
        pd_record_add(&rec, "writable", "%" PRIu64, sb->writable_bytes);
        if (sb->template_buf[0])
                pd_record_add(&rec, "template", "%s", sb->template_buf);
        int dfd = sb->dirfd >= 0 ? sb->dirfd : open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return pd_error_set(err, errno, "open '%s'", sb->dir);
        int r = pd_record_write(dfd, "record", &rec, err);
        if (dfd != sb->dirfd)
                close(dfd);
        return r;
}

int pd_sandbox_load(struct pd_state *st, const char *id, struct pd_sandbox **out, struct pd_error *err)
{
        if (pd_id_check(id) < 0)
                return pd_error_setx(err, EINVAL, "invalid sandbox id '%s'", id);
        struct pd_record rec;
        char dir[PATH_MAX + 16], tier[32];
        snprintf(dir, sizeof dir, "sandboxes/%s", id);
        _pd_cleanup_close_ int dfd = openat(st->rundirfd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || pd_record_read(dfd, "record", &rec, err) < 0)
                return pd_error_setx(err, ENOENT, "no sandbox '%s' in %s", id, st->rundir);
        enum pd_isolation iso;
        const struct pd_tier_ops *ops;
        if (pd_record_get(&rec, "tier", tier, sizeof tier) < 0 || pd_isolation_parse(tier, &iso) < 0 ||
            !(ops = pd_tier_find(iso)))
                return pd_error_setx(err, EINVAL, "sandbox '%s': unreadable record", id);
        struct pd_sandbox *sb = sandbox_alloc(st, id, ops);
        if (!sb)
                return pd_error_set(err, ENOMEM, "allocate sandbox");
        pd_spec_defaults(&sb->spec);
        sb->spec.isolation = iso;
        uint64_t v;
        if (pd_record_get_u64(&rec, "agent_pid", &v) == 0)
                sb->agent_pid = (pid_t)v;
        (void)pd_record_get_u64(&rec, "agent_start", &sb->agent_start);
        if (pd_record_get_u64(&rec, "supervisor_pid", &v) == 0)
                sb->supervisor_pid = (pid_t)v;
        (void)pd_record_get_u64(&rec, "supervisor_start", &sb->supervisor_start);
        if (pd_record_get_u64(&rec, "memory", &v) == 0)
                sb->spec.memory_bytes = v;
        if (pd_record_get_u64(&rec, "pids", &v) == 0)
                sb->spec.pids = (uint32_t)v;
        if (pd_record_get_u64(&rec, "millicpus", &v) == 0)
                sb->spec.millicpus = (uint32_t)v;
        (void)pd_record_get_u64(&rec, "writable", &sb->writable_bytes);
        if (pd_record_get(&rec, "template", sb->template_buf, sizeof sb->template_buf) == 0 &&
            pd_template_name_check(sb->template_buf) == 0)
                sb->spec.template_name = sb->template_buf;
        else
                sb->template_buf[0] = '\0';
        if (ops->load)
                ops->load(sb, &rec);
        *out = sb;
        return 0;
}

int pd_gc(struct pd_state *st, int *destroyed, struct pd_error *err)
{
        int count = 0, ret = 0;
        /* a `paddock run` teardown still in flight would race this one on
         * the same sandbox: let it finish first (lib/teardown.h) */
        (void)pd_teardown_wait(st);
        _pd_cleanup_close_ int dfd = openat(st->rundirfd, "sandboxes", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                DIR *d = fdopendir(dfd);
                if (d) {
                        dfd = -1;
                        struct dirent *de;
                        while ((de = readdir(d))) {
                                if (de->d_name[0] == '.')
                                        continue;
                                struct pd_sandbox *sb = NULL;
                                struct pd_error e2;
                                if (pd_sandbox_load(st, de->d_name, &sb, &e2) < 0) {
                                        /* no usable record: still remove the directory */
                                        char path[PATH_MAX + 300];
                                        snprintf(path, sizeof path, "%s/sandboxes/%s", st->rundir, de->d_name);
                                        pd_rm_rf(path, NULL);
                                        continue;
                                }
                                if (pd_sandbox_destroy(sb, &e2) < 0 && ret == 0)
                                        ret = pd_error_setx(err, e2.code, "%s", e2.msg);
                                count++;
                        }
                        closedir(d);
                }
        }
        /* Anything the records missed (a crash between steps): each tier's
         * own sweep, once per distinct one (tiers share theirs). */
        for (int i = 0; i < PD_ISO__MAX; i++) {
                const struct pd_tier_ops *t = pd_tier_find((enum pd_isolation)i);
                bool seen = false;
                for (int j = 0; j < i && !seen; j++)
                        seen = pd_tier_find((enum pd_isolation)j)->gc == t->gc;
                if (t->gc && !seen && t->gc(st, ret == 0 ? err : NULL) < 0 && ret == 0)
                        ret = -EIO;
        }
        /* The runtime dirs are this state dir's own: remove them once empty. */
        (void)unlinkat(st->rundirfd, "sandboxes", AT_REMOVEDIR);
        (void)rmdir(st->rundir);
        (void)rmdir("/dev/shm/paddock");
        if (destroyed)
                *destroyed = count;
        return ret;
}

int pd_sandbox_net_info(struct pd_sandbox *sb, struct pd_net_info *out, struct pd_error *err)
{
        *out = (struct pd_net_info){ 0 };
        if (!sb->ops->net_info)
                return pd_error_setx(err, ENOENT, "the %s tier has no network (mode none)", sb->ops->name);
        return sb->ops->net_info(sb, out, err);
}

int pd_sandbox_net_update(struct pd_sandbox *sb, const struct pd_netpol *pol, struct pd_error *err)
{
        if (!sb->ops->net_update)
                return pd_error_setx(err, ENOTSUP, "the %s tier has no network to change", sb->ops->name);
        return sb->ops->net_update(sb, pol, err);
}

void pd_sandbox_describe(const struct pd_sandbox *sb, struct pd_tier_info *out)
{
        *out = (struct pd_tier_info){ 0 };
        if (sb->ops->describe)
                sb->ops->describe(sb, out);
}
