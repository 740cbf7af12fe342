/* Idle upstream connections of the port relay (ports_cache.c): an agent
 * connection with its tunnel to a service that answered a GET in full
 * with keep-alive, kept briefly for the next GET to the same sandbox and
 * port (no agent connect, no TCP connect and accept inside the sandbox). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "proto/client.h"

struct pd_srv_sandbox;

/* Keep cl (taken over; closed if there is no room or it cannot be kept)
 * for tunnel tid to port of s. */
void pd_ports_cache_put(const struct pd_srv_sandbox *s, unsigned port, struct pd_client *cl, uint32_t tid);
/* An idle connection to port of s into *out (its tunnel in *tid) that has
 * received nothing since it was kept (no close, no stray bytes); false if
 * none. The caller checked the request's right to s beforehand. */
bool pd_ports_cache_take(const struct pd_srv_sandbox *s, unsigned port, struct pd_client *out, uint32_t *tid);
/* Close every connection kept for s now (s paused or gone): the
 * lifecycle's stop hook (core/sb_hooks.h), registered by routes.c. */
void pd_ports_cache_drop_sandbox(const struct pd_srv_sandbox *s);
