#include "jail/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/landlock.h>

#include "jail/seccomp-policy.h"
#include "lib/util.h"

/* Debian 12's <linux/landlock.h> stops at ABI 2: the later rights are
 * defined here with the kernel's values (include/uapi/linux/landlock.h). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)        /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)       /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)        /* ABI 4 */
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The ABI 6 layout; older kernels accept it as long as the fields they do
 * not know are zero. */
struct ll_ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
};

struct ll_path_beneath {
        uint64_t allowed_access;
        int32_t parent_fd;
} __attribute__((packed));

#define FS_ABI1 ((1ULL << 13) - 1)      /* EXECUTE .. MAKE_SYM */
#define FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_RX (FS_READ | LANDLOCK_ACCESS_FS_EXECUTE)
#define FS_DEV (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
                LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* Rights that make sense on a file (the kernel refuses others on one). */
#define FS_FILE (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
                 LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* What the policy cannot do without. A kernel lacking one of these would
 * leave a promise of docs/security.md unkept, so we refuse to start (or,
 * with allow_weaker, record the gap). REFER (ABI 2) is not listed: without
 * it the kernel refuses cross-directory renames and links outright, which
 * is stricter. IOCTL_DEV (ABI 5) is not listed either: the only devices
 * the sandbox can open are the harmless ones below. */
static const struct {
        const char *name;
        int abi;
} needed[] = {
        { "LANDLOCK_ACCESS_FS_TRUNCATE", 3 },
        { "LANDLOCK_ACCESS_NET_BIND_TCP", 4 },
        { "LANDLOCK_ACCESS_NET_CONNECT_TCP", 4 },
        { "LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET", 6 },
        { "LANDLOCK_SCOPE_SIGNAL", 6 },
};

int pd_landlock_abi(void)
{
        long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (v < 0)
                return 0;
        const char *cap = getenv("PADDOCK_LANDLOCK_ABI_MAX");
        if (cap && *cap) {
                char *end;
                long c = strtol(cap, &end, 10);
                if (!*end && c >= 0 && c < v)
                        v = c;
        }
        return (int)v;
}

static int add_path(int ruleset, const char *path, uint64_t access, uint64_t handled, bool required,
                    struct pd_error *err)
{
        _pd_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0) {
                if (!required && errno == ENOENT)
                        return 0;
                return pd_error_set(err, errno, "landlock: open '%s'", path);
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return pd_error_set(err, errno, "landlock: stat '%s'", path);
        if (!S_ISDIR(st.st_mode))
                access &= FS_FILE;
        struct ll_path_beneath pb = { .allowed_access = access & handled, .parent_fd = fd };
        if (pb.allowed_access == 0)
                return 0;
        if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
                return pd_error_set(err, errno, "landlock: rule for '%s'", path);
        return 0;
}

int pd_landlock_ruleset(const struct pd_landlock_opts *o, struct pd_landlock_info *info,
                        struct pd_error *err)
{
        int abi = pd_landlock_abi();
        memset(info, 0, sizeof *info);
        info->abi = abi;
        if (abi < 1)
                return pd_error_setx(err, EOPNOTSUPP,
                                     "the process tier needs Landlock, which this kernel does not enable "
                                     "(CONFIG_SECURITY_LANDLOCK and 'landlock' in the lsm= boot parameter); "
                                     "no weaker mode exists without it");
        char missing[256] = "";
        size_t ml = 0;
        for (size_t i = 0; i < PD_ARRAY_SIZE(needed); i++)
                if (abi < needed[i].abi)
                        ml += (size_t)snprintf(missing + ml, ml < sizeof missing ? sizeof missing - ml : 0,
                                               "%s%s (ABI %d)", ml ? ", " : "", needed[i].name,
                                               needed[i].abi);
        if (missing[0] && !o->allow_weaker)
                return pd_error_setx(err, EOPNOTSUPP,
                                     "this kernel's Landlock ABI is %d and lacks %s, which the process tier "
                                     "needs; refusing to start (--allow-weaker accepts the downgrade and "
                                     "records it in the sandbox's info)",
                                     abi, missing);
        snprintf(info->weaker, sizeof info->weaker, "%s", missing);

        struct ll_ruleset_attr attr = { .handled_access_fs = FS_ABI1 };
        if (abi >= 2)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        /* No network rules: every TCP bind and connect is denied. */
        if (abi >= 4)
                attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
        if (abi >= 6)
                attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
        /* An older kernel refuses a size it does not know if any byte past
         * its own struct is set; pass the smallest layout that holds ours. */
        size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
        _pd_cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
        if (rs < 0)
                return pd_error_set(err, errno, "landlock: create ruleset (ABI %d)", abi);
        uint64_t h = attr.handled_access_fs;
        int r;
        if ((r = add_path(rs, o->workspace, h, h, true, err)) < 0 ||
            (r = add_path(rs, o->agent_path, LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_EXECUTE, h, true,
                          err)) < 0)
                return r;
        static const char *const rx[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(rx); i++)
                if ((r = add_path(rs, rx[i], FS_RX, h, false, err)) < 0)
                        return r;
        if ((r = add_path(rs, "/proc", FS_READ, h, false, err)) < 0)
                return r;
        /* O_TRUNC on open needs TRUNCATE, and `> /dev/null` opens so. */
        static const char *const dev[] = { "/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                           "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(dev); i++)
                if ((r = add_path(rs, dev[i], FS_DEV, h, false, err)) < 0)
                        return r;
        return PD_TAKE_FD(rs);
}

int pd_landlock_restrict(int ruleset_fd)
{
        if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0)
                return -errno;
        return 0;
}
