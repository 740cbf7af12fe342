/* Inside the gvisor tier: what gvisor.c (the sandbox, runsc) and
 * gvisor_ckpt.c (checkpoint and restore: pause to disk, snapshots, fork)
 * share. */
#pragma once
#include <limits.h>
#include <stdbool.h>

#include "lib/sandbox.h"
#include "jail/userns.h"
#include "tiers/host.h"

/* The tier's own data: the host's handles first (pd_host() reads them),
 * then the tree the sandbox's root was built from, kept in its record so
 * that a restore (also by a new server) builds the same root. */
struct pd_gv_data {
        struct pd_host_data host;
        char root_name[65];             /* a registered template, or "" */
        char root_dir[PATH_MAX];        /* a template directory, or "" */
        char platform[8];               /* ptrace, systrap, kvm: chosen at create, kept */
        bool net;                       /* a veth from the instance's router (--network=sandbox) */
};

static inline struct pd_gv_data *pd_gv(const struct pd_sandbox *sb)
{
        return (struct pd_gv_data *)sb->tier_data;
}

/* runsc GLOBAL-FLAGS SUB... for this sandbox, waited for; runsc's last
 * words in the error. */
int pd_gv_runsc_call(struct pd_sandbox *sb, const char *const *sub, int nsub, struct pd_error *err);
/* Build the sandbox: `runsc run`, or `runsc restore` of the checkpoint in
 * directory image (NULL: run). */
int pd_gv_create(struct pd_sandbox *sb, const char *image, struct pd_error *err);
/* Start an existing sandbox's Sentry again from the checkpoint in image
 * (its dirs, cgroup and socket tmpfs are there). */
int pd_gv_relaunch(struct pd_sandbox *sb, const char *image, struct pd_error *err);
void pd_gv_umount_sock(const struct pd_sandbox *sb);

/* gvisor_ckpt.c */
/* 1 with image set if sb->spec.template_name is a gvisor snapshot, 0 if
 * not, -errno. */
int pd_gv_snapshot_image(struct pd_sandbox *sb, char *image, size_t size, struct pd_error *err);
/* The tree a checkpoint's root was built from (its "root" record). */
int pd_gv_image_root(struct pd_sandbox *sb, const char *image, char root_name[65], char root_dir[PATH_MAX],
                     struct pd_error *err);
int pd_gv_pause_to_disk(struct pd_sandbox *sb, struct pd_error *err);
int pd_gv_resume(struct pd_sandbox *sb, struct pd_error *err);
int pd_gv_resume_memory(struct pd_sandbox *sb, struct pd_error *err);
int pd_gv_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err);
int pd_gv_fork(struct pd_sandbox *src, struct pd_sandbox *const *dst, unsigned n, struct pd_error *err);
int pd_gv_adopt(struct pd_sandbox *sb, struct pd_error *err);
/* At destroy: its saved state and its use of a snapshot. */
void pd_gv_forget(struct pd_sandbox *sb);

/* gvisor_root.c: a root stacked from layers (the filesystem snapshots of a
 * container or supervised sandbox, an image template's layers) as an
 * overlay in the launcher's private mount namespace. */
#include "lib/template.h"
#define PD_GV_MAX_LOWER (PD_MAX_STACK + 1 + PD_MAX_IMAGE_LAYERS)
struct pd_gv_stack {
        unsigned n_lower;                       /* root layers, top first */
        char lower_src[PD_GV_MAX_LOWER][PATH_MAX];      /* a host path, or "" */
        int lower_fd[PD_GV_MAX_LOWER];          /* an idmapped detached tree, or -1 */
        char root_opts[1024];
        unsigned n_grafts;
        char graft_src[PD_MAX_GRAFTS][PD_MAX_STACK + 1][PATH_MAX];
        unsigned n_graft_lower;                 /* per graft: its snapshot layers + its source */
        char graft_dst[PD_MAX_GRAFTS][PATH_MAX + 80];
        char graft_opts[PD_MAX_GRAFTS][256];
        struct pd_userns_holder holder;
};
/* 1 if t needs a stacked root (snapshots or an image), else 0. */
static inline int pd_gv_stacked(const struct pd_template *t)
{
        return t->n_stack > 0 || t->image;
}
/* In the parent: the layers of t's root and grafts (root: where it will be
 * mounted); image layers are idmapped from the layer store's id range to
 * 0..65535 here, as trees the child attaches. 0 or -errno. */
int pd_gv_stack_prepare(struct pd_sandbox *sb, const struct pd_template *t, const char *root, struct pd_gv_stack *s,
                        struct pd_error *err);
/* In the child, in its own mount namespace: the overlay at root (over a
 * small tmpfs holding the layers' mount points and the upper layer where
 * runsc makes the spec's mount points), the grafts' overlays on it.
 * Async-signal-safe; 0 or -1 with errno. */
int pd_gv_stack_mount(const struct pd_gv_stack *s, const char *root);
/* In the parent, after the child: close the trees, reap the holder. */
void pd_gv_stack_close(struct pd_gv_stack *s);
