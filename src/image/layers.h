/* The layer store (docs/templates.md "Storage"): <state>/layers, 0700.
 *   <hex>/tree    one unpacked layer, an overlay lower dir; <hex> is its
 *                 diff_id (sha256 of the uncompressed tar), verified while
 *                 it was unpacked, so one layer is stored once whichever
 *                 image, compression or recipe step brought it
 *   <hex>/info    record: bytes (tar size), entries, created, source
 *   .tmp-*        unpacks under way (or left by a crash: never read,
 *                 removed by prune); a layer appears by rename only
 *   .gc.lock      shared by everything that adds or uses layers while it
 *                 registers a template, exclusive for prune
 * Owners inside are in the store's id range (template.h). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "lib/state.h"
#include "image/unpack.h"

/* The store's directory fd (made 0700 if missing). */
int pd_layers_dir(struct pd_state *st, struct pd_error *err);
/* Hold the store against prune (shared) or for it (exclusive): an fd. */
int pd_layers_lock(struct pd_state *st, bool exclusive, struct pd_error *err);
/* 1 if layer hex is in the store. */
int pd_layers_has(struct pd_state *st, const char *hex);
/* Unpack the blob on fd as layer o->want_diff (required), verifying
 * o->want_blob too when given; nothing appears unless all is well. A
 * layer already there (a racing pull) is success. */
int pd_layers_add(struct pd_state *st, int fd, const struct pd_unpack_opts *o, struct pd_unpack_result *res,
                 const char *source, struct pd_error *err);
/* A new empty layer directory to fill (recipe steps, flattening): its
 * path (.tmp-*) in tmp; pd_layers_commit moves it in as hex. */
int pd_layers_begin(struct pd_state *st, char *tmp, size_t size, struct pd_error *err);
int pd_layers_commit(struct pd_state *st, const char *tmp, const char *hex, uint64_t bytes, const char *source,
                    struct pd_error *err);
/* The recorded size of a layer (0 if unknown). */
uint64_t pd_layers_layer_bytes(struct pd_state *st, const char *hex);
