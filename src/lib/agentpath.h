#pragma once
#include <stddef.h>

#include "error.h"

/* Where paddock-agent is: $PADDOCK_AGENT, else beside the running binary
 * (build tree: ../agent/paddock-agent), else the installed libexec path. */
int pd_agent_path(char *buf, size_t size, struct pd_error *err);
