/* Named snapshots of a microvm guest (tier.h's snapshot op): the whole
 * guest (memory, devices, and its writable layer, a tmpfs in that memory)
 * saved once into <state>/templates/<name>/vmstate beside a "snapshot"
 * record (isolation microvm, the limits QEMU must be started with again).
 * A sandbox started from it is a full restore: processes, memory and files
 * as they were at the snapshot; the relay's SYNC gives it the host's clock
 * and fresh RNG seed, so no two sandboxes of one snapshot share RNG state.
 * The file is never written after the rename: sandboxes read it once. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tiers/microvm_int.h"
#include "lib/state.h"
#include "lib/template.h"
#include "lib/util.h"

#define SNAP_STATE "vmstate"

int pd_microvm_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err)
{
        struct pd_state *st = sb->state;
        if (sb->paused && sb->agent_pidfd < 0)
                return pd_error_setx(err, EBUSY, "sandbox %s is paused to disk: resume it first", sb->id);
        if (pd_microvm_refuse_with_network(sb, "a snapshot", err) < 0)
                return -1;
        char tdir[PATH_MAX], path[PATH_MAX + 80], tmp[PATH_MAX + 96];
        snprintf(tdir, sizeof tdir, "%s/templates", st->dir);
        snprintf(path, sizeof path, "%s/%s", tdir, name);
        if (access(path, F_OK) == 0)
                return pd_error_setx(err, EEXIST, "a template or snapshot named '%s' exists already", name);
        if (pd_mkdir_p(tdir, 0755, err) < 0)
                return -1;
        snprintf(tmp, sizeof tmp, "%s/.snap-%s-%d", tdir, name, (int)getpid());
        (void)pd_rm_rf(tmp, NULL);
        if (mkdir(tmp, 0700) < 0)
                return pd_error_set(err, errno, "create '%s'", tmp);
        int r = 0;
        _pd_cleanup_close_ int tfd = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
        _pd_cleanup_close_ int fd = tfd < 0 ? -1 : openat(tfd, SNAP_STATE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = pd_error_set(err, errno, "create '%s/%s'", tmp, SNAP_STATE);
                goto fail;
        }
        if ((r = pd_microvm_save_full(sb, fd, err)) < 0)
                goto fail;
        if (fsync(fd) < 0) {
                r = pd_error_set(err, errno, "fsync '%s/%s'", tmp, SNAP_STATE);
                goto fail;
        }
        struct pd_record rec;
        pd_record_init(&rec);
        /* self-contained: it stacks on nothing, whatever sb started from */
        pd_record_add(&rec, "parent", "base");
        pd_record_add(&rec, "source", "%s", sb->id);
        pd_record_add(&rec, "isolation", "microvm");
        pd_record_add(&rec, "created", "%lld", (long long)time(NULL));
        pd_record_add(&rec, "memory_bytes", "%" PRIu64, sb->spec.memory_bytes);
        pd_record_add(&rec, "millicpus", "%u", sb->spec.millicpus);
        if ((r = pd_snapshot_install(tfd, tmp, path, name, &rec, err)) < 0)
                goto fail;
        return 0;
fail:
        (void)pd_rm_rf(tmp, NULL);
        return pd_error_prefix(err, "snapshot '%s' of sandbox %s", name, sb->id);
}

int pd_microvm_create_from_snapshot(struct pd_sandbox *sb, struct pd_error *err)
{
        const char *name = sb->spec.template_name;
        struct pd_state *st = sb->state;
        if (!name || !strcmp(name, "base") || !pd_snapshot_is(st, name))
                return 0;
        char dir[PATH_MAX + 80];
        snprintf(dir, sizeof dir, "templates/%s", name);
        _pd_cleanup_close_ int d = openat(st->dirfd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct pd_record rec;
        char iso[32] = "", mem[32] = "", cpus[32] = "";
        if (d < 0 || pd_record_read(d, "snapshot", &rec, err) < 0)
                return pd_error_set(err, d < 0 ? errno : EIO, "snapshot '%s'", name);
        (void)pd_record_get(&rec, "isolation", iso, sizeof iso);
        if (strcmp(iso, "microvm"))
                return pd_error_setx(err, ENOTSUP, "snapshot '%s' was taken on the %s tier, not microvm", name,
                                     iso[0] ? iso : "container");
        /* QEMU must be started as the saved guest was: same RAM, same vCPUs */
        (void)pd_record_get(&rec, "memory_bytes", mem, sizeof mem);
        (void)pd_record_get(&rec, "millicpus", cpus, sizeof cpus);
        uint64_t m = strtoull(mem, NULL, 10);
        unsigned c = (unsigned)strtoul(cpus, NULL, 10);
        unsigned vc = c > 1000 ? (c + 999) / 1000 : 1, want = sb->spec.millicpus > 1000 ? (sb->spec.millicpus + 999) / 1000 : 1;
        if (m != sb->spec.memory_bytes || vc != want)
                return pd_error_setx(err, EINVAL, "snapshot '%s' is a guest of %" PRIu64 " MiB and %u vCPU: start it "
                                                  "with that memory and cpus", name, m >> 20, vc);
        struct pd_template t = { .n_stack = 1 };
        snprintf(t.name, sizeof t.name, "%s", name);
        snprintf(t.stack[0], sizeof t.stack[0], "%s", name);
        /* recorded as a user first: destroy (also of a failed create) forgets it */
        snprintf(sb->template_buf, sizeof sb->template_buf, "%s", name);
        int r = pd_snapshot_use(st, &t, sb->id, err);
        if (r < 0)
                return r;
        _pd_cleanup_close_ int fd = openat(d, SNAP_STATE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open '%s/%s'", dir, SNAP_STATE);
        if ((r = pd_microvm_start_from(sb, fd, err)) < 0)
                return r;
        return 1;
}
