#include "agentpath.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PD_LIBEXECDIR
#define PD_LIBEXECDIR "/usr/local/libexec/paddock"
#endif

int pd_agent_path(char *buf, size_t size, struct pd_error *err)
{
        const char *env = getenv("PADDOCK_AGENT");
        if (env && *env) {
                if (access(env, X_OK) < 0)
                        return pd_error_set(err, errno, "PADDOCK_AGENT='%s'", env);
                snprintf(buf, size, "%s", env);
                return 0;
        }
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
                exe[n] = '\0';
                char *dir = dirname(exe);
                static const char *const rel[] = { "paddock-agent", "agent/paddock-agent",
                                                   "../libexec/paddock/paddock-agent" };
                for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
                        snprintf(buf, size, "%s/%s", dir, rel[i]);
                        if (access(buf, X_OK) == 0)
                                return 0;
                }
        }
        snprintf(buf, size, "%s/paddock-agent", PD_LIBEXECDIR);
        if (access(buf, X_OK) == 0)
                return 0;
        return pd_error_setx(err, ENOENT,
                             "paddock-agent not found beside the paddock binary or in %s (set PADDOCK_AGENT)",
                             PD_LIBEXECDIR);
}
