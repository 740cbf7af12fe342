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

#include "lib/error.h"

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

/* supervised tier: the policy's path rules, in the policy's order (first
 * match decides), as the mounts that can enforce them in the kernel
 * (docs/security.md "`supervised` tier", src/jail/policy_mounts.c). A rule
 * whose glob is a literal path or "P/" "**" with a literal P is a candidate:
 * ro -> a read-only bind of P onto itself, noexec -> a noexec bind, deny ->
 * an empty mode-000 file or directory over P, rw -> a bind of the original
 * P (a hole in a later rule's mount). Any other glob keeps only its literal
 * directory prefix here: it decides which candidates stay (a mount must not
 * be stricter than an earlier rule that may match beneath it). */
#define PD_MAX_POLICY_RULES 64
#define PD_MAX_DENY_INODES 1024
enum pd_rule_access { PD_RULE_RW = 0, PD_RULE_RO, PD_RULE_DENY, PD_RULE_NOEXEC };

struct pd_mount_rule {
        char path[256];         /* literal path, or a glob's literal directory prefix */
        uint8_t access;         /* enum pd_rule_access */
        bool recursive;         /* "P/" "**": P and everything beneath */
        bool glob;              /* not a mount candidate */
        bool create;            /* make the directory if missing (paddock's own /run/paddock) */
};

/* A file a deny rule's mount covers, by identity: the supervisor refuses
 * to open it under any other name (a hard link made before the sandbox). */
struct pd_deny_inode {
        uint64_t dev, ino;
};

struct pd_mount_plan {
        const char *stage_dir;          /* host dir to mount the staging tmpfs on */
        uint64_t disk_bytes;            /* size of the writable layer */
        struct pd_mount_layer root;
        struct pd_mount_layer grafts[PD_MAX_GRAFTS];
        unsigned n_grafts;
        struct pd_mount_bind binds[PD_MAX_BINDS];
        unsigned n_binds;
        struct pd_mount_rule rules[PD_MAX_POLICY_RULES];
        unsigned n_rules;
        bool rules_truncated;           /* the policy has more rules than fit here */
        /* Filled by pd_mount_policy: an ro or deny rule is left to the
         * supervisor (no mount enforces it), so the calls that change paths
         * must go to it. */
        bool need_broker;
        /* Filled by pd_mount_build (the child): what the deny mounts cover. */
        struct pd_deny_inode deny_inodes[PD_MAX_DENY_INODES];
        unsigned n_deny_inodes;
        bool deny_inodes_truncated;
};

/* Step 1, while the child still holds the host's kuid 0 (before setresuid
 * in the new user namespace), so it may walk the root-only state dir:
 * make mounts private and mount the staging tmpfs. Returns its fd. */
int pd_mount_stage(const struct pd_mount_plan *p, struct pd_error *err);
/* Step 2, as root of the new namespace: build the tree on the stage and
 * pivot_root onto it. On return "/" is the sandbox root and the host's tree
 * is gone from this mount namespace. */
int pd_mount_build(struct pd_mount_plan *p, int stagefd, struct pd_error *err);
/* Part of step 2 (pd_mount_build calls it before pivot_root): the policy
 * rules' mounts on the tree at <stage>/root (src/jail/policy_mounts.c). */
int pd_mount_policy(struct pd_mount_plan *p, int stagefd, struct pd_error *err);
