/* What an image template asks of the processes the APIs start in its
 * sandboxes (docs/templates.md "What runs"): its Env under the request's,
 * its WorkingDir when the request names no cwd, its User when the request
 * names no user. The same rules `paddock run` follows (src/cli/run.c), for
 * POST /processes, POST /exec and E2B's envd (Start, and the user files
 * are read and written as). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/template.h"
#include "server/api/procs.h"
#include "server/core/log.h"

int pd_spawn_image_load(struct pd_server *srv, const struct pd_srv_sandbox *s, struct pd_template_run *img)
{
        struct pd_error err = { 0 };
        /* base, a host directory, a snapshot of base: nothing to read
         * (pd_template_run_defaults answers 0 with img empty) */
        if (pd_template_run_defaults(&srv->state, s->template_name, img, &err) < 0) {
                /* the template was pulled by this server's state dir and is
                 * in use, so its config.json cannot go; a damaged one leaves
                 * paddock's defaults rather than refusing every command */
                pd_log("warn", "sandbox=%s template=%s image defaults unreadable, using paddock's: %s", s->id,
                       s->template_name, err.msg);
                memset(img, 0, sizeof *img);
        }
        return 0;
}

bool pd_spawn_user_parse(const struct pd_template_run *img, const char *name, struct pd_route_user *u)
{
        if (img && img->has_user && (!name || !strcmp(name, img->user))) {
                *u = (struct pd_route_user){ img->uid, img->gid, img->home, img->user, { img->gid }, 1 };
                return true;
        }
        return pd_route_user_parse(name, u);
}

const char *pd_spawn_default_cwd(const struct pd_template_run *img, const struct pd_route_user *u)
{
        return img && img->workdir ? img->workdir : u->home;
}

json_t *pd_spawn_env_image(const struct pd_srv_sandbox *s, const struct pd_route_user *u, bool pty,
                           const struct pd_template_run *img)
{
        json_t *env = pd_spawn_env_base(s, u, pty);
        /* the image's Env over paddock's defaults, under the sandbox's own
         * env (create's env / envVars) and the request's */
        for (unsigned i = 0; img && i < img->n_env; i++) {
                const char *eq = strchr(img->env[i], '=');
                if (!eq || eq == img->env[i])
                        continue;
                char *k = strndup(img->env[i], (size_t)(eq - img->env[i]));
                if (k)
                        json_object_set_new(env, k, json_string(eq + 1));
                free(k);
        }
        if (img && img->n_env)
                pd_spawn_env_sandbox(env, s);
        return env;
}
