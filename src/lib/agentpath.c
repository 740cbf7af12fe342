#include "lib/agentpath.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
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
        /* closes the "(set PADDOCK_AGENT" of the not-found message only */
        if (r == -ENOENT && err && !getenv("PADDOCK_AGENT"))
                strncat(err->msg, ")", sizeof err->msg - strlen(err->msg) - 1);
        return r;
}

int pd_agent_pin(int state_dirfd, const char *state_dir, struct pd_error *err)
{
        char src[PATH_MAX], dst[PATH_MAX + 32];
        int r = pd_agent_path(src, sizeof src, err);
        if (r < 0)
                return r;
        if (mkdirat(state_dirfd, "agent", 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s/agent'", state_dir);
        int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return pd_error_set(err, errno, "open agent '%s'", src);
        int out = openat(state_dirfd, "agent/paddock-agent.new", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
        if (out < 0) {
                r = pd_error_set(err, errno, "create '%s/agent/paddock-agent.new'", state_dir);
                close(in);
                return r;
        }
        struct stat st;
        r = fstat(in, &st) < 0 ? -errno : 0;
        for (off_t done = 0; r == 0 && done < st.st_size;) {
                ssize_t n = sendfile(out, in, NULL, (size_t)(st.st_size - done));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        r = n < 0 ? -errno : -EIO;
                else
                        done += n;
        }
        if (r == 0 && (fchmod(out, 0755) < 0 || fsync(out) < 0))
                r = -errno;
        close(in);
        if (close(out) < 0 && r == 0)
                r = -errno;
        if (r == 0 && renameat(state_dirfd, "agent/paddock-agent.new", state_dirfd, "agent/paddock-agent") < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(state_dirfd, "agent/paddock-agent.new", 0);
                return pd_error_set(err, -r, "copy agent '%s' into '%s/agent'", src, state_dir);
        }
        snprintf(dst, sizeof dst, "%s/agent/paddock-agent", state_dir);
        if (setenv("PADDOCK_AGENT", dst, 1) < 0)
                return pd_error_set(err, errno, "setenv PADDOCK_AGENT");
        return 0;
}
