/* The sandbox manager (manager.c): the server's sandbox table, creation
 * (from warm pools when the limits class matches), deletion, TTL reaper,
 * pause/resume, and re-adoption of the sandboxes of an earlier server.
 *
 * Locking: s->lock (one sandbox's lifecycle) may be taken before srv->lock
 * (the table), never the other way round. */
#pragma once
#include "server/core/server.h"

struct pd_create_req {
        struct pd_spec spec;            /* limits and isolation; template_name is ignored */
        char template_name[65];
        json_t *env, *metadata;         /* borrowed */
        uint32_t timeout_s;
        bool auto_pause;                /* pause at the deadline instead of deleting */
        json_t *network;                /* borrowed: policy JSON (src/net/policy.h); NULL = none */
        /* Already built (a fork's copy from the tier's own fork op): taken
         * over instead of a new create; destroyed if the create fails. */
        struct pd_sandbox *made;
};

struct pd_manager_counts {
        size_t running, paused, failed;
        uint64_t creates_total;
};

/* Adopt the store's sandboxes, clean up strays, start the reaper and the
 * pool filler. */
int pd_manager_start(struct pd_server *srv, struct pd_error *err);
/* Refuse new work and wake every blocked stream (first step of shutdown). */
void pd_manager_begin_stop(struct pd_server *srv);
/* Join the threads, destroy the pools; with cfg.destroy_on_exit destroy
 * every sandbox too (otherwise they keep running for the next server). */
void pd_manager_stop(struct pd_server *srv);

/* Errors: -EAGAIN (limit reached: 429), -ESHUTDOWN (stopping: 503), or the
 * library's. On success *out holds a reference (pd_server_sandbox_put). */
/* The network policy a sandbox runs with ({"mode":"none"} without one). */
json_t *pd_manager_network_json(struct pd_server *srv, const char *id);
int pd_manager_create(struct pd_server *srv, const struct pd_key *key, const struct pd_create_req *req,
                      struct pd_srv_sandbox **out, struct pd_error *err);
/* How many more sandboxes key may have now (server and key limits). */
unsigned pd_manager_slots_free(struct pd_server *srv, const struct pd_key *key);
/* event: "sandbox.delete" (caller) or "sandbox.timeout" (reaper). */
int pd_manager_delete(struct pd_server *srv, struct pd_srv_sandbox *s, const char *event, struct pd_error *err);
int pd_manager_set_timeout(struct pd_server *srv, struct pd_srv_sandbox *s, uint32_t timeout_s,
                           struct pd_error *err);
/* -EBUSY when the sandbox is not in a state that allows it. */
int pd_manager_pause(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err);
/* mode: PD_PAUSE_DEFAULT (the tier's choice: to disk where it can),
 * _MEMORY or _DISK (-ENOTSUP where the tier cannot). */
int pd_manager_pause_mode(struct pd_server *srv, struct pd_srv_sandbox *s, enum pd_pause_mode mode,
                          struct pd_error *err);
int pd_manager_resume(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err);
/* snapshots.c: a named snapshot of s (running or paused), recorded for
 * key; -EEXIST if the name is taken. */
int pd_manager_take_snapshot(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox *s,
                             const char *name, json_t **out, struct pd_error *err);
/* n new sandboxes (API objects appended to out, an array) from s's
 * current filesystem, each independent; all or none. */
int pd_manager_fork(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox *s, unsigned n,
                    json_t *out, struct pd_error *err);
/* The create parameters s was made with (template, limits, env,
 * metadata, timeout, autoPause); env and metadata are new references. */
void pd_manager_create_params(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_create_req *out);
/* The API's sandbox object. */
json_t *pd_manager_sandbox_json(struct pd_server *srv, struct pd_srv_sandbox *s);
/* Stats (with the sandbox's limits) for GET .../metrics. */
int pd_manager_stats(struct pd_server *srv, struct pd_srv_sandbox *s, json_t **out, struct pd_error *err);
/* A referenced snapshot of key's live sandboxes (all keys if key is NULL),
 * sorted by id. Release with pd_manager_snapshot_free. */
int pd_manager_snapshot(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox ***out, size_t *n);
void pd_manager_snapshot_free(struct pd_server *srv, struct pd_srv_sandbox **v, size_t n);
void pd_manager_counts(struct pd_server *srv, struct pd_manager_counts *out);
/* {"<template>": ready count, ...} over every pool class. */
json_t *pd_manager_pool_ready(struct pd_server *srv);
/* watcher.c: the thread that notices a sandbox's agent dying (pidfds) and
 * calls pd_manager_agent_died; the manager starts and joins it. */
void *pd_watcher_main(void *srv);
int pd_manager_changed_fd(struct pd_server *srv);
/* Mark a sandbox whose agent died "failed", clean up its kernel objects,
 * keep its record (listed as failed until deleted), audit it. */
void pd_manager_agent_died(struct pd_server *srv, struct pd_srv_sandbox *s);
/* CLOCK_BOOTTIME in ms. */
uint64_t pd_boot_ms(void);
