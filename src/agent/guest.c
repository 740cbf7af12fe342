/* The agent as the init of a microvm guest (booted from paddock's
 * initramfs as /init). Before the usual loop runs it: mounts /dev /proc
 * /sys, loads the kernel modules the initramfs carries in dependency order
 * (no modprobe in there), mounts the template's read-only erofs disk under
 * a tmpfs overlay, moves onto it, listens on its own unix socket and
 * forks the demux that turns channels of the virtio-serial port into
 * connections to that socket (src/proto/vmmux.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"
#include "proto/vmmux.h"

#define GUEST_SOCK "/run/paddock/agent.sock"
#define PORT_NAME "agent"

static int msleep(long ms)
{
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        return nanosleep(&ts, NULL);
}

static int mnt(const char *src, const char *dst, const char *type, unsigned long fl, const char *data,
               struct pd_error *err)
{
        mkdir(dst, 0755);
        if (mount(src, dst, type, fl, data) < 0)
                return pd_error_set(err, errno, "mount %s on %s", type ? type : src, dst);
        return 0;
}

static int cmp_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* /modules/NN-name.ko, loaded in name order (the builder numbered them in
 * dependency order). */
static int load_modules(struct pd_error *err)
{
        DIR *d = opendir("/modules");
        if (!d)
                return 0;
        char *names[64];
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n < PD_ARRAY_SIZE(names))
                if (de->d_name[0] != '.')
                        names[n++] = strdup(de->d_name);
        closedir(d);
        qsort(names, n, sizeof *names, cmp_names);
        int ret = 0;
        for (size_t i = 0; i < n; i++) {
                char path[300];
                snprintf(path, sizeof path, "/modules/%s", names[i]);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)) {
                        if (ret == 0)
                                ret = pd_error_set(err, errno, "load module %s", names[i]);
                }
                if (fd >= 0)
                        close(fd);
                unlink(path);   /* give its pages back */
                free(names[i]);
        }
        return ret;
}

/* Devices probe asynchronously: wait (bounded) for a path to appear. */
static int wait_for(const char *path, int timeout_ms)
{
        uint64_t end = pd_now_ms() + (uint64_t)timeout_ms;
        while (access(path, F_OK) < 0) {
                if (pd_now_ms() > end)
                        return -ETIMEDOUT;
                msleep(1);
        }
        return 0;
}

static uint64_t cmdline_u64(const char *key, uint64_t def)
{
        char buf[4096];
        int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return def;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return def;
        buf[n] = '\0';
        size_t kl = strlen(key);
        for (char *p = buf; (p = strstr(p, key)); p += kl)
                if ((p == buf || p[-1] == ' ') && p[kl] == '=')
                        return strtoull(p + kl + 1, NULL, 10);
        return def;
}

static int mount_root(struct pd_error *err)
{
        if (wait_for("/sys/block/vda", 5000) < 0)
                return pd_error_setx(err, ENODEV, "no root disk (vda) appeared");
        if (wait_for("/dev/vda", 2000) < 0)
                return pd_error_setx(err, ENODEV, "no /dev/vda");
        if (mnt("/dev/vda", "/lower", "erofs", MS_RDONLY, NULL, err) < 0)
                return -1;
        char opts[64];
        uint64_t size = cmdline_u64("paddock.disk", 256ull << 20);
        snprintf(opts, sizeof opts, "size=%llu,mode=0755", (unsigned long long)size);
        if (mnt("tmpfs", "/rw", "tmpfs", MS_NOSUID | MS_NODEV, opts, err) < 0)
                return -1;
        mkdir("/rw/upper", 0755);
        mkdir("/rw/work", 0755);
        if (mnt("overlay", "/newroot", "overlay", 0,
                "lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work", err) < 0)
                return -1;
        static const char *const moved[] = { "/dev", "/proc", "/sys" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(moved); i++) {
                char dst[64];
                snprintf(dst, sizeof dst, "/newroot%s", moved[i]);
                if (mnt(moved[i], dst, NULL, MS_MOVE, NULL, err) < 0)
                        return -1;
        }
        /* switch_root: the initramfs stays (it holds only us and is small) */
        if (chdir("/newroot") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
            chdir("/") < 0)
                return pd_error_set(err, errno, "move onto the root disk");
        if (mnt("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "ptmxmode=0666,mode=0620", err) < 0 ||
            mnt("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", err) < 0 ||
            mnt("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", err) < 0)
                return -1;
        chmod("/tmp", 01777);
        return 0;
}

static int write_file(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, text, strlen(text));
        int e = errno;
        close(fd);
        return n == (ssize_t)strlen(text) ? 0 : -e;
}

/* The workload's own cgroup inside the guest, beside the agent: a fork
 * bomb or an OOM in the workload never takes the agent (and so the
 * sandbox) down (DESIGN §5). QEMU's cgroup on the host bounds it all. */
static int workload_cgroup(struct agent *ag, struct pd_error *err)
{
        if (mnt("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err) < 0)
                return -1;
        if (write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids") < 0)
                return pd_error_set(err, errno, "enable the memory and pids controllers");
        if (mkdir("/sys/fs/cgroup/work", 0755) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "mkdir /sys/fs/cgroup/work");
        char v[32];
        snprintf(v, sizeof v, "%llu", (unsigned long long)cmdline_u64("paddock.pids", 512));
        if (write_file("/sys/fs/cgroup/work/pids.max", v) < 0)
                return pd_error_set(err, errno, "pids.max");
        /* all of the guest's memory but a reserve for its kernel and the agent */
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        uint64_t total = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
        uint64_t reserve = 48ull << 20;
        if (total > 2 * reserve) {
                snprintf(v, sizeof v, "%llu", (unsigned long long)(total - reserve));
                if (write_file("/sys/fs/cgroup/work/memory.max", v) < 0)
                        return pd_error_set(err, errno, "memory.max");
        }
        int fd = open("/sys/fs/cgroup/work/cgroup.procs", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open work/cgroup.procs");
        int *n = realloc(ag->cgroup_fds, (ag->ncgroup + 1) * sizeof *n);
        if (!n) {
                close(fd);
                return pd_error_set(err, ENOMEM, "cgroup fds");
        }
        ag->cgroup_fds = n;
        n[ag->ncgroup++] = fd;
        return 0;
}

static void loopback_up(void)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return;
        struct ifreq ifr = { 0 };
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
                ifr.ifr_flags |= IFF_UP;
                ioctl(s, SIOCSIFFLAGS, &ifr);
        }
        close(s);
}

/* /dev/vportNpM of the port named PORT_NAME (no udev in here). */
static int find_port(char *out, size_t size, struct pd_error *err)
{
        uint64_t end = pd_now_ms() + 5000;
        for (;;) {
                DIR *d = opendir("/sys/class/virtio-ports");
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char p[300], name[64] = "";
                        snprintf(p, sizeof p, "/sys/class/virtio-ports/%s/name", de->d_name);
                        int fd = open(p, O_RDONLY | O_CLOEXEC);
                        if (fd < 0)
                                continue;
                        ssize_t n = read(fd, name, sizeof name - 1);
                        close(fd);
                        if (n > 0 && strncmp(name, PORT_NAME "\n", sizeof PORT_NAME) == 0) {
                                snprintf(out, size, "/dev/%s", de->d_name);
                                closedir(d);
                                return wait_for(out, 2000) < 0 ? pd_error_setx(err, ENODEV, "no %s", out) : 0;
                        }
                }
                if (d)
                        closedir(d);
                if (pd_now_ms() > end)
                        return pd_error_setx(err, ENODEV, "no virtio-serial port named '%s'", PORT_NAME);
                msleep(1);
        }
}

/* SYNC from the host (first thing on every host connection, so also after
 * a clone was restored from a template): its wall clock and fresh bytes,
 * so no two clones share a clock or an RNG state. */
static void on_sync(uint64_t sec, uint32_t nsec, const uint8_t *entropy, size_t n)
{
        struct timespec ts = { (time_t)sec, (long)nsec };
        clock_settime(CLOCK_REALTIME, &ts);
        int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        struct {
                struct rand_pool_info info;
                uint8_t buf[PD_MUX_ENTROPY];
        } rp;
        rp.info.entropy_count = (int)(n * 8);
        rp.info.buf_size = (int)n;
        memcpy(rp.buf, entropy, n);
        ioctl(fd, RNDADDENTROPY, &rp);
        ioctl(fd, RNDRESEEDCRNG);       /* use it now, not at the next timed reseed */
        close(fd);
}

static void demux_main(const char *port)
{
        struct pd_error err = { 0 };
        /* nothing of the agent's (listener, epoll, connections) */
        syscall(SYS_close_range, 3, ~0u, 0);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGIO);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        int fd = open(port, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 || sfd < 0) {
                fprintf(stderr, "paddock-agent: open %s: %m\n", port);
                _exit(1);
        }
        /* the port raises SIGIO when a host connects */
        fcntl(fd, F_SETOWN, getpid());
        fcntl(fd, F_SETFL, O_NONBLOCK | O_ASYNC);
        struct pd_mux_cfg cfg = { .guest = true, .trunk_fd = fd, .listen_fd = -1,
                                  .agent_path = GUEST_SOCK, .hup_wait_fd = sfd, .ready_fd = -1,
                                  .on_sync = on_sync, .on_netcfg = ag_guest_net_apply };
        if (pd_mux_run(&cfg, &err) < 0)
                fprintf(stderr, "paddock-agent: demux: %s\n", err.msg);
        _exit(1);
}

static pid_t demux_pid;
static char demux_port[300];

static int demux_start(void)
{
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                /* the agent's signal mask and listener are not the demux's */
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                demux_main(demux_port);
        }
        demux_pid = pid;
        return 0;
}

void ag_guest_check(struct agent *ag)
{
        /* the workload is root in its guest and may kill the demux (kill -1
         * spares only PID 1): start a new one; the host's channels that
         * went with it are closed as soon as they are used */
        if (demux_pid > 0 && kill(demux_pid, 0) < 0 && errno == ESRCH)
                (void)demux_start();
}

int ag_guest_boot(struct agent *ag, struct pd_error *err)
{
        mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
        if (mnt("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err) < 0 ||
            mnt("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err) < 0)
                return -1;
        if (load_modules(err) < 0 || mount_root(err) < 0 || workload_cgroup(ag, err) < 0)
                return -1;
        loopback_up();
        sethostname("paddock", 7);
        if (find_port(demux_port, sizeof demux_port, err) < 0)
                return -1;
        mkdir("/run/paddock", 0700);
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = GUEST_SOCK };
        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
                return pd_error_set(err, errno, "listen on %s", GUEST_SOCK);
        ag->listen_fd = l;
        if (access("/usr/bin/sudo", X_OK) == 0)
                ag->sudo_path = "/run/paddock/sudo.sock";
        int r = demux_start();
        if (r < 0)
                return pd_error_set(err, -r, "fork the demux");
        return 0;
}
