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
