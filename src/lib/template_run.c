/* An image template's run defaults (template.h): read from its
 * config.json, written at pull or build time by src/image/tpl.c. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/template.h"
#include "lib/util.h"

static char **strv(json_t *a, unsigned *n)
{
        size_t len = json_array_size(a);
        char **v = calloc(len + 1, sizeof *v);
        if (!v)
                return NULL;
        unsigned k = 0;
        for (size_t i = 0; i < len; i++) {
                const char *s = json_string_value(json_array_get(a, i));
                if (s && (v[k] = strdup(s)))
                        k++;
        }
        if (n)
                *n = k;
        return v;
}

int pd_template_run_defaults(struct pd_state *st, const char *name, struct pd_template_run *out,
                             struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        if (!name || pd_template_name_check(name) < 0)
                return 0;
        /* the nearest config.json down the stack: a snapshot a recipe
         * built (image/build_live.c) has one, an image template has one */
        char cur[65], path[PATH_MAX];
        snprintf(cur, sizeof cur, "%s", name);
        for (unsigned depth = 0; depth <= PD_MAX_STACK && pd_snapshot_is(st, cur) &&
                                 !pd_template_is_built_snapshot(st, cur); depth++)
                if (pd_snapshot_parent(st, cur, cur) < 0)
                        return 0;
        if (!pd_template_is_image(st, cur) && !pd_template_is_built_snapshot(st, cur))
                return 0;
        snprintf(path, sizeof path, "%s/templates/%s/config.json", st->dir, cur);
        json_error_t je;
        json_t *doc = json_load_file(path, 0, &je);
        if (!doc)
                return pd_error_setx(err, EINVAL, "template '%s': its config.json: %s", cur, je.text);
        json_t *cfg = json_object_get(doc, "config"), *run = json_object_get(doc, "run");
        out->env = strv(json_object_get(cfg, "Env"), &out->n_env);
        const char *wd = json_string_value(json_object_get(cfg, "WorkingDir"));
        if (wd && *wd)
                out->workdir = strdup(wd);
        if (json_is_object(run)) {
                out->has_user = true;
                out->user = strdup(json_string_value(json_object_get(run, "name")) ?: "user");
                out->uid = (uint32_t)json_integer_value(json_object_get(run, "uid"));
                out->gid = (uint32_t)json_integer_value(json_object_get(run, "gid"));
                out->home = strdup(json_string_value(json_object_get(run, "home")) ?: "/");
        }
        json_t *cmd = json_array();
        json_array_extend(cmd, json_object_get(cfg, "Entrypoint"));
        json_array_extend(cmd, json_object_get(cfg, "Cmd"));
        if (json_array_size(cmd))
                out->argv = strv(cmd, NULL);
        json_decref(cmd);
        json_t *start = json_object_get(doc, "start");
        const char *sc = json_string_value(json_object_get(start, "cmd"));
        const char *rc = json_string_value(json_object_get(start, "ready"));
        if (sc && *sc)
                out->start_cmd = strdup(sc);
        if (sc && *sc && rc && *rc)
                out->ready_cmd = strdup(rc);
        json_int_t to = json_integer_value(json_object_get(start, "timeout"));
        out->ready_timeout_ms = to >= 1 && to <= 600 ? (int)to * 1000 : 0;
        json_decref(doc);
        return 0;
}

void pd_template_run_free(struct pd_template_run *r)
{
        for (unsigned i = 0; r->env && i < r->n_env; i++)
                free(r->env[i]);
        free(r->env);
        for (char **a = r->argv; a && *a; a++)
                free(*a);
        free(r->argv);
        free(r->workdir);
        free(r->user);
        free(r->home);
        free(r->start_cmd);
        free(r->ready_cmd);
        memset(r, 0, sizeof *r);
}

int pd_template_is_built_snapshot(struct pd_state *st, const char *name)
{
        if (!name || pd_template_name_check(name) < 0 || !pd_snapshot_is(st, name))
                return 0;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/templates/%s/config.json", st->dir, name);
        return access(p, F_OK) == 0;
}
