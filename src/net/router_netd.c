/* paddock-netd, the resolver and strict proxy of a router netns: started
 * inside it (setns in a forked child, then exec), one per router; the
 * router tells it about each sandbox over its control socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "lib/agentpath.h"
#include "net/netd_client.h"
#include "net/router_int.h"
#include "lib/util.h"
#include <dirent.h>

#define NETD_START_TIMEOUT_MS 5000

static bool has_domain_rules(const struct pd_netpol *pol)
{
        for (size_t i = 0; i < pol->n_rules; i++)
                if (pol->rules[i].kind == PD_NETPOL_DOMAIN)
                        return true;
        return false;
}

static int read_pid(struct pd_router *r)
{
        char buf[32];
        int fd = openat(r->dirfd, "netd.pid", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return -ENOENT;
        buf[n] = 0;
        long pid = strtol(buf, NULL, 10);
        return pid > 1 ? (int)pid : -ENOENT;
}

int pd_router_netd_start(struct pd_router *r, const struct pd_router_cfg *cfg, struct pd_error *err)
{
        char bin[PATH_MAX];
        struct pd_error e2;
        if (pd_helper_path("paddock-netd", "PADDOCK_NETD", bin, sizeof bin, &e2) < 0)
                return 0;       /* CIDR rules work without it; domain rules say so at attach */
        char control[PATH_MAX + 16], never[sizeof r->never + 64], ready[16], pool[32];
        snprintf(control, sizeof control, "%s/netd.sock", r->dir);
        (void)unlinkat(r->dirfd, "netd.sock", 0);
        if (r->never[0]) {
                /* what the router added to the never list (router_setup.c):
                 * transit, pool, the host's own addresses... */
                snprintf(never, sizeof never, "%s", r->never);
        } else {
                /* a router made before that list was recorded */
                char pa[INET_ADDRSTRLEN], dflt[32];
                inet_ntop(AF_INET, r->pool, pa, sizeof pa);
                snprintf(pool, sizeof pool, "%s/%d", pa, r->pool_prefix);
                pd_router_default_transit(r->instance, dflt, sizeof dflt);
                snprintf(never, sizeof never, "%s,%s", pool, cfg->transit ? cfg->transit : dflt);
        }
        const char *resolvers = r->resolvers[0] ? r->resolvers : cfg->resolvers;
        int rp[2], pp[2];
        if (pipe2(rp, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        if (pipe2(pp, O_CLOEXEC) < 0) {
                close(rp[0]);
                close(rp[1]);
                return pd_error_set(err, errno, "pipe");
        }
        snprintf(ready, sizeof ready, "%d", rp[1]);
        char proxy[16];
        snprintf(proxy, sizeof proxy, "%d", PD_ROUTER_PROXY_PORT);
        const char *argv[16];
        int a = 0;
        argv[a++] = bin;
        argv[a++] = "--control";
        argv[a++] = control;
        if (resolvers && *resolvers) {
                argv[a++] = "--upstream";
                argv[a++] = resolvers;
        }
        argv[a++] = "--proxy-port";
        argv[a++] = proxy;
        argv[a++] = "--ready-fd";
        argv[a++] = ready;
        argv[a++] = "--never";
        argv[a++] = never;
        argv[a] = NULL;
        /* Double fork: netd outlives `paddock run` and is nobody's zombie.
         * The children use raw syscalls only (the caller may be threaded). */
        pid_t mid = fork();
        if (mid < 0) {
                int e = errno;
                close(rp[0]); close(rp[1]); close(pp[0]); close(pp[1]);
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
                if (setns(r->nsfd, CLONE_NEWNET) < 0)
                        _exit(127);
                int fl = fcntl(rp[1], F_GETFD);
                fcntl(rp[1], F_SETFD, fl & ~FD_CLOEXEC);      /* netd writes it when listening */
                /* no inherited stdout/stderr: a caller reading ours to EOF
                 * (a test, a pipe) would wait for the daemon's exit */
                int devnull = open("/dev/null", O_RDWR);
                int log = openat(r->dirfd, "netd.log", O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
                if (devnull >= 0) {
                        dup2(devnull, 0);
                        dup2(devnull, 1);
                        dup2(log >= 0 ? log : devnull, 2);
                }
                execv(bin, (char *const *)argv);
                _exit(127);
        }
        close(rp[1]);
        close(pp[1]);
        int status;
        while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
                ;
        pid_t pid = 0;
        ssize_t n = read(pp[0], &pid, sizeof pid);
        close(pp[0]);
        int rc = 0;
        if (n != sizeof pid || pid <= 0) {
                close(rp[0]);
                return pd_error_setx(err, ECHILD, "start paddock-netd");
        }
        char text[32];
        snprintf(text, sizeof text, "%d\n", (int)pid);
        int fd = openat(r->dirfd, "netd.pid", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0) {
                (void)pd_write_all(fd, text, strlen(text));
                close(fd);
        }
        struct pollfd pf = { .fd = rp[0], .events = POLLIN };
        char c = 0;
        int pr = poll(&pf, 1, NETD_START_TIMEOUT_MS);
        if (pr <= 0 || read(rp[0], &c, 1) != 1 || c != '1')
                rc = pd_error_setx(err, ETIMEDOUT, "paddock-netd did not start (%s)", bin);
        close(rp[0]);
        if (rc < 0)
                pd_router_netd_stop(r);
        return rc;
}

/* Is pid still paddock-netd (not a reused pid)? */
static bool is_netd(int pid)
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
        return strstr(buf, "paddock-netd") != NULL;
}

void pd_router_netd_stop(struct pd_router *r)
{
        pd_router_netd_disconnect(r);
        int pid = read_pid(r);
        if (pid > 0 && is_netd(pid)) {
                int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
                if (pfd >= 0 && is_netd(pid)) {
                        (void)syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0);
                        struct pollfd pf = { .fd = pfd, .events = POLLIN };
                        if (poll(&pf, 1, 2000) <= 0)
                                (void)syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
                        pf.revents = 0;
                        (void)poll(&pf, 1, 2000);
                }
                if (pfd >= 0)
                        close(pfd);
        }
        (void)unlinkat(r->dirfd, "netd.pid", 0);
        (void)unlinkat(r->dirfd, "netd.sock", 0);
}

void pd_router_netd_disconnect(struct pd_router *r)
{
        if (r->netd)
                pd_netd_close(r->netd);
        r->netd = NULL;
}

/* The control connection, or 0 with r->netd NULL when this router runs
 * without netd. */
static int client(struct pd_router *r, struct pd_error *err)
{
        if (r->netd)
                return 0;
        if (read_pid(r) < 0)
                return 0;
        char control[PATH_MAX + 16];
        snprintf(control, sizeof control, "%s/netd.sock", r->dir);
        return pd_netd_connect(control, 2000, &r->netd, err);
}

int pd_router_netd_add(struct pd_router *r, const char *id, const struct pd_router_slot *s,
                       const struct pd_netpol *pol, const char *audit_path, struct pd_error *err)
{
        int rc = client(r, err);
        if (rc < 0)
                return rc;
        if (!r->netd) {
                if (has_domain_rules(pol))
                        return pd_error_setx(err, ENOENT, "domain rules need paddock-netd, which was not found "
                                                          "(set PADDOCK_NETD or install it)");
                return 0;
        }
        char addr[INET_ADDRSTRLEN], addr6[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET, s->sb_addr, addr, sizeof addr);
        /* its IPv6 address too, when it has one: netd knows a sandbox by
         * the source of its queries and strict-mode connections */
        uint8_t a6[16];
        pd_router_addr6(PD_NET_POOL6, s->sb_addr, a6);
        inet_ntop(AF_INET6, a6, addr6, sizeof addr6);
        bool v6 = r->ipv6 && !s->no_ipv6;
        struct pd_netd_sandbox sb = { .id = id, .iface = s->ifname, .addrs = { addr, v6 ? addr6 : NULL, NULL },
                                      .audit_path = audit_path, .policy = pol };
        if ((rc = pd_netd_add(r->netd, &sb, err)) < 0)
                pd_router_netd_disconnect(r);   /* reconnect next time */
        return rc;
}

int pd_router_netd_update(struct pd_router *r, const char *id, const struct pd_netpol *pol,
                          struct pd_error *err)
{
        int rc = client(r, err);
        if (rc < 0 || !r->netd)
                return rc < 0 ? rc : has_domain_rules(pol) ? pd_error_setx(err, ENOENT, "domain rules need paddock-netd") : 0;
        if ((rc = pd_netd_update(r->netd, id, pol, err)) < 0)
                pd_router_netd_disconnect(r);
        return rc;
}

int pd_router_netd_remove(struct pd_router *r, const char *id, struct pd_error *err)
{
        struct pd_error e2;
        if (client(r, &e2) < 0 || !r->netd)
                return 0;       /* netd gone: nothing of the sandbox left in it */
        if (pd_netd_remove(r->netd, id, &e2) < 0)
                pd_router_netd_disconnect(r);
        return 0;
}

int pd_router_netd_revive(struct pd_router *r, const struct pd_router_cfg *cfg, struct pd_error *err)
{
        int pid = read_pid(r);
        if (pid < 0 || is_netd(pid))
                return 0;       /* runs without netd, or netd is alive */
        pd_router_netd_stop(r);
        int rc = pd_router_netd_start(r, cfg, err);
        if (rc < 0)
                return pd_error_prefix(err, "restart paddock-netd");
        if (read_pid(r) < 0)
                return 0;       /* the binary is gone: CIDR rules still hold */
        int fd = openat(r->dirfd, "sb", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        for (struct dirent *de; (de = readdir(d));) {
                struct pd_router_slot slot;
                struct pd_netpol pol = { 0 };
                char audit[PATH_MAX];
                if (de->d_name[0] == '.' ||
                    pd_router_sandbox_info(r, de->d_name, &slot, &pol, audit, sizeof audit) < 0)
                        continue;
                struct pd_error e2;
                if (pd_router_netd_add(r, de->d_name, &slot, &pol, audit[0] ? audit : NULL, &e2) < 0 && rc == 0) {
                        *err = e2;
                        rc = -e2.code;
                }
                pd_netpol_free(&pol);
        }
        closedir(d);
        return rc < 0 ? pd_error_prefix(err, "restart paddock-netd") : 0;
}
