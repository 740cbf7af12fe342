/* Snapshots of the container and supervised tiers (src/tiers/snapshot.c):
 * the filesystem only. The writable layers (root and grafts) are copied,
 * with the sandbox frozen, into <state>/templates/<name>/ as layers that
 * stack on the sandbox's own template (template.h). */
#pragma once
#include "lib/sandbox.h"

int pd_container_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err);
/* Attach the setup child's clone of the writable layer's mount at
 * <sandbox dir>/mnt in the host's mount namespace (takes tree_fd). */
int pd_container_attach_stage(struct pd_sandbox *sb, int tree_fd, struct pd_error *err);
/* Copy the root's writable layer of a container-tier sandbox (not a
 * one-shot one) into the existing directory dst as a store layer: owners
 * moved from the sandbox's range to to + id, setuid bits kept, overlay's
 * marks other than opaque dropped (src/image/build.c). */
int pd_container_copy_upper(struct pd_sandbox *sb, const char *dst, uint32_t to, struct pd_error *err);
