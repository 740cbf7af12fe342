/* The gvisor tier's one outside entry (besides pd_tier_gvisor): where runsc
 * is, for the tier and for `paddock tiers`. */
#pragma once
#include <stddef.h>

#include "lib/error.h"

/* $PADDOCK_RUNSC, else the Debian package's /usr/sbin/runsc (or /usr/bin,
 * /usr/local/bin); -ENOENT naming the package when there is none. */
int pd_gvisor_runsc(char *buf, size_t size, struct pd_error *err);
