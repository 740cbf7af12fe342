/* process.apparmorProfile and process.selinuxLabel. paddock-oci sets them
 * for the workload's exec through /proc/self/attr when the host runs that
 * LSM. On a host without it nothing could enforce the label, and refusing
 * would only break engines that send a profile anyway: the runtime logs
 * that the label is not applied (never silently). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "oci/oci.h"
#include "lib/util.h"

/* Is the LSM active? /sys/kernel/security/lsm lists them where securityfs
 * is mounted; otherwise each LSM's own trace. */
static bool lsm_active(const char *name)
{
        char buf[256];
        ssize_t n = pd_read_file_at(AT_FDCWD, "/sys/kernel/security/lsm", buf, sizeof buf);
        if (n > 0) {
                size_t len = strlen(name);
                for (const char *s = buf; (s = strstr(s, name)) != NULL; s += len)
                        if ((s == buf || s[-1] == ',') && (s[len] == ',' || s[len] == '\0' || s[len] == '\n'))
                                return true;
                return false;
        }
        if (strcmp(name, "apparmor") == 0)
                return pd_read_file_at(AT_FDCWD, "/sys/module/apparmor/parameters/enabled", buf, sizeof buf) > 0 &&
                       buf[0] == 'Y';
        return access("/sys/fs/selinux/enforce", F_OK) == 0;
}

void oci_lsm_check(struct oci_process *p)
{
        if (p->apparmor_profile && *p->apparmor_profile && !lsm_active("apparmor")) {
                oci_warn("process.apparmorProfile '%s' not applied: AppArmor is not enabled on this host",
                         p->apparmor_profile);
                p->apparmor_profile = NULL;
        }
        if (p->selinux_label && *p->selinux_label && !lsm_active("selinux")) {
                oci_warn("process.selinuxLabel '%s' not applied: SELinux is not enabled on this host", p->selinux_label);
                p->selinux_label = NULL;
        }
}

static int set_exec_attr(const char *lsm, const char *value, struct pd_error *err)
{
        char path[64];
        snprintf(path, sizeof path, "/proc/thread-self/attr/%s/exec", lsm);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)  /* kernels before 5.8: the primary LSM's file */
                fd = open("/proc/thread-self/attr/exec", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "open %s exec attribute", lsm);
        ssize_t n = write(fd, value, strlen(value));
        int e = errno;
        close(fd);
        return n == (ssize_t)strlen(value) ? 0 : pd_error_set(err, n < 0 ? e : EIO, "set %s label '%s'", lsm, value);
}

int oci_proc_set_lsm(const struct oci_process *p, struct pd_error *err)
{
        char buf[4096];
        int r = 0;
        if (p->apparmor_profile && *p->apparmor_profile) {
                snprintf(buf, sizeof buf, "exec %s", p->apparmor_profile);
                r = set_exec_attr("apparmor", buf, err);
        }
        if (r == 0 && p->selinux_label && *p->selinux_label)
                r = set_exec_attr("selinux", p->selinux_label, err);
        return r;
}
