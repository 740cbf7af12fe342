/* The microvm tier's root image of an image template (docs/templates.md
 * "Tiers"): one erofs image of the merged layers, made once per template
 * (and agent) under templates/<name>/vm/.
 *
 * The layers' owners are in the store's range (template.h); the guest must
 * see the image's own ids. So mkfs.erofs runs in a user namespace that maps
 * the store range onto 0..65535, reading an overlay of the layers mounted
 * there (a detached mount, fsopen/fsmount, that nothing else sees). The
 * state dir is root's alone: the child reaches the layers only through
 * directory fds its parent opened (/proc/self/fd/N), and writes the image
 * through a file fd. The agent becomes /usr/bin/sudo, as in the base
 * template's image (src/vm/mkroot.sh). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "lib/state.h"
#include "lib/template.h"
#include "lib/util.h"
#include "vm/vm.h"

static int xfsopen(const char *fs)
{
        return (int)syscall(SYS_fsopen, fs, FSOPEN_CLOEXEC);
}

static int xfsconfig(int fd, unsigned cmd, const char *key, const char *val)
{
        return (int)syscall(SYS_fsconfig, fd, cmd, key, val, 0);
}

static int xfsmount(int fd)
{
        return (int)syscall(SYS_fsmount, fd, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID);
}

/* The child: in its own user and mount namespaces, once the parent wrote
 * its maps (a byte on go), mount the overlay and exec mkfs.erofs. */
static _Noreturn void child(int go, char (*paths)[PATH_MAX], unsigned n, int outfd)
{
        char c = 'u';
        if (read(go, &c, 1) != 1)
                _exit(120);
        /* The layers are opened here, in our own mount namespace (overlay
         * takes no mount of another as a layer), and before setresuid:
         * until then our fsuid is still host root's, the owner of the
         * state dir's 0700 directories. */
        int lowers[2 + PD_MAX_IMAGE_LAYERS];
        for (unsigned i = 0; i < n; i++)
                if ((lowers[i] = open(paths[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                        fprintf(stderr, "paddock: open '%s': %s\n", paths[i], strerror(errno));
                        _exit(120);
                }
        if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
                _exit(121);
        char opts[4096];
        size_t len = 0;
        opts[0] = '\0';
        for (unsigned i = 0; i < n; i++)
                len += (size_t)snprintf(opts + len, sizeof opts - len, "%s/proc/self/fd/%d", i ? ":" : "", lowers[i]);
        int fs = xfsopen("overlay");
        if (fs < 0 || xfsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", opts) < 0 ||
            xfsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL) < 0 ||
            xfsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL) < 0) {
                fprintf(stderr, "paddock: overlay of the template's layers: %s\n", strerror(errno));
                _exit(122);
        }
        int mnt = xfsmount(fs);
        if (mnt < 0) {
                fprintf(stderr, "paddock: mount the template's layers: %s\n", strerror(errno));
                _exit(123);
        }
        /* mkfs.erofs takes a path, and canonicalizes it: the overlay gets
         * one, on a tmpfs of this namespace only (nothing propagates out) */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("paddock", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") < 0 || mkdir("/tmp/root", 0700) < 0 ||
            syscall(SYS_move_mount, mnt, "", AT_FDCWD, "/tmp/root", MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                fprintf(stderr, "paddock: attach the template's layers: %s\n", strerror(errno));
                _exit(124);
        }
        struct pd_fd_path out = pd_fd_path(outfd);
        char src[] = "/tmp/root";
        /* the image's fd must survive the exec */
        (void)fcntl(outfd, F_SETFD, 0);
        char *argv[] = { "mkfs.erofs", "--quiet", "-T0", out.s, src, NULL };
        execvp(argv[0], argv);
        _exit(127);
}

static int make_erofs(struct pd_state *st, const struct pd_template *t, const char *extra, const char *out,
                      struct pd_error *err)
{
        _pd_cleanup_free_ char(*paths)[PATH_MAX] = calloc(2 + PD_MAX_IMAGE_LAYERS, PATH_MAX);
        if (!paths)
                return pd_error_set(err, ENOMEM, "paths");
        unsigned n = 0;
        int r = 0;
        snprintf(paths[n++], PATH_MAX, "%s", extra);
        snprintf(paths[n++], PATH_MAX, "%s", t->rootfs);
        for (unsigned i = 0; i < t->n_layers; i++)
                pd_template_layer_path(st, t->layers[i], paths[n++], PATH_MAX);
        _pd_cleanup_close_ int ofd = -1;
        if (r == 0) {
                ofd = open(out, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (ofd < 0 || fchown(ofd, PD_STORE_UID_BASE, PD_STORE_UID_BASE) < 0)
                        r = pd_error_set(err, errno, "create '%s'", out);
        }
        int go[2] = { -1, -1 }, ready[2] = { -1, -1 };
        pid_t pid = -1;
        if (r == 0 && (pipe2(go, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0))
                r = pd_error_set(err, errno, "pipe");
        if (r == 0) {
                pid = fork();
                if (pid < 0) {
                        r = pd_error_set(err, errno, "fork");
                } else if (pid == 0) {
                        close(go[1]);
                        close(ready[0]);
                        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                                _exit(119);
                        /* the parent writes our maps once we have them */
                        if (write(ready[1], "u", 1) != 1)
                                _exit(119);
                        close(ready[1]);
                        child(go[0], paths, n, ofd);
                }
        }
        if (pid > 0) {
                close(go[0]);
                go[0] = -1;
                close(ready[1]);
                ready[1] = -1;
                char u;
                ssize_t k;
                while ((k = read(ready[0], &u, 1)) < 0 && errno == EINTR)
                        ;
                char map[64];
                snprintf(map, sizeof map, "0 %u %u\n", PD_STORE_UID_BASE, PD_STORE_ID_RANGE);
                char up[64], gp[64];
                snprintf(up, sizeof up, "/proc/%d/uid_map", (int)pid);
                snprintf(gp, sizeof gp, "/proc/%d/gid_map", (int)pid);
                if (pd_write_file_at(AT_FDCWD, up, map, err) < 0 || pd_write_file_at(AT_FDCWD, gp, map, err) < 0) {
                        r = -1;
                        kill(pid, SIGKILL);
                } else if (write(go[1], "g", 1) != 1) {
                        r = pd_error_set(err, errno, "start mkfs.erofs");
                }
                close(go[1]);
                go[1] = -1;
                int status;
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
                if (r == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
                        r = pd_error_setx(err, EIO, "mkfs.erofs of the template failed (status %d)", status);
        }
        for (int i = 0; i < 2; i++) {
                if (go[i] >= 0)
                        close(go[i]);
                if (ready[i] >= 0)
                        close(ready[i]);
        }
        if (r == 0 && (fchown(ofd, 0, 0) < 0 || fchmod(ofd, 0644) < 0))
                r = pd_error_set(err, errno, "set up '%s'", out);
        return r;
}

/* A layer with just usr/bin/sudo (the agent), owned by the store's root. */
static int sudo_layer(const char *dir, const char *agent, struct pd_error *err)
{
        char p[PATH_MAX + 32];
        static const char *const d[] = { "", "/usr", "/usr/bin" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(d); i++) {
                snprintf(p, sizeof p, "%s%s", dir, d[i]);
                if ((mkdir(p, 0755) < 0 && errno != EEXIST) || chown(p, PD_STORE_UID_BASE, PD_STORE_UID_BASE) < 0)
                        return pd_error_set(err, errno, "create '%s'", p);
        }
        snprintf(p, sizeof p, "%s/usr/bin/sudo", dir);
        _pd_cleanup_close_ int in = open(agent, O_RDONLY | O_CLOEXEC);
        _pd_cleanup_close_ int out = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        if (in < 0 || out < 0)
                return pd_error_set(err, errno, "copy the agent to '%s'", p);
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof buf)) > 0)
                if (pd_write_all(out, buf, (size_t)n) < 0)
                        return pd_error_set(err, errno, "write '%s'", p);
        if (n < 0 || fchown(out, PD_STORE_UID_BASE, PD_STORE_UID_BASE) < 0 || fchmod(out, 0755) < 0)
                return pd_error_set(err, errno, "write '%s'", p);
        return 0;
}

int pd_vm_image_assets(struct pd_state *st, const struct pd_template *t, struct pd_vm_assets *out, char *vmdir,
                       size_t vmdir_size, struct pd_error *err)
{
        if (pd_vm_boot_assets_get(st, out, err) < 0)
                return -1;
        char agent[PATH_MAX];
        if (pd_agent_path(agent, sizeof agent, err) < 0)
                return -1;
        /* the image: its layers and our agent */
        uint64_t h = PD_VM_HASH_INIT;
        for (unsigned i = 0; i < t->n_layers; i++)
                h = pd_vm_hash(h, t->layers[i], 64);
        struct stat rs;
        if (stat(t->rootfs, &rs) == 0)
                h = pd_vm_hash(h, &rs.st_ino, sizeof rs.st_ino);
        if (pd_vm_hash_file(&h, agent, err) < 0)
                return -1;
        snprintf(vmdir, vmdir_size, "%s/templates/%s/vm", st->dir, t->bottom);
        if (mkdir(vmdir, 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s'", vmdir);
        snprintf(out->rootfs, sizeof out->rootfs, "%s/rootfs-%016" PRIx64 ".erofs", vmdir, h);
        uint64_t k = pd_vm_hash(PD_VM_HASH_INIT, out->key, strlen(out->key));
        k = pd_vm_hash(k, &h, sizeof h);
        snprintf(out->key, sizeof out->key, "%016" PRIx64, k);
        if (access(out->rootfs, R_OK) == 0)
                return 0;
        /* one builder at a time (the tier's own lock) */
        char lockp[PATH_MAX];
        snprintf(lockp, sizeof lockp, "%s/vm/lock", st->dir);
        _pd_cleanup_close_ int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock < 0 || flock(lock, LOCK_EX) < 0)
                return pd_error_set(err, errno, "lock '%s'", lockp);
        if (access(out->rootfs, R_OK) == 0)
                return 0;
        fprintf(stderr, "paddock: making the microvm root image of template '%s' (first use only)...\n", t->bottom);
        char tmp[PATH_MAX + 8], extra[PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", out->rootfs);
        snprintf(extra, sizeof extra, "%s/sudo.tmp", vmdir);
        pd_rm_rf(extra, NULL);
        int r = sudo_layer(extra, agent, err);
        if (r == 0)
                r = make_erofs(st, t, extra, tmp, err);
        pd_rm_rf(extra, NULL);
        if (r == 0 && rename(tmp, out->rootfs) < 0)
                r = pd_error_set(err, errno, "install '%s'", out->rootfs);
        if (r < 0) {
                unlink(tmp);
                return pd_error_prefix(err, "template '%s' for the microvm tier", t->bottom);
        }
        return 0;
}
