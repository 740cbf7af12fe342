#include "jail/caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/util.h"

#define CAP(c) (1ull << (c))

uint64_t pd_caps_default_set(void)
{
        return CAP(CAP_CHOWN) | CAP(CAP_DAC_OVERRIDE) | CAP(CAP_FSETID) | CAP(CAP_FOWNER) |
               CAP(CAP_MKNOD) | CAP(CAP_SETGID) | CAP(CAP_SETUID) | CAP(CAP_SETFCAP) |
               CAP(CAP_SETPCAP) | CAP(CAP_NET_BIND_SERVICE) | CAP(CAP_SYS_CHROOT) |
               CAP(CAP_KILL) | CAP(CAP_AUDIT_WRITE);
}

int pd_caps_last(void)
{
        char buf[16];
        if (pd_read_file_at(-100 /* AT_FDCWD */, "/proc/sys/kernel/cap_last_cap", buf, sizeof buf) > 0) {
                int v = 0;
                for (char *p = buf; *p >= '0' && *p <= '9' && v < 64; p++)
                        v = v * 10 + (*p - '0');
                if (v > 0 && v < 64)
                        return v;
        }
        return CAP_LAST_CAP;
}

int pd_caps_drop_bounding(uint64_t keep, struct pd_error *err)
{
        int last = pd_caps_last();
        for (int c = 0; c <= last; c++)
                if (!(keep & CAP(c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return pd_error_set(err, errno, "drop capability %d from the bounding set", c);
        return 0;
}

int pd_caps_set(const struct pd_caps *c, uint64_t *not_raised, struct pd_error *err)
{
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct d[2] = {
                { (uint32_t)c->effective, (uint32_t)c->permitted, (uint32_t)c->inheritable },
                { (uint32_t)(c->effective >> 32), (uint32_t)(c->permitted >> 32), (uint32_t)(c->inheritable >> 32) },
        };
        if (not_raised)
                *not_raised = 0;
        if (syscall(SYS_capset, &h, d) < 0)
                return pd_error_set(err, errno, "set capabilities");
        /* EINVAL: a kernel without ambient capabilities (before 4.3). */
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return pd_error_set(err, errno, "clear ambient capabilities");
        if (!c->ambient)
                return 0;
        int last = pd_caps_last();
        for (int k = 0; k <= last; k++)
                if ((c->ambient & CAP(k)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, k, 0, 0) < 0 && not_raised)
                        *not_raised |= CAP(k);
        return 0;
}

int pd_caps_restrict(uint64_t keep, struct pd_error *err)
{
        int r = pd_caps_drop_bounding(keep, err);
        if (r < 0)
                return r;
        struct pd_caps c = { .bounding = keep, .effective = keep, .permitted = keep };
        if ((r = pd_caps_set(&c, NULL, err)) < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return pd_error_set(err, errno, "set no_new_privs");
        return 0;
}

int pd_rlimits_set(const struct pd_rlimit *l, size_t n, struct pd_error *err)
{
        for (size_t i = 0; i < n; i++) {
                struct rlimit rl = { l[i].soft, l[i].hard };
                if (setrlimit(l[i].resource, &rl) < 0)
                        /* Raising a hard limit needs CAP_SYS_RESOURCE, which some
                         * hosts withhold: say so instead of a bare EPERM. */
                        return pd_error_set(err, errno, "setrlimit(%d, soft %llu, hard %llu)%s", l[i].resource,
                                            (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
                                            errno == EPERM ? " (above the runtime's own hard limit?)" : "");
        }
        return 0;
}

/* The soft RLIMIT_NOFILE before pd_rlimits_raise_nofile; 0: not raised. */
static rlim_t nofile_given;

void pd_rlimits_raise_nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rlim_t given = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
                nofile_given = given;
}

int pd_rlimits_apply(struct pd_error *err)
{
        struct pd_rlimit core = { RLIMIT_CORE, 0, 0 };
        int r = pd_rlimits_set(&core, 1, err);
        if (r < 0)
                return r;
        /* Open files: keep at most 1048576 but never above what we have. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                if (rl.rlim_max > 1048576)
                        rl.rlim_max = 1048576;
                if (nofile_given && rl.rlim_cur > nofile_given)
                        rl.rlim_cur = nofile_given;      /* what the parent was given */
                if (rl.rlim_cur > rl.rlim_max)
                        rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        return pd_error_set(err, errno, "set RLIMIT_NOFILE");
        }
        return 0;
}
