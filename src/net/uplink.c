/* The default uplink (uplink.h): choosing the program, the uplink's user
 * and network namespaces, starting and stopping its supervisor. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "lib/agentpath.h"
#include "net/nft.h"
#include "net/nlsock.h"
#include "net/router_int.h"
#include "net/rtnl.h"
#include "net/uplink.h"
#include "jail/userns.h"
#include "lib/util.h"

#define UPLINK_READY_MS 5000            /* the process configures its tap in ~10 ms */
#define UPLINK_STOP_MS 2000

static const char *const kind_names[] = { "none", "pasta", "slirp4netns" };

const char *pd_uplink_kind_name(enum pd_uplink_kind k)
{
        return (unsigned)k < PD_ARRAY_SIZE(kind_names) ? kind_names[k] : "?";
}

bool pd_uplink_find_bin(const char *name, const char *env, char *out, size_t size)
{
        const char *e = env ? getenv(env) : NULL;
        if (e) {
                if (!*e || access(e, X_OK) < 0)
                        return false;
                snprintf(out, size, "%s", e);
                return true;
        }
        static const char *const dirs[] = { "/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin", "/sbin" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(dirs); i++) {
                snprintf(out, size, "%s/%s", dirs[i], name);
                if (access(out, X_OK) == 0)
                        return true;
        }
        out[0] = 0;
        return false;
}

int pd_uplink_choose(const char *spec, struct pd_uplink *u, struct pd_error *err)
{
        memset(u, 0, sizeof *u);
        bool any = !spec || !*spec || !strcmp(spec, "auto");
        if (spec && !strcmp(spec, "none")) {
                snprintf(u->why, sizeof u->why, "no uplink (--net-uplink none): sandboxes reach only paddock's resolver");
                return 1;
        }
        bool relay = any || !strcmp(spec, "relay");
        bool pasta = any || !strcmp(spec, "pasta"), slirp = relay || !strcmp(spec, "slirp4netns");
        if (!pasta && !slirp)
                return 0;
        /* slirp4netns first: pasta is faster (bench/uplink.py), but the
         * 2023-03 pasta of Debian 12 resets a connection whose server is
         * silent for ~24 s (a slow answer, an idle keep-alive), which
         * breaks real work (a large git clone, a slow API); slirp4netns
         * passed every fault test (docs/network.md, "Why slirp4netns") */
        if (slirp && pd_uplink_find_bin("slirp4netns", "PADDOCK_SLIRP4NETNS", u->bin, sizeof u->bin)) {
                u->kind = PD_UPLINK_SLIRP;
                /* TCP through the socket-level relay (relay.h): the
                 * kernel's TCP on both sides, bytes spliced; $PADDOCK_RELAY=0
                 * keeps the packet path on the default (benchmarks) */
                const char *env = getenv("PADDOCK_RELAY");
                u->relay = relay && !(any && env && !strcmp(env, "0"));
                return 1;
        }
        if (!any && slirp)
                return pd_error_setx(err, ENOENT, "uplink %s", relay ? "relay: the relay carries TCP only; slirp4netns, "
                                     "which carries the rest, was not found (install Debian's slirp4netns package)" :
                                     "slirp4netns: the slirp4netns program was not found "
                                                  "(install Debian's slirp4netns package)");
        if (pasta && pd_uplink_find_bin("pasta", "PADDOCK_PASTA", u->bin, sizeof u->bin)) {
                u->kind = PD_UPLINK_PASTA;
                return 1;
        }
        if (!any)
                return pd_error_setx(err, ENOENT, "uplink pasta: the pasta program was not found "
                                                  "(install Debian's passt package)");
        snprintf(u->why, sizeof u->why, "no uplink: neither slirp4netns nor pasta (package passt) is installed, "
                                        "and no --net-uplink was given; sandboxes reach only paddock's resolver");
        return 1;
}

/* ---- the uplink's user and network namespaces ---- */

static int pin_file(struct pd_router *r, const char *name, struct pd_error *err)
{
        int fd = openat(r->dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return pd_error_set(err, errno, "create '%s/%s'", r->dir, name);
        close(fd);
        return 0;
}

static int read_uid(struct pd_router *r, unsigned *slot, unsigned *uid)
{
        char buf[64];
        if (pd_router_file_read(r, "uplink.uid", buf, sizeof buf) <= 0 || sscanf(buf, "%u %u", slot, uid) != 2)
                return -ENOENT;
        return 0;
}

static void uid_owner(struct pd_router *r, char *buf, size_t size)
{
        /* not "<instance>:...": pd_uidrange_gc(instance) frees the
         * sandboxes' ranges before the router (and this uid's process)
         * is gone; the router frees this one itself */
        snprintf(buf, size, "%s/net:uplink", r->instance);
}

/* A child drops to uid (losing every capability), makes a user namespace
 * (so uid owns it), gets its maps from us, makes a network namespace inside
 * it and waits while we pin both. Raw syscalls only in the child: the
 * caller may be a threaded server. */
static int make_namespaces(struct pd_router *r, unsigned uid, struct pd_error *err)
{
        int to_child[2], from_child[2];
        if (pipe2(to_child, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        if (pipe2(from_child, O_CLOEXEC) < 0) {
                close(to_child[0]);
                close(to_child[1]);
                return pd_error_set(err, errno, "pipe");
        }
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(to_child[0]); close(to_child[1]); close(from_child[0]); close(from_child[1]);
                return pd_error_set(err, e, "fork");
        }
        if (pid == 0) {
                char c = 0;
                close(to_child[1]);
                close(from_child[0]);
                /* raw syscalls: glibc's wrappers would broadcast to the
                 * threads of a threaded parent, which the child has not */
                if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, uid, uid, uid) < 0 ||
                    syscall(SYS_setresuid, uid, uid, uid) < 0)
                        _exit(10);
                if (unshare(CLONE_NEWUSER) < 0)
                        _exit(11);
                if (write(from_child[1], "u", 1) != 1 || read(to_child[0], &c, 1) != 1)
                        _exit(12);
                if (unshare(CLONE_NEWNET) < 0)
                        _exit(13);
                if (write(from_child[1], "n", 1) != 1)
                        _exit(14);
                (void)!read(to_child[0], &c, 1);        /* until the parent closes */
                _exit(0);
        }
        close(to_child[0]);
        close(from_child[1]);
        int rc = 0;
        char c, map[64], path[64], src[64], dst[PATH_MAX + 32];
        if (read(from_child[0], &c, 1) != 1) {
                rc = pd_error_setx(err, EPERM, "could not make the uplink's user namespace as uid %u "
                                               "(are unprivileged user namespaces disabled?)", uid);
                goto out;
        }
        snprintf(map, sizeof map, "0 %u 1\n", uid);
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
        if ((rc = pd_write_file_at(AT_FDCWD, path, map, err)) < 0)
                goto out;
        snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
        if ((rc = pd_write_file_at(AT_FDCWD, path, map, err)) < 0)
                goto out;
        if (write(to_child[1], "m", 1) != 1 || read(from_child[0], &c, 1) != 1) {
                rc = pd_error_setx(err, EPERM, "could not make the uplink's network namespace");
                goto out;
        }
        static const char *const ns[2][2] = { { "user", "uplink-user" }, { "net", "uplink-net" } };
        for (int i = 0; i < 2 && rc == 0; i++) {
                snprintf(src, sizeof src, "/proc/%d/ns/%s", (int)pid, ns[i][0]);
                snprintf(dst, sizeof dst, "%s/%s", r->dir, ns[i][1]);
                if ((rc = pin_file(r, ns[i][1], err)) == 0 && mount(src, dst, NULL, MS_BIND, NULL) < 0)
                        rc = pd_error_set(err, errno, "pin the uplink's %s namespace", ns[i][0]);
        }
out:
        close(to_child[1]);
        close(from_child[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        return rc;
}

int pd_uplink_make_netns(struct pd_router *r, struct pd_error *err)
{
        char owner[64], text[64];
        uid_owner(r, owner, sizeof owner);
        struct pd_uidrange ur;
        int rc = pd_uidrange_alloc(owner, &ur, err);
        if (rc < 0)
                return pd_error_prefix(err, "uplink uid");
        snprintf(text, sizeof text, "%u %u\n", ur.slot, ur.base);
        if ((rc = pd_router_file_write(r, "uplink.uid", text, err)) < 0) {
                (void)pd_uidrange_free(ur.slot, owner, NULL);
                return rc;
        }
        if ((rc = make_namespaces(r, ur.base, err)) < 0)
                return rc;      /* the teardown frees what was made */
        char pin[PATH_MAX + 16];
        snprintf(pin, sizeof pin, "%s/uplink-net", r->dir);
        int fd = pd_router_pin_open(pin);
        return fd < 0 ? pd_error_set(err, -fd, "open '%s'", pin) : fd;
}

int pd_uplink_config_netns(struct pd_router *r, int nsfd, enum pd_uplink_kind kind, const char *rt_ifname,
                           struct pd_error *err)
{
        struct pd_rtnl *rt;
        int rc = pd_rtnl_open(nsfd, &rt, err);
        if (rc < 0)
                return rc;
        pd_rtnl_up(rt, 1);      /* lo */
        rc = pd_rtnl_flush(rt, err);
        pd_rtnl_close(rt);
        if (rc < 0)
                return pd_error_prefix(err, "uplink netns loopback");
        /* the uplink netns forwards between the router's veth and the tap;
         * a per-netns setting, as in the router */
        if ((rc = pd_netns_sysctl(nsfd, "/proc/sys/net/ipv4/conf/all/forwarding", "1", err)) < 0)
                return rc;
        /* slirp4netns gives its tap IPv6 by router advertisement, which a
         * forwarding netns ignores unless told (tap0 does not exist yet:
         * the default setting, which it inherits) */
        if (r->ipv6 && kind == PD_UPLINK_SLIRP &&
            ((rc = pd_netns_sysctl(nsfd, "/proc/sys/net/ipv6/conf/default/accept_ra", "2", err)) < 0 ||
             /* and its address usable at once (no duplicate detection on
              * a link with one other end: the masquerade needs it) */
             (rc = pd_netns_sysctl(nsfd, "/proc/sys/net/ipv6/conf/default/accept_dad", "0", err)) < 0))
                return rc;
        struct pd_nft *nft;
        if ((rc = pd_nft_open(nsfd, &nft, err)) < 0)
                return rc;
        rc = pd_nft_uplink_init(nft, rt_ifname, PD_UPLINK_IF, kind == PD_UPLINK_PASTA, err);
        pd_nft_close(nft);
        return rc;
}

/* ---- the supervisor ---- */

static int read_pid(struct pd_router *r)
{
        char buf[32];
        if (pd_router_file_read(r, "uplink.pid", buf, sizeof buf) <= 0)
                return -ENOENT;
        long pid = strtol(buf, NULL, 10);
        return pid > 1 ? (int)pid : -ENOENT;
}

static bool is_supervisor(int pid)
{
        char path[64], buf[256];
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = 0;
        return strstr(buf, "paddock-uplink") != NULL;
}

static void stop_supervisor(struct pd_router *r)
{
        int pid = read_pid(r);
        if (pid > 0 && is_supervisor(pid)) {
                int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
                /* checked again with the pidfd held: the pid is not reused
                 * under it */
                if (pfd >= 0 && is_supervisor(pid)) {
                        (void)syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0);
                        struct pollfd pf = { .fd = pfd, .events = POLLIN };
                        if (poll(&pf, 1, UPLINK_STOP_MS) <= 0) {
                                /* its process dies with it (PDEATHSIG) */
                                (void)syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
                                pf.revents = 0;
                                (void)poll(&pf, 1, UPLINK_STOP_MS);
                        }
                }
                if (pfd >= 0)
                        close(pfd);
        }
        (void)unlinkat(r->dirfd, "uplink.pid", 0);
}

/* uplink.kind: "<kind> <bin> <dns_forward 0|1>", what a revive needs */
static int start_supervisor(struct pd_router *r, enum pd_uplink_kind kind, const char *prog, bool dns_forward,
                            bool ipv6, bool relay, struct pd_error *err)
{
        char bin[PATH_MAX];
        struct pd_error e2;
        if (pd_helper_path("paddock-uplink", "PADDOCK_UPLINK", bin, sizeof bin, &e2) < 0)
                return pd_error_setx(err, ENOENT, "%s", e2.msg);
        unsigned slot, uid;
        if (read_uid(r, &slot, &uid) < 0)
                return pd_error_setx(err, ENOENT, "the uplink has no uid (%s/uplink.uid)", r->dir);
        char userns[PATH_MAX + 16], netns[PATH_MAX + 16], uidtext[16], router[PATH_MAX + 16];
        snprintf(router, sizeof router, "%s/router", r->dir);
        snprintf(userns, sizeof userns, "%s/uplink-user", r->dir);
        snprintf(netns, sizeof netns, "%s/uplink-net", r->dir);
        snprintf(uidtext, sizeof uidtext, "%u", uid);
        const char *argv[16];
        int a = 0;
        argv[a++] = bin;
        argv[a++] = "--kind";
        argv[a++] = pd_uplink_kind_name(kind);
        argv[a++] = "--bin";
        argv[a++] = prog;
        argv[a++] = "--userns";
        argv[a++] = userns;
        argv[a++] = "--netns";
        argv[a++] = netns;
        argv[a++] = "--uid";
        argv[a++] = uidtext;
        if (dns_forward && kind == PD_UPLINK_PASTA) {
                argv[a++] = "--dns-forward";
                argv[a++] = PD_UPLINK_PASTA_DNS;
        }
        if (ipv6)
                argv[a++] = "--ipv6";
        if (relay) {
                argv[a++] = "--relay-netns";
                argv[a++] = router;
        }
        argv[a] = NULL;
        int pp[2];
        if (pipe2(pp, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        /* opened here, as root: the supervisor writes to it after dropping
         * to the uplink's uid; the log starts afresh with each supervisor */
        int log = openat(r->dirfd, "uplink.log", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        /* Double fork: the supervisor outlives `paddock run` and is nobody's
         * zombie. The children use raw syscalls only. */
        pid_t mid = fork();
        if (mid < 0) {
                int e = errno;
                close(pp[0]);
                close(pp[1]);
                if (log >= 0)
                        close(log);
                return pd_error_set(err, e, "fork");
        }
        if (mid == 0) {
                pid_t pid = fork();
                if (pid != 0) {
                        if (pid > 0)
                                (void)!write(pp[1], &pid, sizeof pid);
                        _exit(pid > 0 ? 0 : 1);
                }
                setsid();
                int devnull = open("/dev/null", O_RDWR);
                if (devnull >= 0) {
                        dup2(devnull, 0);
                        dup2(devnull, 1);
                        dup2(log >= 0 ? log : devnull, 2);
                }
                execv(bin, (char *const *)argv);
                _exit(127);
        }
        close(pp[1]);
        if (log >= 0)
                close(log);
        while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
                ;
        pid_t pid = 0;
        ssize_t n = read(pp[0], &pid, sizeof pid);
        close(pp[0]);
        if (n != sizeof pid || pid <= 0)
                return pd_error_setx(err, ECHILD, "start paddock-uplink");
        char text[PATH_MAX + 64];
        snprintf(text, sizeof text, "%d\n", (int)pid);
        int rc = pd_router_file_write(r, "uplink.pid", text, err);
        snprintf(text, sizeof text, "%s %s %d %d %d\n", pd_uplink_kind_name(kind), prog, dns_forward ? 1 : 0,
                 ipv6 ? 1 : 0, relay ? 1 : 0);
        if (rc == 0)
                rc = pd_router_file_write(r, "uplink.kind", text, err);
        return rc;
}

static int uplink_nsfd(struct pd_router *r)
{
        char pin[PATH_MAX + 16];
        snprintf(pin, sizeof pin, "%s/uplink-net", r->dir);
        return pd_router_pin_open(pin);
}

int pd_uplink_start(struct pd_router *r, const struct pd_uplink *u, bool dns_forward, char *why, size_t whysz,
                    struct pd_error *err)
{
        why[0] = 0;
        int rc = start_supervisor(r, u->kind, u->bin, dns_forward, r->ipv6, u->relay, err);
        if (rc < 0)
                return rc;
        _pd_cleanup_close_ int ns = uplink_nsfd(r);
        if (ns < 0)
                return pd_error_set(err, -ns, "open the uplink netns");
        struct pd_error e2;
        int up = pd_rtnl_wait_default_route(ns, AF_INET, UPLINK_READY_MS, &e2);
        /* IPv6 comes by router advertisement from slirp4netns, a moment
         * later: the first sandboxes would find no route */
        if (up > 0 && r->ipv6)
                up = pd_rtnl_wait_default_route(ns, AF_INET6, UPLINK_READY_MS, &e2);
        if (up <= 0)
                snprintf(why, whysz, "the uplink (%s) did not come up within %d s (see %s/uplink.log)",
                         pd_uplink_kind_name(u->kind), UPLINK_READY_MS / 1000, r->dir);
        return 0;
}

int pd_uplink_revive(struct pd_router *r, struct pd_error *err)
{
        int pid = read_pid(r);
        if (pid == -ENOENT || is_supervisor(pid))
                return 0;       /* no user-mode uplink, or it runs */
        char buf[PATH_MAX + 64], kind[32], prog[PATH_MAX];
        int fwd = 0, v6 = 0, relay = 0;
        if (pd_router_file_read(r, "uplink.kind", buf, sizeof buf) <= 0 ||
            sscanf(buf, "%31s %4095s %d %d %d", kind, prog, &fwd, &v6, &relay) < 2)
                return pd_error_setx(err, ENOENT, "the uplink's settings are gone (%s/uplink.kind)", r->dir);
        enum pd_uplink_kind k = !strcmp(kind, "pasta") ? PD_UPLINK_PASTA : PD_UPLINK_SLIRP;
        (void)unlinkat(r->dirfd, "uplink.pid", 0);
        int rc = start_supervisor(r, k, prog, fwd != 0, v6 != 0, relay != 0, err);
        return rc < 0 ? pd_error_prefix(err, "restart the uplink supervisor") : 0;
}

void pd_uplink_teardown(struct pd_router *r)
{
        stop_supervisor(r);
        static const char *const pins[] = { "uplink-net", "uplink-user" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(pins); i++) {
                char p[PATH_MAX + 16];
                snprintf(p, sizeof p, "%s/%s", r->dir, pins[i]);
                (void)umount2(p, MNT_DETACH);
                (void)unlinkat(r->dirfd, pins[i], 0);
        }
        unsigned slot, uid;
        if (read_uid(r, &slot, &uid) == 0) {
                char owner[64];
                uid_owner(r, owner, sizeof owner);
                (void)pd_uidrange_free(slot, owner, NULL);
        }
        (void)unlinkat(r->dirfd, "uplink.uid", 0);
        (void)unlinkat(r->dirfd, "uplink.kind", 0);
}

bool pd_uplink_up(struct pd_router *r, char *why, size_t whysz)
{
        int pid = read_pid(r);
        if (pid < 0 || !is_supervisor(pid)) {
                snprintf(why, whysz, "the uplink's supervisor (paddock-uplink) is not running; the next "
                                     "sandbox with a network starts it again");
                return false;
        }
        _pd_cleanup_close_ int ns = uplink_nsfd(r);
        struct pd_error e2;
        if (ns < 0 || pd_rtnl_wait_default_route(ns, AF_INET, 0, &e2) <= 0) {
                snprintf(why, whysz, "the uplink process is down and being restarted (see %s/uplink.log)", r->dir);
                return false;
        }
        return true;
}
