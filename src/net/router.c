/* The router netns of one instance (router.h): creation, slots, attaching
 * and detaching sandboxes, gc. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "net/nft.h"
#include "net/router.h"
#include "net/router_int.h"
#include "net/rtnl.h"
#include "net/uplink.h"
#include "lib/util.h"

#define SB_INDEX_IN_SANDBOX 64          /* eth0's ifindex in a fresh netns */

int pd_router_parse_cidr4(const char *s, uint8_t addr[4], int *prefix, struct pd_error *err)
{
        char buf[64];
        const char *slash = s ? strchr(s, '/') : NULL;
        if (!slash || (size_t)(slash - s) >= sizeof buf)
                return pd_error_setx(err, EINVAL, "'%s' is not an IPv4 CIDR (a.b.c.d/n)", s ? s : "");
        memcpy(buf, s, (size_t)(slash - s));
        buf[slash - s] = 0;
        char *end;
        long p = strtol(slash + 1, &end, 10);
        if (inet_pton(AF_INET, buf, addr) != 1 || *end || end == slash + 1 || p < 0 || p > 32)
                return pd_error_setx(err, EINVAL, "'%s' is not an IPv4 CIDR (a.b.c.d/n)", s);
        *prefix = (int)p;
        return 0;
}

void pd_router_default_transit(const char *instance, char *buf, size_t size)
{
        unsigned long h = strtoul(instance, NULL, 16);
        unsigned n = 1 + (unsigned)(h % 16383u);        /* /30 number n of 10.200.0.0/16 */
        snprintf(buf, size, "10.200.%u.%u/30", (n * 4) >> 8, (n * 4) & 0xff);
}

static int lock(struct pd_router *r, struct pd_error *err)
{
        while (flock(r->lockfd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return pd_error_set(err, errno, "lock the router");
        return 0;
}

static void unlock(struct pd_router *r)
{
        (void)flock(r->lockfd, LOCK_UN);
}

/* Is path a pinned network namespace (an nsfs file)? Returns an fd on it. */
static int open_pinned(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0 || sf.f_type != NSFS_MAGIC) {
                close(fd);
                return -ENOENT;
        }
        return fd;
}

/* A new netns pinned at path: this thread enters a fresh netns, turns on
 * forwarding there (a per-netns sysctl: /proc/sys/net follows the opening
 * thread's netns), bind-mounts its nsfs file, and comes back. */
static int make_netns(const char *path, struct pd_error *err)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return pd_error_set(err, errno, "create '%s'", path);
        close(fd);
        int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self < 0)
                return pd_error_set(err, errno, "open own network namespace");
        int r = 0;
        if (unshare(CLONE_NEWNET) < 0) {
                r = pd_error_set(err, errno, "create the router network namespace");
                close(self);
                return r;
        }
        int fwd = open("/proc/sys/net/ipv4/conf/all/forwarding", O_WRONLY | O_CLOEXEC);
        if (fwd < 0 || write(fwd, "1", 1) != 1)
                r = pd_error_set(err, errno, "enable forwarding in the router netns");
        if (fwd >= 0)
                close(fwd);
        if (r == 0 && mount("/proc/thread-self/ns/net", path, NULL, MS_BIND, NULL) < 0)
                r = pd_error_set(err, errno, "pin the router netns at '%s'", path);
        if (setns(self, CLONE_NEWNET) < 0)
                abort();        /* this thread would act in the wrong netns */
        close(self);
        return r;
}

static int write_file(int dirfd, const char *name, const char *text, int flags, struct pd_error *err)
{
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | flags, 0600);
        if (fd < 0)
                return flags & O_EXCL && errno == EEXIST ? -EEXIST : pd_error_set(err, errno, "create '%s'", name);
        int r = pd_write_all(fd, text, strlen(text)) < 0 ? pd_error_set(err, errno, "write '%s'", name) : 0;
        close(fd);
        return r;
}

static int read_file(int dirfd, const char *name, char *buf, size_t size)
{
        int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        int e = errno;
        close(fd);
        if (n < 0)
                return -e;
        buf[n] = 0;
        while (n > 0 && (buf[n - 1] == '\n'))
                buf[--n] = 0;
        return (int)n;
}

int pd_router_file_write(struct pd_router *r, const char *name, const char *text, struct pd_error *err)
{
        return write_file(r->dirfd, name, text, O_TRUNC, err);
}

int pd_router_file_read(struct pd_router *r, const char *name, char *buf, size_t size)
{
        return read_file(r->dirfd, name, buf, size);
}

int pd_router_pin_open(const char *path)
{
        return open_pinned(path);
}

int pd_router_open(const struct pd_state *st, const struct pd_router_cfg *cfg, struct pd_router **out,
                   struct pd_error *err)
{
        struct pd_router *r = calloc(1, sizeof *r);
        if (!r)
                return pd_error_set(err, ENOMEM, "router");
        r->dirfd = r->lockfd = r->nsfd = -1;
        snprintf(r->instance, sizeof r->instance, "%s", st->instance);
        snprintf(r->dir, sizeof r->dir, "%s/net", st->rundir);
        int rc;
        const char *pool = cfg->pool ? cfg->pool : PD_NET_DEFAULT_POOL;
        if ((rc = pd_router_parse_cidr4(pool, r->pool, &r->pool_prefix, err)) < 0)
                goto fail;
        if (r->pool_prefix > 28) {
                rc = pd_error_setx(err, EINVAL, "address pool '%s' is smaller than a /28", pool);
                goto fail;
        }
        if (mkdirat(st->rundirfd, "net", 0700) < 0 && errno != EEXIST) {
                rc = pd_error_set(err, errno, "create '%s'", r->dir);
                goto fail;
        }
        r->dirfd = openat(st->rundirfd, "net", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r->dirfd < 0) {
                rc = pd_error_set(err, errno, "open '%s'", r->dir);
                goto fail;
        }
        r->lockfd = openat(r->dirfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (r->lockfd < 0) {
                rc = pd_error_set(err, errno, "open '%s/lock'", r->dir);
                goto fail;
        }
        (void)mkdirat(r->dirfd, "slots", 0700);
        (void)mkdirat(r->dirfd, "sb", 0700);
        (void)mkdirat(r->dirfd, "policy", 0700);
        (void)mkdirat(r->dirfd, "audit", 0700);
        if ((rc = lock(r, err)) < 0)
                goto fail;
        char pin[PATH_MAX + 16], want[512], have[512];
        snprintf(pin, sizeof pin, "%s/router", r->dir);
        /* "auto" is the default uplink: the same router as no setting */
        snprintf(want, sizeof want, "uplink=%s\nresolvers=%s\npool=%s\n",
                 cfg->uplink && strcmp(cfg->uplink, "auto") ? cfg->uplink : "",
                 cfg->resolvers ? cfg->resolvers : "", pool);
        r->nsfd = open_pinned(pin);
        if (r->nsfd >= 0) {
                if (read_file(r->dirfd, "config", have, sizeof have) >= 0 && strncmp(have, want, strlen(have))) {
                        rc = pd_error_setx(err, EEXIST,
                                           "this instance's router runs with other network settings (%s/config); "
                                           "stop its sandboxes (paddock gc) to change them", r->dir);
                        goto fail_locked;
                }
                pd_router_load_egress(r);
                /* netd and the uplink's supervisor are daemons: one that
                 * was killed comes back with the next sandbox */
                if ((rc = pd_nft_open(r->nsfd, &r->nft, err)) < 0 || (rc = pd_rtnl_open(r->nsfd, &r->rt, err)) < 0 ||
                    (rc = pd_router_netd_revive(r, cfg, err)) < 0 || (rc = pd_uplink_revive(r, err)) < 0)
                        goto fail_locked;
                unlock(r);
                *out = r;
                return 0;
        }
        if ((rc = make_netns(pin, err)) < 0)
                goto fail_locked;
        if ((r->nsfd = open_pinned(pin)) < 0) {
                rc = pd_error_set(err, -r->nsfd, "open the router netns");
                goto fail_locked;
        }
        if ((rc = pd_nft_open(r->nsfd, &r->nft, err)) < 0 || (rc = pd_rtnl_open(r->nsfd, &r->rt, err)) < 0 ||
            (rc = pd_router_setup(r, cfg, err)) < 0 || (rc = pd_router_netd_start(r, cfg, err)) < 0 ||
            (rc = write_file(r->dirfd, "config", want, O_TRUNC, err)) < 0) {
                pd_router_teardown(r);
                goto fail_locked;
        }
        unlock(r);
        *out = r;
        return 0;
fail_locked:
        unlock(r);
fail:
        pd_router_close(r);
        return pd_error_prefix(err, "network router");
}

void pd_router_close(struct pd_router *r)
{
        if (!r)
                return;
        pd_router_netd_disconnect(r);
        pd_nft_close(r->nft);
        pd_rtnl_close(r->rt);
        if (r->nsfd >= 0)
                close(r->nsfd);
        if (r->lockfd >= 0)
                close(r->lockfd);
        if (r->dirfd >= 0)
                close(r->dirfd);
        free(r);
}

/* Tear the router down: netd, pin, files (the netns goes when its last
 * reference does; its veths and rules with it). Lock held. */
void pd_router_teardown(struct pd_router *r)
{
        char pin[PATH_MAX + 16];
        pd_router_netd_stop(r);
        pd_uplink_teardown(r);
        pd_nft_close(r->nft);
        r->nft = NULL;
        pd_rtnl_close(r->rt);
        r->rt = NULL;
        if (r->nsfd >= 0)
                close(r->nsfd);
        r->nsfd = -1;
        snprintf(pin, sizeof pin, "%s/router", r->dir);
        (void)umount2(pin, MNT_DETACH);
        (void)unlinkat(r->dirfd, "router", 0);
        (void)unlinkat(r->dirfd, "config", 0);
        (void)unlinkat(r->dirfd, "egress", 0);
}

static void slot_fill(const struct pd_router *r, unsigned n, struct pd_router_slot *s)
{
        s->n = n;
        snprintf(s->ifname, sizeof s->ifname, "pd%x", n);
        pd_v4_put(s->gw_addr, pd_v4(r->pool) + 4 * n + 1);
        pd_v4_put(s->sb_addr, pd_v4(r->pool) + 4 * n + 2);
        s->prefix = 30;
        s->mtu_max = 0;
        s->no_ipv6 = false;
}

int pd_router_reserve(struct pd_router *r, const char *id, struct pd_router_slot *out, struct pd_error *err)
{
        if (pd_nft_key_check(id) < 0)
                return pd_error_setx(err, EINVAL, "bad sandbox id");
        unsigned n_slots = 1u << (32 - r->pool_prefix) >> 2;
        int rc = lock(r, err);
        if (rc < 0)
                return rc;
        /* start at a hash of the id: few collisions with concurrent callers */
        unsigned h = 2166136261u;
        for (const char *p = id; *p; p++)
                h = (h ^ (unsigned char)*p) * 16777619u;
        rc = -ENOSPC;
        for (unsigned i = 0; i < n_slots; i++) {
                unsigned n = 1 + (h + i) % (n_slots - 1);       /* slot 0: network address */
                char name[32];
                snprintf(name, sizeof name, "slots/%u", n);
                rc = write_file(r->dirfd, name, id, O_EXCL, err);
                if (rc == -EEXIST)
                        continue;
                if (rc < 0)
                        break;
                char sbname[PD_NFT_KEY_MAX + 8], num[16];
                snprintf(sbname, sizeof sbname, "sb/%s", id);
                snprintf(num, sizeof num, "%u", n);
                if ((rc = write_file(r->dirfd, sbname, num, O_TRUNC, err)) < 0) {
                        (void)unlinkat(r->dirfd, name, 0);
                        break;
                }
                slot_fill(r, n, out);
                break;
        }
        unlock(r);
        if (rc == -EEXIST || rc == -ENOSPC)
                return pd_error_setx(err, ENOSPC, "the address pool has no free /30 left");
        return rc;
}

static int slot_of(struct pd_router *r, const char *id, struct pd_router_slot *out)
{
        char sbname[PD_NFT_KEY_MAX + 8], num[16];
        snprintf(sbname, sizeof sbname, "sb/%s", id);
        if (read_file(r->dirfd, sbname, num, sizeof num) <= 0)
                return -ENOENT;
        char *end;
        unsigned long n = strtoul(num, &end, 10);
        if (*end || n == 0 || n >= (1u << (32 - r->pool_prefix) >> 2))
                return -EINVAL;
        slot_fill(r, (unsigned)n, out);
        return 0;
}

void pd_router_policy_to_nft(const struct pd_netpol *pol, struct pd_nft_rules *out,
                             struct pd_nft_cidr *allow, struct pd_nft_cidr *deny, struct pd_nft_cidr *never)
{
        memset(out, 0, sizeof *out);
        out->mode = pol->mode == PD_NETPOL_OPEN ? PD_NFT_MODE_OPEN : PD_NFT_MODE_POLICY;
        out->allow = allow;
        out->deny = deny;
        out->conn_per_sec = pol->conn_per_sec;
        out->bytes_per_sec = pol->bytes_per_sec;
        out->strict_port = pol->strict ? PD_ROUTER_PROXY_PORT : 0;
        for (size_t i = 0; i < pol->n_rules; i++) {
                const struct pd_netpol_rule *ru = &pol->rules[i];
                if (ru->kind != PD_NETPOL_CIDR)
                        continue;
                struct pd_nft_cidr *c = ru->action == PD_NETPOL_ALLOW ? &allow[out->n_allow++] : &deny[out->n_deny++];
                memset(c, 0, sizeof *c);
                c->family = ru->family;
                memcpy(c->addr, ru->addr, 16);
                c->prefix = ru->prefix;
                c->proto = ru->proto;
                c->port_lo = ru->port_lo;
                c->port_hi = ru->port_hi;
        }
        size_t nb;
        const struct pd_netpol_builtin *b = pd_netpol_builtin_deny(&nb);
        for (size_t i = 0; i < nb && i < PD_NFT_OPEN_DENY_MAX; i++) {
                memset(&never[i], 0, sizeof never[i]);
                never[i].family = b[i].family;
                memcpy(never[i].addr, b[i].addr, 16);
                never[i].prefix = b[i].prefix;
                out->n_never = i + 1;
        }
        out->never = never;
}

static int save_policy(struct pd_router *r, const char *id, const struct pd_netpol *pol, struct pd_error *err)
{
        char *text = pd_netpol_to_json_str(pol);
        if (!text)
                return pd_error_set(err, ENOMEM, "policy JSON");
        char name[PD_NFT_KEY_MAX + 16];
        snprintf(name, sizeof name, "policy/%s", id);
        int rc = write_file(r->dirfd, name, text, O_TRUNC, err);
        free(text);
        return rc;
}

/* A whole small file (at most 64 MiB) of dirfd, malloc'd and NUL-ended. */
static int read_all(int dirfd, const char *name, char **out)
{
        int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap);
        for (;;) {
                if (!buf) {
                        close(fd);
                        return -ENOMEM;
                }
                ssize_t n = read(fd, buf + len, cap - len - 1);
                if (n < 0) {
                        int e = errno;
                        free(buf);
                        close(fd);
                        return -e;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (cap - len < 2) {
                        char *nb = cap < (64u << 20) ? realloc(buf, cap *= 2) : NULL;
                        if (!nb)
                                free(buf);
                        buf = nb;
                }
        }
        close(fd);
        buf[len] = 0;
        *out = buf;
        return 0;
}

int pd_router_policy_json(const struct pd_state *st, const char *id, char **out)
{
        if (pd_nft_key_check(id) < 0)
                return -EINVAL;
        char name[PD_NFT_KEY_MAX + 16];
        snprintf(name, sizeof name, "net/policy/%s", id);
        return read_all(st->rundirfd, name, out);
}

/* program nft for a sandbox from its policy: add (new) or apply (update) */
static int program(struct pd_router *r, const char *id, const struct pd_router_slot *s,
                   const struct pd_netpol *pol, bool add, struct pd_error *err)
{
        struct pd_nft_cidr *allow = calloc(pol->n_rules + 1, sizeof *allow);
        struct pd_nft_cidr *deny = calloc(pol->n_rules + 1, sizeof *deny);
        struct pd_nft_cidr *never = calloc(PD_NFT_OPEN_DENY_MAX, sizeof *never);
        int rc;
        if (!allow || !deny || !never) {
                rc = pd_error_set(err, ENOMEM, "rules");
        } else {
                struct pd_nft_rules rules;
                pd_router_policy_to_nft(pol, &rules, allow, deny, never);
                rc = add ? pd_nft_sandbox_add(r->nft, id, s->ifname, s->sb_addr, &rules, err)
                         : pd_nft_sandbox_apply(r->nft, id, s->ifname, &rules, false, err);
        }
        free(allow);
        free(deny);
        free(never);
        return rc;
}

int pd_router_attach(struct pd_router *r, const char *id, const struct pd_router_slot *s, int netns_fd,
                     const struct pd_netpol *pol, const char *audit_path, struct pd_error *err)
{
        if (pol->mode == PD_NETPOL_NONE)
                return pd_error_setx(err, EINVAL, "network mode none needs no router");
        int rc;
        struct pd_rtnl *srt = NULL;
        /* IPv6 behind a default uplink whose host has it (router.h) */
        bool v6 = r->ipv6 && !s->no_ipv6;
        uint8_t sb6[16], gw6[16];
        pd_router_addr6(PD_NET_POOL6, s->sb_addr, sb6);
        pd_router_addr6(PD_NET_POOL6, s->gw_addr, gw6);
        /* nft first: the veth must not pass a packet before its rules exist */
        if ((rc = program(r, id, s, pol, true, err)) < 0)
                return rc;
        if (v6 && (rc = pd_nft_sandbox_src6(r->nft, s->ifname, sb6, true, err)) < 0)
                goto undo;
        if ((rc = pd_rtnl_open(netns_fd, &srt, err)) < 0)
                goto undo;
        int rindex = PD_ROUTER_INDEX_BASE + (int)s->n;
        /* behind a user-mode uplink, large frames (router_setup.c), unless
         * the tier caps them (a microvm guest's NIC) */
        unsigned mtu = s->mtu_max && r->sb_mtu > s->mtu_max ? 0 : r->sb_mtu;
        for (int attempt = 0;; attempt++) {
                pd_rtnl_veth(r->rt, s->ifname, rindex, "eth0", SB_INDEX_IN_SANDBOX, netns_fd);
                pd_rtnl_addr(r->rt, rindex, AF_INET, s->gw_addr, s->prefix);
                if (v6)
                        pd_rtnl_addr(r->rt, rindex, AF_INET6, gw6, 96 + s->prefix);
                if (mtu)
                        pd_rtnl_mtu(r->rt, rindex, mtu);
                pd_rtnl_up(r->rt, rindex);
                rc = pd_rtnl_flush(r->rt, err);
                if (rc != -EEXIST || attempt)
                        break;
                /* the veth of the slot's last sandbox, whose netns is still
                 * being torn down by the kernel: remove it and retry */
                struct pd_error e3;
                pd_rtnl_del(r->rt, s->ifname);
                (void)pd_rtnl_flush(r->rt, &e3);
        }
        if (rc < 0)
                goto undo;
        pd_rtnl_addr(srt, SB_INDEX_IN_SANDBOX, AF_INET, s->sb_addr, s->prefix);
        if (v6)
                pd_rtnl_addr(srt, SB_INDEX_IN_SANDBOX, AF_INET6, sb6, 96 + s->prefix);
        if (mtu)
                pd_rtnl_mtu(srt, SB_INDEX_IN_SANDBOX, mtu);
        pd_rtnl_up(srt, SB_INDEX_IN_SANDBOX);
        pd_rtnl_default_route(srt, AF_INET, s->gw_addr, SB_INDEX_IN_SANDBOX);
        if (v6)
                pd_rtnl_default_route(srt, AF_INET6, gw6, SB_INDEX_IN_SANDBOX);
        if ((rc = pd_rtnl_flush(srt, err)) < 0)
                goto undo;
        pd_rtnl_close(srt);
        srt = NULL;
        char aname[PD_NFT_KEY_MAX + 16];
        snprintf(aname, sizeof aname, "audit/%s", id);
        if ((rc = pd_router_netd_add(r, id, s, pol, audit_path, err)) < 0 ||
            (rc = save_policy(r, id, pol, err)) < 0 ||
            (rc = write_file(r->dirfd, aname, audit_path ? audit_path : "", O_TRUNC, err)) < 0)
                goto undo;
        return 0;
undo:
        pd_rtnl_close(srt);
        {
                struct pd_error e2;
                pd_rtnl_del(r->rt, s->ifname);
                (void)pd_rtnl_flush(r->rt, &e2);
                if (v6)
                        (void)pd_nft_sandbox_src6(r->nft, s->ifname, sb6, false, &e2);
                (void)pd_nft_sandbox_del(r->nft, id, s->ifname, s->sb_addr, &e2);
        }
        return pd_error_prefix(err, "attach sandbox %s to the network", id);
}

int pd_router_update(struct pd_router *r, const char *id, const struct pd_netpol *pol, struct pd_error *err)
{
        struct pd_router_slot s;
        if (slot_of(r, id, &s) < 0)
                return pd_error_setx(err, ENOENT, "sandbox %s has no network to change (created with none?)", id);
        if (pol->mode == PD_NETPOL_NONE)
                return pd_error_setx(err, EINVAL, "a sandbox's network cannot change to none while it runs");
        int rc = lock(r, err);
        if (rc < 0)
                return rc;
        /* the kernel's rules first (atomic), then the resolver's view */
        rc = program(r, id, &s, pol, false, err);
        if (rc >= 0)
                rc = pd_router_netd_update(r, id, pol, err);
        if (rc >= 0)
                rc = save_policy(r, id, pol, err);
        unlock(r);
        return rc;
}

static int detach_locked(struct pd_router *r, const char *id, struct pd_error *err)
{
        struct pd_router_slot s;
        if (slot_of(r, id, &s) < 0)
                return 0;
        struct pd_error e2;
        int rc = pd_router_netd_remove(r, id, err);
        if (rc >= 0 && r->nft && r->ipv6) {
                uint8_t sb6[16];
                pd_router_addr6(PD_NET_POOL6, s.sb_addr, sb6);
                rc = pd_nft_sandbox_src6(r->nft, s.ifname, sb6, false, err);
        }
        if (rc >= 0 && r->nft)
                rc = pd_nft_sandbox_del(r->nft, id, s.ifname, s.sb_addr, err);
        /* The veth would die with the sandbox's netns, but that netns can
         * outlive the sandbox's processes for minutes (orphaned TCP sockets
         * retrying a FIN hold it), so it is deleted here, costly as it is
         * (netdev unregistration: RCU grace periods, 10-30 ms). */
        if (r->rt) {
                pd_rtnl_del(r->rt, s.ifname);
                if (pd_rtnl_flush(r->rt, &e2) < 0 && e2.code != ENODEV && rc >= 0) {
                        *err = e2;
                        rc = -e2.code;
                }
        }
        if (rc < 0)
                return rc;
        char name[PD_NFT_KEY_MAX + 8];
        snprintf(name, sizeof name, "slots/%u", s.n);
        (void)unlinkat(r->dirfd, name, 0);
        snprintf(name, sizeof name, "sb/%s", id);
        (void)unlinkat(r->dirfd, name, 0);
        snprintf(name, sizeof name, "policy/%s", id);
        (void)unlinkat(r->dirfd, name, 0);
        snprintf(name, sizeof name, "audit/%s", id);
        (void)unlinkat(r->dirfd, name, 0);
        return 0;
}

int pd_router_sandbox_info(struct pd_router *r, const char *id, struct pd_router_slot *slot,
                           struct pd_netpol *pol, char *audit_path, size_t audit_size)
{
        if (pd_nft_key_check(id) < 0 || slot_of(r, id, slot) < 0)
                return -ENOENT;
        char name[PD_NFT_KEY_MAX + 16];
        snprintf(name, sizeof name, "audit/%s", id);
        if (read_file(r->dirfd, name, audit_path, audit_size) < 0)
                audit_path[0] = 0;
        char *text = NULL;
        snprintf(name, sizeof name, "policy/%s", id);
        int rc = read_all(r->dirfd, name, &text);
        if (rc < 0)
                return rc;
        struct pd_error e2;
        rc = pd_netpol_from_json_str(text, strlen(text), pol, &e2);
        free(text);
        return rc;
}

int pd_router_detach(struct pd_router *r, const char *id, struct pd_error *err)
{
        if (pd_nft_key_check(id) < 0)
                return pd_error_setx(err, EINVAL, "bad sandbox id");
        int rc = lock(r, err);
        if (rc < 0)
                return rc;
        rc = detach_locked(r, id, err);
        unlock(r);
        return rc;
}

/* Open what exists of the router, without making anything; the lock is
 * held on success. */
static int open_existing_locked(const struct pd_state *st, struct pd_router **out, struct pd_error *err)
{
        char pin[PATH_MAX + 16];
        struct pd_router *r = calloc(1, sizeof *r);
        if (!r)
                return pd_error_set(err, ENOMEM, "router");
        r->lockfd = r->nsfd = -1;
        snprintf(r->dir, sizeof r->dir, "%s/net", st->rundir);
        snprintf(pin, sizeof pin, "%s/router", r->dir);
        snprintf(r->instance, sizeof r->instance, "%s", st->instance);
        r->dirfd = openat(st->rundirfd, "net", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r->dirfd < 0) {
                free(r);
                return -ENOENT;
        }
        int rc = 0;
        r->lockfd = openat(r->dirfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (r->lockfd < 0 || (rc = lock(r, err)) < 0) {
                rc = rc < 0 ? rc : pd_error_set(err, errno, "open the router lock");
                pd_router_close(r);
                return rc;
        }
        char have[512], *p;
        if (read_file(r->dirfd, "config", have, sizeof have) > 0 && (p = strstr(have, "pool=")))
                (void)pd_router_parse_cidr4(strtok(p + 5, "\n"), r->pool, &r->pool_prefix, NULL);
        if (!r->pool_prefix)
                (void)pd_router_parse_cidr4(PD_NET_DEFAULT_POOL, r->pool, &r->pool_prefix, NULL);
        pd_router_load_egress(r);
        r->nsfd = open_pinned(pin);
        if (r->nsfd >= 0) {
                struct pd_error e2;
                if (pd_nft_open(r->nsfd, &r->nft, &e2) < 0)
                        r->nft = NULL;
                if (pd_rtnl_open(r->nsfd, &r->rt, &e2) < 0)
                        r->rt = NULL;
        }
        *out = r;
        return 0;
}

int pd_router_open_existing(const struct pd_state *st, struct pd_router **out, struct pd_error *err)
{
        int rc = open_existing_locked(st, out, err);
        if (rc == -ENOENT)
                return pd_error_setx(err, ENOENT, "no network router in this instance");
        if (rc < 0)
                return rc;
        unlock(*out);
        if ((*out)->nsfd < 0) {
                pd_router_close(*out);
                return pd_error_setx(err, ENOENT, "no network router in this instance");
        }
        return 0;
}

int pd_router_release(const struct pd_state *st, const char *id, struct pd_error *err)
{
        if (pd_nft_key_check(id) < 0)
                return pd_error_setx(err, EINVAL, "bad sandbox id");
        struct pd_router *r;
        int rc = open_existing_locked(st, &r, err);
        if (rc == -ENOENT)
                return 0;
        if (rc < 0)
                return rc;
        rc = detach_locked(r, id, err);
        unlock(r);
        /* Closing the nftables socket after a removal waits for the
         * kernel's deferred destroy work (an RCU grace period, ~5-15 ms
         * here): the one cost of a networked sandbox's destroy. */
        pd_router_close(r);
        return rc;
}

int pd_router_dropped(const struct pd_state *st, const char *id, uint64_t *packets, uint64_t *bytes,
                      struct pd_error *err)
{
        struct pd_router *r;
        int rc = pd_router_open_existing(st, &r, err);
        if (rc < 0)
                return rc;
        rc = r->nft ? pd_nft_dropped(r->nft, id, packets, bytes, err)
                    : pd_error_setx(err, ENOENT, "no nftables in the router");
        pd_router_close(r);
        return rc;
}

int pd_router_gc(const struct pd_state *st, bool (*alive)(const char *id, void *ctx), void *ctx,
                 struct pd_error *err)
{
        struct pd_router *r;
        int rc = open_existing_locked(st, &r, err);
        if (rc == -ENOENT)
                return 0;
        if (rc < 0)
                return rc;
        int sbdir = openat(r->dirfd, "sb", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = sbdir >= 0 ? fdopendir(sbdir) : NULL;
        unsigned left = 0;
        for (struct dirent *de; d && (de = readdir(d));) {
                if (de->d_name[0] == '.')
                        continue;
                if (pd_nft_key_check(de->d_name) == 0 && alive && alive(de->d_name, ctx)) {
                        left++;
                        continue;
                }
                struct pd_error e2;
                if (detach_locked(r, de->d_name, &e2) < 0 && rc == 0) {
                        *err = e2;
                        rc = -e2.code;
                }
        }
        if (d)
                closedir(d);
        else if (sbdir >= 0)
                close(sbdir);
        if (!left)
                pd_router_teardown(r);
        unlock(r);
        pd_router_close(r);
        return rc;
}
