/* /api/v1/templates (docs/api.md "Templates", docs/templates.md
 * "Templates over HTTP"): list, create from an image reference or a
 * recipe (JSON), create from a recipe with its context (a tar upload),
 * inspect, follow the build log, delete. The builds themselves and the
 * rules of who sees what are tpl_builds.c's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/image.h"
#include "lib/template.h"
#include "lib/util.h"
#include "server/api/api.h"
#include "server/api/templates.h"
#include "server/core/log.h"
#include "server/core/store.h"

#define LOG_BLOCK 16384
#define LOG_RECHECK_MS 1000
#define MAX_BUILD_ARGS 64

/* ---- list, inspect ---- */

static bool template_there(struct pd_server *srv, const char *name)
{
        char p[PATH_MAX];
        struct stat st;
        snprintf(p, sizeof p, "%s/templates/%s/rootfs", srv->state.dir, name);
        return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* What the API says of one template: name, shared, status (builds). */
static json_t *entry(struct pd_server *srv, const char *name, const char *owner, json_t *created)
{
        char status[16], error[512];
        pd_tpl_status(srv, name, status, error, sizeof error);
        json_t *o = json_pack("{s:s, s:O, s:b, s:b}", "name", name, "created_at", created ? created : json_null(),
                              "builtin", 0, "shared", !owner[0]);
        if (status[0])
                json_object_set_new(o, "status", json_string(status));
        else if (template_there(srv, name))
                json_object_set_new(o, "status", json_string("ready"));
        if (error[0])
                json_object_set_new(o, "error", json_string(error));
        return o;
}

static enum MHD_Result list_templates(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        json_t *rows = NULL;
        struct pd_error err = { 0 };
        if (pd_store_template_list(r->srv->store, &rows, &err) < 0)
                return pd_reply_errno(r, -EIO, err.msg);
        json_t *arr = json_array(), *seen = json_object();
        char path[PATH_MAX + 64];
        struct stat st;
        snprintf(path, sizeof path, "%s/templates/base/version", r->srv->state.dir);
        json_t *created = json_null();
        if (stat(path, &st) == 0) {
                char ts[32];
                pd_rfc3339_ms((uint64_t)st.st_mtim.tv_sec * 1000u + (uint64_t)st.st_mtim.tv_nsec / 1000000u, ts);
                created = json_string(ts);
        }
        json_array_append_new(arr, json_pack("{s:s, s:o, s:b, s:b, s:s}", "name", "base", "created_at", created,
                                             "builtin", 1, "shared", 1, "status", "ready"));
        size_t i;
        json_t *row;
        char owner[40];
        /* registered templates (the store's rows) that are there and the key
         * may see, then the key's builds not registered (yet, or failed) */
        json_array_foreach(rows, i, row) {
                const char *name = json_string_value(json_object_get(row, "name"));
                if (!name || !template_there(r->srv, name) || !pd_tpl_visible(r->srv, name, r->key.id, owner))
                        continue;
                json_array_append_new(arr, entry(r->srv, name, owner, json_object_get(row, "created_at")));
                json_object_set_new(seen, name, json_true());
        }
        json_decref(rows);
        snprintf(path, sizeof path, "%s/template-builds", r->srv->state.dir);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (de->d_name[0] == '.' || json_object_get(seen, de->d_name) ||
                    pd_template_name_check(de->d_name) < 0 || !pd_tpl_visible(r->srv, de->d_name, r->key.id, owner) ||
                    !owner[0])
                        continue;
                json_array_append_new(arr, entry(r->srv, de->d_name, owner, NULL));
        }
        if (d)
                closedir(d);
        json_decref(seen);
        return pd_reply_json(r, 200, json_pack("{s:o}", "templates", arr));
}

/* The name in the path, checked and visible: false with a reply queued. */
static bool path_name(struct pd_req *r, char owner[40], enum MHD_Result *ret)
{
        const char *name = r->params[0];
        struct pd_error err = { 0 };
        if (pd_template_name_check(name) < 0) {
                *ret = pd_reply_error(r, 400, "bad_request", "invalid template name (names are [a-z0-9-]{1,64})");
                return false;
        }
        char status[16];
        pd_tpl_status(r->srv, name, status, NULL, 0);
        /* snapshots are the key's own and have their routes (/snapshots):
         * here they are unknown, whoever asks */
        bool known = !strcmp(name, "base") || status[0] ||
                     (template_there(r->srv, name) && (!pd_snapshot_is(&r->srv->state, name) ||
                                                        pd_template_is_built_snapshot(&r->srv->state, name)));
        if (!known || !pd_tpl_visible(r->srv, name, r->key.id, owner)) {
                (void)err;
                *ret = pd_reply_error(r, 404, "not_found", "unknown template '%s'", name);
                return false;
        }
        return true;
}

static enum MHD_Result get_template(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        char owner[40];
        enum MHD_Result ret;
        if (!path_name(r, owner, &ret))
                return ret;
        const char *name = r->params[0];
        if (!strcmp(name, "base"))
                return pd_reply_json(r, 200, json_pack("{s:s, s:b, s:b, s:s}", "name", "base", "builtin", 1, "shared",
                                                       1, "status", "ready"));
        json_t *o = entry(r->srv, name, owner, NULL);
        json_t *detail = NULL;
        struct pd_error err = { 0 };
        if ((pd_template_is_image(&r->srv->state, name) || pd_template_is_built_snapshot(&r->srv->state, name)) &&
            pd_image_inspect(&r->srv->state, name, &detail, &err) == 0) {
                /* what the image asks (config), its layers, size and users;
                 * not where on the host it lives */
                const char *k;
                json_t *v;
                json_object_foreach(detail, k, v) if (!json_object_get(o, k) && strcmp(k, "path"))
                        json_object_set(o, k, v);
                json_decref(detail);
        }
        char p[PATH_MAX + 16], src[512];
        pd_tpl_dir(r->srv, name, p, sizeof p);
        /* a recipe build's RUN network (tpl_launch.c keeps it) */
        strncat(p, "/network.json", sizeof p - strlen(p) - 1);
        json_t *net = json_load_file(p, 0, NULL);
        if (net)
                json_object_set_new(o, "network", net);
        pd_tpl_dir(r->srv, name, p, sizeof p);
        strncat(p, "/source", sizeof p - strlen(p) - 1);
        int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
                ssize_t n = read(fd, src, sizeof src - 1);
                close(fd);
                if (n > 0) {
                        src[n] = '\0';
                        json_object_set_new(o, "source", json_string(src));
                }
        }
        return pd_reply_json(r, 200, o);
}

/* ---- create ---- */

static enum MHD_Result reply_started(struct pd_req *r, const char *name, bool shared)
{
        char log[160];
        snprintf(log, sizeof log, "/api/v1/templates/%s/log", name);
        return pd_reply_json(r, 202, json_pack("{s:s, s:s, s:s, s:b}", "name", name, "status", "queued", "log", log,
                                               "shared", shared));
}

/* build_args: {"K": "V"} into "K=V" strings. */
static unsigned args_from_json(json_t *j, char **out, char *why, size_t whysz)
{
        const char *k;
        json_t *v;
        unsigned n = 0;
        json_object_foreach(j, k, v) {
                if (n == MAX_BUILD_ARGS || !*k || strpbrk(k, "= \t\n") || !json_is_string(v) ||
                    strlen(json_string_value(v)) != json_string_length(v)) {
                        snprintf(why, whysz, "build_args: at most %d, names without '=' or spaces, string values",
                                 MAX_BUILD_ARGS);
                        return 400;
                }
                if (asprintf(&out[n], "%s=%s", k, json_string_value(v)) < 0)
                        return 500;
                n++;
        }
        return 0;
}

static enum MHD_Result create_template(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        enum MHD_Result ret;
        _pd_cleanup_json_ json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        const char *k;
        json_t *v;
        json_object_foreach(body, k, v) if (strcmp(k, "name") && strcmp(k, "image") && strcmp(k, "recipe") &&
                                            strcmp(k, "build_args") && strcmp(k, "shared") && strcmp(k, "network"))
                return pd_reply_error(r, 400, "bad_request", "unknown field '%.64s' (allowed: name, image, recipe, "
                                      "build_args, shared, network)", k);
        json_t *js = json_object_get(body, "shared");
        if (js && !json_is_boolean(js))
                return pd_reply_error(r, 400, "bad_request", "'shared' is true or false");
        bool shared = json_is_true(js);
        if (shared && !r->key.admin)
                return pd_reply_error(r, 403, "forbidden", "only an admin key (`paddock key create --admin`) may "
                                      "make shared templates");
        json_t *jn = json_object_get(body, "name"), *ji = json_object_get(body, "image"),
               *jr = json_object_get(body, "recipe"), *ja = json_object_get(body, "build_args");
        struct pd_error err = { 0 };
        if (!json_is_string(jn) || pd_image_name_check(json_string_value(jn), &err) < 0)
                return pd_reply_error(r, 400, "bad_request", "%s", json_is_string(jn) ? err.msg :
                                      "'name' must be a template name ([a-z0-9-]{1,64})");
        const char *name = json_string_value(jn);
        if (!ji == !jr)
                return pd_reply_error(r, 400, "bad_request", "give one of 'image' (a registry reference) or 'recipe' "
                                      "(its text; with a context, POST /api/v1/templates/{name}/build)");
        if (ja && (!jr || !json_is_object(ja)))
                return pd_reply_error(r, 400, "bad_request", "'build_args' is an object of strings, with a recipe");
        /* the RUN steps' network: a recipe's (an image pull runs nothing) */
        json_t *jnet = json_object_get(body, "network");
        if (jnet && !jr)
                return pd_reply_error(r, 400, "bad_request", "'network' is the network of a recipe's RUN steps: "
                                      "with a recipe");
        char why[640];
        unsigned st;
        char *args[MAX_BUILD_ARGS] = { 0 };
        unsigned nargs = 0;
        if (ji) {
                if (!json_is_string(ji) || strlen(json_string_value(ji)) != json_string_length(ji))
                        return pd_reply_error(r, 400, "bad_request", "'image' must be a string");
                if ((st = pd_tpl_ref_check(r->srv, json_string_value(ji), why, sizeof why)))
                        return pd_reply_error(r, st, st == 403 ? "forbidden" : "bad_request", "%s", why);
        } else {
                if (!json_is_string(jr) || strlen(json_string_value(jr)) != json_string_length(jr))
                        return pd_reply_error(r, 400, "bad_request", "'recipe' must be a string (its text)");
                if (json_string_length(jr) > PD_TPL_RECIPE_MAX)
                        return pd_reply_error(r, 413, "too_large", "recipe over %u bytes", PD_TPL_RECIPE_MAX);
                if ((st = pd_tpl_recipe_check(r->srv, r->key.id, json_string_value(jr), why, sizeof why)))
                        return pd_reply_error(r, st, st == 403 ? "forbidden" : st == 404 ? "not_found" : "bad_request",
                                              "%s", why);
                if (ja && (st = args_from_json(ja, args, why, sizeof why))) {
                        for (unsigned i = 0; i < MAX_BUILD_ARGS; i++)
                                free(args[i]);
                        return pd_reply_error(r, st, "bad_request", "%s", why);
                }
                while (nargs < MAX_BUILD_ARGS && args[nargs])
                        nargs++;
        }
        _pd_cleanup_json_ json_t *net = NULL;
        st = pd_tpl_network_check(jnet, &net, why, sizeof why);
        if (!st) {
                struct pd_tpl_launch l = { .name = name, .key = &r->key, .shared = shared,
                                           .source = ji ? json_string_value(ji) : "recipe",
                                           .ref = ji ? json_string_value(ji) : NULL,
                                           .recipe_text = jr ? json_string_value(jr) : NULL,
                                           .recipe_rel = "Dockerfile", .build_args = args, .n_args = nargs,
                                           .network = net };
                st = pd_tpl_launch(r->srv, &l, why, sizeof why);
        }
        for (unsigned i = 0; i < nargs; i++)
                free(args[i]);
        if (st)
                return pd_reply_error(r, st, pd_tpl_status_code(st), "%s", why);
        pd_log("info", "template=%s create key=%s source=%s%s", name, r->key.id, ji ? json_string_value(ji) : "recipe",
               shared ? " shared" : "");
        return reply_started(r, name, shared);
}

/* POST /templates/{name}/build: the body a tar of the build context;
 * ?recipe=PATH in it (default Dockerfile), ?build_arg=K=V repeated. */
struct upload {
        int fd;
        uint64_t len;
        struct pd_deferred_error fail;
        char *args[MAX_BUILD_ARGS];
        unsigned nargs;
        bool args_bad;
        bool shared;            /* ?shared=1: an admin key's shared template */
        json_t *net_allow, *net_deny;   /* ?allow=RULE, ?deny=RULE (repeated) */
        bool net_bad;
};

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        (void)kind;
        struct upload *u = cls;
        if (!strcmp(key, "allow") || !strcmp(key, "deny")) {
                /* a rule that is not text is refused, never dropped (a
                 * dropped deny would widen the policy) */
                json_t **l = key[0] == 'a' ? &u->net_allow : &u->net_deny;
                json_t *rule = value ? json_string(value) : NULL;
                if (!*l)
                        *l = json_array();
                if (!rule || !*l || json_array_append_new(*l, rule) < 0)
                        u->net_bad = true;
                return MHD_YES;
        }
        if (strcmp(key, "build_arg"))
                return MHD_YES;
        if (!value || !strchr(value, '=') || value[0] == '=' || u->nargs == MAX_BUILD_ARGS) {
                u->args_bad = true;
                return MHD_YES;
        }
        u->args[u->nargs] = strdup(value);
        if (u->args[u->nargs])
                u->nargs++;
        return MHD_YES;
}

static void upload_free(struct pd_req *r, struct upload *u)
{
        if (u->fd >= 0)
                close(u->fd);
        for (unsigned i = 0; i < u->nargs; i++)
                free(u->args[i]);
        json_decref(u->net_allow);
        json_decref(u->net_deny);
        free(u);
        r->route_state = NULL;
}

static enum MHD_Result build_upload(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct upload *u = r->route_state;
        if (!chunk_len) {       /* the request ended early: only free */
                if (u)
                        upload_free(r, u);
                return MHD_NO;
        }
        if (!u) {
                u = calloc(1, sizeof *u);
                if (!u)
                        return MHD_NO;
                u->fd = -1;
                r->route_state = u;
                struct pd_error err = { 0 };
                char owner[40], p[PATH_MAX];
                const char *name = r->params[0];
                MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_arg, u);
                const char *rec = pd_req_query(r, "recipe"), *sq = pd_req_query(r, "shared");
                u->shared = sq && (!strcmp(sq, "1") || !strcmp(sq, "true"));
                if (pd_image_name_check(name, &err) < 0)
                        pd_deferred_fail(&u->fail, 400, "bad_request", "%s", err.msg);
                else if (sq && !u->shared && strcmp(sq, "0") && strcmp(sq, "false"))
                        pd_deferred_fail(&u->fail, 400, "bad_request", "shared is 1, true, 0 or false");
                else if (u->shared && !r->key.admin)
                        pd_deferred_fail(&u->fail, 403, "forbidden", "only an admin key (`paddock key create "
                                         "--admin`) may make shared templates");
                else if (!pd_tpl_visible(r->srv, name, r->key.id, owner))
                        pd_deferred_fail(&u->fail, 409, "conflict",
                                         "the name '%s' is taken (names are one namespace for all keys)", name);
                else if (u->net_bad)
                        pd_deferred_fail(&u->fail, 400, "bad_request", "network: allow and deny take rules "
                                         "(TARGET[:PORTS[/PROTO]], UTF-8 text)");
                else if (u->args_bad)
                        pd_deferred_fail(&u->fail, 400, "bad_request", "build_arg must be NAME=VALUE (at most %d)",
                                         MAX_BUILD_ARGS);
                else if (rec && (!*rec || rec[0] == '/' || strstr(rec, "..") || strlen(rec) > 255))
                        pd_deferred_fail(&u->fail, 400, "bad_request", "recipe must be a path inside the context");
                snprintf(p, sizeof p, "%s/template-builds", r->srv->state.dir);
                if (!u->fail.status && (pd_mkdir_p(p, 0700, NULL) < 0 ||
                                        (u->fd = open(p, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0))
                        pd_deferred_fail(&u->fail, 500, "internal", "cannot hold the upload");
        }
        if (chunk) {
                pd_tpl_hold_chunk(u->fd, &u->len, "the context", &u->fail, chunk, *chunk_len);
                *chunk_len = 0;
                return MHD_YES;
        }
        /* the end: check, unpack, reserve, start */
        enum MHD_Result ret;
        const char *name = r->params[0];
        char why[640], tmp[PATH_MAX + 64];
        unsigned st;
        if (u->fail.status) {
                ret = pd_reply_error(r, u->fail.status, u->fail.code, "%s", u->fail.msg);
                upload_free(r, u);
                return ret;
        }
        const char *rec = pd_req_query(r, "recipe");
        rec = rec ? rec : "Dockerfile";
        snprintf(tmp, sizeof tmp, "%s/template-builds/.ctx-%s-%d", r->srv->state.dir, name, (int)gettid());
        (void)pd_rm_rf(tmp, NULL);
        if (pd_tpl_untar(u->fd, tmp, why, sizeof why) < 0) {
                upload_free(r, u);
                return pd_reply_error(r, 400, "bad_request", "%s", why);
        }
        /* the recipe: a regular file of the context, checked as JSON's is */
        char rp[PATH_MAX + 300];
        snprintf(rp, sizeof rp, "%s/%s", tmp, rec);
        struct stat sb;
        char *text = NULL;
        if (lstat(rp, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > PD_TPL_RECIPE_MAX ||
            !(text = calloc(1, (size_t)sb.st_size + 1)) || pd_read_file_at(AT_FDCWD, rp, text, (size_t)sb.st_size + 1) < 0) {
                free(text);
                (void)pd_rm_rf(tmp, NULL);
                upload_free(r, u);
                return pd_reply_error(r, 400, "bad_request", "the context has no recipe '%.255s' (a regular file of at "
                                      "most %u bytes; ?recipe= names another)", rec, PD_TPL_RECIPE_MAX);
        }
        st = pd_tpl_recipe_check(r->srv, r->key.id, text, why, sizeof why);
        free(text);
        /* ?network=MODE&allow=RULE&deny=RULE: the policy's JSON form */
        _pd_cleanup_json_ json_t *net = NULL;
        const char *nq = pd_req_query(r, "network");
        if (!st && (nq || u->net_allow || u->net_deny)) {
                json_t *j = json_pack("{s:s}", "mode", nq ? nq : "none");
                if (u->net_allow)
                        json_object_set(j, "allow", u->net_allow);
                if (u->net_deny)
                        json_object_set(j, "deny", u->net_deny);
                st = pd_tpl_network_check(j, &net, why, sizeof why);
                json_decref(j);
        }
        if (!st) {
                struct pd_tpl_launch l = { .name = name, .key = &r->key, .shared = u->shared, .source = "recipe",
                                           .context_dir = tmp, .recipe_rel = rec, .build_args = u->args,
                                           .n_args = u->nargs, .network = net };
                st = pd_tpl_launch(r->srv, &l, why, sizeof why);
        }
        if (st) {
                (void)pd_rm_rf(tmp, NULL);
                upload_free(r, u);
                return pd_reply_error(r, st, pd_tpl_status_code(st), "%s", why);
        }
        pd_log("info", "template=%s create key=%s source=recipe context_bytes=%" PRIu64 "%s", name, r->key.id, u->len,
               u->shared ? " shared" : "");
        bool shared = u->shared;
        upload_free(r, u);
        return reply_started(r, name, shared);
}

/* ---- delete ---- */

static enum MHD_Result delete_template(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        char owner[40], status[16];
        enum MHD_Result ret;
        if (!path_name(r, owner, &ret))
                return ret;
        const char *name = r->params[0];
        char why[512];
        if (pd_tpl_may_manage(&r->key, name, owner, why, sizeof why))
                return pd_reply_error(r, 403, "forbidden", "%s", why);
        pd_tpl_status(r->srv, name, status, NULL, 0);
        if (!strcmp(status, "queued") || !strcmp(status, "building"))
                return pd_reply_error(r, 409, "conflict", "template '%s' is being built; delete it when the build "
                                      "has ended", name);
        struct pd_error err = { 0 };
        int rc = template_there(r->srv, name) ? pd_image_remove(&r->srv->state, name, &err) : 0;
        if (rc < 0 && err.code == EBUSY && pd_teardown_drain(r->srv, PD_TEARDOWN_WAIT_MS)) {
                memset(&err, 0, sizeof err);
                rc = pd_image_remove(&r->srv->state, name, &err);
        }
        if (rc < 0)
                return pd_reply_error(r, err.code == EBUSY || err.code == ENOTSUP ? 409 : 500,
                                      err.code == EBUSY || err.code == ENOTSUP ? "conflict" : "internal", "%s",
                                      err.msg);
        pd_tpl_unreserve(r->srv, name);
        pd_log("info", "template=%s delete key=%s%s", name, r->key.id, owner[0] ? "" : " shared");
        return pd_reply_empty(r, 204);
}

/* ---- the build log ---- */

struct logf {
        struct pd_server *srv;
        char name[65];
        int fd, ino, client_fd;
        uint64_t from;          /* the log offset of the response's first byte */
        bool follow;
};

static bool build_over(struct logf *f)
{
        char status[16];
        pd_tpl_status(f->srv, f->name, status, NULL, 0);
        return strcmp(status, "queued") && strcmp(status, "building");
}

static ssize_t log_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct logf *f = cls;
        bool last = false;
        for (;;) {
                ssize_t n = pread(f->fd, buf, max, (off_t)(f->from + pos));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (n > 0)
                        return n;
                /* at the end: over once the build is (one more read after
                 * its status said so: the last lines come before it) */
                if (!f->follow || last)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (build_over(f)) {
                        last = true;
                        continue;
                }
                struct pollfd p[3] = {
                        { .fd = f->ino, .events = POLLIN },
                        { .fd = pd_server_stop_fd(f->srv), .events = POLLIN },
                        { .fd = f->client_fd, .events = POLLRDHUP },
                };
                int r = poll(p, 3, LOG_RECHECK_MS);
                if (r < 0 && errno != EINTR)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (p[1].revents)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR))
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (p[0].revents) {
                        char ev[4096];
                        while (read(f->ino, ev, sizeof ev) > 0)
                                ;
                }
        }
}

static void log_free(void *cls)
{
        struct logf *f = cls;
        if (f->fd >= 0)
                close(f->fd);
        if (f->ino >= 0)
                close(f->ino);
        free(f);
}

static enum MHD_Result build_log(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        char owner[40], dir[PATH_MAX], p[PATH_MAX + 16];
        enum MHD_Result ret;
        if (!path_name(r, owner, &ret))
                return ret;
        const char *name = r->params[0];
        uint64_t from = 0;
        const char *q = pd_req_query(r, "offset");
        if (q) {
                char *end;
                errno = 0;
                unsigned long long v = strtoull(q, &end, 10);
                if (!*q || *end || errno || q[0] == '-')
                        return pd_reply_error(r, 400, "bad_request", "offset must be a byte offset");
                from = v;
        }
        const char *fq = pd_req_query(r, "follow");
        pd_tpl_dir(r->srv, name, dir, sizeof dir);
        snprintf(p, sizeof p, "%s/log", dir);
        struct logf *f = calloc(1, sizeof *f);
        if (!f)
                return pd_reply_errno(r, -ENOMEM, "log");
        f->srv = r->srv;
        snprintf(f->name, sizeof f->name, "%s", name);
        f->follow = fq && (!strcmp(fq, "1") || !strcmp(fq, "true"));
        f->ino = -1;
        f->fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (f->fd < 0) {
                /* a template with no build of this server: no log; a build
                 * that has not written one yet: an empty file */
                if (errno != ENOENT || !owner[0]) {
                        log_free(f);
                        return pd_reply_error(r, 404, "not_found", "template '%s' has no build log", name);
                }
                f->fd = open(p, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (f->fd < 0) {
                        log_free(f);
                        return pd_reply_error(r, 404, "not_found", "template '%s' has no build log", name);
                }
        }
        struct stat sb;
        if (fstat(f->fd, &sb) == 0 && from > (uint64_t)sb.st_size && (!f->follow || build_over(f))) {
                log_free(f);
                return pd_reply_error(r, 416, "range_not_satisfiable", "offset %" PRIu64 " is past the log's end "
                                      "(%lld bytes)", from, (long long)sb.st_size);
        }
        if (f->follow) {
                f->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
                /* the directory: the log's writes and the status's rename */
                if (f->ino < 0 || inotify_add_watch(f->ino, dir, IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
                        log_free(f);
                        return pd_reply_errno(r, -EIO, "follow the build log");
                }
                const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn,
                                                                             MHD_CONNECTION_INFO_CONNECTION_FD);
                f->client_fd = ci ? ci->connect_fd : -1;
        }
        /* MHD asks from position 0 of the response: offset it */
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, LOG_BLOCK, log_read, f,
                                                                      log_free);
        if (!resp) {
                log_free(f);
                return pd_reply_errno(r, -ENOMEM, "log");
        }
        f->from = from;
        char hv[32];
        snprintf(hv, sizeof hv, "%" PRIu64, from);
        MHD_add_response_header(resp, "X-Paddock-Offset", hv);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        return pd_reply_response(r, 200, resp);
}

const struct pd_route pd_routes_templates[] = {
        { "GET", "/api/v1/templates", list_templates, 0, 0 },
        { "POST", "/api/v1/templates", create_template, 0, PD_TPL_RECIPE_MAX + 65536 },
        { "GET", "/api/v1/templates/{name}", get_template, 0, 0 },
        { "DELETE", "/api/v1/templates/{name}", delete_template, 0, 0 },
        { "POST", "/api/v1/templates/{name}/build", build_upload, PD_ROUTE_STREAM_BODY, 0 },
        { "POST", "/api/v1/templates/{name}/image", pd_tpl_image_upload, PD_ROUTE_STREAM_BODY, 0 },
        { "GET", "/api/v1/templates/{name}/log", build_log, 0, 0 },
        { 0 },
};
