/* Whether this host can run a tier, without starting a sandbox (tier.h's
 * host_check): what `paddock tiers` and GET /api/v1/tiers say. */
#include "tiers/facts.h"

#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "jail/landlock.h"
#include "lib/error.h"
#include "vm/vm.h"

int pd_facts_process(char *why, size_t size)
{
        int abi = pd_landlock_abi();
        if (abi <= 0) {
                snprintf(why, size, "no Landlock in this kernel");
                return 0;
        }
        snprintf(why, size, "Landlock ABI %d", abi);
        return 1;
}

int pd_facts_container(char *why, size_t size)
{
        if (access("/proc/self/ns/user", F_OK) < 0) {
                snprintf(why, size, "no user namespaces");
                return 0;
        }
        snprintf(why, size, "user namespaces");
        return 1;
}

int pd_facts_microvm(char *why, size_t size)
{
        struct pd_error err = { 0 };
        char buf[PATH_MAX], rel[128];
        if (access("/usr/bin/qemu-system-x86_64", X_OK) < 0) {
                snprintf(why, size, "no QEMU (Debian package qemu-system-x86)");
                return 0;
        }
        if (pd_vm_guest_kernel(buf, sizeof buf, rel, sizeof rel, &err) < 0) {
                snprintf(why, size, "%s", err.msg);
                return 0;
        }
        snprintf(why, size, "QEMU %s, guest kernel %s", pd_vm_have_kvm() ? "KVM" : "TCG", rel);
        return 1;
}
