/* Talking to a sandbox's agent from a route (agent_io.c); the calls
 * themselves are agentc.c's. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/core/server.h"

/* pd_agentc_connect, retried for a while when the agent turns connections
 * away (it serves a bounded number at once). */
int pd_route_agent(struct pd_srv_sandbox *s, struct pd_conn *c, struct pd_error *err);
/* Like pd_conn_wait, but also gives up when the sandbox is deleted
 * or the server stops (-ESHUTDOWN) or the HTTP client has gone
 * (-ECONNABORTED; mc may be NULL).
 * timeout_ms < 0: no deadline. */
int pd_route_wait(struct pd_server *srv, struct pd_conn *c, struct MHD_Connection *mc,
                  struct pd_srv_sandbox *s, struct pd_frame_hdr *h, const uint8_t **payload, int timeout_ms);
/* Wait (pd_route_wait) for the REPLY or ERROR of request id on c, other
 * frames skipped: 0, or the ERROR's errno with its message. */
int pd_agent_wait_reply(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_conn *c, uint32_t id,
                        int timeout_ms, struct pd_error *err);

/* The sandbox's users: "user" (default) or "root": uid, gid, home, name.
 * false if unknown. */
struct pd_route_user {
        uint32_t uid, gid;
        const char *home, *name;
        uint32_t groups[3];
        unsigned n_groups;
};
bool pd_route_user_parse(const char *name, struct pd_route_user *u);

/* An agent's ENTRY (a FILE_* reply's file or directory entry), decoded:
 * the numbers into *e; the name, path and link target, as JSON strings,
 * set in o under "name", "path" and link_key, in the agent's order. */
struct pd_file_entry {
        uint32_t ftype, mode, uid, gid;
        uint64_t size, mtime_ns;
};
void pd_file_entry_decode(const uint8_t *p, size_t len, json_t *o, const char *link_key, struct pd_file_entry *e);
