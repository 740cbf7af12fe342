/* microvm isolation, the runtime's side: the root image made from the
 * bundle's rootfs (cached by content), QEMU booted from it (jailed as the
 * microvm tier does, src/vm/qemu.c), its channel relay, and the shim that
 * becomes the container's pid. Records: <dir>/vm.json (QEMU, relay, uid
 * slot, runtime dir); the sockets live in <paddock rundir>/oci-<hash>/
 * (short paths: a unix socket name is at most 107 bytes). */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "jail/helper_proc.h"
#include "lib/state.h"
#include "jail/userns.h"
#include "lib/util.h"
#include "oci/ocivm.h"
#include "vm/vm.h"

#define VM_BOOT_TIMEOUT_MS 180000       /* a cold boot under TCG on a busy host */
#define VM_DEFAULT_MEMORY (512ull << 20)
#define VM_MIN_MEMORY (128ull << 20)
#define VM_MAX_MEMORY (64ull << 30)
#define QEMU_OVERHEAD (384ull << 20)    /* QEMU itself beside the guest (TCG's code cache) */
#define IMAGE_KEEP_S (24 * 3600)        /* unused root images older than this are dropped */

bool oci_vm_is(json_t *config)
{
        json_t *iso = json_object_get(json_object_get(config, "annotations"), "run.oci.paddock.isolation");
        return json_is_string(iso) && strcmp(json_string_value(iso), "microvm") == 0;
}

/* ---- the root image: mkfs.erofs of the rootfs, keyed by a stat walk ---- */

static uint64_t walk_hash;
static size_t walk_root_len;

static int hash_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
        (void)type;
        (void)ftw;
        struct {
                uint64_t ino, size, mtime_s, mtime_ns, ctime_s, ctime_ns;
                uint32_t mode, uid, gid;
        } k = { sb->st_ino, (uint64_t)sb->st_size, (uint64_t)sb->st_mtim.tv_sec, (uint64_t)sb->st_mtim.tv_nsec,
                (uint64_t)sb->st_ctim.tv_sec, (uint64_t)sb->st_ctim.tv_nsec, sb->st_mode, sb->st_uid, sb->st_gid };
        const char *rel = path + walk_root_len;
        walk_hash = pd_vm_hash(walk_hash, rel, strlen(rel) + 1);
        walk_hash = pd_vm_hash(walk_hash, &k, sizeof k);
        return 0;
}

/* Unused images (mtime is touched on every use) go after a day: a VM
 * still running from one holds its inode through its jail's bind mount. */
static void drop_old_images(const char *vmdir, const char *keep)
{
        DIR *d = opendir(vmdir);
        if (!d)
                return;
        struct dirent *de;
        time_t now = time(NULL);
        while ((de = readdir(d))) {
                struct stat sb;
                if (strncmp(de->d_name, "oci-", 4) || strcmp(de->d_name, keep) == 0 ||
                    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (now - sb.st_mtime > IMAGE_KEEP_S)
                        (void)unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
}

static int root_image(struct pd_state *ps, const char *rootfs, char *out, size_t size, struct pd_error *err)
{
        walk_hash = PD_VM_HASH_INIT;
        walk_root_len = strlen(rootfs);
        if (nftw(rootfs, hash_entry, 64, FTW_PHYS | FTW_MOUNT) < 0)
                return pd_error_set(err, errno ? errno : EIO, "read the rootfs '%s'", rootfs);
        char vmdir[PATH_MAX], name[64];
        snprintf(vmdir, sizeof vmdir, "%s/vm", ps->dir);
        if (pd_mkdir_p(vmdir, 0700, err) < 0)
                return -1;
        snprintf(name, sizeof name, "oci-%016" PRIx64 ".erofs", walk_hash);
        if ((size_t)snprintf(out, size, "%s/%s", vmdir, name) >= size)
                return pd_error_setx(err, ENAMETOOLONG, "state dir path too long");
        char lockp[PATH_MAX + 16];
        snprintf(lockp, sizeof lockp, "%s/oci-image.lock", vmdir);
        _pd_cleanup_close_ int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock < 0 || flock(lock, LOCK_EX) < 0)
                return pd_error_set(err, errno, "lock '%s'", lockp);
        if (access(out, R_OK) == 0) {
                (void)utimensat(AT_FDCWD, out, NULL, 0);
                return 0;
        }
        oci_info("microvm: making the guest's root image of '%s'", rootfs);
        char tmp[PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", out);
        pid_t pid = fork();
        if (pid < 0)
                return pd_error_set(err, errno, "fork");
        if (pid == 0) {
                int nul = open("/dev/null", O_RDWR);
                dup2(nul, 0);
                dup2(nul, 1);
                dup2(nul, 2);
                execlp("mkfs.erofs", "mkfs.erofs", "--quiet", "-T0", tmp, rootfs, (char *)NULL);
                _exit(127);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                unlink(tmp);
                return pd_error_setx(err, EIO, "mkfs.erofs of the rootfs '%s' failed (status %d%s)", rootfs, st,
                                     WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ": is erofs-utils installed?" : "");
        }
        if (rename(tmp, out) < 0) {
                unlink(tmp);
                return pd_error_set(err, errno, "rename '%s'", tmp);
        }
        drop_old_images(vmdir, name);
        return 0;
}

/* ---- what of config.json applies to a guest ---- */

struct vm_plan {
        uint64_t memory;
        unsigned vcpus;
        struct pd_cg_limits limits;     /* for QEMU's cgroup (borrows cfg's lists) */
};

/* Refuse what would weaken isolation, log what a VM ignores. */
static int vm_plan(const char *id, const struct oci_config *cfg, struct vm_plan *pl, struct pd_error *err)
{
        const struct oci_process *p = &cfg->proc;
        if (p->terminal)
                return pd_error_setx(err, ENOTSUP, "run.oci.paddock.isolation=microvm: process.terminal is not "
                                                   "supported yet (use the container tier for a terminal)");
        for (size_t i = 0; i < cfg->n_ns; i++)
                if (cfg->ns[i].path)
                        oci_warn("container '%s' (microvm): namespace %s '%s' not joined: the guest has its own "
                                 "kernel%s", id, oci_ns_name(cfg->ns[i].flag), cfg->ns[i].path,
                                 cfg->ns[i].flag == CLONE_NEWNET ? " and no NIC (network none)" : "");
        for (size_t i = 0; i < cfg->n_mounts; i++) {
                const struct oci_mount *m = &cfg->mounts[i];
                if (m->bind)
                        oci_warn("container '%s' (microvm): bind mount of '%s' on '%s' ignored: no host path "
                                 "enters the guest", id, m->source ? m->source : "", m->destination);
                else if (!m->type || (strcmp(m->type, "proc") && strcmp(m->type, "sysfs") &&
                                      strcmp(m->type, "devpts")))
                        oci_info("container '%s' (microvm): mount of %s on '%s' ignored (the guest has its own "
                                 "/dev, /dev/shm, /run and a writable overlay root)", id, m->type ? m->type : "?",
                                 m->destination);
        }
        if (cfg->devices && json_array_size(cfg->devices))
                oci_warn("container '%s' (microvm): linux.devices ignored: the guest's devices are its own", id);
        if (cfg->seccomp || p->has_caps || p->n_rlimits || p->apparmor_profile || p->selinux_label)
                oci_info("container '%s' (microvm): seccomp, capabilities, rlimits and LSM labels apply on the "
                         "host to QEMU (paddock's jail), not inside the guest", id);
        if (cfg->uid_map)
                oci_info("container '%s' (microvm): uid/gid mappings: the guest sees the rootfs's owners as "
                         "they are on the host", id);
        if (cfg->root_readonly)
                oci_warn("container '%s' (microvm): root.readonly: the guest's root is a read-only image under "
                         "a writable overlay; writes stay in the guest's memory", id);
        if (cfg->sysctl && json_object_size(cfg->sysctl))
                oci_warn("container '%s' (microvm): linux.sysctl ignored (set it in the guest)", id);
        /* guest memory: the config's memory limit, else a default; QEMU's
         * cgroup gets it plus QEMU's own share */
        pl->memory = VM_DEFAULT_MEMORY;
        const struct pd_cg_limits *lim = &cfg->res.lim;
        if ((lim->set & PD_CG_SET_MEM_LIMIT) && lim->memory.limit > 0) {
                uint64_t v = (uint64_t)lim->memory.limit;
                if (v < VM_MIN_MEMORY || v > VM_MAX_MEMORY)
                        return pd_error_setx(err, EINVAL, "run.oci.paddock.isolation=microvm: memory limit %" PRIu64
                                             " is outside %llu MiB .. %llu GiB (the guest's RAM)", v,
                                             VM_MIN_MEMORY >> 20, VM_MAX_MEMORY >> 30);
                pl->memory = v & ~((1ull << 20) - 1);
        }
        pl->vcpus = 1;
        int64_t quota = (lim->set & PD_CG_SET_CPU_QUOTA) ? lim->cpu.quota : 0;
        int64_t period = (lim->set & PD_CG_SET_CPU_PERIOD) ? lim->cpu.period : 0;
        if (quota > 0 && period > 0)
                pl->vcpus = (unsigned)((quota + period - 1) / period);
        if (pl->vcpus > 8)
                pl->vcpus = 8;
        /* QEMU's cgroup: the config's limits but for devices (the guest's
         * are its own) and memory, which is the guest's RAM plus QEMU's
         * own share and nothing else. */
        pl->limits = *lim;
        pl->limits.devices = NULL;
        pl->limits.n_devices = 0;
        pl->limits.set &= ~(uint32_t)(PD_CG_SET_MEM_LIMIT | PD_CG_SET_MEM_RESERVATION | PD_CG_SET_MEM_SWAP |
                                      PD_CG_SET_MEM_KERNEL | PD_CG_SET_MEM_KERNEL_TCP | PD_CG_SET_MEM_SWAPPINESS |
                                      PD_CG_SET_MEM_NO_OOM_KILL);
        pl->limits.set |= PD_CG_SET_MEM_LIMIT;
        pl->limits.memory = (typeof(pl->limits.memory)){ .limit = (int64_t)(pl->memory + QEMU_OVERHEAD) };
        return 0;
}

/* ---- the VM record ---- */

struct vm_rec {
        char top[PATH_MAX];     /* <rundir>/oci-<hash>: agent.sock, vm/, jail/ */
        pid_t qemu, relay;
        uint64_t qemu_start, relay_start;
        uint32_t slot;
        bool have_slot;
        char owner[96];
};

static int rec_save(const char *dir, const struct vm_rec *v, struct pd_error *err)
{
        json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:s}", "top", v->top, "qemu", (json_int_t)v->qemu, "qemu_start",
                              (json_int_t)v->qemu_start, "relay", (json_int_t)v->relay, "relay_start",
                              (json_int_t)v->relay_start, "owner", v->owner);
        if (!o)
                return pd_error_setx(err, ENOMEM, "vm record");
        if (v->have_slot)
                json_object_set_new(o, "slot", json_integer(v->slot));
        char p[PATH_MAX + 16], tmp[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/vm.json", dir);
        snprintf(tmp, sizeof tmp, "%s/.vm.json.tmp", dir);
        int r = json_dump_file(o, tmp, JSON_COMPACT);
        json_decref(o);
        if (r < 0 || rename(tmp, p) < 0)
                return pd_error_set(err, errno ? errno : EIO, "write '%s'", p);
        return 0;
}

static int rec_load(const char *dir, struct vm_rec *v)
{
        memset(v, 0, sizeof *v);
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/vm.json", dir);
        json_t *o = json_load_file(p, 0, NULL);
        if (!o)
                return -ENOENT;
        snprintf(v->top, sizeof v->top, "%s", json_string_value(json_object_get(o, "top")) ?: "");
        snprintf(v->owner, sizeof v->owner, "%s", json_string_value(json_object_get(o, "owner")) ?: "");
        v->qemu = (pid_t)json_integer_value(json_object_get(o, "qemu"));
        v->qemu_start = (uint64_t)json_integer_value(json_object_get(o, "qemu_start"));
        v->relay = (pid_t)json_integer_value(json_object_get(o, "relay"));
        v->relay_start = (uint64_t)json_integer_value(json_object_get(o, "relay_start"));
        json_t *s = json_object_get(o, "slot");
        v->have_slot = json_is_integer(s);
        v->slot = (uint32_t)json_integer_value(s);
        json_decref(o);
        return 0;
}

static void rec_teardown(const struct vm_rec *v)
{
        /* QEMU is not our child (it was the creating runtime's): SIGKILL
         * through a pidfd pinned to its start time, then wait until gone */
        if (v->relay > 0)
                pd_helper_stop(v->relay, v->relay_start, SIGTERM, 1000, 2000);
        if (v->qemu > 0 && oci_pid_alive(v->qemu, v->qemu_start)) {
                int fd = (int)syscall(SYS_pidfd_open, v->qemu, 0);
                if (fd >= 0 && oci_pid_alive(v->qemu, v->qemu_start))
                        syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
                if (fd >= 0)
                        close(fd);
                oci_pid_wait_gone(v->qemu, v->qemu_start, 10000);
        }
        if (v->have_slot)
                (void)pd_uidrange_free(v->slot, v->owner, NULL);
        if (v->top[0])
                (void)pd_rm_rf(v->top, NULL);
}

void oci_vm_cleanup(const struct oci_state *st)
{
        struct vm_rec v;
        if (rec_load(st->dir, &v) == 0)
                rec_teardown(&v);
}

/* ---- create ---- */

static int listen_at(const char *path, struct pd_error *err)
{
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof a.sun_path)
                return pd_error_setx(err, ENAMETOOLONG, "socket path '%s' too long", path);
        strcpy(a.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(err, errno, "socket");
        unlink(path);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "listen on '%s'", path);
        }
        return fd;
}

static int start_vm(const char *id, struct pd_state *ps, const struct oci_config *cfg, const struct vm_plan *pl,
                    const char *cgroup, struct vm_rec *v, struct pd_error *err)
{
        struct pd_vm_assets as;
        int r;
        if ((r = pd_vm_boot_assets_get(ps, &as, err)) < 0 ||
            (r = root_image(ps, cfg->rootfs, as.rootfs, sizeof as.rootfs, err)) < 0)
                return r;
        char qdir[PATH_MAX + 8], jail[PATH_MAX + 8], serial[PATH_MAX + 32], sock[PATH_MAX + 16];
        snprintf(qdir, sizeof qdir, "%s/vm", v->top);
        snprintf(jail, sizeof jail, "%s/jail", v->top);
        if (pd_mkdir_p(v->top, 0700, err) < 0)
                return -1;
        if (mkdir(qdir, 0700) < 0 || mkdir(jail, 0700) < 0)
                return pd_error_set(err, errno, "create '%s'", qdir);
        struct pd_uidrange u;
        if ((r = pd_uidrange_alloc(v->owner, &u, err)) < 0)
                return r;
        v->slot = u.slot;
        v->have_slot = true;
        if (chown(qdir, u.base, u.base) < 0)
                return pd_error_set(err, errno, "chown '%s'", qdir);
        struct pd_vm_launch l = {
                .assets = &as, .dir = qdir, .memory_bytes = pl->memory, .vcpus = pl->vcpus,
                .disk_bytes = pl->memory / 2, .jail_root = jail, .uid = u.base, .gid = u.base,
        };
        int pidfd = -1;
        if ((r = pd_vm_qemu_start(&l, &v->qemu, &pidfd, err)) < 0)
                return r;
        close(pidfd);
        v->qemu_start = pd_proc_starttime(v->qemu);
        /* before the guest touches its memory: QEMU under the config's cgroup */
        if ((r = oci_cgroup_setup(cgroup, &pl->limits, v->qemu, err)) < 0)
                return r;
        /* QMP answering means QEMU made its sockets: the relay may connect */
        char qmp[PATH_MAX + 16];
        snprintf(qmp, sizeof qmp, "%s/qmp.sock", qdir);
        struct pd_qmp *q = NULL;
        r = pd_qmp_open(qmp, 30000, &q, err);
        pd_qmp_close(q);
        if (r < 0)
                return r;
        snprintf(sock, sizeof sock, "%s/agent.sock", v->top);
        _pd_cleanup_close_ int lfd = listen_at(sock, err);
        if (lfd < 0)
                return lfd;
        char relay[PATH_MAX];
        if (pd_helper_path("paddock-vm-relay", "PADDOCK_VM_RELAY", relay, sizeof relay, err) < 0)
                return -1;
        snprintf(serial, sizeof serial, "%s/serial.sock", qdir);
        char *argv[] = { "paddock-vm-relay", serial, NULL };
        _pd_cleanup_close_ int topfd = open(v->top, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int ready = -1;
        const char *step = "";
        pid_t pid = pd_helper_spawn(relay, argv, topfd, "relay.log", &lfd, 1, &ready, &step);
        if (pid < 0)
                return pd_error_set(err, (int)-pid, "start paddock-vm-relay (%s)", step);
        v->relay = pid;
        v->relay_start = pd_proc_starttime(pid);
        (void)oci_cgroup_enter(cgroup, pid, NULL);
        oci_info("container '%s' (microvm): booting the guest (%" PRIu64 " MiB, %u vCPU, %s)", id, pl->memory >> 20,
                 pl->vcpus, pd_vm_have_kvm() ? "kvm" : "tcg");
        char msg[8];
        ssize_t n = 0;
        r = pd_helper_wait_ready(ready, VM_BOOT_TIMEOUT_MS, msg, sizeof msg, &n);
        close(ready);
        if (r <= 0 || n != 1 || msg[0] != 'R') {
                /* the runtime dir goes with the failed create: log the ends
                 * of the guest's console and the relay's log first */
                static const char *const logs[] = { "vm/console.log", "relay.log" };
                for (size_t i = 0; i < PD_ARRAY_SIZE(logs); i++) {
                        char p[PATH_MAX + 32], buf[1024];
                        snprintf(p, sizeof p, "%s/%s", v->top, logs[i]);
                        int fd = open(p, O_RDONLY | O_CLOEXEC);
                        off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
                        ssize_t k = fd >= 0 ? pread(fd, buf, sizeof buf - 1, end > 1023 ? end - 1023 : 0) : 0;
                        if (fd >= 0)
                                close(fd);
                        if (k > 0) {
                                buf[k] = '\0';
                                oci_warn("container '%s' (microvm): end of %s:\n%s", id, logs[i], buf);
                        }
                }
                return pd_error_setx(err, r == 0 ? ETIMEDOUT : EIO, "the guest's agent did not answer%s",
                                     r == 0 ? " in time" : "");
        }
        return 0;
}

int oci_vm_create(const struct oci_global *g, const char *id, const struct create_opts_pub *po, struct oci_config *cfg,
                  pid_t *out_pid, struct pd_error *err)
{
        struct oci_state st = { 0 };
        struct vm_plan pl = { 0 };
        struct vm_rec v = { 0 };
        struct pd_state ps = { .dirfd = -1, .rundirfd = -1 };
        bool have_ps = false, made_dir = false;
        pid_t shim = -1;
        int r = oci_state_dir(g, id, st.dir, sizeof st.dir, err);
        if (r < 0)
                return r;
        snprintf(st.id, sizeof st.id, "%s", id);
        snprintf(st.bundle, sizeof st.bundle, "%s", cfg->bundle);
        snprintf(st.rootfs, sizeof st.rootfs, "%s", cfg->rootfs);
        oci_now_rfc3339(st.created, sizeof st.created);
        st.annotations = cfg->annotations;
        if ((r = vm_plan(id, cfg, &pl, err)) < 0)
                goto fail;
        if ((r = oci_cgroup_path(g, cfg, id, st.cgroup, sizeof st.cgroup, err)) < 0)
                goto fail;
        if ((r = pd_mkdir_p(g->root, 0700, err)) < 0)
                goto fail;
        if (mkdir(st.dir, 0700) < 0) {
                r = errno == EEXIST ? pd_error_setx(err, EEXIST, "container '%s' already exists", id)
                                    : pd_error_set(err, errno, "mkdir '%s'", st.dir);
                goto fail;
        }
        made_dir = true;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/config.json", st.dir);
        if (json_dump_file(cfg->json, path, JSON_COMPACT) < 0) {
                r = pd_error_set(err, errno ? errno : EIO, "write '%s'", path);
                goto fail;
        }
        snprintf(path, sizeof path, "%s/exec.fifo", st.dir);
        if (mkfifo(path, 0600) < 0) {
                r = pd_error_set(err, errno, "mkfifo '%s'", path);
                goto fail;
        }
        /* the guest assets and root images are shared with paddock's own
         * microvm tier: the paddock state dir */
        if ((r = pd_state_open(pd_state_dir_default(), &ps, err)) < 0)
                goto fail;
        have_ps = true;
        uint64_t h = pd_vm_hash(PD_VM_HASH_INIT, st.dir, strlen(st.dir));
        snprintf(v.top, sizeof v.top, "%s/oci-%016" PRIx64, ps.rundir, h);
        snprintf(v.owner, sizeof v.owner, "oci-%s:%016" PRIx64, ps.instance, h);
        if (access(v.top, F_OK) == 0) {
                r = pd_error_setx(err, EEXIST, "'%s' exists (a VM of container '%s' not deleted?)", v.top, id);
                v.top[0] = '\0';
                goto fail;
        }
        r = start_vm(id, &ps, cfg, &pl, st.cgroup, &v, err);
        if (rec_save(st.dir, &v, r < 0 ? NULL : err) < 0 && r == 0)
                r = -1;
        if (r < 0)
                goto fail;
        char sock[PATH_MAX + 16];
        snprintf(sock, sizeof sock, "%s/agent.sock", v.top);
        shim = fork();
        if (shim < 0) {
                r = pd_error_set(err, errno, "fork the shim");
                goto fail;
        }
        if (shim == 0)
                oci_vm_shim_init(st.dir, sock, &cfg->proc);     /* never returns */
        st.pid = shim;
        st.pid_start = pd_proc_starttime(shim);
        if ((r = oci_cgroup_enter(st.cgroup, shim, err)) < 0)
                goto fail;
        if ((r = oci_hooks_run_create(cfg->hooks, &st, err)) < 0)
                goto fail;
        if (json_object_get(cfg->hooks, "createContainer") || json_object_get(cfg->hooks, "startContainer"))
                oci_warn("container '%s' (microvm): createContainer/startContainer hooks not run (they would run "
                         "inside the guest, which has no host tools)", id);
        if ((r = oci_state_save(&st, err)) < 0)
                goto fail;
        if (po->pid_file && (r = oci_write_pid_file(po->pid_file, shim, err)) < 0)
                goto fail;
        pd_state_close(&ps);
        *out_pid = shim;
        return 0;
fail:
        if (shim > 0) {
                kill(shim, SIGKILL);
                waitpid(shim, NULL, 0);
        }
        rec_teardown(&v);
        if (st.cgroup[0] && made_dir)
                oci_cgroup_destroy(st.cgroup, NULL);
        if (made_dir)
                pd_rm_rf(st.dir, NULL);
        if (have_ps)
                pd_state_close(&ps);
        return r;
}

/* ---- pause / resume ---- */

bool oci_vm_paused(const struct oci_state *st)
{
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/vm.paused", st->dir);
        return access(p, F_OK) == 0;
}

int oci_vm_pause(const struct oci_state *st, bool pause, struct pd_error *err)
{
        struct vm_rec v;
        if (rec_load(st->dir, &v) < 0)
                return pd_error_setx(err, ENOENT, "container '%s': its VM record is missing", st->id);
        char qmp[PATH_MAX + 16], mark[PATH_MAX + 16];
        snprintf(qmp, sizeof qmp, "%s/vm/qmp.sock", v.top);
        snprintf(mark, sizeof mark, "%s/vm.paused", st->dir);
        struct pd_qmp *q = NULL;
        int r = pd_qmp_open(qmp, 10000, &q, err);
        if (r == 0)
                r = pd_qmp_cmd(q, pause ? "stop" : "cont", NULL, err);
        pd_qmp_close(q);
        if (r < 0)
                return pd_error_prefix(err, "container '%s': %s the guest", st->id, pause ? "stop" : "continue");
        if (pause) {
                int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                if (fd < 0)
                        return pd_error_set(err, errno, "create '%s'", mark);
                close(fd);
        } else {
                unlink(mark);
        }
        return 0;
}
