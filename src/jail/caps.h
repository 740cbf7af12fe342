/* Capabilities, rlimits and no_new_privs for the sandbox's first process.
 * Runs in the post-clone child: no malloc. */
#pragma once
#include <stdint.h>

#include "lib/error.h"

/* Docker's default capability set: what root inside the sandbox keeps, and
 * only within the sandbox's own user namespace (none in the host's view). */
uint64_t pd_caps_default_set(void);
/* Drop every capability outside `keep` from the bounding set, clear the
 * ambient set, set permitted/effective/inheritable to `keep`, and set
 * no_new_privs. */
int pd_caps_restrict(uint64_t keep, struct pd_error *err);
/* Sandbox rlimits: core dumps off, open files capped (never raised above
 * what we hold: CAP_SYS_RESOURCE may be withheld). */
int pd_rlimits_apply(struct pd_error *err);
