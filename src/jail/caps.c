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

int pd_caps_restrict(uint64_t keep, struct pd_error *err)
{
        int last = CAP_LAST_CAP;
        char buf[16];
        if (pd_read_file_at(-100 /* AT_FDCWD */, "/proc/sys/kernel/cap_last_cap", buf, sizeof buf) > 0) {
                int v = 0;
                for (char *p = buf; *p >= '0' && *p <= '9'; p++)
                        v = v * 10 + (*p - '0');
                if (v > 0 && v < 64)
                        last = v;
        }
        for (int c = 0; c <= last; c++)
                if (!(keep & CAP(c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return pd_error_set(err, errno, "drop capability %d from the bounding set", c);
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return pd_error_set(err, errno, "clear ambient capabilities");
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct d[2] = {
                { .effective = (uint32_t)keep, .permitted = (uint32_t)keep, .inheritable = 0 },
                { .effective = (uint32_t)(keep >> 32), .permitted = (uint32_t)(keep >> 32), .inheritable = 0 },
        };
        if (syscall(SYS_capset, &h, d) < 0)
                return pd_error_set(err, errno, "set capabilities");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return pd_error_set(err, errno, "set no_new_privs");
        return 0;
}

int pd_rlimits_apply(struct pd_error *err)
{
        struct rlimit rl = { 0, 0 };
        if (setrlimit(RLIMIT_CORE, &rl) < 0)
                return pd_error_set(err, errno, "set RLIMIT_CORE");
        /* Open files: keep at most 1048576 but never above what we have. */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                if (rl.rlim_max > 1048576)
                        rl.rlim_max = 1048576;
                if (rl.rlim_cur > rl.rlim_max)
                        rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        return pd_error_set(err, errno, "set RLIMIT_NOFILE");
        }
        return 0;
}
