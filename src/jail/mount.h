/* The container tier's filesystem (DESIGN §4, §5): built in the sandbox's
 * own mount namespace, in the post-clone child, then pivot_root onto it.
 *
 *   <stage> (tmpfs, --disk bytes: the writable layer)
 *     lower/        the template tree, idmapped (moved in from the host)
 *     upper/ work/  overlay upper and work dirs
 *     root/         overlay(lower, upper) -> becomes "/"
 *     g<N>-*        the same for each graft (base: host /usr on root/usr)
 *
 * Everything here runs in the child: no malloc, no stdio. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define PD_MAX_GRAFTS 8
#define PD_MAX_BINDS 40

/* A directory grafted at `target` of the rootfs with an overlay of its own
 * (the base template takes the host's /usr this way). */
/* snapshots (8), an image template's own layer and its store layers (40) */
#define PD_MOUNT_MAX_STACK 49

struct pd_mount_layer {
        int tree_fd;            /* detached (open_tree) idmapped tree from the host */
        /* Snapshot layers over tree_fd, top first (detached idmapped trees). */
        int stack_fds[PD_MOUNT_MAX_STACK];
        unsigned n_stack;
        char target[64];        /* path inside the sandbox, e.g. "usr" ("" = root) */
};

struct pd_mount_bind {
        int tree_fd;            /* detached idmapped tree */
        char target[256];       /* absolute path inside the sandbox */
        bool is_dir;
        bool readonly;
};

struct pd_mount_plan {
        const char *stage_dir;          /* host dir to mount the staging tmpfs on */
        uint64_t disk_bytes;            /* size of the writable layer */
        struct pd_mount_layer root;
        struct pd_mount_layer grafts[PD_MAX_GRAFTS];
        unsigned n_grafts;
        struct pd_mount_bind binds[PD_MAX_BINDS];
        unsigned n_binds;
};

/* Step 1, while the child still holds the host's kuid 0 (before setresuid
 * in the new user namespace), so it may walk the root-only state dir:
 * make mounts private and mount the staging tmpfs. Returns its fd. */
int pd_mount_stage(const struct pd_mount_plan *p, struct pd_error *err);
/* Step 2, as root of the new namespace: build the tree on the stage and
 * pivot_root onto it. On return "/" is the sandbox root and the host's tree
 * is gone from this mount namespace. */
int pd_mount_build(const struct pd_mount_plan *p, int stagefd, struct pd_error *err);
