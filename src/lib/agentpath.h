#pragma once
#include <stddef.h>

#include "lib/error.h"

/* Where a paddock helper binary is: $<env_var> if set, else beside the
 * running binary (build tree: also ../agent/, ../), else the installed
 * libexec directory. */
int pd_helper_path(const char *name, const char *env_var, char *buf, size_t size, struct pd_error *err);
/* paddock-agent ($PADDOCK_AGENT). */
int pd_agent_path(char *buf, size_t size, struct pd_error *err);
/* For a long-running server: copy the agent it was started with into
 * <state dir>/agent/paddock-agent (temp + rename, so sandboxes still
 * running the previous copy keep it) and point $PADDOCK_AGENT at the copy.
 * Rebuilding or upgrading the original then cannot break creates: the
 * linker leaves no executable file at that path while it writes one, and
 * an agent built from other sources may not speak this server's protocol.
 * Call before any thread starts (setenv). */
int pd_agent_pin(int state_dirfd, const char *state_dir, struct pd_error *err);
