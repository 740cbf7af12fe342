/* What each tier isolates and whether this host can run it (the tier
 * table's isolates and host_check; gvisor's in tiers/gvisor_platform.c). */
#pragma once
#include <stddef.h>

#define PD_ISOLATES_PROCESS "host kernel; Landlock + seccomp + own uid, host namespaces"
#define PD_ISOLATES_CONTAINER "host kernel; namespaces, seccomp allowlist, cgroups, own uid range"
#define PD_ISOLATES_SUPERVISED "container + a supervisor brokering and auditing opens/connects/execs"
#define PD_ISOLATES_GVISOR "user-space kernel (gVisor's Sentry); the host sees the Sentry's and gofer's system calls"
#define PD_ISOLATES_MICROVM "own guest kernel in QEMU (jailed); KVM or TCG"

int pd_facts_process(char *why, size_t size);
int pd_facts_container(char *why, size_t size);
int pd_facts_microvm(char *why, size_t size);
