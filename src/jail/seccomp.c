#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* The sandbox's seccomp filter: policy (with seccomp-list.h), BPF export,
 * on-disk cache, install. The policy in prose is docs/seccomp.md. */
#include "jail/seccomp-policy.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "jail/seccomp-list.h"
#include "lib/util.h"

/* Bump whenever the rules in this file or the list in seccomp-list.h
 * change: it is part of the cache key. */
#define PD_SECCOMP_POLICY_VERSION 4u

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef SECCOMP_FILTER_FLAG_NEW_LISTENER
#define SECCOMP_FILTER_FLAG_NEW_LISTENER (1UL << 3)
#endif
#ifndef SECCOMP_GET_NOTIF_SIZES
#define SECCOMP_GET_NOTIF_SIZES 3
#endif

/* Namespace flags refused on clone and unshare. CLONE_NEWTIME (0x80) lies
 * inside CSIGNAL for clone(), where the kernel reads those bits as the exit
 * signal and never as a flag, so it is checked for unshare only. */
#define PD_NS_FLAGS (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | \
                     CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP)

#define PD_CACHE_MAGIC 0x43535044u /* "PDSC" little-endian, in the trailer */

/* ---- small helpers ------------------------------------------------------ */

/* A non-cryptographic hash for cache keys and the cache checksum (the cache
 * lives in paddock's own 0700 state directory: this catches damage, not an
 * attacker). Word at a time, FNV-1a style, so that a cached load stays in
 * the microseconds even in an -O0 build. */
static uint64_t hash64(uint64_t h, const void *p, size_t n)
{
        const unsigned char *c = p;
        uint64_t w;
        for (; n >= sizeof w; n -= sizeof w, c += sizeof w) {
                memcpy(&w, c, sizeof w);
                h = (h ^ w) * 0x100000001b3ULL;
                h ^= h >> 29;
        }
        for (; n > 0; n--, c++)
                h = (h ^ *c) * 0x100000001b3ULL;
        return h;
}
#define HASH64_INIT 0xcbf29ce484222325ULL

static uint32_t bpf_checksum(const struct sock_filter *insns, size_t len)
{
        uint64_t h = hash64(HASH64_INIT, insns, len * sizeof *insns);
        return (uint32_t)(h ^ (h >> 32));
}

/* ---- rule construction -------------------------------------------------- */

/* libseccomp evaluates the rules of one syscall as a decision tree whose
 * order between *different* actions is not specified, and an unconditional
 * rule silently swallows every conditional rule of the same syscall. So each
 * syscall's rules here partition the argument space: "allow these values,
 * deny the rest" is written as the values plus the exact complement, split
 * into disjoint masked-equality cubes (a binary trie over the bits). Masked
 * comparisons with a 32-bit mask also ignore the upper register half, which
 * the kernel drops for int arguments (ioctl cmd, socket family, ...). */

struct pd_rule {
        scmp_filter_ctx ctx;
        uint32_t action;
        int nr;
        struct scmp_arg_cmp cmp[4]; /* fixed conditions, then the varying one */
        unsigned ncmp;              /* number of fixed conditions */
        unsigned arg;               /* argument the cubes are on */
};

static int rule_cube(struct pd_rule *r, uint32_t mask, uint32_t val)
{
        r->cmp[r->ncmp] = (struct scmp_arg_cmp){ .arg = r->arg, .op = SCMP_CMP_MASKED_EQ,
                                                 .datum_a = mask, .datum_b = val };
        return seccomp_rule_add_exact_array(r->ctx, r->action, r->nr, r->ncmp + 1, r->cmp);
}

/* Add one rule per value in set (compared under width_mask). */
static int rule_points(struct pd_rule *r, uint32_t width_mask, const uint32_t *set, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                int ret = rule_cube(r, width_mask, set[i]);
                if (ret < 0)
                        return ret;
        }
        return 0;
}

/* Add rules covering exactly the values below 2^(bit+1) that match the
 * prefix (mask, val) and are not in set. At most (bit+1)*n rules. */
static int rule_complement_at(struct pd_rule *r, const uint32_t *set, size_t n, int bit,
                              uint32_t mask, uint32_t val)
{
        if (bit < 0)
                return 0; /* a single value, and it is in set */
        for (uint32_t side = 0; side <= 1; side++) {
                uint32_t m = mask | (1u << bit), v = val | (side << bit);
                bool hit = false;
                for (size_t i = 0; i < n && !hit; i++)
                        hit = (set[i] & m) == v;
                int ret = hit ? rule_complement_at(r, set, n, bit - 1, m, v) : rule_cube(r, m, v);
                if (ret < 0)
                        return ret;
        }
        return 0;
}

static int rule_complement(struct pd_rule *r, int width_bits, const uint32_t *set, size_t n)
{
        return rule_complement_at(r, set, n, width_bits - 1, 0, 0);
}

#define A32(i, v) ((struct scmp_arg_cmp){ .arg = (i), .op = SCMP_CMP_MASKED_EQ, \
                                          .datum_a = 0xffffffffu, .datum_b = (uint32_t)(v) })

/* clone/unshare: no namespace flag → allowed; any → PD_SECCOMP_NS_ERRNO. */
static int add_ns_rules(scmp_filter_ctx ctx, int nr, uint32_t ns_flags)
{
        int ret = seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, nr, 1,
                                         SCMP_A0_64(SCMP_CMP_MASKED_EQ, ns_flags, 0));
        for (uint32_t bit = 1; ret >= 0 && bit; bit <<= 1)
                if (ns_flags & bit)
                        ret = seccomp_rule_add_exact(ctx, SCMP_ACT_ERRNO(PD_SECCOMP_NS_ERRNO), nr, 1,
                                                     SCMP_A0_64(SCMP_CMP_MASKED_EQ, bit, bit));
        return ret;
}

static int add_ioctl_rules(scmp_filter_ctx ctx)
{
        static const uint32_t denied[] = { TIOCSTI, TIOCLINUX };
        struct pd_rule r = { .ctx = ctx, .nr = SCMP_SYS(ioctl), .arg = 1 };
        r.action = SCMP_ACT_ERRNO(PD_SECCOMP_DENY_ERRNO);
        int ret = rule_points(&r, 0xffffffffu, denied, PD_ARRAY_SIZE(denied));
        if (ret < 0)
                return ret;
        r.action = SCMP_ACT_ALLOW;
        return rule_complement(&r, 32, denied, PD_ARRAY_SIZE(denied));
}

/* Docker's list: PER_LINUX (0), PER_LINUX32 (0x8), UNAME26 (0x20000), their
 * union, and 0xffffffff (query only). Other flags (ADDR_NO_RANDOMIZE,
 * READ_IMPLIES_EXEC, ...) would weaken the workload's own hardening. */
static int add_personality_rules(scmp_filter_ctx ctx)
{
        static const uint32_t allowed[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffffu };
        struct pd_rule r = { .ctx = ctx, .nr = SCMP_SYS(personality), .arg = 0 };
        r.action = SCMP_ACT_ALLOW;
        int ret = rule_points(&r, 0xffffffffu, allowed, PD_ARRAY_SIZE(allowed));
        if (ret < 0)
                return ret;
        r.action = SCMP_ACT_ERRNO(PD_SECCOMP_DENY_ERRNO);
        return rule_complement(&r, 32, allowed, PD_ARRAY_SIZE(allowed));
}

/* seccomp(2): a further filter can only restrict, so it is allowed, but not
 * a user-notification listener (whoever holds it decides syscalls for the
 * workload). The operation and flags are unsigned int: 32-bit compares. */
static int add_seccomp_rules(scmp_filter_ctx ctx)
{
        static const uint32_t ops[] = { SECCOMP_SET_MODE_STRICT, SECCOMP_SET_MODE_FILTER,
                                        SECCOMP_GET_ACTION_AVAIL, SECCOMP_GET_NOTIF_SIZES };
        static const uint32_t plain_ops[] = { SECCOMP_SET_MODE_STRICT, SECCOMP_GET_ACTION_AVAIL,
                                              SECCOMP_GET_NOTIF_SIZES };
        struct pd_rule r = { .ctx = ctx, .nr = SCMP_SYS(seccomp), .arg = 0,
                             .action = SCMP_ACT_ALLOW };
        int ret = rule_points(&r, 0xffffffffu, plain_ops, PD_ARRAY_SIZE(plain_ops));
        if (ret < 0)
                return ret;
        r.action = SCMP_ACT_ERRNO(PD_SECCOMP_DENY_ERRNO);
        ret = rule_complement(&r, 32, ops, PD_ARRAY_SIZE(ops));
        if (ret < 0)
                return ret;
        ret = seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r.nr, 2, A32(0, SECCOMP_SET_MODE_FILTER),
                                     SCMP_A1_64(SCMP_CMP_MASKED_EQ, SECCOMP_FILTER_FLAG_NEW_LISTENER, 0));
        if (ret < 0)
                return ret;
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ERRNO(PD_SECCOMP_DENY_ERRNO), r.nr, 2,
                                      A32(0, SECCOMP_SET_MODE_FILTER),
                                      SCMP_A1_64(SCMP_CMP_MASKED_EQ, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                                                 SECCOMP_FILTER_FLAG_NEW_LISTENER));
}

/* socket(family, type, protocol): AF_UNIX, AF_INET, AF_INET6 and
 * AF_NETLINK/NETLINK_ROUTE; everything else (AF_PACKET, AF_ALG, AF_VSOCK,
 * other netlink families, ...) gets EPERM. With deny_udp_raw, AF_INET and
 * AF_INET6 also refuse SOCK_DGRAM and SOCK_RAW (type & 0xf: the kernel's
 * SOCK_TYPE_MASK, so SOCK_CLOEXEC|SOCK_NONBLOCK do not matter). */
static int add_socket_rules(scmp_filter_ctx ctx, const struct pd_seccomp_opts *o)
{
        static const uint32_t families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
        static const uint32_t inet[] = { AF_INET, AF_INET6 };
        static const uint32_t udp_raw[] = { SOCK_DGRAM, SOCK_RAW };
        static const uint32_t route[] = { NETLINK_ROUTE };
        const uint32_t deny = SCMP_ACT_ERRNO(PD_SECCOMP_DENY_ERRNO);
        struct pd_rule r = { .ctx = ctx, .nr = SCMP_SYS(socket) };
        int ret;

        /* Unknown families. */
        r.arg = 0;
        r.action = deny;
        if ((ret = rule_complement(&r, 32, families, PD_ARRAY_SIZE(families))) < 0)
                return ret;
        /* deny_unix_names: the sandbox shares the host's abstract names. */
        r.action = o->deny_unix_names ? deny : SCMP_ACT_ALLOW;
        if ((ret = rule_cube(&r, 0xffffffffu, AF_UNIX)) < 0)
                return ret;

        for (size_t i = 0; i < PD_ARRAY_SIZE(inet); i++) {
                r.ncmp = 0;
                r.arg = 0;
                r.action = SCMP_ACT_ALLOW;
                if (o->deny_inet) {
                        r.action = deny;
                        if ((ret = rule_cube(&r, 0xffffffffu, inet[i])) < 0)
                                return ret;
                        continue;
                }
                if (!o->deny_udp_raw) {
                        if ((ret = rule_cube(&r, 0xffffffffu, inet[i])) < 0)
                                return ret;
                        continue;
                }
                r.cmp[0] = A32(0, inet[i]);
                r.ncmp = 1;
                r.arg = 1;
                if ((ret = rule_complement(&r, 4, udp_raw, PD_ARRAY_SIZE(udp_raw))) < 0)
                        return ret;
                r.action = deny;
                if ((ret = rule_points(&r, 0xf, udp_raw, PD_ARRAY_SIZE(udp_raw))) < 0)
                        return ret;
        }

        r.cmp[0] = A32(0, AF_NETLINK);
        r.ncmp = 1;
        r.arg = 2;
        r.action = SCMP_ACT_ALLOW;
        if ((ret = rule_points(&r, 0xffffffffu, route, 1)) < 0)
                return ret;
        r.action = deny;
        return rule_complement(&r, 32, route, 1);
}

/* deny_unix_names (the process tier, in the host's network namespace).
 * An abstract name is squatted by bind(), whose address seccomp cannot
 * read, so no socket of the sandbox may be named: bind() is refused for
 * every family (inet sockets are refused anyway; glibc's getifaddrs() binds
 * its netlink socket and fails with it), socket(AF_UNIX) is refused in
 * add_socket_rules (it would also reach host daemons' pathname sockets,
 * which Landlock ABI 7 does not govern), and socketpair() keeps what
 * programs need (asyncio, subprocess and libuv pipes, multiprocessing):
 * AF_UNIX stream and seqpacket pairs. Not datagram pairs: a datagram socket
 * can be disconnected (connect AF_UNSPEC) and then sendmsg() to any
 * pathname socket its uid may write (/dev/log, a journal). A connected
 * stream or seqpacket socket cannot connect again (EISCONN), has no accept
 * queue (listen() is EINVAL) and sends only to its peer. */
static int add_unix_name_rules(scmp_filter_ctx ctx)
{
        static const uint32_t unix_family[] = { AF_UNIX };
        static const uint32_t pair_types[] = { SOCK_STREAM, SOCK_SEQPACKET };
        const uint32_t deny = SCMP_ACT_ERRNO(PD_SECCOMP_DENY_ERRNO);
        int ret = seccomp_rule_add_exact(ctx, deny, SCMP_SYS(bind), 0);
        if (ret < 0)
                return ret;
        struct pd_rule r = { .ctx = ctx, .nr = SCMP_SYS(socketpair), .arg = 0, .action = deny };
        if ((ret = rule_complement(&r, 32, unix_family, 1)) < 0)
                return ret;
        /* The type under the kernel's SOCK_TYPE_MASK (0xf): SOCK_CLOEXEC and
         * SOCK_NONBLOCK do not matter. */
        r.cmp[0] = A32(0, AF_UNIX);
        r.ncmp = 1;
        r.arg = 1;
        r.action = SCMP_ACT_ALLOW;
        if ((ret = rule_points(&r, 0xf, pair_types, PD_ARRAY_SIZE(pair_types))) < 0)
                return ret;
        r.action = deny;
        return rule_complement(&r, 4, pair_types, PD_ARRAY_SIZE(pair_types));
}

/* ---- build ---------------------------------------------------------------- */

#define PD_ALLOW_NR(name) SCMP_SYS(name),
#define PD_ALLOW_STR(name) #name " "

static const int pd_allow_nrs[] = {
        PD_SECCOMP_ALLOW_COMMON(PD_ALLOW_NR) PD_SECCOMP_ALLOW_ARCH(PD_ALLOW_NR)
};
/* Part of the cache key: a list edit invalidates old cache files. */
static const char pd_allow_names[] =
        PD_SECCOMP_ALLOW_COMMON(PD_ALLOW_STR) PD_SECCOMP_ALLOW_ARCH(PD_ALLOW_STR);

/* deny_ipc: left out of the allowlist, so they get the default ENOSYS. No
 * ipc() multiplexer exists on x86_64 or aarch64 (the i386 entry, which has
 * one, is killed by the architecture check). */
static const int pd_ipc_nrs[] = {
        SCMP_SYS(shmget), SCMP_SYS(shmat), SCMP_SYS(shmctl), SCMP_SYS(shmdt),
        SCMP_SYS(msgget), SCMP_SYS(msgsnd), SCMP_SYS(msgrcv), SCMP_SYS(msgctl),
        SCMP_SYS(semget), SCMP_SYS(semop), SCMP_SYS(semtimedop), SCMP_SYS(semctl),
        SCMP_SYS(mq_open), SCMP_SYS(mq_unlink), SCMP_SYS(mq_timedsend), SCMP_SYS(mq_timedreceive),
        SCMP_SYS(mq_notify), SCMP_SYS(mq_getsetattr),
};

/* Is nr on the allowlist but left out (or given argument rules) under o? */
static bool left_out(const struct pd_seccomp_opts *o, int nr)
{
        for (size_t i = 0; o->deny_ipc && i < PD_ARRAY_SIZE(pd_ipc_nrs); i++)
                if (pd_ipc_nrs[i] == nr)
                        return true;
        return o->deny_unix_names && (nr == SCMP_SYS(bind) || nr == SCMP_SYS(socketpair));
}

static int build_rules(scmp_filter_ctx ctx, const struct pd_seccomp_opts *o, struct pd_error *err)
{
        int ret;

        /* The architecture check: a syscall made through another ABI (i386
         * via int 0x80) kills the process instead of being matched against
         * x86_64 numbers. x32 shares AUDIT_ARCH_X86_64 and is told apart by
         * bit 30 of the number: libseccomp's x86_64 filter sends those
         * numbers to the bad-arch action too (tests/unit/test-seccomp.c). */
        if ((ret = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
                return pd_error_set(err, -ret, "seccomp: set bad-arch action");
        /* We never call seccomp_load(): the caller sets no_new_privs itself
         * and installs the exported BPF, so libseccomp's NNP handling is off. */
        if ((ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
                return pd_error_set(err, -ret, "seccomp: clear NNP attribute");
        /* Binary search over syscall numbers instead of a linear chain. */
        if ((ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
                return pd_error_set(err, -ret, "seccomp: set optimize level");

        /* The calls a supervisor mediates (supervised tier). */
        const int notified[] = {
#ifdef __NR_open
                SCMP_SYS(open),
#endif
#ifdef __NR_creat
                SCMP_SYS(creat),
#endif
                SCMP_SYS(openat), SCMP_SYS(openat2), SCMP_SYS(connect), SCMP_SYS(execve), SCMP_SYS(execveat),
                /* continued; tells the supervisor that callers' roots may
                 * differ from here on (sv_root_is_sandbox) */
                SCMP_SYS(chroot),
        };
        /* ... when the policy has ro or deny rules: every call that
         * creates, removes, renames or links a name, or changes a file's
         * size, mode, owner, extended attributes or times, by path or by fd
         * (bind: a unix socket's path is a new name). */
        const int notified_paths[] = {
#if defined(__x86_64__)
                SCMP_SYS(mknod), SCMP_SYS(mkdir), SCMP_SYS(rmdir), SCMP_SYS(unlink), SCMP_SYS(symlink),
                SCMP_SYS(link), SCMP_SYS(rename), SCMP_SYS(chmod), SCMP_SYS(chown), SCMP_SYS(lchown),
                SCMP_SYS(utime), SCMP_SYS(utimes), SCMP_SYS(futimesat),
#endif
                SCMP_SYS(truncate), SCMP_SYS(ftruncate), SCMP_SYS(fallocate), SCMP_SYS(mknodat),
                SCMP_SYS(mkdirat), SCMP_SYS(unlinkat), SCMP_SYS(symlinkat), SCMP_SYS(linkat), SCMP_SYS(renameat),
                SCMP_SYS(renameat2), SCMP_SYS(fchmod), SCMP_SYS(fchmodat), SCMP_SYS(fchown), SCMP_SYS(fchownat),
                SCMP_SYS(setxattr), SCMP_SYS(lsetxattr), SCMP_SYS(fsetxattr), SCMP_SYS(removexattr),
                SCMP_SYS(lremovexattr), SCMP_SYS(fremovexattr), SCMP_SYS(utimensat), SCMP_SYS(bind),
        };
        /* ... when the policy has connect rules: the sends that may carry
         * an address in memory (sendto's is a register: below). */
        const int notified_sends[] = { SCMP_SYS(sendmsg), SCMP_SYS(sendmmsg) };
        for (size_t i = 0; i < PD_ARRAY_SIZE(pd_allow_nrs); i++) {
                uint32_t action = SCMP_ACT_ALLOW;
                if (left_out(o, pd_allow_nrs[i]))
                        continue;
                for (size_t j = 0; o->notify && j < PD_ARRAY_SIZE(notified); j++)
                        if (notified[j] == pd_allow_nrs[i])
                                action = SCMP_ACT_NOTIFY;
                for (size_t j = 0; o->notify && o->notify_paths && j < PD_ARRAY_SIZE(notified_paths); j++)
                        if (notified_paths[j] == pd_allow_nrs[i])
                                action = SCMP_ACT_NOTIFY;
                for (size_t j = 0; o->notify && o->notify_sends && j < PD_ARRAY_SIZE(notified_sends); j++)
                        if (notified_sends[j] == pd_allow_nrs[i])
                                action = SCMP_ACT_NOTIFY;
                if (o->notify && o->notify_sends && pd_allow_nrs[i] == SCMP_SYS(sendto)) {
                        /* sendto(fd, buf, len, flags, addr, addrlen): a NULL
                         * addr (a connected socket's send) is the kernel's
                         * alone; any other goes to the supervisor, which
                         * sends a copy itself (UDP, MSG_FASTOPEN). */
                        ret = seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto), 1,
                                                     SCMP_A4_64(SCMP_CMP_EQ, 0, 0));
                        if (ret >= 0)
                                ret = seccomp_rule_add_exact(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 1,
                                                             SCMP_A4_64(SCMP_CMP_NE, 0, 0));
                        if (ret < 0)
                                return pd_error_set(err, -ret, "seccomp: sendto rules");
                        continue;
                }
                ret = seccomp_rule_add(ctx, action, pd_allow_nrs[i], 0);
                if (ret < 0) {
                        const char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, pd_allow_nrs[i]);
                        pd_error_set(err, -ret, "seccomp: allow '%s' (%d)", name ? name : "?", pd_allow_nrs[i]);
                        free((void *)name);
                        return -err->code;
                }
        }

        /* clone3 is deliberately absent: its flags live in memory, where
         * seccomp cannot look, so it gets the default ENOSYS and glibc falls
         * back to clone, whose flags are checked below. (libseccomp refuses
         * an explicit rule whose action equals the default one.) */
        _Static_assert(PD_SECCOMP_DEFAULT_ERRNO == ENOSYS, "clone3 must get ENOSYS");
        if ((ret = add_ns_rules(ctx, SCMP_SYS(clone), PD_NS_FLAGS)) < 0)
                return pd_error_set(err, -ret, "seccomp: clone rules");
        if ((ret = add_ns_rules(ctx, SCMP_SYS(unshare), PD_NS_FLAGS | CLONE_NEWTIME)) < 0)
                return pd_error_set(err, -ret, "seccomp: unshare rules");
        if ((ret = add_ioctl_rules(ctx)) < 0)
                return pd_error_set(err, -ret, "seccomp: ioctl rules");
        if ((ret = add_personality_rules(ctx)) < 0)
                return pd_error_set(err, -ret, "seccomp: personality rules");
        if ((ret = add_seccomp_rules(ctx)) < 0)
                return pd_error_set(err, -ret, "seccomp: seccomp rules");
        if ((ret = add_socket_rules(ctx, o)) < 0)
                return pd_error_set(err, -ret, "seccomp: socket rules");
        if (o->deny_unix_names && (ret = add_unix_name_rules(ctx)) < 0)
                return pd_error_set(err, -ret, "seccomp: bind and socketpair rules");
        return 0;
}

/* libseccomp 2.5 can only export to an fd: go through a memfd. */
static int export_bpf(scmp_filter_ctx ctx, struct pd_bpf *out, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = memfd_create("pd-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "seccomp: memfd_create");
        int ret = seccomp_export_bpf(ctx, fd);
        if (ret < 0)
                return pd_error_set(err, -ret, "seccomp: export BPF");
        off_t size = lseek(fd, 0, SEEK_CUR);
        if (size < 0)
                return pd_error_set(err, errno, "seccomp: size of exported BPF");
        if (size == 0 || size % sizeof(struct sock_filter) ||
            (size_t)size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return pd_error_setx(err, E2BIG, "seccomp: exported BPF has a bad size (%lld bytes)",
                                     (long long)size);
        struct sock_filter *insns = malloc(size);
        if (!insns)
                return pd_error_set(err, ENOMEM, "seccomp: BPF buffer");
        if (lseek(fd, 0, SEEK_SET) < 0 || pd_read_all(fd, insns, size) != size) {
                free(insns);
                return pd_error_set(err, errno ? errno : EIO, "seccomp: read back BPF");
        }
        out->insns = insns;
        out->len = (unsigned short)(size / sizeof(struct sock_filter));
        return 0;
}

int pd_seccomp_build(const struct pd_seccomp_opts *o, struct pd_bpf *out, struct pd_error *err)
{
        static const struct pd_seccomp_opts defaults = { 0 };
        if (!o)
                o = &defaults;
        *out = (struct pd_bpf){ 0 };

        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(PD_SECCOMP_DEFAULT_ERRNO));
        if (!ctx)
                return pd_error_setx(err, ENOMEM, "seccomp: seccomp_init failed");
        int ret = build_rules(ctx, o, err);
        if (ret >= 0)
                ret = export_bpf(ctx, out, err);
        seccomp_release(ctx);
        return ret < 0 ? ret : 0;
}

/* ---- cache ---------------------------------------------------------------- */

/* File layout: the BPF instructions, then one 8-byte trailer (the size of an
 * instruction, so the file stays a whole number of them): magic and a
 * checksum of the instructions. A file truncated on an instruction boundary
 * or damaged in place would otherwise still look like a valid program. */
struct pd_cache_trailer {
        uint32_t magic;
        uint32_t sum;
};
_Static_assert(sizeof(struct pd_cache_trailer) == sizeof(struct sock_filter), "trailer size");

static void cache_path(char *buf, size_t size, const char *dir, const struct pd_seccomp_opts *o)
{
        const struct scmp_version *v = seccomp_version();
        char key[192];
        int n = snprintf(key, sizeof key,
                         "paddock-seccomp policy=%u libseccomp=%u.%u.%u arch=%u udp_raw=%d inet=%d notify=%d "
                         "ipc=%d unix_names=%d paths=%d sends=%d",
                         PD_SECCOMP_POLICY_VERSION, v ? v->major : 0, v ? v->minor : 0,
                         v ? v->micro : 0, seccomp_arch_native(), o->deny_udp_raw ? 1 : 0, o->deny_inet ? 1 : 0,
                         o->notify ? 1 : 0, o->deny_ipc ? 1 : 0, o->deny_unix_names ? 1 : 0,
                         o->notify_paths ? 1 : 0, o->notify_sends ? 1 : 0);
        uint64_t h = hash64(HASH64_INIT, key, n > 0 ? (size_t)n : 0);
        h = hash64(h, pd_allow_names, sizeof pd_allow_names);
        snprintf(buf, size, "%s/seccomp-%016llx.bpf", dir, (unsigned long long)h);
}

/* 0 and *out filled if path holds a well-formed filter, else < 0. */
static int cache_read(const char *path, struct pd_bpf *out)
{
        _pd_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        /* A filter someone else could have written is not ours to trust. */
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
                return -EPERM;
        const size_t isz = sizeof(struct sock_filter);
        if (st.st_size < (off_t)(2 * isz) || st.st_size % isz ||
            (size_t)st.st_size / isz - 1 > BPF_MAXINSNS)
                return -EBADMSG;
        size_t len = (size_t)st.st_size / isz - 1;
        _pd_cleanup_free_ struct sock_filter *buf = malloc(st.st_size);
        if (!buf)
                return -ENOMEM;
        if (pd_read_all(fd, buf, st.st_size) != st.st_size)
                return -EBADMSG;
        struct pd_cache_trailer t;
        memcpy(&t, &buf[len], sizeof t);
        if (t.magic != PD_CACHE_MAGIC || t.sum != bpf_checksum(buf, len) ||
            BPF_CLASS(buf[len - 1].code) != BPF_RET)
                return -EBADMSG;
        out->insns = PD_TAKE_PTR(buf);
        out->len = (unsigned short)len;
        return 0;
}

/* Best effort: a cache we cannot write only costs time. */
static int cache_write(const char *dir, const char *path, const struct pd_bpf *f)
{
        char tmp[PATH_MAX];
        if (snprintf(tmp, sizeof tmp, "%s/.seccomp-XXXXXX", dir) >= (int)sizeof tmp)
                return -ENAMETOOLONG;
        _pd_cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
        if (fd < 0)
                return -errno;
        struct pd_cache_trailer t = { .magic = PD_CACHE_MAGIC, .sum = bpf_checksum(f->insns, f->len) };
        int ret = pd_write_all(fd, f->insns, f->len * sizeof *f->insns);
        if (ret >= 0)
                ret = pd_write_all(fd, &t, sizeof t);
        if (ret >= 0 && fchmod(fd, 0600) < 0)
                ret = -errno;
        if (ret >= 0 && rename(tmp, path) < 0)
                ret = -errno;
        if (ret < 0)
                unlink(tmp);
        return ret;
}

int pd_seccomp_load(const char *cache_dir, const struct pd_seccomp_opts *o, struct pd_bpf *out,
                    struct pd_error *err)
{
        static const struct pd_seccomp_opts defaults = { 0 };
        if (!o)
                o = &defaults;
        if (!cache_dir)
                return pd_seccomp_build(o, out, err);

        char path[PATH_MAX];
        cache_path(path, sizeof path, cache_dir, o);
        *out = (struct pd_bpf){ 0 };
        if (cache_read(path, out) == 0)
                return 0;
        int ret = pd_seccomp_build(o, out, err);
        if (ret < 0)
                return ret;
        (void)cache_write(cache_dir, path, out);
        return 0;
}

/* ---- install ------------------------------------------------------------- */

int pd_seccomp_install(const struct pd_bpf *f)
{
        if (!f || !f->insns || f->len == 0)
                return -EINVAL;
        struct sock_fprog prog = { .len = f->len, .filter = f->insns };
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return -errno;
        return 0;
}

int pd_seccomp_install_listener(const struct pd_bpf *f)
{
        if (!f || !f->insns || f->len == 0)
                return -EINVAL;
        struct sock_fprog prog = { .len = f->len, .filter = f->insns };
        /* The listener fd is CLOEXEC: the caller hands it on before exec. */
        long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        return fd < 0 ? -errno : (int)fd;
}

void pd_bpf_free(struct pd_bpf *f)
{
        if (!f)
                return;
        free(f->insns);
        f->insns = NULL;
        f->len = 0;
}
