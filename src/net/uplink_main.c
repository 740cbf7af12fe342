/* paddock-uplink: runs and supervises the user-mode uplink process (pasta
 * or slirp4netns) of one router (uplink.h). Started as root by the router,
 * it keeps root only long enough to
 *   - open the pinned user and network namespaces of the uplink,
 *   - open a conntrack socket inside the uplink netns,
 *   - give itself a private mount namespace in which /dev/net/tun is a
 *     node owned by the uplink's uid (the host's node is root's, 0600),
 * then becomes that unprivileged uid for good (no capabilities in the
 * host's namespaces, no_new_privs). It owns the uplink's user namespace,
 * so it can start the process inside it: setns into it, become its root
 * (still the same host uid) and exec. The process holds capabilities over
 * the uplink netns only, and its sockets are ordinary host sockets.
 *
 * When the process dies, its tap and routes vanish: the supervisor flushes
 * the uplink netns's conntrack table (so segments of the dead process's
 * connections are reset there, nft_uplink.c) and starts it again, with a
 * backoff (0.1 s doubling to 10 s; reset after 30 s of life). SIGTERM
 * stops both. The process gets SIGKILL if the supervisor dies
 * (PR_SET_PDEATHSIG), so it never outlives the router's teardown. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include "lib/util.h"

#define NS_FD 3                         /* the uplink netns, in the process */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
#define HEALTHY_MS 30000
#define STOP_MS 1000

struct opts {
        const char *kind, *bin, *userns, *netns, *dns_forward;
        unsigned uid;
        int ipv6;
};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
        char buf[512];
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ paddock-uplink: ", &tm);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
        va_end(ap);
        strcat(buf, "\n");
        (void)!write(2, buf, strlen(buf));
}

/* A netlink socket of bus inside the netns nsfd (this process enters and
 * comes back; it is single-threaded). */
static int socket_in(int nsfd, int bus)
{
        int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self < 0 || setns(nsfd, CLONE_NEWNET) < 0)
                return -1;
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, bus);
        if (setns(self, CLONE_NEWNET) < 0)
                _exit(1);       /* the process would live in the wrong netns */
        close(self);
        return fd;
}

/* Forget every connection the uplink netns tracked (the dead process's). */
static void conntrack_flush(int ct)
{
        struct {
                struct nlmsghdr h;
                struct nfgenmsg g;
        } m = { 0 };
        m.h.nlmsg_len = sizeof m;
        m.h.nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
        m.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        m.h.nlmsg_seq = (uint32_t)pd_now_ms();
        m.g.nfgen_family = AF_UNSPEC;   /* every family */
        m.g.version = NFNETLINK_V0;
        struct sockaddr_nl to = { .nl_family = AF_NETLINK };
        if (ct < 0 || sendto(ct, &m, sizeof m, 0, (struct sockaddr *)&to, sizeof to) < 0) {
                logf_("conntrack flush: %s", strerror(errno));
                return;
        }
        char buf[512];
        struct pollfd pf = { .fd = ct, .events = POLLIN };
        if (poll(&pf, 1, 1000) == 1 && recv(ct, buf, sizeof buf, 0) >= (ssize_t)(sizeof(struct nlmsghdr) + 4)) {
                const struct nlmsgerr *e = NLMSG_DATA((struct nlmsghdr *)buf);
                if (((struct nlmsghdr *)buf)->nlmsg_type == NLMSG_ERROR && e->error && e->error != -ENOENT)
                        logf_("conntrack flush: %s", strerror(-e->error));
        }
}

/* The host's /dev/net/tun is root's (0600): in a mount namespace of our
 * own, a node of the same device owned by uid takes its place. The mount
 * namespace is made private first, so nothing here reaches the host's
 * mounts (slirp4netns's own --enable-sandbox once unmounted every
 * /run/netns mount of the host: never used). */
static int private_tun(unsigned uid)
{
        struct stat st;
        dev_t dev = stat("/dev/net/tun", &st) == 0 && S_ISCHR(st.st_mode) ? st.st_rdev : makedev(10, 200);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        if (mount("tmpfs", "/dev/net", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=16k,mode=0755") < 0)
                return -errno;
        if (mknod("/dev/net/tun", S_IFCHR | 0600, dev) < 0 || chown("/dev/net/tun", uid, uid) < 0)
                return -errno;
        return 0;
}

static int drop_privileges(unsigned uid)
{
        if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
                return -errno;
        /* leaving uid 0 cleared every capability; make sure */
        if (setresuid(0, 0, 0) == 0)
                return -EPERM;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

static void child_argv(const struct opts *o, const char **argv)
{
        int a = 0;
        argv[a++] = o->bin;
        if (!strcmp(o->kind, "pasta")) {
                /* root of its own user namespace (--runas 0 keeps it there:
                 * "nobody" has no mapping in it); foreground; configure the
                 * tap like the host's interface; no port forwarding either
                 * way, and the gateway address is not mapped to the host
                 * (each of those would open the host's loopback) */
                static const char *const base[] = { "--runas", "0", "-f", "-q", "--config-net", "--no-netns-quit",
                                                    "--no-map-gw", "-t", "none", "-u", "none", "-T", "none",
                                                    "-U", "none", "-I", "tap0", "--netns", "/proc/self/fd/3" };
                for (size_t i = 0; i < sizeof base / sizeof *base; i++)
                        argv[a++] = base[i];
                if (o->dns_forward) {
                        argv[a++] = "--dns-forward";
                        argv[a++] = o->dns_forward;
                }
        } else {
                /* --disable-host-loopback: 10.0.2.2 (and fd00::2) is not
                 * the host's loopback; never --enable-sandbox (see
                 * private_tun) */
                static const char *const base[] = { "--configure", "--mtu=65520", "--disable-host-loopback",
                                                    "--enable-seccomp", "--netns-type=path", "/proc/self/fd/3",
                                                    "tap0" };
                if (o->ipv6)
                        argv[a++] = "--enable-ipv6";
                for (size_t i = 0; i < sizeof base / sizeof *base; i++)
                        argv[a++] = base[i];
        }
        argv[a] = NULL;
}

static pid_t spawn(const struct opts *o, int userns, int netns, pid_t self)
{
        const char *argv[40];
        child_argv(o, argv);
        pid_t pid = fork();
        if (pid != 0)
                return pid;
        /* dies with the supervisor, whatever kills it */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
                _exit(126);
        /* default dispositions: an ignored SIGPIPE inherited from paddock
         * makes pasta's start-up fail ("Couldn't install signal handlers") */
        for (int sig = 1; sig < NSIG; sig++)
                (void)signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* root of the uplink's user namespace: the same host uid, with
         * capabilities over the uplink netns only */
        if (setns(userns, CLONE_NEWUSER) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                _exit(125);
        /* dup2 onto itself would keep FD_CLOEXEC */
        if (netns == NS_FD ? fcntl(NS_FD, F_SETFD, 0) < 0 : dup2(netns, NS_FD) < 0)
                _exit(124);
        execv(o->bin, (char *const *)argv);
        _exit(127);
}

static void stop(pid_t pid, int pidfd)
{
        kill(pid, SIGTERM);
        struct pollfd pf = { .fd = pidfd, .events = POLLIN };
        if (poll(&pf, 1, STOP_MS) <= 0)
                kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

static int usage(void)
{
        fprintf(stderr, "usage: paddock-uplink --kind pasta|slirp4netns --bin PATH --userns PIN --netns PIN "
                        "--uid UID [--dns-forward ADDR] [--ipv6]\n(started by paddock's router; docs/network.md)\n");
        return 2;
}

int main(int argc, char **argv)
{
        static const struct option lo[] = {
                { "kind", required_argument, NULL, 'k' }, { "bin", required_argument, NULL, 'b' },
                { "userns", required_argument, NULL, 'U' }, { "netns", required_argument, NULL, 'N' },
                { "uid", required_argument, NULL, 'u' }, { "dns-forward", required_argument, NULL, 'd' },
                { "ipv6", no_argument, NULL, '6' }, { 0 },
        };
        struct opts o = { 0 };
        int c;
        char *end;
        while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
                switch (c) {
                case 'k': o.kind = optarg; break;
                case 'b': o.bin = optarg; break;
                case 'U': o.userns = optarg; break;
                case 'N': o.netns = optarg; break;
                case 'd': o.dns_forward = optarg; break;
                case '6': o.ipv6 = 1; break;
                case 'u':
                        o.uid = (unsigned)strtoul(optarg, &end, 10);
                        if (*end || !o.uid)
                                return usage();
                        break;
                default: return usage();
                }
        }
        if (!o.kind || !o.bin || !o.userns || !o.netns || !o.uid || optind != argc ||
            (strcmp(o.kind, "pasta") && strcmp(o.kind, "slirp4netns")))
                return usage();
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        int userns = open(o.userns, O_RDONLY | O_CLOEXEC), netns = open(o.netns, O_RDONLY | O_CLOEXEC);
        if (sfd < 0 || userns < 0 || netns < 0) {
                logf_("cannot open the uplink's namespaces: %s", strerror(errno));
                return 1;
        }
        int ct = socket_in(netns, NETLINK_NETFILTER);
        if (ct < 0)
                logf_("no conntrack socket in the uplink netns: %s (dead connections will not be reset)",
                      strerror(errno));
        int r = private_tun(o.uid);
        if (r < 0) {
                logf_("cannot prepare /dev/net/tun: %s", strerror(-r));
                return 1;
        }
        if ((r = drop_privileges(o.uid)) < 0) {
                logf_("cannot drop to uid %u: %s", o.uid, strerror(-r));
                return 1;
        }
        pid_t self = getpid();
        unsigned backoff = BACKOFF_MIN_MS;
        for (;;) {
                uint64_t started = pd_now_ms();
                pid_t pid = spawn(&o, userns, netns, self);
                if (pid < 0) {
                        logf_("fork: %s", strerror(errno));
                } else {
                        logf_("started %s as uid %u (pid %d)", o.kind, o.uid, (int)pid);
                        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
                        struct pollfd pf[2] = { { .fd = sfd, .events = POLLIN }, { .fd = pfd, .events = POLLIN } };
                        while (poll(pf, 2, -1) < 0 && errno == EINTR)
                                ;
                        if (pf[0].revents) {
                                logf_("stopping");
                                stop(pid, pfd);
                                return 0;
                        }
                        int status = 0;
                        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                                ;
                        close(pfd);
                        if (WIFSIGNALED(status))
                                logf_("%s (pid %d) was killed by signal %d", o.kind, (int)pid, WTERMSIG(status));
                        else
                                logf_("%s (pid %d) exited with status %d", o.kind, (int)pid, WEXITSTATUS(status));
                }
                /* its connections are gone: their next segments get a reset */
                conntrack_flush(ct);
                if (pd_now_ms() - started > HEALTHY_MS)
                        backoff = BACKOFF_MIN_MS;
                logf_("restarting %s in %u ms", o.kind, backoff);
                struct pollfd ps = { .fd = sfd, .events = POLLIN };
                int pr;
                while ((pr = poll(&ps, 1, (int)backoff)) < 0 && errno == EINTR)
                        ;
                if (pr > 0) {
                        logf_("stopping");
                        return 0;
                }
                backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
        }
}
