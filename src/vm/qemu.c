/* QEMU's command line for one guest (the `microvm` machine, recipe in
 * MICROVM-NOTES) and its start. Everything the child does after fork is
 * raw syscalls on memory prepared before it: the server is threaded. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/util.h"
#include "vm/vm.h"

#define QEMU_BIN "/usr/bin/qemu-system-x86_64"
#define QEMU_TAP_FD 200         /* the tap's fd number in QEMU (above what QEMU opens first) */
#define QEMU_QMP_FD 201         /* listening sockets made by paddock, handed to QEMU */
#define QEMU_SERIAL_FD 202

bool pd_vm_have_kvm(void)
{
        /* vmx/svm in cpuinfo: real hardware virtualization. /dev/kvm alone
         * is not enough (a software PVM hypervisor cannot run our guest). */
        FILE *f = fopen("/proc/cpuinfo", "re");
        if (!f)
                return false;
        char line[4096];
        bool hw = false;
        while (!hw && fgets(line, sizeof line, f))
                if (strncmp(line, "flags", 5) == 0 && (strstr(line, " vmx") || strstr(line, " svm")))
                        hw = true;
        fclose(f);
        return hw && access("/dev/kvm", R_OK | W_OK) == 0;
}

static unsigned cpu_khz(void)
{
        FILE *f = fopen("/proc/cpuinfo", "re");
        char line[512];
        double mhz = 0;
        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "cpu MHz", 7) == 0 && sscanf(strchr(line, ':') + 1, "%lf", &mhz) == 1)
                        break;
        if (f)
                fclose(f);
        return mhz > 0 ? (unsigned)(mhz * 1000) : 0;
}

struct argv_buf {
        char *argv[64];
        int n;
        char store[8192];
        size_t used;
};

__attribute__((format(printf, 2, 3))) static void arg(struct argv_buf *a, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *p = a->store + a->used;
        int n = vsnprintf(p, sizeof a->store - a->used, fmt, ap);
        va_end(ap);
        if (n < 0 || a->used + (size_t)n + 1 > sizeof a->store || a->n + 1 >= (int)PD_ARRAY_SIZE(a->argv))
                return;
        a->argv[a->n++] = p;
        a->argv[a->n] = NULL;
        a->used += (size_t)n + 1;
}

static void build_argv(const struct pd_vm_launch *l, struct argv_buf *a)
{
        uint64_t mb = l->memory_bytes >> 20;
        bool kvm = pd_vm_have_kvm();
        arg(a, "%s", QEMU_BIN);
        arg(a, "-accel");
        arg(a, "%s", kvm ? "kvm" : "tcg");
        if (!kvm) {
                /* arat: the guest's local APIC timer keeps running when idle,
                 * which Linux needs (no HPET or PIT here to stand in) to stop
                 * its tick when idle and to use high-resolution timers;
                 * without it an idle guest took 250 emulated timer interrupts
                 * a second */
                arg(a, "-cpu");
                arg(a, "qemu64,+arat");
        }
        arg(a, "-nodefaults");
        arg(a, "-no-user-config");
        arg(a, "-nographic");
        arg(a, "-no-reboot");
        arg(a, "-m");
        arg(a, "%llu", (unsigned long long)mb);
        arg(a, "-smp");
        arg(a, "%u", l->vcpus ? l->vcpus : 1);
        if (l->mem_file) {
                arg(a, "-object");
                arg(a, "memory-backend-file,id=mem,size=%lluM,mem-path=%s,share=%s", (unsigned long long)mb,
                    l->mem_file, l->mem_shared ? "on" : "off");
                arg(a, "-M");
                arg(a, "microvm,isa-serial=on,pit=off,pic=off,memory-backend=mem");
        } else if (l->mem_anon) {
                arg(a, "-object");
                arg(a, "memory-backend-ram,id=mem,size=%lluM", (unsigned long long)mb);
                arg(a, "-M");
                arg(a, "microvm,isa-serial=on,pit=off,pic=off,memory-backend=mem");
        } else {
                arg(a, "-M");
                arg(a, "microvm,isa-serial=on,pit=off,pic=off");
        }
        arg(a, "-kernel");
        arg(a, "%s", l->assets->kernel);
        arg(a, "-initrd");
        arg(a, "%s", l->assets->initrd);
        unsigned khz = cpu_khz();
        char tsc[48] = "";
        /* tsc=reliable under TCG: QEMU's TSC is the host's (continuous
         * across stop and restore), but TCG delivers timer interrupts late
         * under load, so the clocksource watchdog, comparing the TSC with
         * jiffies, marked it unstable and the guest fell back to
         * refined-jiffies: no tickless idle (250 timer interrupts a second,
         * each emulated, in every idle guest) and no high-resolution timers
         * (every guest sleep and poll timeout rounded to 4 ms). KVM guests
         * use kvm-clock. */
        if (khz)
                snprintf(tsc, sizeof tsc, " tsc_early_khz=%u%s", khz, kvm ? "" : " tsc=reliable");
        arg(a, "-append");
        arg(a, "console=ttyS0 reboot=t panic=-1%s quiet cryptomgr.notests i8042.noaux i8042.nomux "
               "i8042.nopnp i8042.dumbkbd no_timer_check random.trust_cpu=on 8250.nr_uarts=1 "
               "paddock.disk=%llu paddock.pids=%u%s%s",
            tsc, (unsigned long long)l->disk_bytes, l->pids ? l->pids : 512, l->append_extra ? " " : "",
            l->append_extra ? l->append_extra : "");
        arg(a, "-chardev");
        /* append: the relay truncates the log at its cap (console_cap.c) */
        arg(a, "file,id=con,path=%s/console.log,append=on", l->dir);
        arg(a, "-serial");
        arg(a, "chardev:con");
        arg(a, "-chardev");
        arg(a, "socket,id=agent0,fd=%d,server=on,wait=off", QEMU_SERIAL_FD);
        arg(a, "-device");
        arg(a, "virtio-serial-device,id=vser0");
        arg(a, "-device");
        arg(a, "virtserialport,bus=vser0.0,chardev=agent0,name=agent");
        arg(a, "-drive");
        arg(a, "file=%s,if=none,id=d0,format=raw,readonly=on", l->assets->rootfs);
        arg(a, "-device");
        arg(a, "virtio-blk-device,drive=d0");
        arg(a, "-chardev");
        arg(a, "socket,id=qmp0,fd=%d,server=on,wait=off", QEMU_QMP_FD);
        arg(a, "-mon");
        arg(a, "chardev=qmp0,mode=control");
        /* QEMU's own seccomp filter: no exec, no privilege changes */
        arg(a, "-sandbox");
        arg(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
        if (l->nic) {
                /* the tap fd QEMU's child opened (no slirp, ever); one MAC for
                 * template and clones alike: the guest's agent sets its own */
                arg(a, "-netdev");
                arg(a, "tap,id=n0,fd=%d", QEMU_TAP_FD);
                arg(a, "-device");
                arg(a, "virtio-net-device,netdev=n0,mac=02:70:00:00:00:01");
        }
        if (l->incoming) {
                arg(a, "-incoming");
                arg(a, "defer");
        }
}

/* What the jailed QEMU sees, prepared before the clone (no malloc after). */
struct jail_plan {
        char root[PATH_MAX];
        struct {
                char src[PATH_MAX];
                char dst[PATH_MAX + 8];     /* under root */
                bool dir, ro;
        } b[16];
        int n;
};

static void plan_bind(struct jail_plan *j, const char *path, bool dir, bool ro)
{
        if (!path || j->n >= (int)PD_ARRAY_SIZE(j->b))
                return;
        size_t rl = strlen(j->root);
        snprintf(j->b[j->n].src, sizeof j->b[j->n].src, "%s", path);
        memcpy(j->b[j->n].dst, j->root, rl);
        snprintf(j->b[j->n].dst + rl, sizeof j->b[j->n].dst - rl, "%s", path);
        j->b[j->n].dir = dir;
        j->b[j->n].ro = ro;
        j->n++;
}

/* mkdir -p of path's components below the jail root (a fresh tmpfs). */
static int mkdirs(char *path, size_t skip, bool last)
{
        for (char *p = path + skip + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                int r = mkdir(path, 0755);
                *p = '/';
                if (r < 0 && errno != EEXIST)
                        return -1;
        }
        if (last && mkdir(path, 0755) < 0 && errno != EEXIST)
                return -1;
        return 0;
}

/* In the child, in its new mount namespace: build the jail and pivot into
 * it. Raw syscalls only. Returns 0 or a step name. */
static const char *jail_enter(struct jail_plan *j)
{
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return "make mounts private";
        if (mount("tmpfs", j->root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
                return "mount the jail's tmpfs";
        size_t rl = strlen(j->root);
        for (int i = 0; i < j->n; i++) {
                if (mkdirs(j->b[i].dst, rl, j->b[i].dir) < 0)
                        return "make a mount point";
                if (!j->b[i].dir) {
                        int fd = open(j->b[i].dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                        if (fd < 0)
                                return "make a file mount point";
                        close(fd);
                }
                if (mount(j->b[i].src, j->b[i].dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                        return "bind into the jail";
                if (j->b[i].ro && mount(NULL, j->b[i].dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                                         NULL) < 0)
                        return "make a bind read-only";
        }
        char p[PATH_MAX + 16];
        static const char *const links[][2] = { { "usr/bin", "/bin" }, { "usr/lib", "/lib" },
                                                { "usr/lib64", "/lib64" }, { "usr/sbin", "/sbin" } };
        for (size_t i = 0; i < PD_ARRAY_SIZE(links); i++) {
                snprintf(p, sizeof p, "%s%s", j->root, links[i][1]);
                if (symlink(links[i][0], p) < 0)
                        return "symlink in the jail";
        }
        snprintf(p, sizeof p, "%s/proc", j->root);
        if (mkdir(p, 0555) < 0 || mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return "mount /proc in the jail";
        if (chdir(j->root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
            chdir("/") < 0)
                return "pivot into the jail";
        if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
                return "make the jail's root read-only";
        return NULL;
}

/* QEMU's sockets are bound by us, in its directory, which stays root's:
 * QEMU only gets the listening fds. A QEMU taken over cannot put a
 * symlink where paddock (root, in the host's mount namespace) connects to
 * its QMP and serial sockets, nor anything else in that directory; its one
 * file there, the console log, is made for it. */
static int qemu_files(const struct pd_vm_launch *l, int *qmp, int *serial, struct pd_error *err)
{
        if (chown(l->dir, 0, 0) < 0 || chmod(l->dir, 0711) < 0)
                return pd_error_set(err, errno, "secure '%s'", l->dir);
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/console.log", l->dir);
        (void)unlink(p);
        int c = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (c < 0 || fchown(c, l->uid, l->gid) < 0) {
                int e = errno;
                if (c >= 0)
                        close(c);
                return pd_error_set(err, e, "create '%s'", p);
        }
        close(c);
        static const char *const names[2] = { "qmp.sock", "serial.sock" };
        int *out[2] = { qmp, serial };
        for (int i = 0; i < 2; i++) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", l->dir, names[i]);
                if (n < 0 || (size_t)n >= sizeof sa.sun_path)
                        return pd_error_setx(err, ENAMETOOLONG, "'%s/%s' is too long for a socket", l->dir,
                                             names[i]);
                (void)unlink(sa.sun_path);
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 8) < 0) {
                        int e = errno;
                        if (fd >= 0)
                                close(fd);
                        return pd_error_set(err, e, "listen on '%s'", sa.sun_path);
                }
                *out[i] = fd;
        }
        return 0;
}

static void child_fail(int fd, int code, const char *what)
{
        char msg[160];
        int n = snprintf(msg, sizeof msg, "%s: %s", what, strerror(code));
        (void)!write(fd, msg, (size_t)n);
        _exit(127);
}

int pd_vm_qemu_start(const struct pd_vm_launch *l, pid_t *pid_out, int *pidfd_out, struct pd_error *err)
{
        /* Per call, never static: the server starts QEMUs from several
         * threads at once (a warm-pool fill beside a create), and a child
         * cloned while another thread rewrote a shared plan bound the wrong
         * paths ("bind into the jail: Not a directory"). The child works on
         * its own copy (no CLONE_VM), so the parent frees them. */
        struct start_bufs {
                struct argv_buf a;
                struct jail_plan j;
                struct ifreq tap_req;
        };
        _pd_cleanup_free_ struct start_bufs *bufs = calloc(1, sizeof *bufs);
        if (!bufs)
                return pd_error_set(err, ENOMEM, "start QEMU");
        struct argv_buf *a = &bufs->a;
        struct jail_plan *j = &bufs->j;
        struct ifreq *tap_req = &bufs->tap_req;
        build_argv(l, a);
        if (l->jail_root) {
                snprintf(j->root, sizeof j->root, "%s", l->jail_root);
                plan_bind(j, "/usr", true, true);
                plan_bind(j, "/dev/null", false, false);
                plan_bind(j, "/dev/urandom", false, false);
                if (pd_vm_have_kvm())
                        plan_bind(j, "/dev/kvm", false, false);
                plan_bind(j, l->assets->kernel, false, true);
                plan_bind(j, l->assets->initrd, false, true);
                plan_bind(j, l->assets->rootfs, false, true);
                plan_bind(j, l->mem_file, false, false);
                plan_bind(j, l->dir, true, false);
        }
        char *envp[] = { "PATH=/usr/bin:/bin", NULL };
        snprintf(tap_req->ifr_name, sizeof tap_req->ifr_name, "tap0");
        tap_req->ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
        int qmp_fd = -1, serial_fd = -1;
        if (qemu_files(l, &qmp_fd, &serial_fd, err) < 0) {
                if (qmp_fd >= 0)
                        close(qmp_fd);
                return -1;
        }
        int sync[2];
        if (pipe2(sync, O_CLOEXEC) < 0) {
                close(qmp_fd);
                close(serial_fd);
                return pd_error_set(err, errno, "pipe");
        }
        int pidfd = -1;
        pid_t parent = getpid();
        /* own pid, mount, ipc, uts and net namespaces: no NIC under network
         * none, and QEMU sees no host process */
        unsigned long flags = CLONE_PIDFD | SIGCHLD | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
                              CLONE_NEWUTS;
        long pid = syscall(SYS_clone, flags, NULL, &pidfd, NULL, NULL);
        if (pid < 0) {
                int e = errno;
                close(sync[0]);
                close(sync[1]);
                close(qmp_fd);
                close(serial_fd);
                return pd_error_set(err, e, "clone QEMU");
        }
        if (pid == 0) {
                close(sync[0]);
                /* the listeners at fixed numbers, kept across the exec (dup2
                 * clears CLOEXEC); via a free number first in case they cross */
                int q2 = fcntl(qmp_fd, F_DUPFD_CLOEXEC, 300), s2 = fcntl(serial_fd, F_DUPFD_CLOEXEC, 300);
                if (q2 < 0 || s2 < 0 || dup2(q2, QEMU_QMP_FD) < 0 || dup2(s2, QEMU_SERIAL_FD) < 0)
                        child_fail(sync[1], errno, "hand QEMU its sockets");
                for (int i = 0; i < l->n_cg; i++)
                        if (write(l->cg_fds[i], "0", 1) < 0)
                                child_fail(sync[1], errno, "join cgroup");
                int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (nul >= 0) {
                        dup2(nul, 0);
                        dup2(nul, 1);
                }
                setsid();
                /* tap0 in our new netns, while we still may and /dev/net/tun
                 * is still visible; the fd survives the exec */
                if (l->nic) {
                        int t = open("/dev/net/tun", O_RDWR);
                        if (t < 0 || ioctl(t, TUNSETIFF, tap_req) < 0 ||
                            (t != QEMU_TAP_FD && dup2(t, QEMU_TAP_FD) < 0))
                                child_fail(sync[1], errno, "create tap0");
                        if (t != QEMU_TAP_FD)
                                close(t);
                }
                if (l->jail_root) {
                        const char *step = jail_enter(j);
                        if (step)
                                child_fail(sync[1], errno, step);
                }
                /* an empty bounding set (needs CAP_SETPCAP: before the uid
                         * switch, which clears the other sets) */
                for (int c = 0; c <= 63; c++)
                        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                                child_fail(sync[1], errno, "drop the capability bounding set");
                if (l->uid) {
                        if (syscall(SYS_setgroups, 0, NULL) < 0 ||
                            syscall(SYS_setresgid, l->gid, l->gid, l->gid) < 0 ||
                            syscall(SYS_setresuid, l->uid, l->uid, l->uid) < 0)
                                child_fail(sync[1], errno, "drop privileges");
                }
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        child_fail(sync[1], errno, "no_new_privs");

                if (l->die_with_parent) {
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        if (getppid() != parent && getppid() != 0)
                                _exit(1);
                }
                syscall(SYS_execve, a->argv[0], a->argv, envp);
                child_fail(sync[1], errno, "exec " QEMU_BIN);
        }
        close(sync[1]);
        close(qmp_fd);          /* QEMU holds them now */
        close(serial_fd);
        char msg[200];
        ssize_t n = read(sync[0], msg, sizeof msg - 1);
        close(sync[0]);
        if (n > 0) {
                msg[n] = '\0';
                close(pidfd);
                return pd_error_setx(err, EIO, "start QEMU: %s", msg);
        }
        *pid_out = (pid_t)pid;
        *pidfd_out = pidfd;
        return 0;
}
