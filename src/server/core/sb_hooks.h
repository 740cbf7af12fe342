/* Hooks on a sandbox that stops being served: parts of the server outside
 * core/ (api/'s port relay keeps idle connections to a sandbox's agent)
 * register a callback here, and the lifecycle calls it when a transition
 * takes the sandbox out of the running state (paused, deleted, timed out,
 * failed). core/ never includes api/: the call goes through this table. */
#pragma once

struct pd_srv_sandbox;

typedef void (*pd_sb_stop_hook)(const struct pd_srv_sandbox *s);

/* Register fn (at start-up, before any sandbox exists); -ENOSPC when the
 * table is full. Registering the same fn twice registers it once. */
int pd_sb_hooks_register(pd_sb_stop_hook fn);
/* Call every registered hook for s (s->lock held by the caller: a hook
 * must not take it, nor the server's lock). */
void pd_sb_hooks_stopped(const struct pd_srv_sandbox *s);
