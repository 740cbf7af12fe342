/* Start commands at create (start_cmd.h). Every create runs it, pooled or
 * not: a pooled sandbox was made before its owner, env and network were
 * known, and the start command runs with the create's env (as E2B's does
 * with the template's). A fork's copy does not: it has the state its source
 * had (the source ran the start command at its own create). */
#include "server/core/start_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/start.h"
#include "lib/template.h"
#include "server/core/log.h"
#include "server/core/server.h"

int pd_mgr_start_cmd(struct pd_server *srv, struct pd_sandbox *sb, const struct pd_create_req *req,
                     struct pd_error *err)
{
        struct pd_template_run run;
        if (pd_template_run_defaults(&srv->state, req->template_name, &run, err) < 0)
                return pd_error_prefix(err, "template '%s'", req->template_name);
        if (!run.start_cmd) {
                pd_template_run_free(&run);
                return 0;
        }
        struct pd_strv env = { 0 };
        const char *user = run.has_user ? run.user : "user";
        const char *home = run.has_user ? run.home : "/home/user";
        uint32_t uid = run.has_user ? run.uid : 1000, gid = run.has_user ? run.gid : 1000;
        (void)pd_strv_add(&env, uid ? "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
                                    : "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        (void)pd_strv_add_kv(&env, "HOME", home);
        (void)pd_strv_add_kv(&env, "USER", user);
        (void)pd_strv_add_kv(&env, "LOGNAME", user);
        (void)pd_strv_add(&env, "LANG=C.UTF-8");
        /* the template's Env, then the create's: the agent takes the first
         * of a name, so the later ones go first */
        struct pd_strv mine = { 0 };
        const char *k;
        json_t *v;
        json_object_foreach(req->env, k, v) if (json_is_string(v)) (void)pd_strv_add_kv(&mine, k, json_string_value(v));
        for (unsigned i = 0; i < run.n_env; i++)
                (void)pd_strv_add(&mine, run.env[i]);
        struct pd_strv all = { 0 };
        for (size_t i = 0; i < mine.n; i++)
                (void)pd_strv_add(&all, mine.v[i]);
        for (size_t i = 0; i < env.n; i++)
                (void)pd_strv_add(&all, env.v[i]);
        struct pd_template_start ts = { .start = run.start_cmd, .ready = run.ready_cmd, .uid = uid, .gid = gid,
                                        .cwd = run.workdir ? run.workdir : home,
                                        .env = (const char *const *)all.v, .n_env = all.n,
                                        .timeout_ms = run.ready_timeout_ms };
        uint32_t pid = 0;
        int r = pd_template_start(sb, &ts, &pid, err);
        if (r < 0)
                pd_error_prefix(err, "template '%s': its start command", req->template_name);
        else
                pd_log("info", "sandbox=%s template=%s start command running pid=%u", sb->id, req->template_name,
                       pid);
        pd_strv_free(&all);
        pd_strv_free(&mine);
        pd_strv_free(&env);
        pd_template_run_free(&run);
        return r;
}
