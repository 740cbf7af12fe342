/* Recipes FROM a template that is not an image (build_live.c): `base` (the
 * host's /usr), a snapshot, a template a recipe built on one of those.
 * Their files are not store layers, so the build cannot stack layers:
 * instead one container-tier sandbox of that template runs every step
 * (RUN in it, COPY as a tar unpacked in it, WORKDIR made in it) and is then
 * snapshotted (tiers/snapshot.c) into the new template, with a config.json
 * beside the snapshot record (Env, WorkingDir, User, command, start and
 * ready commands: template_run.c reads it). */
#pragma once
#include <jansson.h>
#include <stdint.h>

#include "image/copyin.h"
#include "lib/sandbox.h"

struct pd_image_opts;

struct pd_live {
        struct pd_state *st;
        const struct pd_image_opts *o;  /* the build's options (its RUN network) */
        char parent[65];
        struct pd_sandbox *sb;          /* NULL until the first step that needs it */
};

/* 1 if name is a template a recipe can build on live (base, a snapshot, a
 * directory template), with its identity for the step cache in ident (the
 * base template's version, a snapshot's record); 0 if not (an image
 * template, or no template). */
int pd_live_parent(struct pd_state *st, const char *name, char *ident, size_t size);
/* The build's sandbox (started on first use). */
int pd_live_sandbox(struct pd_live *l, struct pd_error *err);
/* Run argv as root in it; stdout+stderr's last bytes in out (may be NULL),
 * *code the exit status (-1: killed). */
int pd_live_exec(struct pd_live *l, const char *const *argv, const void *in, size_t in_len, char *out,
                 size_t out_size, int *code, struct pd_error *err);
/* A user spec ("name", "uid", "name:group"...) against the sandbox's
 * /etc/passwd and /etc/group: {name, uid, gid, home}. */
int pd_live_user(struct pd_live *l, const char *spec, json_t **out, struct pd_error *err);
/* COPY: c's sources copied (as copyin.c does, owners c->uid/gid) into the
 * sandbox's root. */
int pd_live_copy(struct pd_live *l, const struct pd_copyin *c, struct pd_error *err);
/* Snapshot the sandbox into template name (an earlier built template of
 * that name replaced, unless in use) with doc as its config.json. */
int pd_live_finish(struct pd_live *l, const char *name, json_t *doc, struct pd_error *err);
/* Destroy the sandbox (if any). */
void pd_live_end(struct pd_live *l);
