/* Templates over HTTP (docs/templates.md "Templates over HTTP"):
 *
 *   tpl_builds.c       build records, who may see a template, the checks of
 *                      an image reference against the operator's registry
 *                      allowlist, and the build itself: a `paddock template
 *                      pull|build --no-local --status-file` child of the
 *                      server whose stderr is the build log
 *   routes_templates.c the routes under /api/v1/templates
 *
 * A build record is <state>/template-builds/<name>/:
 *   owner    the key id that made it (templates without a record are
 *            shared: base, the operator's from the local CLI)
 *   shared   present: an admin key made it as a shared template (visible
 *            to every key, managed by admin keys)
 *   status   {"status": "queued"|"building"|"ready"|"failed", "error"};
 *            "waiting": reserved by E2B's POST /v3/templates, not started
 *   log      the build's output (plain lines), appended while it runs
 *   source   the image reference, or "recipe"
 *   context/ the unpacked build context; recipe: a recipe given as text
 *   image.tar an uploaded image archive (tpl_upload.c), until its pull ends
 *   network.json  the RUN steps' network policy (absent: none) */
#pragma once
#include <jansson.h>
#include <stdbool.h>
struct archive;
struct archive_entry;
#include <stddef.h>
#include <stdint.h>

#include "server/core/server.h"

#define PD_TPL_RECIPE_MAX (256u << 10)          /* recipe text in a JSON body */
#define PD_TPL_CONTEXT_MAX (64ull << 20)        /* a context tar upload */
#define PD_TPL_CONTEXT_ENTRIES 20000
#define PD_TPL_BUILDS_MAX 4                     /* builds under way at once, all keys */
#define PD_TPL_ARCHIVE_MAX_DEFAULT (4ull << 30) /* an image archive upload (serve --template-upload-max) */

/* Who may use template name: 1 visible to key (shared, or its own), 0
 * not (another key's, or none). owner (33 bytes) gets the owner, "" when
 * shared. */
int pd_tpl_visible(struct pd_server *srv, const char *name, const char *key_id, char *owner);
/* The record's status ("" when there is no record) and its error. */
void pd_tpl_status(struct pd_server *srv, const char *name, char status[16], char *error, size_t errsz);
/* An image reference a key may have the server pull: fully qualified
 * (registry host first), no host source, its registry in the allowlist.
 * 0, or an HTTP status (400, 403) with a message in why. */
unsigned pd_tpl_ref_check(struct pd_server *srv, const char *ref, char *why, size_t whysz);
/* A recipe's FROM lines, for a key: scratch, an image template it may
 * see, or a reference pd_tpl_ref_check admits. 0 or a status with why. */
unsigned pd_tpl_recipe_check(struct pd_server *srv, const char *key_id, const char *recipe, char *why,
                             size_t whysz);
/* Reserve name for key (a new record dir, status queued): 0, or a status
 * (409: taken by another key, a shared template, a build under way; 429:
 * PD_TPL_BUILDS_MAX builds under way) with
 * why. A failed or finished record of the same key is replaced. */
unsigned pd_tpl_reserve(struct pd_server *srv, const char *name, const char *key_id, const char *source,
                        char *why, size_t whysz);
/* The same for key, shared: a shared template (403 unless key is an admin
 * key; it may replace a shared record or the operator's image template). */
unsigned pd_tpl_reserve_as(struct pd_server *srv, const char *name, const struct pd_key *key, bool shared,
                           const char *source, char *why, size_t whysz);
/* Whether key may delete or replace template name, shared or its own
 * (owner as pd_tpl_visible gave): 0, or 403 with why. */
unsigned pd_tpl_may_manage(const struct pd_key *key, const char *name, const char *owner, char *why, size_t whysz);
/* Set the record's status (and error, or NULL): "waiting" is a record
 * reserved for a build that has not started (E2B's POST /v3/templates). */
void pd_tpl_set_status(struct pd_server *srv, const char *name, const char *status, const char *error);
/* Drop a reserved record whose build never started. */
void pd_tpl_unreserve(struct pd_server *srv, const char *name);
/* The record's directory ("<state>/template-builds/<name>"). */
void pd_tpl_dir(struct pd_server *srv, const char *name, char *out, size_t size);
/* Start the build of a reserved record: image ref, or (ref NULL) the
 * recipe at recipe_rel under the record's context/ (build_args "K=V").
 * 0 or -errno with err. */
int pd_tpl_start(struct pd_server *srv, const char *name, const char *ref, const char *recipe_rel,
                 char *const *build_args, unsigned n_args, struct pd_error *err);
/* Unpack the tar at tar_fd into dir (a new directory): regular files,
 * directories and symlinks only, no absolute or '..' path, nothing
 * through a symlink. 0, or -EINVAL with a message in why. */
int pd_tpl_untar(int tar_fd, const char *dir, char *why, size_t whysz);

/* tpl_upload.c: POST /api/v1/templates/{name}/image, an image archive as
 * the body (PD_ROUTE_STREAM_BODY). */
enum MHD_Result pd_tpl_image_upload(struct pd_req *r, const char *chunk, size_t *chunk_len);
/* What the tar at fd is: "oci-archive" or "docker-archive" in *transport;
 * -EINVAL with why for anything else, or an entry that is absolute, climbs
 * out ('..', a symlink out), a hard link or a device. */
int pd_tpl_archive_kind(int fd, const char **transport, char *why, size_t whysz);
/* A libarchive reader of the tar (plain or gzip) in fd, from its start;
 * *opened false if it is not one. Freed with archive_read_free. */
struct archive *pd_tpl_tar_open(int fd, bool *opened);

/* tpl_launch.c: a checked build request, from its reservation to its
 * start. */
struct pd_tpl_launch {
        const char *name;
        const struct pd_key *key;
        bool shared;
        const char *source;             /* the record's "source" */
        const char *ref;                /* an image reference; NULL: a recipe */
        /* a recipe: an unpacked context moved in as context/ (NULL: an
         * empty one), recipe_text written at context/<recipe_rel> */
        const char *context_dir;
        const char *recipe_text;
        const char *recipe_rel;
        char *const *build_args;
        unsigned n_args;
        json_t *network;                /* pd_tpl_network_check's; NULL: none */
        /* more inputs, into the reserved record dir, before the start */
        int (*prepare)(struct pd_server *srv, const char *dir, void *arg, struct pd_error *err);
        void *arg;
        bool keep_failed;               /* a failed start: status failed (E2B), not unreserved */
};
/* 0 (started), or an HTTP status with why: pd_tpl_reserve_as's, or 500
 * when the start failed. */
unsigned pd_tpl_launch(struct pd_server *srv, const struct pd_tpl_launch *l, char *why, size_t whysz);
/* The error code of a status of these routes ("conflict", ...). */
const char *pd_tpl_status_code(unsigned status);
/* A request's "network" (docs/network.md's policy form): 0 with *out the
 * canonical policy (NULL for none or absent), or 400 with why. */
unsigned pd_tpl_network_check(json_t *v, json_t **out, char *why, size_t whysz);

/* tpl_tar.c: walk a key's tar, one checked entry at a time. */
struct pd_tpl_tar_walk {
        const char *what;               /* "context", "archive": in messages */
        const char *entry;              /* "context", "archive": "... entry 'x'" */
        unsigned max_entries;
        bool links_inside;              /* symlinks must stay inside the tar */
        unsigned count;
};
/* The next entry that passes the checks (relative, no '..', a file,
 * directory or symlink, no hard link, not sparse, at most max_entries;
 * links_inside): 1 with *e and *name ("./" stripped; "." skipped), 0 at
 * the end, -EINVAL with why. */
int pd_tpl_tar_next(struct archive *a, struct pd_tpl_tar_walk *w, struct archive_entry **e, const char **name,
                    char *why, size_t whysz);
/* A chunk of a context tar body (at most PD_TPL_CONTEXT_MAX in all: 413
 * naming what, e.g. "the context") appended to fd and counted in *len;
 * nothing once fail is set. */
void pd_tpl_hold_chunk(int fd, uint64_t *len, const char *what, struct pd_deferred_error *fail, const char *chunk,
                       size_t n);
