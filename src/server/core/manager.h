/* The sandbox manager (manager.c and the files mgr_int.h lists): the
 * server's sandbox table, creation (from warm pools when the limits class
 * matches), deletion, TTL reaper, pause/resume, and re-adoption of the
 * sandboxes of an earlier server. It answers with typed data; api/ and
 * e2b/ format it.
 *
 * Locking: s->lock (one sandbox's lifecycle) may be taken before srv->lock
 * (the table), never the other way round. */
#pragma once
#include "server/core/server.h"

/* What a pool class's sandboxes go through before they are pooled, beyond
 * the tier's own warm-up (the E2B code interpreter starts its kernel:
 * e2b_ci.c). Sandboxes prepared differently are different classes (name);
 * run is called on the pool's filler thread with a sandbox nobody owns
 * yet, and gives up soon once *stop (read with __atomic_load_n) is true:
 * the server is stopping and joins that thread; < 0: the sandbox is
 * destroyed and the class retried later. */
struct pd_pool_prep {
        const char *name;
        int (*run)(struct pd_server *srv, struct pd_sandbox *sb, const bool *stop, struct pd_error *err);
};

struct pd_create_req {
        struct pd_spec spec;            /* limits and isolation; template_name is ignored */
        char template_name[65];
        json_t *env, *metadata;         /* borrowed */
        uint32_t timeout_s;
        bool auto_pause;                /* pause at the deadline instead of deleting */
        bool auto_pause_files;          /* ... keeping the filesystem only (PD_PAUSE_FILES) */
        bool auto_resume;               /* paused: a request to one of its ports resumes it */
        bool ports_public;              /* its ports answer without a port token */
        json_t *network;                /* borrowed: policy JSON (src/net/policy.h); NULL = none */
        bool disk_requested;            /* disk_mb was asked for: say so if it is lowered */
        /* Already built (a fork's copy from the tier's own fork op): taken
         * over instead of a new create; destroyed if the create fails. */
        struct pd_sandbox *made;
        /* NULL: the plain pool of the template, never for a sandbox with a
         * network. Set: a pool of its own, whose sandboxes are prepared and
         * may carry the create's network (same policy, same class). */
        const struct pd_pool_prep *pool_prep;
};

struct pd_manager_counts {
        size_t running, paused, failed;
        uint64_t creates_total;
        /* deleted sandboxes whose teardown (after the answer) is queued or
         * running, and those finished since start (core/teardown.c) */
        uint64_t teardowns_pending, teardowns_total;
};

/* A sandbox as the manager knows it. env, metadata and notes are new
 * references: release with pd_sandbox_info_clear. */
struct pd_sandbox_info {
        char id[PD_ID_LEN + 1];
        char template_name[65];
        char isolation[16];
        enum pd_sb_state state;
        uint64_t created_ms;            /* wall clock, ms since the epoch */
        uint64_t expires_ms;            /* wall clock; 0: no deadline (paused) */
        uint64_t timeout_remaining_ms;  /* paused: the TTL it resumes with */
        uint32_t timeout_s;
        uint64_t memory_bytes, disk_bytes;
        uint32_t pids, millicpus;
        bool auto_pause;
        bool auto_resume;
        bool tier_pauses_to_disk;       /* what a pause does on its tier */
        bool paused_files;              /* paused keeping the filesystem only */
        char accel[8];                  /* the tier's CPU ("kvm", "tcg"), "" if not a guest */
        json_t *env, *metadata, *notes;
};

/* Stats with the limits they are measured against. */
struct pd_sandbox_metrics {
        struct pd_sandbox_stats st;
        uint64_t memory_limit, disk_limit;
        uint32_t pids_limit;
};

/* A snapshot taken through the API. */
struct pd_snapshot_info {
        char name[65];
        char source[PD_ID_LEN + 1];
        char template_name[65];
        char isolation[16];
};

/* Warm sandboxes ready in one pool class (template and limits); there are
 * at most PD_POOL_CLASSES_MAX: the pools must not grow with every odd limit
 * a client asks for. */
#define PD_POOL_CLASSES_MAX 4
struct pd_pool_count {
        char template_name[65];
        char isolation[16];
        unsigned ready;
        uint64_t memory_bytes;          /* the ready sandboxes' memory, summed */
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
int pd_manager_create(struct pd_server *srv, const struct pd_key *key, const struct pd_create_req *req,
                      struct pd_srv_sandbox **out, struct pd_error *err);
/* How many more sandboxes key may have now (server and key limits). */
unsigned pd_manager_slots_free(struct pd_server *srv, const struct pd_key *key);
/* Destroy s and forget it (audited sandbox.delete); -ENOENT if gone. */
int pd_manager_delete(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err);
int pd_manager_set_timeout(struct pd_server *srv, struct pd_srv_sandbox *s, uint32_t timeout_s,
                           struct pd_error *err);
/* -EBUSY when the sandbox is not in a state that allows it. */
int pd_manager_pause(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err);
/* mode: PD_PAUSE_DEFAULT (the tier's choice: to disk where it can),
 * _MEMORY or _DISK (-ENOTSUP where the tier cannot). */
int pd_manager_pause_mode(struct pd_server *srv, struct pd_srv_sandbox *s, enum pd_pause_mode mode,
                          struct pd_error *err);
int pd_manager_resume(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err);
/* A request reached a port of s (api/ports.c) and its caller is
 * authorised: resume s if it is paused and was made with auto_resume
 * (audited sandbox.auto_resume). 0 when s is running (already, or now);
 * -EBUSY with a message when it is paused without auto_resume, failed or
 * gone (-ENOENT). */
int pd_manager_resume_on_traffic(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err);
/* Make s's ports public (no port token needed) or private; persisted and
 * audited (ports.public). */
int pd_manager_set_ports_public(struct pd_server *srv, struct pd_srv_sandbox *s, bool pub, struct pd_error *err);
/* snapshots.c: a named snapshot of s (running or paused), recorded for
 * key; -EEXIST if the name is taken. */
int pd_manager_take_snapshot(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox *s,
                             const char *name, struct pd_snapshot_info *out, struct pd_error *err);
/* n new sandboxes from s's current state, each independent; all or none.
 * made[0..n) get a reference each (pd_server_sandbox_put). */
int pd_manager_fork(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox *s, unsigned n,
                    struct pd_srv_sandbox **made, struct pd_error *err);
/* The create parameters s was made with (template, limits, env,
 * metadata, timeout, autoPause); env and metadata are new references. */
void pd_manager_create_params(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_create_req *out);
void pd_manager_sandbox_info(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_sandbox_info *out);
void pd_sandbox_info_clear(struct pd_sandbox_info *i);
/* Stats (with the sandbox's limits) for GET .../metrics. */
int pd_manager_stats(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_sandbox_metrics *out,
                     struct pd_error *err);
/* A referenced snapshot of key's live sandboxes (all keys if key is NULL),
 * sorted by id. Release with pd_manager_snapshot_free. */
int pd_manager_snapshot(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox ***out, size_t *n);
void pd_manager_snapshot_free(struct pd_server *srv, struct pd_srv_sandbox **v, size_t n);
void pd_manager_counts(struct pd_server *srv, struct pd_manager_counts *out);
/* teardown.c: wait (at most timeout_ms) until no deleted sandbox's
 * teardown is queued or running; true if there was one and now there is
 * none. A template or snapshot "in use" by a sandbox deleted a moment ago
 * is released by its teardown, which runs after the delete's answer: the
 * template and snapshot deletes wait for it once before answering 409. */
bool pd_teardown_drain(struct pd_server *srv, int timeout_ms);
#define PD_TEARDOWN_WAIT_MS 30000
/* network.c: the network s runs with, as its tier reports it (-ENOENT: it
 * has none, mode none); a live change of its policy, audited as
 * sandbox.network for key (-ENOENT: it has none to change). */
int pd_manager_net_info(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_net_info *out,
                        struct pd_error *err);
int pd_manager_net_update(struct pd_server *srv, struct pd_srv_sandbox *s, const struct pd_key *key,
                          const struct pd_netpol *pol, struct pd_error *err);
/* The warm pools' classes (at most max), with their ready counts. */
size_t pd_manager_pool_ready(struct pd_server *srv, struct pd_pool_count *out, size_t max);
/* watcher.c: the thread that notices a sandbox's agent dying (pidfds) and
 * calls pd_manager_agent_died; the manager starts and joins it. */
void *pd_watcher_main(void *srv);
int pd_manager_changed_fd(struct pd_server *srv);
/* Mark a sandbox whose agent died "failed", clean up its kernel objects,
 * keep its record (listed as failed until deleted), audit it. */
void pd_manager_agent_died(struct pd_server *srv, struct pd_srv_sandbox *s);
/* CLOCK_BOOTTIME in ms. */
uint64_t pd_boot_ms(void);
