#include "lib/agentpath.h"

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

int pd_helper_path(const char *name, const char *env_var, char *buf, size_t size, struct pd_error *err)
{
        const char *env = env_var ? getenv(env_var) : NULL;
        if (env && *env) {
                if (access(env, X_OK) < 0)
                        return pd_error_set(err, errno, "%s='%s'", env_var, env);
                snprintf(buf, size, "%s", env);
                return 0;
        }
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
                exe[n] = '\0';
                char *dir = dirname(exe);
                static const char *const rel[] = { "", "agent/", "net/", "../", "../libexec/paddock/" };
                for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
                        snprintf(buf, size, "%s/%s%s", dir, rel[i], name);
                        if (access(buf, X_OK) == 0)
                                return 0;
                }
        }
        snprintf(buf, size, "%s/%s", PD_LIBEXECDIR, name);
        if (access(buf, X_OK) == 0)
                return 0;
        return pd_error_setx(err, ENOENT, "%s not found beside the paddock binary or in %s%s%s", name,
                             PD_LIBEXECDIR, env_var ? " (set " : "", env_var ? env_var : "");
}

int pd_agent_path(char *buf, size_t size, struct pd_error *err)
{
        int r = pd_helper_path("paddock-agent", "PADDOCK_AGENT", buf, size, err);
        if (r < 0 && err)
                strncat(err->msg, ")", sizeof err->msg - strlen(err->msg) - 1);
        return r;
}
