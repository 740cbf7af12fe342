/* The gvisor tier's one outside entry (besides pd_tier_gvisor): where runsc
 * is, for the tier and for `paddock tiers`. */
#pragma once
#include <stddef.h>

#include "lib/error.h"

/* $PADDOCK_RUNSC, else the Debian package's /usr/sbin/runsc (or /usr/bin,
 * /usr/local/bin); -ENOENT naming the package when there is none. */
int pd_gvisor_runsc(char *buf, size_t size, struct pd_error *err);
/* The platform the Sentry runs on here (gvisor_platform.c): systrap or kvm
 * where runsc and the host have them, else ptrace; PADDOCK_GVISOR_PLATFORM
 * forces one (-ENOTSUP naming what is missing). */
int pd_gvisor_platform(const char *runsc, char *out, size_t size, struct pd_error *err);
/* For the tier table: 1 available (why: runsc and the platform), 0 not (why). */
int pd_gvisor_host_check(char *why, size_t size);
