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
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"
#include "vm.h"

#define QEMU_BIN "/usr/bin/qemu-system-x86_64"

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
        if (khz)
                snprintf(tsc, sizeof tsc, " tsc_early_khz=%u", khz);
        arg(a, "-append");
        arg(a, "console=ttyS0 reboot=t panic=-1%s quiet cryptomgr.notests i8042.noaux i8042.nomux "
               "i8042.nopnp i8042.dumbkbd no_timer_check random.trust_cpu=on 8250.nr_uarts=1 "
               "paddock.disk=%llu",
            tsc, (unsigned long long)l->disk_bytes);
        arg(a, "-chardev");
        arg(a, "file,id=con,path=%s/console.log", l->dir);
        arg(a, "-serial");
        arg(a, "chardev:con");
        arg(a, "-chardev");
        arg(a, "socket,id=agent0,path=%s/serial.sock,server=on,wait=off", l->dir);
        arg(a, "-device");
        arg(a, "virtio-serial-device,id=vser0");
        arg(a, "-device");
        arg(a, "virtserialport,bus=vser0.0,chardev=agent0,name=agent");
        arg(a, "-drive");
        arg(a, "file=%s,if=none,id=d0,format=raw,readonly=on", l->assets->rootfs);
        arg(a, "-device");
        arg(a, "virtio-blk-device,drive=d0");
        arg(a, "-qmp");
        arg(a, "unix:%s/qmp.sock,server=on,wait=off", l->dir);
        /* QEMU's own seccomp filter: no exec, no privilege changes */
        arg(a, "-sandbox");
        arg(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
        if (l->incoming) {
                arg(a, "-incoming");
                arg(a, "defer");
        }
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
        static struct argv_buf a;
        memset(&a, 0, sizeof a);
        build_argv(l, &a);
        char *envp[] = { "PATH=/usr/bin:/bin", NULL };
        int sync[2];
        if (pipe2(sync, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        int pidfd = -1;
        pid_t parent = getpid();
        /* own pid, mount, ipc, uts and net namespaces: no NIC under network
         * none, and QEMU sees no host process */
        unsigned long flags = CLONE_PIDFD | SIGCHLD | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
                              CLONE_NEWUTS;
        long pid = syscall(SYS_clone, flags, NULL, &pidfd, NULL, NULL);
        if (pid < 0) {
                close(sync[0]);
                close(sync[1]);
                return pd_error_set(err, errno, "clone QEMU");
        }
        if (pid == 0) {
                close(sync[0]);
                for (int i = 0; i < l->n_cg; i++)
                        if (write(l->cg_fds[i], "0", 1) < 0)
                                child_fail(sync[1], errno, "join cgroup");
                int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (nul >= 0) {
                        dup2(nul, 0);
                        dup2(nul, 1);
                }
                setsid();
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
                syscall(SYS_execve, a.argv[0], a.argv, envp);
                child_fail(sync[1], errno, "exec " QEMU_BIN);
        }
        close(sync[1]);
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
