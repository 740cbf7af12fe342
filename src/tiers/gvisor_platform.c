/* Which gVisor platform the Sentry runs on (docs/gvisor.md, "Platform"):
 * how it intercepts the workload's system calls. systrap (seccomp traps,
 * the fast one) where the runsc present has it; kvm where it has it and the
 * host has hardware virtualization (a software /dev/kvm cannot run it);
 * ptrace, which every runsc has, otherwise. PADDOCK_GVISOR_PLATFORM names
 * one instead; a platform this runsc or host lacks is refused, not replaced.
 *
 * What a runsc has: runsc has no command that lists its platforms, and
 * `--platform=X` is only checked when a sandbox boots (seconds here), so
 * the binary is searched for the platform's Go package path, once per
 * process (tens of ms on a cached 30 MB file). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiers/gvisor.h"
#include "vm/vm.h"

#define PKG "gvisor.dev/gvisor/pkg/sentry/platform/"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char cached_for[PATH_MAX];
static bool has_systrap, has_kvm;

static void scan(const char *runsc)
{
        has_systrap = has_kvm = false;
        int fd = open(runsc, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
                return;
        has_systrap = memmem(m, (size_t)st.st_size, PKG "systrap", strlen(PKG "systrap")) != NULL;
        has_kvm = memmem(m, (size_t)st.st_size, PKG "kvm", strlen(PKG "kvm")) != NULL;
        munmap(m, (size_t)st.st_size);
}

int pd_gvisor_platform(const char *runsc, char *out, size_t size, struct pd_error *err)
{
        pthread_mutex_lock(&lock);
        if (strcmp(cached_for, runsc)) {
                scan(runsc);
                snprintf(cached_for, sizeof cached_for, "%s", runsc);
        }
        bool systrap = has_systrap, kvm = has_kvm;
        pthread_mutex_unlock(&lock);
        bool hw = pd_vm_have_kvm();
        const char *want = getenv("PADDOCK_GVISOR_PLATFORM");
        if (want && *want) {
                if (!strcmp(want, "ptrace") || (!strcmp(want, "systrap") && systrap) ||
                    (!strcmp(want, "kvm") && kvm && hw)) {
                        snprintf(out, size, "%s", want);
                        return 0;
                }
                if (!strcmp(want, "systrap") || !strcmp(want, "kvm"))
                        return pd_error_setx(err, ENOTSUP, "PADDOCK_GVISOR_PLATFORM=%s: %s", want,
                                             !strcmp(want, "systrap") ? "this runsc has no systrap platform "
                                                                        "(it predates it)"
                                             : !kvm ? "this runsc has no kvm platform"
                                                    : "this host has no hardware virtualization (vmx/svm and "
                                                      "/dev/kvm)");
                return pd_error_setx(err, EINVAL, "PADDOCK_GVISOR_PLATFORM='%s': not a gVisor platform "
                                                  "(ptrace, systrap, kvm)", want);
        }
        snprintf(out, size, "%s", systrap ? "systrap" : kvm && hw ? "kvm" : "ptrace");
        return 0;
}

int pd_gvisor_host_check(char *why, size_t size)
{
        char runsc[PATH_MAX], plat[16];
        struct pd_error err = { 0 };
        if (pd_gvisor_runsc(runsc, sizeof runsc, &err) < 0 || pd_gvisor_platform(runsc, plat, sizeof plat, &err) < 0) {
                snprintf(why, size, "%s", err.msg);
                return 0;
        }
        snprintf(why, size, "%s, --platform=%s", runsc, plat);
        return 1;
}
