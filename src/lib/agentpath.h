#pragma once
#include <stddef.h>

#include "lib/error.h"

/* Where a paddock helper binary is: $<env_var> if set, else beside the
 * running binary (build tree: also ../agent/, ../), else the installed
 * libexec directory. */
int pd_helper_path(const char *name, const char *env_var, char *buf, size_t size, struct pd_error *err);
/* paddock-agent ($PADDOCK_AGENT). */
int pd_agent_path(char *buf, size_t size, struct pd_error *err);
