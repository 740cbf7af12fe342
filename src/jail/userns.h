/* Per-sandbox host uid/gid ranges (DESIGN §5, §7). Each sandbox's root maps
 * to its own unprivileged range of PD_UID_RANGE ids starting at
 * PD_UID_BASE + slot * PD_UID_RANGE. Slots are recorded host-wide under
 * /run/paddock/uids (one file per slot naming its owner), allocated under a
 * host-wide flock, so servers with different state dirs never share one. */
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include "lib/error.h"

#define PD_UID_BASE 1000000000u
#define PD_UID_RANGE 65536u
#define PD_UID_SLOTS 40000u
#define PD_UID_REGISTRY "/run/paddock/uids"

struct pd_uidrange {
        uint32_t slot;
        uint32_t base;          /* host uid == host gid of sandbox root */
};

/* owner: "<instance>:<sandbox id>", recorded in the slot file. */
int pd_uidrange_alloc(const char *owner, struct pd_uidrange *out, struct pd_error *err);
/* Free a slot if (and only if) owner still owns it. */
int pd_uidrange_free(uint32_t slot, const char *owner, struct pd_error *err);
/* Free every slot whose owner starts with "<instance>:". Returns count freed. */
int pd_uidrange_gc(const char *instance, struct pd_error *err);
/* Write uid_map/gid_map of pid: sandbox 0..RANGE-1 -> base..base+RANGE-1. */
int pd_userns_write_maps(pid_t pid, uint32_t base, struct pd_error *err);
/* The child that made a user namespace for pd_userns_make, and its stack
 * (it shares our memory): both live until pd_userns_reap. */
#define PD_USERNS_HOLDER_STACK (64u << 10)
struct pd_userns_holder {
        pid_t pid;
        void *stack;
        int pfd[2];
};

/* A user namespace with these uid_map and gid_map texts ("inside host
 * count" lines), held by the returned fd (O_CLOEXEC): the idmapping of a
 * mount (MOUNT_ATTR_IDMAP). Needs host root. The child that made it is on
 * its way out when this returns, success or not: pd_userns_reap(h) after. */
int pd_userns_make(const char *uid_map, const char *gid_map, struct pd_userns_holder *h, struct pd_error *err);
/* Reap the child of pd_userns_make and free its stack (a zeroed h: no-op). */
void pd_userns_reap(struct pd_userns_holder *h);
