/* The server's SQLite store (WAL) at <state>/paddock.db: API keys (hashes
 * only), sandboxes (what adoption needs after a restart), templates.
 * Every call is safe from any thread (one connection behind a mutex). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"
#include "server/core/server.h"

#define PD_STORE_SCHEMA_VERSION 2
#define PD_KEY_TEXT_MAX 80

struct pd_store;

/* One row of `sandboxes`. Strings are owned by the row (pd_store_row_clear). */
struct pd_store_row {
        char id[PD_ID_LEN + 1];
        char key_id[17];
        char template_name[65];
        char isolation[16];
        char *spec_json;        /* limits */
        char *env_json;
        char *metadata_json;
        char *notes_json;
        char state[16];
        uint64_t created_ms;
        uint32_t timeout_s;
        uint64_t deadline_boot_ms;
        uint64_t paused_remaining_ms;
        char boot_id[40];
};

/* Open (creating) <state_dir>/paddock.db. A corrupt or locked database is an
 * error with a message saying so; it is never reset. */
int pd_store_open(const char *state_dir, struct pd_store **out, struct pd_error *err);
void pd_store_close(struct pd_store *s);

/* Keys. create: a new random key; its text (shown once) into key_text. */
int pd_store_key_create(struct pd_store *s, const char *name, char key_text[PD_KEY_TEXT_MAX], struct pd_key *out,
                        struct pd_error *err);
/* Make key id an admin key (it may manage shared templates). */
int pd_store_key_set_admin(struct pd_store *s, const char *id, struct pd_error *err);
/* 0 and *out if the key text is a live key, -ENOENT otherwise. */
int pd_store_key_lookup(struct pd_store *s, const char *key_text, struct pd_key *out);
int pd_store_key_count(struct pd_store *s, struct pd_error *err);
/* json array of {id, name, created_at, admin}. */
int pd_store_key_list(struct pd_store *s, json_t **out, struct pd_error *err);
int pd_store_key_revoke(struct pd_store *s, const char *id, struct pd_error *err);

/* Sandboxes. put inserts or replaces the whole row (one transaction). */
int pd_store_sandbox_put(struct pd_store *s, const struct pd_store_row *row, struct pd_error *err);
int pd_store_sandbox_delete(struct pd_store *s, const char *id, struct pd_error *err);
/* Calls fn for every row; fn may not call back into the store. */
int pd_store_sandbox_each(struct pd_store *s, void (*fn)(const struct pd_store_row *row, void *ctx), void *ctx,
                          struct pd_error *err);
void pd_store_row_clear(struct pd_store_row *row);

/* Templates registered with `paddock template add`. */
int pd_store_template_add(struct pd_store *s, const char *name, struct pd_error *err);
/* json array of {name, created_at}. */
int pd_store_template_list(struct pd_store *s, json_t **out, struct pd_error *err);
int pd_store_template_exists(struct pd_store *s, const char *name);
/* Snapshots (sandbox snapshots taken through the API), owned by a key. */
int pd_store_snapshot_add(struct pd_store *s, const char *name, const char *key_id, const char *source,
                          const char *template_name, const char *isolation, struct pd_error *err);
int pd_store_snapshot_delete(struct pd_store *s, const char *name, struct pd_error *err);
/* [{name, key_id, source, template, isolation, created_at}] by name. */
int pd_store_snapshot_list(struct pd_store *s, json_t **out, struct pd_error *err);
/* 1 and the owner's key id if the snapshot exists, else 0. */
int pd_store_snapshot_owner(struct pd_store *s, const char *name, char key_id[64]);

/* Hex SHA-256 of a string (65 bytes out). */
void pd_sha256_hex(const char *s, char out[65]);
/* RFC 3339 UTC with milliseconds from ms since the epoch. */
void pd_rfc3339_ms(uint64_t ms, char out[32]);
