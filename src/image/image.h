/* Templates from OCI images and recipes (docs/templates.md): the library
 * the CLI verbs call, and the HTTP API will (one call each: pull, build,
 * list, inspect, remove, prune; progress and logs through a callback).
 *
 * An image template is templates/<name>/ with
 *   layers       the store layers (store.h), top first, one hex per line
 *   rootfs/      its own small top layer: mount points, /home/user, the
 *                `user` account when the image has none, hosts/hostname
 *   config.json  what runs by default (Env, WorkingDir, User, command) and
 *                where it came from
 *   users/       who uses it (sandboxes, snapshots; template.h)
 *   vm/          the microvm tier's erofs image of it, made on first use */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "lib/error.h"
#include "lib/state.h"

struct pd_netpol;

/* What a pull or build reports while it works. */
enum pd_image_event_kind {
        PD_IMAGE_EV_STEP,       /* text: a phase ("resolving", "copying", step N/M ...) */
        PD_IMAGE_EV_LINE,       /* text: a line of a tool's or a RUN step's output */
        PD_IMAGE_EV_LAYER,      /* layer, done/total bytes: unpacking (done == total: finished) */
        PD_IMAGE_EV_CACHED,     /* layer or step text: already there, nothing to do */
        PD_IMAGE_EV_DOWNLOAD,   /* done: bytes of the blobs being downloaded; text: each one's */
};

struct pd_image_event {
        enum pd_image_event_kind kind;
        const char *text;
        const char *layer;      /* hex */
        uint64_t done, total;
};

typedef void (*pd_image_progress_fn)(const struct pd_image_event *ev, void *arg);

struct pd_image_opts {
        pd_image_progress_fn progress;
        void *arg;
        /* local CLI only: allow sources on the host (oci:, oci-archive:,
         * docker-archive:, containers-storage:, dir:). Over HTTP: false. */
        bool allow_local;
        /* replace an existing image template of that name (not in use) */
        bool replace;
        /* what the template's config says it came from, instead of the
         * reference (an uploaded archive: not a host path) */
        const char *source_label;
        /* a server-made pull (egress.h): skopeo may reach only these
         * registries ("host[:port]"), redirects included */
        bool egress_guard;
        const char *const *egress_allow;
        unsigned n_egress_allow;
        /* a recipe's RUN sandboxes' network (docs/templates.md "Network of
         * RUN steps"): NULL or mode none = loopback only; open or policy
         * through the instance's router like any sandbox's (never list,
         * audit), the router made with net_uplink/net_resolver if it is not
         * there yet. Part of each RUN step's cache key. */
        const struct pd_netpol *run_net;
        const char *net_uplink, *net_resolver;
};

/* Names users may give (DESIGN §4, plus the reserved prefixes). */
int pd_image_name_check(const char *name, struct pd_error *err);

/* Pull ref (docker://..., or a local source with allow_local; a bare
 * "name:tag" means docker://) into template name. */
int pd_image_pull(struct pd_state *st, const char *name, const char *ref, const struct pd_image_opts *o,
                  struct pd_error *err);

/* Build the recipe (a Dockerfile subset) with context dir into template
 * name; build_args: "K=V" strings, n of them. */
int pd_image_build(struct pd_state *st, const char *name, const char *recipe_path, const char *context,
                   char *const *build_args, unsigned n_args, const struct pd_image_opts *o, struct pd_error *err);

/* [{name, kind, source, digest, layers, bytes_total, bytes_own, bytes_shared, created, users}] of every
 * image template, snapshot and registered directory template. */
int pd_image_list(struct pd_state *st, json_t **out, struct pd_error *err);
/* One template in detail (config, layers, users). */
int pd_image_inspect(struct pd_state *st, const char *name, json_t **out, struct pd_error *err);
/* Remove an image template: -EBUSY naming a user while one uses it. */
int pd_image_remove(struct pd_state *st, const char *name, struct pd_error *err);
/* Remove layers no template uses, unfinished unpacks, the download cache
 * and the recipe step cache entries whose layers went. */
struct pd_prune_result {
        unsigned layers;
        uint64_t bytes;
        unsigned blobs;
};
int pd_image_prune(struct pd_state *st, struct pd_prune_result *res, struct pd_error *err);

/* ---- between the files of src/image/ ---- */

/* Register template name from store layers (bottom first, as in an OCI
 * manifest) and an OCI image config object (its "config" part, may be
 * NULL), with meta (source, digest, kind: merged into config.json). */
int pd_image_register(struct pd_state *st, const char *name, char (*layers)[65], unsigned n,
                      json_t *config, json_t *meta, const struct pd_image_opts *o, struct pd_error *err);
/* The config.json of template name (new reference) or NULL. */
json_t *pd_image_config(struct pd_state *st, const char *name);
void pd_image_emit(const struct pd_image_opts *o, enum pd_image_event_kind kind, const char *text,
                   const char *layer, uint64_t done, uint64_t total);
/* Copy ref and unpack its layers into the store (no template): the layer
 * ids bottom first, the whole OCI config, the manifest digest. The caller
 * holds the store's shared lock until it registers them. */
struct pd_image_fetched {
        char (*layers)[65];
        unsigned n;
        json_t *config;
        char digest[80];
};
int pd_image_fetch(struct pd_state *st, const char *ref, const struct pd_image_opts *o, struct pd_image_fetched *f,
                   struct pd_error *err);
void pd_image_fetched_free(struct pd_image_fetched *f);
/* What path (relative) is in the merged view of store layers (top first):
 * an fd (O_RDONLY for files, O_PATH else) and its stat, or -ENOENT. */
int pd_image_lookup(struct pd_state *st, char (*top_first)[65], unsigned n, const char *path, struct stat *out);
/* An image user spec ("name", "uid", "name:group", "uid:gid") against
 * passwd and group texts: {name, uid, gid, home}. */
int pd_image_resolve_user(const char *spec, const char *passwd, const char *group, json_t **out, struct pd_error *err);
/* A small file of the merged view, malloc'd, or NULL. */
char *pd_image_read_file(struct pd_state *st, char (*top_first)[65], unsigned n, const char *path);
/* Merge layers (bottom first) into one new store layer (whiteouts applied):
 * hex of the result in out. */
int pd_image_flatten(struct pd_state *st, char (*layers)[65], unsigned n, char out[65], struct pd_error *err);
/* run_net.c: a RUN step's network (opts.run_net). Fill the sandbox spec;
 * the text that joins the step's cache key (malloc'd; NULL: none); say
 * which sandbox ran with it (its audit has the egress decisions). */
struct pd_spec;
struct pd_sandbox;
void pd_image_run_net(const struct pd_image_opts *o, struct pd_spec *spec);
char *pd_image_run_net_key(const struct pd_image_opts *o);
void pd_image_run_net_said(const struct pd_image_opts *o, const struct pd_sandbox *sb);
