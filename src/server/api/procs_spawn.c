/* Spawn options from the JSON body of POST /processes and POST /exec:
 * argv (list or shell string), env (defaults, the sandbox's, the request's),
 * user, cwd, pty, stdin, tag, timeout; the environment E2B's Start shares;
 * and the answers to a failed SPAWN. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/procs.h"
#include "lib/util.h"

#define ENV_VALUE_MAX (1u << 17)

void pd_spawn_req_free(struct pd_spawn_req *sr)
{
        pd_strv_free(&sr->args);
        pd_strv_free(&sr->env);
        json_decref(sr->argv);
        sr->argv = NULL;
}

/* Strings from JSON must not carry NUL bytes (jansson keeps them with
 * json_string_length when a client sends \u0000). */
bool pd_json_clean_str(const json_t *j, size_t max)
{
        if (!json_is_string(j))
                return false;
        size_t len = json_string_length(j);
        return len <= max && strlen(json_string_value(j)) == len;
}

static bool env_key_ok(const char *k)
{
        return *k && !strchr(k, '=') && strlen(k) < 4096;
}

void pd_spawn_env_sandbox(json_t *env, const struct pd_srv_sandbox *s)
{
        const char *key;
        json_t *v;
        if (json_is_object(s->env))
                json_object_foreach(s->env, key, v)
                        if (env_key_ok(key) && pd_json_clean_str(v, ENV_VALUE_MAX))
                                json_object_set(env, key, v);
}

json_t *pd_spawn_env_base(const struct pd_srv_sandbox *s, const struct pd_route_user *u, bool pty)
{
        json_t *env = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}",
                                "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                "HOME", u->home, "USER", u->name, "LOGNAME", u->name,
                                "SHELL", "/bin/bash", "LANG", "C.UTF-8", "HOSTNAME", "paddock");
        if (pty)
                json_object_set_new(env, "TERM", json_string("xterm-256color"));
        pd_spawn_env_sandbox(env, s);
        return env;
}

int pd_spawn_env_merge(json_t *env, json_t *req, char *msg, size_t msgsz)
{
        const char *key;
        json_t *v;
        json_object_foreach(req, key, v) {
                if (!env_key_ok(key) || !pd_json_clean_str(v, ENV_VALUE_MAX)) {
                        snprintf(msg, msgsz, "env '%.64s': names must be non-empty without '=', "
                                 "values strings without NUL bytes", key);
                        return -EINVAL;
                }
                json_object_set(env, key, v);
        }
        return 0;
}

int pd_spawn_env_list(json_t *env, struct pd_strv *out)
{
        const char *key;
        json_t *v;
        json_object_foreach(env, key, v)
                if (pd_strv_add_kv(out, key, json_string_value(v)) < 0)
                        return -ENOMEM;
        return 0;
}

int pd_spawn_build(struct pd_srv_sandbox *s, json_t *body, bool exec, struct pd_spawn_req *sr,
                   char *msg, size_t msgsz)
{
        static const char *const allowed[] = { "cmd", "env", "cwd", "user", "pty", "stdin", "tag", "timeout", NULL };
        memset(sr, 0, sizeof *sr);
        struct pd_spawn_opts *o = &sr->opts;
        const char *key;
        json_t *v;
        json_object_foreach(body, key, v) {
                bool ok = exec && !strcmp(key, "stdin_data");
                for (size_t i = 0; allowed[i] && !ok; i++)
                        ok = !strcmp(key, allowed[i]);
                if (!ok) {
                        snprintf(msg, msgsz, "unknown field '%s'", key);
                        return -EINVAL;
                }
        }
        /* user first: cwd and HOME depend on it */
        json_t *ju = json_object_get(body, "user");
        if (ju && !json_is_null(ju) &&
            (!json_is_string(ju) || !pd_route_user_parse(json_string_value(ju), &sr->user))) {
                snprintf(msg, msgsz, "user must be \"user\" or \"root\"");
                return -EINVAL;
        }
        if (!ju || json_is_null(ju))
                pd_route_user_parse(NULL, &sr->user);

        json_t *cmd = json_object_get(body, "cmd");
        sr->argv = json_array();
        if (json_is_string(cmd)) {
                if (!pd_json_clean_str(cmd, 1u << 19) || !json_string_length(cmd)) {
                        snprintf(msg, msgsz, "cmd must be a non-empty string without NUL bytes");
                        return -EINVAL;
                }
                const char *sh[] = { "/bin/bash", "-l", "-c" };
                for (size_t i = 0; i < PD_ARRAY_SIZE(sh); i++)
                        json_array_append_new(sr->argv, json_string(sh[i]));
                json_array_append(sr->argv, cmd);
        } else if (json_is_array(cmd) && json_array_size(cmd) > 0 && json_array_size(cmd) <= 4096) {
                size_t i;
                json_t *a;
                json_array_foreach(cmd, i, a) {
                        if (!pd_json_clean_str(a, 1u << 19) || (i == 0 && !json_string_length(a))) {
                                snprintf(msg, msgsz, "cmd[%zu] must be a %sstring without NUL bytes", i,
                                         i == 0 ? "non-empty " : "");
                                return -EINVAL;
                        }
                        json_array_append(sr->argv, a);
                }
        } else {
                snprintf(msg, msgsz, "cmd must be an argv list of strings or a shell string");
                return -EINVAL;
        }
        size_t i;
        json_t *a;
        json_array_foreach(sr->argv, i, a)
                if (pd_strv_add(&sr->args, json_string_value(a)) < 0)
                        goto nomem;

        json_t *jpty = json_object_get(body, "pty");
        uint32_t rows = 0, cols = 0;
        if (jpty && !json_is_null(jpty) && !json_is_false(jpty)) {
                if (json_is_true(jpty)) {
                        rows = 24;
                        cols = 80;
                } else {
                        json_t *jr = json_object_get(jpty, "rows"), *jc = json_object_get(jpty, "cols");
                        if (!json_is_object(jpty) || !json_is_integer(jr) || !json_is_integer(jc) ||
                            json_integer_value(jr) < 1 || json_integer_value(jr) > 65535 ||
                            json_integer_value(jc) < 1 || json_integer_value(jc) > 65535) {
                                snprintf(msg, msgsz, "pty must be {\"rows\": 1..65535, \"cols\": 1..65535}");
                                return -EINVAL;
                        }
                        rows = (uint32_t)json_integer_value(jr);
                        cols = (uint32_t)json_integer_value(jc);
                }
                sr->pty = true;
        }

        /* env: defaults, then the sandbox's, then the request's (later wins) */
        json_t *jenv = json_object_get(body, "env");
        if (jenv && !json_is_null(jenv) && !json_is_object(jenv)) {
                snprintf(msg, msgsz, "env must be an object of strings");
                return -EINVAL;
        }
        json_t *env = pd_spawn_env_base(s, &sr->user, sr->pty);
        if (json_is_object(jenv) && pd_spawn_env_merge(env, jenv, msg, msgsz) < 0) {
                json_decref(env);
                return -EINVAL;
        }
        int k = pd_spawn_env_list(env, &sr->env);
        json_decref(env);
        if (k < 0)
                goto nomem;

        json_t *jcwd = json_object_get(body, "cwd");
        if (jcwd && !json_is_null(jcwd)) {
                if (!pd_json_clean_str(jcwd, PATH_MAX - 1) || !json_string_length(jcwd)) {
                        snprintf(msg, msgsz, "cwd must be a path without NUL bytes");
                        return -EINVAL;
                }
                const char *c = json_string_value(jcwd);
                int n = c[0] == '/' ? snprintf(sr->cwd, sizeof sr->cwd, "%s", c)
                                    : snprintf(sr->cwd, sizeof sr->cwd, "%s/%s", sr->user.home, c);
                if (n < 0 || (size_t)n >= sizeof sr->cwd) {
                        snprintf(msg, msgsz, "cwd too long");
                        return -EINVAL;
                }
        } else {
                snprintf(sr->cwd, sizeof sr->cwd, "%s", sr->user.home);
        }
        o->cwd = sr->cwd;
        o->uid = sr->user.uid;
        o->gid = sr->user.gid;
        o->groups = sr->user.groups;
        o->n_groups = sr->user.n_groups;
        o->pty_rows = (uint16_t)rows;
        o->pty_cols = (uint16_t)cols;

        json_t *jin = json_object_get(body, "stdin");
        if (jin && !json_is_null(jin) && !json_is_boolean(jin)) {
                snprintf(msg, msgsz, "stdin must be true or false");
                return -EINVAL;
        }
        /* native: stdin is the caller's only when asked (pd_spawn_opts) */
        o->stdin_open = json_is_true(jin) || (exec && json_object_get(body, "stdin_data") &&
                                              !json_is_null(json_object_get(body, "stdin_data")));

        json_t *jtag = json_object_get(body, "tag");
        if (jtag && !json_is_null(jtag)) {
                if (!pd_json_clean_str(jtag, 255)) {
                        snprintf(msg, msgsz, "tag must be a string of at most 255 bytes");
                        return -EINVAL;
                }
                sr->tag = o->tag = json_string_value(jtag);
        }

        json_t *jto = json_object_get(body, "timeout");
        if (jto && !json_is_null(jto)) {
                double t = json_number_value(jto);
                if (!json_is_number(jto) || t <= 0 || t > 365.0 * 86400) {
                        snprintf(msg, msgsz, "timeout must be a positive number of seconds");
                        return -EINVAL;
                }
                uint64_t ms = (uint64_t)(t * 1000.0);
                o->timeout_ms = ms ? ms : 1;
        }
        o->argv = (const char *const *)sr->args.v;
        o->argc = sr->args.n;
        o->env = (const char *const *)sr->env.v;
        o->envc = sr->env.n;
        /* too large for one request is the caller's 400 */
        if (pd_spawn_check(o) < 0) {
                snprintf(msg, msgsz, "request too large for one SPAWN");
                return -EINVAL;
        }
        return 0;
nomem:
        snprintf(msg, msgsz, "out of memory");
        return -ENOMEM;
}

enum MHD_Result pd_spawn_reply_error(struct pd_req *r, int k, const struct pd_error *err,
                                     const struct pd_spawn_req *sr)
{
        const char *cmd0 = json_string_value(json_array_get(sr->argv, 0));
        bool exec_fail = !strncmp(err->msg, "cannot execute", 14);
        if (k == -ENOENT && exec_fail)
                return pd_reply_error(r, 400, "bad_request", "command not found: '%s'", cmd0);
        if ((k == -EACCES || k == -ENOEXEC) && exec_fail)
                return pd_reply_error(r, 400, "bad_request", "%s", err->msg);
        if (!strncmp(err->msg, "cannot change directory", 23))
                return pd_reply_error(r, 400, "bad_request", "%s", err->msg);
        if (k == -EINVAL)
                return pd_reply_error(r, 400, "bad_request", "%s", err->msg);
        return pd_route_reply_agent_error(r, k, err);
}

void pd_spawn_audit(struct pd_req *r, struct pd_srv_sandbox *s, const struct pd_spawn_req *sr,
                    uint32_t pid, const char *via)
{
        pd_audit(r->srv, s->id, r->key.id, "process.start",
                 json_pack("{s:O,s:s,s:s,s:i,s:b,s:s}", "argv", sr->argv, "user", sr->user.name,
                           "cwd", sr->cwd, "pid", (int)pid, "pty", sr->pty, "via", via));
}
