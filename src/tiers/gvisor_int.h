/* Inside the gvisor tier: what gvisor.c (the sandbox, runsc) and
 * gvisor_ckpt.c (checkpoint and restore: pause to disk, snapshots, fork)
 * share. */
#pragma once
#include <limits.h>
#include <stdbool.h>

#include "lib/sandbox.h"
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
