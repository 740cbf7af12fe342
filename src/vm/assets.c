/* The guest's boot assets, built on first use and cached under
 * <state>/vm/ by content hash: the uncompressed kernel, the initramfs (agent
 * + modules) and the base template's erofs root image. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "lib/state.h"
#include "lib/util.h"
#include "vm/vm.h"

/* In dependency order (read from each module's modinfo `depends=`; an
 * unpacked package has no modules.dep and the guest no modprobe). */
static const char *const guest_modules[] = {
        "kernel/drivers/virtio/virtio_ring", "kernel/drivers/virtio/virtio",
        "kernel/drivers/virtio/virtio_mmio", "kernel/drivers/block/virtio_blk",
        "kernel/drivers/char/virtio_console", "kernel/crypto/crc32c_generic",
        "kernel/lib/libcrc32c", "kernel/fs/erofs/erofs", "kernel/fs/overlayfs/overlay",
        /* the NIC of a guest with a network (none: no device, the module idles) */
        "kernel/net/core/failover", "kernel/drivers/net/net_failover", "kernel/drivers/net/virtio_net", NULL,
};

uint64_t pd_vm_hash(uint64_t h, const void *p, size_t n)
{
        const uint8_t *b = p;
        for (size_t i = 0; i < n; i++) {
                h ^= b[i];
                h *= 0x100000001b3ull;
        }
        return h;
}

int pd_vm_hash_file(uint64_t *h, const char *path, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open '%s'", path);
        uint8_t buf[65536];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0)
                *h = pd_vm_hash(*h, buf, (size_t)n);
        return n < 0 ? pd_error_set(err, errno, "read '%s'", path) : 0;
}

/* The builders running now (mkroot, mkfs.erofs), each the leader of its
 * own process group, so that a stopping server can end them with all their
 * children (cp, ldd, ...) instead of leaving them writing into the state
 * dir (pd_vm_builders_stop). */
static pthread_mutex_t builders_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t builders[16];
static bool builders_stopped;

static bool builder_add(pid_t pid)
{
        bool ok = false;
        pthread_mutex_lock(&builders_lock);
        for (size_t i = 0; !builders_stopped && i < PD_ARRAY_SIZE(builders) && !ok; i++)
                if (!builders[i]) {
                        builders[i] = pid;
                        ok = true;
                }
        pthread_mutex_unlock(&builders_lock);
        return ok;
}

static void builder_del(pid_t pid)
{
        pthread_mutex_lock(&builders_lock);
        for (size_t i = 0; i < PD_ARRAY_SIZE(builders); i++)
                if (builders[i] == pid)
                        builders[i] = 0;
        pthread_mutex_unlock(&builders_lock);
}

void pd_vm_builders_stop(void)
{
        pthread_mutex_lock(&builders_lock);
        builders_stopped = true;
        for (size_t i = 0; i < PD_ARRAY_SIZE(builders); i++)
                if (builders[i] > 0)
                        kill(-builders[i], SIGKILL);    /* not yet reaped: the group is ours */
        pthread_mutex_unlock(&builders_lock);
}

/* Run argv; with out, capture up to size-1 bytes of its stdout. */
static int run(char *const argv[], char *out, size_t size, struct pd_error *err)
{
        int p[2] = { -1, -1 };
        if (out && pipe2(p, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0)
                return pd_error_set(err, errno, "fork");
        if (pid == 0) {
                /* its own group (ended as one); and gone if we die first */
                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                if (out)
                        dup2(p[1], 1);
                else
                        dup2(2, 1);     /* tools' chatter goes to stderr */
                execvp(argv[0], argv);
                _exit(127);
        }
        setpgid(pid, pid);      /* also here: no window where kill(-pid) misses */
        bool registered = builder_add(pid);
        if (!registered)
                kill(-pid, SIGKILL);    /* stopping, or too many at once */
        size_t len = 0;
        if (out) {
                close(p[1]);
                ssize_t n;
                while ((n = read(p[0], out + len, size - 1 - len)) > 0 && len + (size_t)n < size - 1)
                        len += (size_t)n;
                if (n > 0)
                        len += (size_t)n;
                out[len] = '\0';
                close(p[0]);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        builder_del(pid);
        if (!registered)
                return pd_error_setx(err, ECANCELED, "%s: the server is stopping", argv[0]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return pd_error_setx(err, EIO, "%s failed (status %d)", argv[0], st);
        return 0;
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int build_rootfs(const char *vmdir, const char *mkroot, const char *agent, const char *out,
                        struct pd_error *err)
{
        char tree[PATH_MAX], tmp[PATH_MAX + 8];
        snprintf(tree, sizeof tree, "%s/tree.tmp", vmdir);
        snprintf(tmp, sizeof tmp, "%s.tmp", out);
        pd_rm_rf(tree, NULL);
        fprintf(stderr, "paddock: building the microvm base template (bash, coreutils, python3; "
                        "first use only)...\n");
        double t0 = now_s();
        char *mk[] = { (char *)mkroot, tree, (char *)agent, NULL };
        int r = run(mk, NULL, 0, err);
        if (r == 0) {
                fprintf(stderr, "paddock: ... tree ready (%.1f s), making its erofs image\n", now_s() - t0);
                char *fs[] = { "mkfs.erofs", "--quiet", "-T0", tmp, tree, NULL };
                r = run(fs, NULL, 0, err);
        }
        pd_rm_rf(tree, NULL);
        if (r == 0 && rename(tmp, out) < 0)
                r = pd_error_set(err, errno, "rename '%s'", tmp);
        if (r < 0) {
                unlink(tmp);
                return pd_error_prefix(err, "build the microvm base template");
        }
        fprintf(stderr, "paddock: microvm base template ready (%.1f s)\n", now_s() - t0);
        return 0;
}

/* Drop cache entries of kind prefix other than keep (older agents or
 * packages): a VM that still uses one holds its inode open. */
static void drop_stale(const char *vmdir, const char *prefix, const char *keep)
{
        DIR *d = opendir(vmdir);
        if (!d)
                return;
        const char *base = strrchr(keep, '/');
        base = base ? base + 1 : keep;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 && strcmp(de->d_name, base) != 0)
                        (void)unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
}

/* The kernel and the initramfs (under the caller's lock); *h gets the
 * initramfs's content hash. */
static int boot_assets(const char *vmdir, const char *gdir, const char *rel, const char *agent,
                       struct pd_vm_assets *out, uint64_t *h, struct pd_error *err)
{
        snprintf(out->kernel, sizeof out->kernel, "%s/vmlinux-%s", vmdir, rel);
        if (access(out->kernel, R_OK) < 0) {
                char bz[PATH_MAX + 160];
                snprintf(bz, sizeof bz, "%s/boot/vmlinuz-%s", gdir, rel);
                if (pd_vm_kernel_extract(bz, out->kernel, err) < 0)
                        return -1;
        }
        *h = PD_VM_HASH_INIT;
        *h = pd_vm_hash(*h, rel, strlen(rel));
        if (pd_vm_hash_file(h, agent, err) < 0)
                return -1;
        snprintf(out->initrd, sizeof out->initrd, "%s/initrd-%016" PRIx64 ".cpio", vmdir, *h);
        if (access(out->initrd, R_OK) < 0) {
                char moddir[PATH_MAX + 160];
                snprintf(moddir, sizeof moddir, "%s/lib/modules/%s", gdir, rel);
                if (pd_vm_initramfs_write(out->initrd, agent, moddir, guest_modules, err) < 0)
                        return -1;
        }
        return 0;
}

static int assets_get(struct pd_state *st, struct pd_vm_assets *out, bool with_rootfs, struct pd_error *err)
{
        char vmdir[PATH_MAX], gdir[PATH_MAX], rel[128], agent[PATH_MAX], mkroot[PATH_MAX];
        snprintf(vmdir, sizeof vmdir, "%s/vm", st->dir);
        if (pd_mkdir_p(vmdir, 0700, err) < 0)
                return -1;
        if (pd_vm_guest_kernel(gdir, sizeof gdir, rel, sizeof rel, err) < 0 ||
            pd_agent_path(agent, sizeof agent, err) < 0 ||
            (with_rootfs && pd_helper_path("paddock-vm-mkroot", "PADDOCK_VM_MKROOT", mkroot, sizeof mkroot, err) < 0))
                return -1;
        /* the tree builder works in another directory: absolute paths */
        char real[PATH_MAX];
        if (!realpath(agent, real))
                return pd_error_set(err, errno, "resolve '%s'", agent);
        snprintf(agent, sizeof agent, "%s", real);
        /* the key remembered from the last start (assets_memo.c): no
         * dpkg-query, no hashing, no lock when nothing changed */
        char sig[4096];
        const char *const inputs_of[] = { agent, mkroot, "/var/lib/dpkg/status", NULL };
        if (with_rootfs) {
                char extra[PATH_MAX + 160];
                snprintf(extra, sizeof extra, "guest %s %s", gdir, rel);
                pd_vm_assets_sig(sig, sizeof sig, inputs_of, extra);
                uint64_t mh, mhr;
                if (pd_vm_assets_memo_get(vmdir, sig, &mh, &mhr) == 1) {
                        snprintf(out->kernel, sizeof out->kernel, "%s/vmlinux-%s", vmdir, rel);
                        snprintf(out->initrd, sizeof out->initrd, "%s/initrd-%016" PRIx64 ".cpio", vmdir, mh);
                        snprintf(out->rootfs, sizeof out->rootfs, "%s/rootfs-%016" PRIx64 ".erofs", vmdir, mhr);
                        if (access(out->kernel, R_OK) == 0 && access(out->initrd, R_OK) == 0 &&
                            access(out->rootfs, R_OK) == 0) {
                                uint64_t k = pd_vm_hash(mh, &mhr, sizeof mhr);
                                k = pd_vm_hash(k, rel, strlen(rel));
                                snprintf(out->key, sizeof out->key, "%016" PRIx64, k);
                                return 0;
                        }
                }
        }
        /* one builder at a time per state dir; the others wait and reuse */
        char lockp[PATH_MAX + 8];
        snprintf(lockp, sizeof lockp, "%s/lock", vmdir);
        _pd_cleanup_close_ int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock < 0 || flock(lock, LOCK_EX) < 0)
                return pd_error_set(err, errno, "lock '%s'", lockp);

        uint64_t h;
        if (boot_assets(vmdir, gdir, rel, agent, out, &h, err) < 0)
                return -1;
        if (!with_rootfs) {
                out->rootfs[0] = '\0';
                snprintf(out->key, sizeof out->key, "%016" PRIx64, h);
                return 0;
        }

        char inputs[8192];
        char *in[] = { mkroot, "--inputs", NULL };
        if (run(in, inputs, sizeof inputs, err) < 0)
                return pd_error_prefix(err, "list the microvm template's inputs");
        uint64_t hr = PD_VM_HASH_INIT;
        hr = pd_vm_hash(hr, inputs, strlen(inputs));
        if (pd_vm_hash_file(&hr, mkroot, err) < 0 || pd_vm_hash_file(&hr, agent, err) < 0)
                return -1;
        snprintf(out->rootfs, sizeof out->rootfs, "%s/rootfs-%016" PRIx64 ".erofs", vmdir, hr);
        if (access(out->rootfs, R_OK) < 0) {
                if (build_rootfs(vmdir, mkroot, agent, out->rootfs, err) < 0)
                        return -1;
                drop_stale(vmdir, "rootfs-", out->rootfs);
                drop_stale(vmdir, "initrd-", out->initrd);
        }
        pd_vm_assets_memo_put(vmdir, sig, h, hr);
        uint64_t k = pd_vm_hash(h, &hr, sizeof hr);
        k = pd_vm_hash(k, rel, strlen(rel));
        snprintf(out->key, sizeof out->key, "%016" PRIx64, k);
        return 0;
}

int pd_vm_assets_get(struct pd_state *st, struct pd_vm_assets *out, struct pd_error *err)
{
        return assets_get(st, out, true, err);
}

int pd_vm_boot_assets_get(struct pd_state *st, struct pd_vm_assets *out, struct pd_error *err)
{
        return assets_get(st, out, false, err);
}

int pd_vm_gc(struct pd_state *st, struct pd_error *err)
{
        /* Everything the state dir owns goes: the template snapshots too
         * (caches, rebuilt on the next use), and the saved state of
         * sandboxes paused to disk (gc destroys every sandbox). */
        char vmdir[PATH_MAX];
        snprintf(vmdir, sizeof vmdir, "%s/vm", st->dir);
        DIR *d = opendir(vmdir);
        if (!d)
                return 0;
        int ret = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                /* templates, sandboxes paused to disk, unfinished fork saves */
                if (strncmp(de->d_name, "tpl-", 4) == 0 || strcmp(de->d_name, "paused") == 0 ||
                    strncmp(de->d_name, "fork-", 5) == 0) {
                        char p[PATH_MAX + 300];
                        snprintf(p, sizeof p, "%s/%s", vmdir, de->d_name);
                        if (pd_rm_rf(p, ret == 0 ? err : NULL) < 0)
                                ret = -EIO;
                }
        closedir(d);
        return ret;
}
