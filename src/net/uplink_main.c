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
#include <stdbool.h>
#include <arpa/inet.h>
#include <netinet/in.h>
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

#include <linux/capability.h>

#include "lib/util.h"
#include "net/relay.h"

#define NS_FD 3                         /* the uplink netns, in the process */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
#define HEALTHY_MS 30000
#define STOP_MS 1000

struct opts {
        const char *kind, *bin, *userns, *netns, *dns_forward;
        const char *relay_netns;        /* the router's netns: TCP relay on */
        unsigned uid;
        int ipv6;
};

#define logf_(...) pd_uplink_log(NULL, __VA_ARGS__)

/* ---- the TCP relay (relay.h) ---- */

struct relay {
        int l4, l6, nfq, ctl;           /* ctl: our end of the gate's channel */
        pid_t gate;
};

/* bind + listen; the listener of a supervisor that was just killed may
 * still be held by its dying children for a moment: retried for 3 s */
static int listen_on(int fd, const struct sockaddr *sa, socklen_t len)
{
        for (int i = 0; bind(fd, sa, len) < 0; i++) {
                if (errno != EADDRINUSE || i >= 60)
                        return -1;
                struct timespec ts = { 0, 50 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        return listen(fd, 4096);
}

/* The listeners and the queue socket, made in the router netns as root. */
static int relay_open(const struct opts *o, struct relay *rl)
{
        rl->l4 = rl->l6 = rl->nfq = rl->ctl = -1;
        int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), ns = open(o->relay_netns, O_RDONLY | O_CLOEXEC);
        if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET) < 0)
                return -errno;
        int one = 1, r = 0;
        struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(PD_RELAY_PORT) };
        rl->l4 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (rl->l4 < 0 || setsockopt(rl->l4, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            listen_on(rl->l4, (struct sockaddr *)&a4, sizeof a4) < 0)
                r = -errno;
        if (r == 0 && o->ipv6) {
                struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(PD_RELAY_PORT) };
                rl->l6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (rl->l6 < 0 || setsockopt(rl->l6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0 ||
                    setsockopt(rl->l6, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
                    listen_on(rl->l6, (struct sockaddr *)&a6, sizeof a6) < 0)
                        r = -errno;
        }
        if (r == 0 && (rl->nfq = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER)) < 0)
                r = -errno;
        if (setns(self, CLONE_NEWNET) < 0)
                _exit(1);       /* the process would live in the wrong netns */
        close(self);
        if (r == 0) {
                struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
                if (bind(rl->nfq, (struct sockaddr *)&sa, sizeof sa) < 0)
                        r = -errno;
                else
                        r = pd_relay_gate_bind(rl->nfq);
        }
        /* the gate's process enters the router netns for good */
        if (r == 0) {
                int sp[2];
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                        r = -errno;
                } else {
                        rl->ctl = sp[0];
                        pid_t sup = getpid();
                        rl->gate = fork();
                        if (rl->gate == 0) {
                                close(sp[0]);
                                close(rl->l4);
                                if (rl->l6 >= 0)
                                        close(rl->l6);
                                /* uid 0 -> the uplink's uid keeping
                                 * CAP_NET_ADMIN only (verdicts need it at
                                 * each message), in the router netns only */
                                struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
                                struct __user_cap_data_struct d[2] = { 0 };
                                d[0].effective = d[0].permitted = 1u << CAP_NET_ADMIN;
                                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || setns(ns, CLONE_NEWNET) < 0)
                                        _exit(120);
                                /* the bounding set first (that needs
                                 * CAP_SETPCAP, which the uid change drops) */
                                for (int cap = 0; cap <= 63; cap++)
                                        if (cap != CAP_NET_ADMIN && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
                                            errno != EINVAL)
                                                _exit(120);
                                if (prctl(PR_SET_KEEPCAPS, 1) < 0 || setgroups(0, NULL) < 0 ||
                                    setresgid(o->uid, o->uid, o->uid) < 0 || setresuid(o->uid, o->uid, o->uid) < 0 ||
                                    syscall(SYS_capset, &h, d) < 0)
                                        _exit(120);
                                /* again: the change of credentials cleared it
                                 * (and the ctl channel's end says the same) */
                                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != sup ||
                                    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0) < 0)
                                        _exit(121);
                                (void)prctl(PR_SET_NAME, "pd-relay-gate");
                                /* nothing of the supervisor's (the uplink
                                 * netns, its conntrack socket) */
                                for (int fd = 3; fd < 1024; fd++)
                                        if (fd != rl->nfq && fd != sp[1] && fd != 2)
                                                close(fd);
                                _exit(pd_relay_gate_run(rl->nfq, sp[1]) < 0 ? 1 : 0);
                        }
                        close(sp[1]);
                        if (rl->gate < 0)
                                r = -errno;
                }
        }
        close(ns);
        if (rl->nfq >= 0)
                close(rl->nfq);         /* the gate's */
        rl->nfq = -1;
        return r;
}

/* Start a worker (as the supervisor's uid, in the host's netns) with a
 * fresh channel, whose other end goes to the gate. */
static pid_t relay_worker(struct relay *rl, const int *keep_out, int n_out, pid_t self)
{
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -1;
        char b = 'w';
        char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
        struct iovec iov = { &b, 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &sp[0], sizeof(int));
        if (sendmsg(rl->ctl, &m, MSG_NOSIGNAL) < 0) {
                close(sp[0]);
                close(sp[1]);
                return -1;
        }
        close(sp[0]);
        pid_t pid = fork();
        if (pid == 0) {
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
                        _exit(126);
                for (int i = 0; i < n_out; i++)
                        if (keep_out[i] >= 0)
                                close(keep_out[i]);
                close(rl->ctl);
                (void)prctl(PR_SET_NAME, "pd-relay");
                signal(SIGPIPE, SIG_IGN);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                int r = pd_relay_worker_run(sp[1], rl->l4, rl->l6);
                if (r < 0)
                        logf_("relay: %s", strerror(-r));
                _exit(r < 0 ? 1 : 0);
        }
        close(sp[1]);
        return pid;
}

void pd_uplink_log(const char *part, const char *fmt, ...)
{
        char buf[512];
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ paddock-uplink", &tm);
        n += (size_t)snprintf(buf + n, sizeof buf - n, part ? " (%s): " : ": ", part);
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

/* A supervised child: restarted with a backoff (0.1 s doubling to 10 s;
 * reset after 30 s of life). */
struct child {
        pid_t pid, last;
        int pidfd;
        uint64_t started, restart_at;
        unsigned backoff;
};

static void child_start(struct child *c, pid_t pid)
{
        c->pid = pid;
        c->started = pd_now_ms();
        c->pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
        if (!c->backoff)
                c->backoff = BACKOFF_MIN_MS;
        if (pid <= 0)
                c->restart_at = pd_now_ms() + c->backoff;
}

static int child_reaped(struct child *c)
{
        int status = 0;
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
                ;
        close(c->pidfd);
        c->pidfd = -1;
        c->last = c->pid;
        c->pid = 0;
        uint64_t now = pd_now_ms();
        if (now - c->started > HEALTHY_MS)
                c->backoff = BACKOFF_MIN_MS;
        c->restart_at = now + c->backoff;
        c->backoff = c->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff * 2;
        return status;
}

static int usage(void)
{
        fprintf(stderr, "usage: paddock-uplink --kind pasta|slirp4netns --bin PATH --userns PIN --netns PIN "
                        "--uid UID [--dns-forward ADDR] [--ipv6] [--relay-netns PIN]\n(started by paddock's router; docs/network.md)\n");
        return 2;
}

int main(int argc, char **argv)
{
        static const struct option lo[] = {
                { "kind", required_argument, NULL, 'k' }, { "bin", required_argument, NULL, 'b' },
                { "userns", required_argument, NULL, 'U' }, { "netns", required_argument, NULL, 'N' },
                { "uid", required_argument, NULL, 'u' }, { "dns-forward", required_argument, NULL, 'd' },
                { "ipv6", no_argument, NULL, '6' }, { "relay-netns", required_argument, NULL, 'R' }, { 0 },
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
                case 'R': o.relay_netns = optarg; break;
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
        /* the relay's sockets and gate, while root (relay.h) */
        struct relay rl = { .l4 = -1, .l6 = -1, .nfq = -1, .ctl = -1 };
        struct child proc = { .pidfd = -1 }, worker = { .pidfd = -1 }, gate = { .pidfd = -1 };
        bool rl_on = o.relay_netns != NULL;
        int r;
        if (rl_on && (r = relay_open(&o, &rl)) < 0) {
                logf_("cannot set up the TCP relay: %s", strerror(-r));
                return 1;
        }
        r = private_tun(o.uid);
        if (r < 0) {
                logf_("cannot prepare /dev/net/tun: %s", strerror(-r));
                return 1;
        }
        if ((r = drop_privileges(o.uid)) < 0) {
                logf_("cannot drop to uid %u: %s", o.uid, strerror(-r));
                return 1;
        }
        pid_t self = getpid();
        if (rl_on) {
                int out[] = { sfd, userns, netns, ct };
                child_start(&worker, relay_worker(&rl, out, 4, self));
                if (worker.pid < 0)
                        logf_("relay: fork: %s", strerror(errno));
                else
                        logf_("started the TCP relay (pid %d)", (int)worker.pid);
                gate.pid = rl.gate;
                gate.pidfd = (int)syscall(SYS_pidfd_open, rl.gate, 0);
        }
        child_start(&proc, spawn(&o, userns, netns, self));
        if (proc.pid < 0)
                logf_("fork: %s", strerror(errno));
        else
                logf_("started %s as uid %u (pid %d)", o.kind, o.uid, (int)proc.pid);
        for (;;) {
                uint64_t now = pd_now_ms();
                int timeout = -1;
                struct child *all[2] = { &proc, &worker };
                for (int i = 0; i < 2; i++)
                        if (all[i]->pid <= 0 && all[i]->restart_at) {
                                int64_t left = (int64_t)(all[i]->restart_at - now);
                                int t = left < 0 ? 0 : (int)left;
                                timeout = timeout < 0 || t < timeout ? t : timeout;
                        }
                struct pollfd pf[4] = { { .fd = sfd, .events = POLLIN }, { .fd = proc.pidfd, .events = POLLIN },
                                        { .fd = worker.pidfd, .events = POLLIN },
                                        { .fd = gate.pidfd, .events = POLLIN } };
                int pr = poll(pf, 4, timeout);
                if (pr < 0 && errno != EINTR)
                        break;
                if (pr > 0 && pf[0].revents) {
                        logf_("stopping");
                        break;
                }
                if (pr > 0 && pf[3].revents) {
                        /* the gate holds the router's queue: without it
                         * new TCP connections are dropped (fail closed);
                         * everything stops, and the router starts a new
                         * supervisor with the next sandbox */
                        int st = 0;
                        while (waitpid(gate.pid, &st, 0) < 0 && errno == EINTR)
                                ;
                        close(gate.pidfd);
                        gate.pidfd = -1;
                        logf_("the relay's gate (pid %d) died (status %d): stopping", (int)gate.pid, st);
                        break;
                }
                if (pr > 0 && pf[1].revents) {
                        int status = child_reaped(&proc);
                        if (WIFSIGNALED(status))
                                logf_("%s (pid %d) was killed by signal %d", o.kind, (int)proc.last, WTERMSIG(status));
                        else
                                logf_("%s (pid %d) exited with status %d", o.kind, (int)proc.last, WEXITSTATUS(status));
                        /* its connections are gone: their next segments get a reset */
                        conntrack_flush(ct);
                        logf_("restarting %s in %u ms", o.kind, proc.backoff);
                }
                if (pr > 0 && pf[2].revents) {
                        int status = child_reaped(&worker);
                        logf_("the TCP relay (pid %d) ended (%s %d); its connections are gone; restarting in %u ms",
                              (int)worker.last, WIFSIGNALED(status) ? "signal" : "status",
                              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), worker.backoff);
                }
                now = pd_now_ms();
                if (proc.pid <= 0 && proc.restart_at && now >= proc.restart_at) {
                        child_start(&proc, spawn(&o, userns, netns, self));
                        if (proc.pid > 0)
                                logf_("started %s as uid %u (pid %d)", o.kind, o.uid, (int)proc.pid);
                }
                if (rl_on && worker.pid <= 0 && worker.restart_at && now >= worker.restart_at) {
                        int out[] = { sfd, userns, netns, ct };
                        child_start(&worker, relay_worker(&rl, out, 4, self));
                        if (worker.pid > 0)
                                logf_("started the TCP relay (pid %d)", (int)worker.pid);
                }
        }
        if (proc.pid > 0)
                stop(proc.pid, proc.pidfd);
        if (worker.pid > 0)
                stop(worker.pid, worker.pidfd);
        /* the gate dies with us (PR_SET_PDEATHSIG) */
        return 0;
}
