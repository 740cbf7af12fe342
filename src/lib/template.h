/* Templates (DESIGN §4): a read-only root tree registered under a name
 * ([a-z0-9-]{1,64}) in <state>/templates/<name>/rootfs, or (local CLI only)
 * a host directory. The built-in `base` is assembled from the host with no
 * download: its own small /etc and home directories, with the host's /usr
 * (and /bin, /lib*, /sbin where those are real directories) grafted in. */
#pragma once
#include <limits.h>

#include "lib/spec.h"
#include "lib/state.h"

/* Host directories grafted into a template's tree, at most (the base
 * template takes the host's /usr, /bin, /lib* this way). */
#define PD_MAX_GRAFTS 8

struct pd_template_graft {
        char target[64];                /* inside the sandbox, no leading '/' */
        char source[PATH_MAX];          /* host directory */
};

/* Snapshots stacked on a template, at most this deep. */
#define PD_MAX_STACK 8
/* Store layers of an image template (templates.md); an image with more is
 * flattened into this many at pull time (overlay's mount options and the
 * fds a start hands to the sandbox both have limits). */
#define PD_MAX_IMAGE_LAYERS 40

/* Owners in the layer store (<state>/layers) and in image templates'
 * own trees: the image's id N is stored as PD_STORE_UID_BASE + N, a range
 * above every sandbox's (userns.h) that no process ever runs as, so no file
 * there is host root's or setuid to a host account. Sandboxes see them
 * through an idmapping of their own (container.c). */
#define PD_STORE_UID_BASE 3621440000u
#define PD_STORE_ID_RANGE 65536u

struct pd_template {
        char name[65];
        char rootfs[PATH_MAX];          /* the bottom template's tree */
        struct pd_template_graft grafts[PD_MAX_GRAFTS];
        unsigned n_grafts;
        /* Snapshot layers over rootfs and the grafts, top first: stack[i]
         * names <state>/templates/<stack[i]> (its rootfs/ and grafts/<t>/). */
        char stack[PD_MAX_STACK][65];
        unsigned n_stack;
        /* The registered template at the bottom of the stack (name itself
         * when there are no snapshots). */
        char bottom[65];
        /* An image template (templates/<bottom>/layers exists): rootfs is
         * its own small layer (mount points, `user`), over these store
         * layers, top first: <state>/layers/<id>/tree. Owners in all of
         * them are in the store's range (PD_STORE_UID_BASE). */
        bool image;
        char layers[PD_MAX_IMAGE_LAYERS][65];
        unsigned n_layers;
};

/* 1 if templates/<name> is an image template (pulled or built), else 0. */
int pd_template_is_image(struct pd_state *st, const char *name);
/* Where store layer id (64 hex) lives: <state>/layers/<id>/tree. */
void pd_template_layer_path(struct pd_state *st, const char *id, char *out, size_t size);

/* 0 if name is a valid template name, else -EINVAL. */
int pd_template_name_check(const char *name);
/* Find (building `base` on first use) the template a spec asks for. */
int pd_template_resolve(struct pd_state *st, const struct pd_spec *spec, struct pd_template *t,
                        struct pd_error *err);
/* Build <state>/templates/base if missing or outdated. */
int pd_template_ensure_base(struct pd_state *st, struct pd_error *err);
/* Remove the outdated base templates that ensure_base moved aside once the
 * sandboxes alive when it did (their users file) are gone; returns
 * how many are still kept. Called after a rebuild and by `paddock gc`. */
int pd_template_sweep_retired(struct pd_state *st);
/* Check a host directory is usable as a template (not a symlink, not "/"). */
int pd_template_check_dir(const char *dir, char *canonical, struct pd_error *err);

/* Snapshots (DESIGN §4; docs/api.md "Snapshots"): a template made from a
 * sandbox's writable layer, stacked on the template that sandbox started
 * from. <state>/templates/<name>/ holds rootfs/ (the layer, whiteouts
 * included), grafts/<target>/ (the layers of grafted trees such as /usr),
 * a `snapshot` record (parent, source, created, fork) and users/<id> for
 * each sandbox (of this state dir) whose filesystem stacks on it. */

/* 0 if name may name a new snapshot ([a-z0-9-]{1,64}, not a built-in);
 * -EINVAL with a message saying what is wrong otherwise. */
int pd_snapshot_name_check(const char *name, struct pd_error *err);
/* The unlisted snapshot a fork of sandbox src_id stacks on. */
void pd_snapshot_fork_name(const char *src_id, char out[65]);
/* 1 if <state>/templates/<name> is a snapshot, 0 if not. */
int pd_snapshot_is(struct pd_state *st, const char *name);
/* Record / forget that sandbox id uses every snapshot of t's stack. A fork
 * snapshot left with no user is removed. */
int pd_snapshot_use(struct pd_state *st, const struct pd_template *t, const char *id, struct pd_error *err);
void pd_snapshot_unuse(struct pd_state *st, const char *top, const char *id);
/* Remove snapshot name: -EBUSY (naming a user) while a live sandbox or
 * another snapshot stacks on it; -ENOENT if there is none. */
int pd_snapshot_delete(struct pd_state *st, const char *name, struct pd_error *err);
/* Remove a fork snapshot once nothing uses it (errors ignored). */
void pd_snapshot_release(struct pd_state *st, const char *name, struct pd_error *err);
/* A rebuild's swap (build_live.c; build.c for an image recipe replacing a
 * template built on base): snapshot or image template tmp takes name's
 * place in one rename (RENAME_EXCHANGE when name exists), so name always
 * answers with a whole template. The old one is then at tmp, for the caller to remove;
 * the records of who stacks on what follow (@name moves from the old
 * one's parents to the new one's). -EBUSY (naming the user, nothing
 * changed) while a sandbox or snapshot uses the old one. */
int pd_snapshot_swap(struct pd_state *st, const char *tmp, const char *name, struct pd_error *err);
/* The template a snapshot stacks on (0), or -ENOENT / -EINVAL. */
int pd_snapshot_parent(struct pd_state *st, const char *name, char parent[65]);
/* Record the new snapshot name as a user of parent's stack. */
int pd_snapshot_register(struct pd_state *st, const char *name, const char *parent, struct pd_error *err);
/* Finish a snapshot built in the directory tmp (open as tmpfd): write its
 * record, make its users/ directory and rename it to path. Two racing
 * snapshots of one name: the first rename wins, the other gets EEXIST. */
struct pd_record;
int pd_snapshot_install(int tmpfd, const char *tmp, const char *path, const char *name,
                        const struct pd_record *rec, struct pd_error *err);
/* The lock every users/ change and every removal of a template or
 * snapshot takes (an fd to close), and, under it, the first live user of
 * template or snapshot name ("<sandbox id>" or "@<snapshot>"): 1 if there
 * is one, 0 if none. */
int pd_template_lock(struct pd_state *st, struct pd_error *err);
int pd_template_user(struct pd_state *st, const char *name, char *who, size_t size);
/* Where layer graft (NULL = the root tree) of snapshot name lives. */
void pd_snapshot_layer_path(struct pd_state *st, const char *name, const char *graft, char *out, size_t size);

/* What an image template asks of the processes started in it (its OCI
 * config, templates.md "What runs"): environment, working directory,
 * default user, default command. All empty for other templates. */
struct pd_template_run {
        char **env;             /* "K=V" */
        unsigned n_env;
        char *workdir;          /* NULL: the user's home */
        bool has_user;
        char *user;             /* account name */
        uint32_t uid, gid;
        char *home;
        char **argv;            /* Entrypoint then Cmd; NULL-terminated, NULL if none */
        /* templates.md "Start and ready commands": run at each create */
        char *start_cmd;        /* NULL: none */
        char *ready_cmd;        /* NULL: none (started is ready) */
        int ready_timeout_ms;   /* 0: the default (60 s) */
};
/* For template (or snapshot) name, the defaults of the image template at
 * its bottom (name may be NULL or "base": none). */
int pd_template_run_defaults(struct pd_state *st, const char *name, struct pd_template_run *out,
                             struct pd_error *err);
void pd_template_run_free(struct pd_template_run *r);
/* 1 if templates/<name> is a snapshot a recipe build made (it has a
 * config.json, as image templates do), else 0. */
int pd_template_is_built_snapshot(struct pd_state *st, const char *name);

