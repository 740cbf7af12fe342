/* Every isolation tier paddock has, weakest first: X(ENUM, name) per tier.
 * This is the one table: enum pd_isolation (lib/spec.h), the names the CLI
 * and the API accept, and the tier-driver lookup (lib/tier.c) all come
 * from it. Adding a tier is its struct pd_tier_ops pd_tier_<name> in
 * src/tiers/ and one line here. */
#pragma once

#define PD_TIERS(X)                     \
        X(PROCESS, process)             \
        X(CONTAINER, container)         \
        X(SUPERVISED, supervised)       \
        X(GVISOR, gvisor)               \
        X(MICROVM, microvm)
