/* Warm pools (pool.c), private to the manager (manager.c). Locking: the
 * pool has its own lock, taken only in pool.c and with no other lock taken
 * under it. */
#pragma once
#include "server/core/manager.h"

struct pd_pool;

/* Allocate (no thread yet); NULL when out of memory. */
struct pd_pool *pd_pool_new(struct pd_server *srv);
/* Register the default class ("base") if cfg.pool_size > 0, start the
 * filler thread. */
int pd_pool_start(struct pd_pool *p, struct pd_error *err);
/* Wake the filler and make it stop (first step of shutdown). */
void pd_pool_begin_stop(struct pd_pool *p);
/* Join the filler, destroy every ready sandbox. */
void pd_pool_stop(struct pd_pool *p);
/* A ready sandbox of this class (alive), or NULL; registers the class
 * otherwise, while there is room, so the filler starts on it. A class is
 * the template, the limits, prep (NULL: none) and, with prep only, the
 * network policy (net: JSON, NULL = none; without prep a sandbox with a
 * network is never pooled, the caller does not ask). */
struct pd_sandbox *pd_pool_take(struct pd_pool *p, const struct pd_spec *spec, const char *tpl,
                                const struct pd_pool_prep *prep, const json_t *net);
/* The tag of the warm-up command a pooled microvm ran before it was handed
 * out (hidden from process lists). */
#define PD_POOL_WARMUP "paddock-pool-warmup"
/* ... and of the one the microvm template ran before it was saved, which
 * every clone inherits (src/tiers/microvm.c). */
#define PD_TEMPLATE_WARMUP "paddock-template-warmup"

/* Every class (at most max) with its ready count. */
size_t pd_pool_ready(struct pd_pool *p, struct pd_pool_count *out, size_t max);
/* Is the sandbox's agent still running? (its pidfd polls readable once it
 * has exited) */
bool pd_agent_alive(struct pd_sandbox *sb);
