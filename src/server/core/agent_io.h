/* Talking to a sandbox's agent from a route (agent_io.c); the calls
 * themselves are agentc.c's. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/client.h"
#include "server/core/server.h"

/* pd_agentc_connect, retried for a while when the agent turns connections
 * away (it serves a bounded number at once). */
int pd_route_agent(struct pd_srv_sandbox *s, struct pd_client *c, struct pd_error *err);
/* Did a call on a pipelined connection (pd_agentc_connect_pipelined) fail
 * before the agent took anything (k: its -errno)? Then nothing of it ran,
 * and it may be retried on a pd_route_agent connection. */
bool pd_route_agent_untouched(const struct pd_client *c, int k);
/* Connect and SPAWN with the HELLO pipelined (a round trip less); falls
 * back to pd_route_agent's retries when the agent took nothing. */
int pd_route_agent_spawn(struct pd_srv_sandbox *s, struct pd_client *c, const struct pd_spawn_opts *o,
                         uint32_t *pid, struct pd_error *err);
/* Make c's waits also give up when the sandbox is deleted or the server
 * stops (-ESHUTDOWN), or the HTTP client mc has gone (-ECONNABORTED; mc
 * may be NULL). */
void pd_route_watch(struct pd_client *c, struct pd_server *srv, struct MHD_Connection *mc,
                    struct pd_srv_sandbox *s);

/* The sandbox's users: "user" (default) or "root": uid, gid, home, name.
 * false if unknown. */
struct pd_route_user {
        uint32_t uid, gid;
        const char *home, *name;
        uint32_t groups[3];
        unsigned n_groups;
};
bool pd_route_user_parse(const char *name, struct pd_route_user *u);

/* An agent's ENTRY's name, path and link target as JSON strings, set in o
 * under "name", "path" and link_key, in the agent's order (a string that
 * is not UTF-8 becomes ""). */
void pd_route_entry_names(const struct pd_entry *e, json_t *o, const char *link_key);
