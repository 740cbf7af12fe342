/* Capabilities, rlimits and no_new_privs for a sandbox's or a container's
 * processes, set by the process itself before exec: the sandbox tiers'
 * first process (a fixed policy, pd_caps_restrict, pd_rlimits_apply) and
 * paddock-oci's init and exec'd processes (config.json's sets and limits,
 * pd_caps_drop_bounding, pd_caps_set, pd_rlimits_set). Runs in post-clone
 * children: no malloc. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

/* The five capability sets, one bit per capability number. */
struct pd_caps {
        uint64_t bounding, effective, permitted, inheritable, ambient;
};

/* One resource limit (RLIMIT_*). */
struct pd_rlimit {
        int resource;
        uint64_t soft, hard;
};

/* Docker's default capability set: what root inside the sandbox keeps, and
 * only within the sandbox's own user namespace (none in the host's view). */
uint64_t pd_caps_default_set(void);
/* The highest capability number this kernel knows. */
int pd_caps_last(void);
/* Drop every capability outside keep from the bounding set. */
int pd_caps_drop_bounding(uint64_t keep, struct pd_error *err);
/* Set effective, permitted and inheritable exactly, then the ambient set to
 * c->ambient. The kernel refuses an ambient capability that is not both
 * permitted and inheritable: those are left out, and named in *not_raised
 * (may be NULL) for the caller to report. */
int pd_caps_set(const struct pd_caps *c, uint64_t *not_raised, struct pd_error *err);
/* The sandbox policy: bounding, permitted and effective = keep, nothing
 * inheritable or ambient, and no_new_privs. */
int pd_caps_restrict(uint64_t keep, struct pd_error *err);
/* Set each limit; raising a hard limit needs CAP_SYS_RESOURCE, and the
 * error says so. */
int pd_rlimits_set(const struct pd_rlimit *l, size_t n, struct pd_error *err);
/* Sandbox rlimits: core dumps off, open files capped (never raised above
 * what we hold: CAP_SYS_RESOURCE may be withheld). */
int pd_rlimits_apply(struct pd_error *err);
/* For a long-running parent (paddock serve): raise our own soft
 * RLIMIT_NOFILE to the hard limit (it holds ~8 fds per sandbox, and
 * systemd's soft default is 1024) and remember the soft limit we were
 * given, which pd_rlimits_apply gives back to the sandboxes, so their
 * limit does not change. */
void pd_rlimits_raise_nofile(void);
