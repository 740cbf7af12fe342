/* Building a recipe (image.h, recipe.h). Each step that changes files
 * makes one store layer: COPY/ADD and WORKDIR on the host (copyin.c), RUN
 * in a container-tier sandbox of the image so far (the build's network, none by default) whose
 * writable layer is then copied into the store. Every instruction extends
 * a chain key (sha256 of the previous key and the instruction as
 * expanded; COPY adds the content it copies), and a step whose key has a
 * layer in <state>/images/steps/ is not run again: an unchanged recipe
 * only re-reads its files. Nothing is registered unless every step
 * succeeded. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/client.h"
#include "image/build_live.h"
#include "image/copyin.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/layers.h"
#include "image/recipe.h"
#include "lib/sandbox.h"
#include "tiers/snapshot.h"
#include "image/start.h"
#include "lib/template.h"
#include "lib/util.h"

#define MAX_VARS 256
#define RUN_TAIL 2048

struct build {
        struct pd_state *st;
        const struct pd_image_opts *o;
        char (*layers)[65];             /* bottom first */
        unsigned n, cap;
        json_t *config;                 /* the OCI config's "config" object */
        char key[65];
        char *args[MAX_VARS];           /* ARG values in scope, "K=V" */
        unsigned n_args;
        char *pre[MAX_VARS];            /* ARGs before FROM */
        unsigned n_pre;
        char *const *cli_args;
        unsigned n_cli;
        int ctxfd;
        unsigned step;
        char tail[RUN_TAIL];            /* last output of a RUN */
        char *vbuf[2 * MAX_VARS];       /* vars()'s answer */
        /* FROM base or a snapshot (build_live.h): the steps run in one
         * sandbox, which a first pass does not start (it only computes the
         * key: an unchanged recipe starts nothing) */
        bool live;
        bool live_exec;
        struct pd_live lv;
};

static void chain(struct build *b, const char *what, const char *text)
{
        struct pd_sha256 *h = pd_sha256_new();
        if (!h)
                return;
        pd_sha256_update(h, b->key, strlen(b->key) + 1);
        pd_sha256_update(h, what, strlen(what) + 1);
        pd_sha256_update(h, text, strlen(text) + 1);
        pd_sha256_final(h, b->key);
        pd_sha256_free(h);
}

static int push_layer(struct build *b, const char *hex, struct pd_error *err)
{
        if (b->n == b->cap) {
                unsigned cap = b->cap ? b->cap * 2 : 16;
                char(*nl)[65] = realloc(b->layers, cap * sizeof *nl);
                if (!nl)
                        return pd_error_set(err, ENOMEM, "layers");
                b->layers = nl;
                b->cap = cap;
        }
        memcpy(b->layers[b->n++], hex, 65);
        return 0;
}

/* The image so far, top first (for lookups). */
static char (*top_first(struct build *b))[65]
{
        char(*t)[65] = calloc(b->n ? b->n : 1, 65);
        for (unsigned i = 0; t && i < b->n; i++)
                memcpy(t[i], b->layers[b->n - 1 - i], 65);
        return t;
}

/* ---- the step cache: images/steps/<key> holds a layer id ---- */

static bool cache_get(struct build *b, char out[65])
{
        char p[128], buf[80];
        snprintf(p, sizeof p, "images/steps/%s", b->key);
        ssize_t n = pd_read_file_at(b->st->dirfd, p, buf, sizeof buf);
        if (n < 64)
                return false;
        buf[64] = '\0';
        if (!pd_digest_hex_ok(buf) || !pd_layers_has(b->st, buf))
                return false;
        memcpy(out, buf, 65);
        return true;
}

static void cache_put(struct build *b, const char *hex)
{
        char p[128], line[80];
        (void)mkdirat(b->st->dirfd, "images", 0700);
        (void)mkdirat(b->st->dirfd, "images/steps", 0700);
        /* written whole, then renamed: a reader sees a full entry or none */
        char tmp[160];
        snprintf(p, sizeof p, "images/steps/%s", b->key);
        snprintf(tmp, sizeof tmp, "images/steps/.%s.%d", b->key, (int)getpid());
        snprintf(line, sizeof line, "%s\n", hex);
        int fd = openat(b->st->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        bool ok = pd_write_all(fd, line, strlen(line)) == 0;
        close(fd);
        if (!ok || renameat(b->st->dirfd, tmp, b->st->dirfd, p) < 0)
                (void)unlinkat(b->st->dirfd, tmp, 0);
}

/* ---- variables ---- */

/* args then env: ENV wins over ARG of the same name */
static char **vars(struct build *b, unsigned *n)
{
        char **v = b->vbuf;
        unsigned k = 0;
        for (unsigned i = 0; i < b->n_args && k < MAX_VARS; i++)
                v[k++] = b->args[i];
        json_t *env = json_object_get(b->config, "Env");
        size_t i;
        json_t *e;
        json_array_foreach(env, i, e) if (k < 2 * MAX_VARS && json_string_value(e)) v[k++] = (char *)json_string_value(e);
        *n = k;
        return v;
}

static char *expand(struct build *b, const char *s, struct pd_error *err)
{
        unsigned n;
        char **v = vars(b, &n);
        return pd_recipe_expand(s, v, n, err);
}

static void env_set(json_t *config, const char *kv)
{
        json_t *env = json_object_get(config, "Env");
        if (!json_is_array(env)) {
                env = json_array();
                json_object_set_new(config, "Env", env);
        }
        size_t kl = strcspn(kv, "=");
        size_t i;
        json_t *e;
        json_array_foreach(env, i, e) {
                const char *s = json_string_value(e);
                if (s && !strncmp(s, kv, kl) && s[kl] == '=') {
                        json_array_set_new(env, i, json_string(kv));
                        return;
                }
        }
        json_array_append_new(env, json_string(kv));
}

static int set_arg(char **list, unsigned *n, const char *kv, struct pd_error *err)
{
        size_t kl = strcspn(kv, "=");
        for (unsigned i = 0; i < *n; i++)
                if (!strncmp(list[i], kv, kl) && list[i][kl] == '=') {
                        free(list[i]);
                        list[i] = strdup(kv);
                        return 0;
                }
        if (*n == MAX_VARS)
                return pd_error_setx(err, E2BIG, "too many ARGs");
        list[(*n)++] = strdup(kv);
        return 0;
}

static const char *arg_value(char *const *list, unsigned n, const char *name)
{
        size_t l = strlen(name);
        for (unsigned i = n; i-- > 0;)
                if (!strncmp(list[i], name, l) && list[i][l] == '=')
                        return list[i] + l + 1;
        return NULL;
}

/* ---- FROM ---- */

static int from(struct build *b, const char *what, struct pd_error *err)
{
        json_decref(b->config);
        b->config = NULL;
        if (!strcmp(what, "scratch")) {
                b->config = json_object();
                chain(b, "FROM", "scratch");
                return 0;
        }
        if (pd_template_name_check(what) == 0 && pd_template_is_image(b->st, what)) {
                json_t *doc = pd_image_config(b->st, what);
                json_t *ids = json_object_get(doc, "layers");
                size_t i;
                json_t *l;
                json_array_foreach(ids, i, l) if (push_layer(b, json_string_value(l), err) < 0) {
                        json_decref(doc);
                        return -1;
                }
                b->config = json_deep_copy(json_object_get(doc, "config"));
                char *ident = json_dumps(ids, JSON_COMPACT);
                chain(b, "FROM template", ident ? ident : "");
                free(ident);
                json_decref(doc);
                pd_image_emit(b->o, PD_IMAGE_EV_CACHED, "FROM template", NULL, 0, 0);
                if (!b->config)
                        b->config = json_object();
                return 0;
        }
        char ident[1200];
        if (pd_live_parent(b->st, what, ident, sizeof ident)) {
                b->live = true;
                b->lv.st = b->st;
                b->lv.o = b->o;
                snprintf(b->lv.parent, sizeof b->lv.parent, "%s", what);
                /* the config goes on: the nearest down the stack (a recipe
                 * built on base, or the image a snapshot stacks on) */
                char cur[65];
                snprintf(cur, sizeof cur, "%s", what);
                for (unsigned d = 0; d <= PD_MAX_STACK && pd_snapshot_is(b->st, cur) &&
                                     !pd_template_is_built_snapshot(b->st, cur); d++)
                        if (pd_snapshot_parent(b->st, cur, cur) < 0)
                                break;
                json_t *doc = pd_template_is_built_snapshot(b->st, cur) || pd_template_is_image(b->st, cur)
                                      ? pd_image_config(b->st, cur) : NULL;
                json_t *cfg = json_object_get(doc, "config");
                b->config = json_is_object(cfg) ? json_deep_copy(cfg) : json_object();
                json_decref(doc);
                chain(b, "FROM live", ident);
                if (!b->live_exec)
                        pd_image_emit(b->o, PD_IMAGE_EV_STEP, "FROM a template that is not an image: the steps run "
                                      "in one sandbox of it, snapshotted at the end", NULL, 0, 0);
                return 0;
        }
        /* an image: fetched once, then taken from images/from/ (as docker
         * build takes a local image: `template prune` forgets it) */
        char hex[65], p[PATH_MAX];
        pd_sha256_of(what, strlen(what), hex);
        snprintf(p, sizeof p, "%s/images/from/%s.json", b->st->dir, hex);
        json_t *doc = json_load_file(p, 0, NULL);
        bool ok = doc != NULL;
        size_t i;
        json_t *l;
        json_array_foreach(json_object_get(doc, "layers"), i, l) ok = ok && pd_layers_has(b->st, json_string_value(l));
        if (!ok) {
                json_decref(doc);
                struct pd_image_fetched f;
                int r = pd_image_fetch(b->st, what, b->o, &f, err);
                if (r < 0)
                        return pd_error_prefix(err, "FROM %.200s", what);
                json_t *ids = json_array();
                for (unsigned k = 0; k < f.n; k++)
                        json_array_append_new(ids, json_string(f.layers[k]));
                doc = json_pack("{s:o, s:O?, s:s}", "layers", ids, "config", json_object_get(f.config, "config"),
                                "digest", f.digest);
                pd_image_fetched_free(&f);
                char dir[PATH_MAX];
                snprintf(dir, sizeof dir, "%s/images/from", b->st->dir);
                if (pd_mkdir_p(dir, 0700, NULL) == 0)
                        (void)json_dump_file(doc, p, JSON_COMPACT);
        } else {
                pd_image_emit(b->o, PD_IMAGE_EV_CACHED, "FROM image (fetched before)", NULL, 0, 0);
        }
        json_array_foreach(json_object_get(doc, "layers"), i, l) if (push_layer(b, json_string_value(l), err) < 0) {
                json_decref(doc);
                return -1;
        }
        json_t *cfg = json_object_get(doc, "config");
        b->config = json_is_object(cfg) ? json_deep_copy(cfg) : json_object();
        chain(b, "FROM image", json_string_value(json_object_get(doc, "digest")) ?: what);
        json_decref(doc);
        return 0;
}

/* ---- RUN ---- */

static void keep_tail(struct build *b, const char *p, size_t n)
{
        size_t have = strlen(b->tail);
        if (n >= RUN_TAIL - 1) {
                p += n - (RUN_TAIL - 1);
                n = RUN_TAIL - 1;
        }
        if (have + n >= RUN_TAIL) {
                size_t cut = have + n - (RUN_TAIL - 1);
                memmove(b->tail, b->tail + cut, have - cut + 1);
                have -= cut;
        }
        memcpy(b->tail + have, p, n);
        b->tail[have + n] = '\0';
}

/* A RUN's output as lines (and its tail kept for the error message). */
struct run_out {
        struct build *b;
        char line[1024];
        size_t ll;
};

static void run_output(void *ctx, uint32_t stream, uint64_t offset, const uint8_t *data, size_t n)
{
        struct run_out *o = ctx;
        keep_tail(o->b, (const char *)data, n);
        for (size_t i = 0; i < n; i++) {
                char ch = (char)data[i];
                if (ch == '\n' || o->ll + 1 == sizeof o->line) {
                        o->line[o->ll] = '\0';
                        pd_image_emit(o->b->o, PD_IMAGE_EV_LINE, o->line, NULL, 0, 0);
                        o->ll = 0;
                        if (ch == '\n')
                                continue;
                }
                o->line[o->ll++] = ch;
        }
}

/* Spawn argv in sb as the step's user, stream its output as lines; its
 * exit code in *code (-1: killed by a signal). */
static int run_in(struct build *b, struct pd_sandbox *sb, char **argv, uint32_t uid, uint32_t gid, const char *home,
                  int *code, struct pd_error *err)
{
        /* defaults, then ARGs, then ENV: the agent takes the first of a
         * name, so each name once, the last word winning */
        char *env[2 * MAX_VARS + 4];
        const char *keep[2 * MAX_VARS + 4];
        unsigned ne = 0, nk = 0;
        char path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        char homev[PATH_MAX + 8];
        snprintf(homev, sizeof homev, "HOME=%s", home);
        env[ne++] = path;
        env[ne++] = homev;
        unsigned nv;
        char **v = vars(b, &nv);
        for (unsigned i = 0; i < nv; i++)
                env[ne++] = v[i];
        for (unsigned i = 0; i < ne; i++) {
                size_t kl = strcspn(env[i], "=");
                bool later = false;
                for (unsigned j = i + 1; j < ne && !later; j++)
                        later = !strncmp(env[j], env[i], kl) && env[j][kl] == '=';
                if (!later)
                        keep[nk++] = env[i];
        }
        size_t argc = 0;
        while (argv[argc])
                argc++;
        const char *wd = json_string_value(json_object_get(b->config, "WorkingDir"));
        const struct pd_spawn_opts o = { .argv = (const char *const *)argv, .argc = argc, .env = keep, .envc = nk,
                                         .cwd = wd && *wd ? wd : "/", .uid = uid, .gid = gid, .groups = &gid,
                                         .n_groups = 1 };
        struct run_out out = { .b = b };
        /* a RUN takes as long as it takes */
        const struct pd_run_io io = { .on_output = run_output, .ctx = &out, .timeout_ms = -1 };
        *code = -1;
        int fd = pd_sandbox_connect(sb, err);
        if (fd < 0)
                return fd;
        struct pd_client c;
        uint32_t pid = 0;
        struct pd_exit x;
        int r = pd_client_connect(&c, fd, "paddock-build", err);
        if (r == 0)
                r = pd_client_run(&c, &o, &io, &pid, &x, err);
        if (r < 0 && c.refused)
                pd_error_prefix(err, "RUN: cannot start '%.100s'", argv[0]);
        else if (r < 0)
                pd_error_prefix(err, "RUN");
        if (r == 0 && x.has_code)
                *code = (int)x.code;
        if (out.ll) {
                out.line[out.ll] = '\0';
                pd_image_emit(b->o, PD_IMAGE_EV_LINE, out.line, NULL, 0, 0);
        }
        pd_client_close(&c);
        return r;
}

static void build_tpl_name(struct build *b, char out[65])
{
        snprintf(out, 65, "paddock-build-%d-%u", (int)getpid(), b->step);
}

/* A RUN's user that the image lacks, in the words of E2B's envd (its SDK's
 * tests look for them; they say what went wrong as well as ours would). */
static int no_such_user(char **argv, const char *user, struct pd_error *err)
{
        const char *cmd = argv[0] && argv[1] && !strcmp(argv[1], "-c") && argv[2] ? argv[2] : argv[0];
        return pd_error_setx(err, ENOENT, "failed to run command '%.200s': command failed: unauthenticated: invalid "
                             "username: '%.64s' (USER: no such user in the image's /etc/passwd)", cmd, user);
}

/* RUN: a sandbox of the image so far; its writable layer becomes a layer. */
static int run_step(struct build *b, char **argv, struct pd_error *err)
{
        char tname[65], out[65];
        build_tpl_name(b, tname);
        if (b->n == 0)
                return pd_error_setx(err, EINVAL, "RUN needs an image below it (FROM scratch has no shell)");
        /* the user it runs as: the recipe's USER, else root */
        const char *user = json_string_value(json_object_get(b->config, "User"));
        uint32_t uid = 0, gid = 0;
        char home[PATH_MAX] = "/root";
        if (user && *user) {
                _pd_cleanup_free_ char(*tf)[65] = top_first(b);
                _pd_cleanup_free_ char *pw = tf ? pd_image_read_file(b->st, tf, b->n, "etc/passwd") : NULL;
                _pd_cleanup_free_ char *gr = tf ? pd_image_read_file(b->st, tf, b->n, "etc/group") : NULL;
                json_t *u = NULL;
                if (pd_image_resolve_user(user, pw, gr, &u, err) < 0)
                        return err->code == ENOENT ? no_such_user(argv, user, err) : pd_error_prefix(err, "USER");
                uid = (uint32_t)json_integer_value(json_object_get(u, "uid"));
                gid = (uint32_t)json_integer_value(json_object_get(u, "gid"));
                snprintf(home, sizeof home, "%s", json_string_value(json_object_get(u, "home")));
                json_decref(u);
        }
        struct pd_image_opts quiet = { .allow_local = false, .replace = true };
        json_t *meta = json_pack("{s:s}", "kind", "build");
        int r = pd_image_register(b->st, tname, b->layers, b->n, b->config, meta, &quiet, err);
        json_decref(meta);
        if (r < 0)
                return pd_error_prefix(err, "RUN: the image so far");
        struct pd_spec spec;
        pd_spec_defaults(&spec);
        spec.isolation = PD_ISO_CONTAINER;
        spec.template_name = tname;
        spec.memory_bytes = 2048ull << 20;
        spec.disk_bytes = 2048ull << 20;
        spec.pids = 4096;
        pd_image_run_net(b->o, &spec);
        struct pd_sandbox *sb = NULL;
        char tmp[PATH_MAX] = "";
        int code = -1;
        b->tail[0] = '\0';
        if ((r = pd_sandbox_new(b->st, &spec, &sb, err)) < 0)
                goto out;
        /* it dies with us (a killed build leaves no sandbox), and the host
         * keeps a view of its writable layer to copy */
        sb->die_with_parent = true;
        sb->keep_stage = true;
        if ((r = pd_sandbox_create(sb, err)) < 0)
                goto out;
        pd_image_run_net_said(b->o, sb);
        if ((r = run_in(b, sb, argv, uid, gid, home, &code, err)) < 0)
                goto out;
        if (code != 0) {
                size_t tl = strlen(b->tail);
                while (tl && b->tail[tl - 1] == '\n')
                        b->tail[--tl] = '\0';
                const char *last = b->tail + (tl > 400 ? tl - 400 : 0);
                r = code < 0 ? pd_error_setx(err, EIO, "RUN was killed by a signal; its last output:\n%s", last)
                             : pd_error_setx(err, EIO, "RUN exited with status %d; its last output:\n%s", code, last);
                goto out;
        }
        if ((r = pd_layers_begin(b->st, tmp, sizeof tmp, err)) < 0)
                goto out;
        char tree[PATH_MAX + 8];
        snprintf(tree, sizeof tree, "%s/tree", tmp);
        if ((r = pd_container_copy_upper(sb, tree, PD_STORE_UID_BASE, err)) < 0)
                goto out;
        memcpy(out, b->key, 65);
        if ((r = pd_layers_commit(b->st, tmp, out, 0, "recipe RUN", err)) < 0)
                goto out;
        tmp[0] = '\0';
        r = push_layer(b, out, err);
        if (r == 0)
                cache_put(b, out);
out:
        if (sb) {
                struct pd_error e2;
                (void)pd_sandbox_destroy(sb, &e2);
        }
        if (tmp[0])
                pd_rm_rf(tmp, NULL);
        struct pd_error e3;
        (void)pd_image_remove(b->st, tname, &e3);
        return r;
}

/* The user a live step runs as: the recipe's USER, else root. */
static int live_user(struct build *b, char **argv, uint32_t *uid, uint32_t *gid, char *home, size_t size,
                     struct pd_error *err)
{
        const char *user = json_string_value(json_object_get(b->config, "User"));
        *uid = *gid = 0;
        snprintf(home, size, "/root");
        if (!user || !*user)
                return 0;
        json_t *u = NULL;
        if (pd_live_user(&b->lv, user, &u, err) < 0)
                return err->code == ENOENT ? no_such_user(argv, user, err) : pd_error_prefix(err, "USER");
        *uid = (uint32_t)json_integer_value(json_object_get(u, "uid"));
        *gid = (uint32_t)json_integer_value(json_object_get(u, "gid"));
        snprintf(home, size, "%s", json_string_value(json_object_get(u, "home")) ?: "/");
        json_decref(u);
        return 0;
}

/* RUN in the build's one sandbox (FROM base or a snapshot). */
static int run_live(struct build *b, char **argv, struct pd_error *err)
{
        uint32_t uid, gid;
        char home[PATH_MAX];
        int code = -1;
        int r = pd_live_sandbox(&b->lv, err);
        if (r < 0 || (r = live_user(b, argv, &uid, &gid, home, sizeof home, err)) < 0)
                return r;
        b->tail[0] = '\0';
        if ((r = run_in(b, b->lv.sb, argv, uid, gid, home, &code, err)) < 0)
                return r;
        if (code != 0) {
                size_t tl = strlen(b->tail);
                while (tl && b->tail[tl - 1] == '\n')
                        b->tail[--tl] = '\0';
                const char *last = b->tail + (tl > 400 ? tl - 400 : 0);
                return code < 0 ? pd_error_setx(err, EIO, "RUN was killed by a signal; its last output:\n%s", last)
                                : pd_error_setx(err, EIO, "RUN exited with status %d; its last output:\n%s", code,
                                                last);
        }
        return 0;
}

/* ---- COPY, ADD, WORKDIR: layers made on the host ---- */

/* p made absolute (against WORKDIR) and clean: "." dropped, ".." going
 * up but never above "/" (paths inside the image); a trailing '/' kept. */
static int abs_path(struct build *b, const char *p, char *out, size_t size)
{
        const char *wd = json_string_value(json_object_get(b->config, "WorkingDir"));
        char in[PATH_MAX * 2];
        if (p[0] == '/')
                snprintf(in, sizeof in, "%s", p);
        else
                snprintf(in, sizeof in, "%s/%s", wd && *wd ? wd : "", p);
        bool slash = in[strlen(in) - 1] == '/';
        size_t o = 0;
        out[0] = '\0';
        char *save = NULL;
        for (char *c = strtok_r(in, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (!strcmp(c, "."))
                        continue;
                if (!strcmp(c, "..")) {
                        char *up = strrchr(out, '/');
                        o = up ? (size_t)(up - out) : 0;
                        out[o] = '\0';
                        continue;
                }
                o += (size_t)snprintf(out + o, size - o, "/%s", c);
                if (o >= size)
                        return -1;
        }
        if (!o)
                snprintf(out, size, "/");
        else if (slash && o + 1 < size)
                strcat(out, "/");
        return 0;
}

static int copy_step(struct build *b, const struct pd_recipe_step *s, const char *text, struct pd_error *err)
{
        _pd_cleanup_free_ char(*tf)[65] = NULL;
        char **w = pd_recipe_words(text, s->json, err);
        if (!w)
                return -1;
        unsigned n = 0;
        while (w[n])
                n++;
        const char *chown_spec = NULL;
        unsigned first = 0;
        int r = 0;
        while (first < n && !strncmp(w[first], "--", 2)) {
                if (!strncmp(w[first], "--chown=", 8)) {
                        chown_spec = w[first] + 8;
                } else {
                        r = pd_error_setx(err, ENOTSUP, "line %u: %s option '%.60s' is not supported (--chown only)",
                                          s->line, pd_recipe_op_name(s->op), w[first]);
                        goto out;
                }
                first++;
        }
        if (n - first < 2) {
                r = pd_error_setx(err, EINVAL, "line %u: %s needs a source and a destination", s->line,
                                  pd_recipe_op_name(s->op));
                goto out;
        }
        for (unsigned i = first; i + 1 < n; i++)
                if (strstr(w[i], "://")) {
                        r = pd_error_setx(err, ENOTSUP, "line %u: %s from a URL is not supported (no downloads "
                                          "during builds; put the file in the context)", s->line, pd_recipe_op_name(s->op));
                        goto out;
                }
        if (b->ctxfd < 0) {
                r = pd_error_setx(err, EINVAL, "line %u: no build context", s->line);
                goto out;
        }
        char dest[PATH_MAX];
        abs_path(b, w[n - 1], dest, sizeof dest);
        /* "." and ".." name directories */
        size_t wl = strlen(w[n - 1]);
        if (dest[strlen(dest) - 1] != '/' && (!strcmp(w[n - 1], ".") || (wl >= 2 && !strcmp(w[n - 1] + wl - 2, "/.")) ||
                                              !strcmp(w[n - 1], "..") || (wl >= 3 && !strcmp(w[n - 1] + wl - 3, "/.."))))
                strcat(dest, "/");
        tf = top_first(b);
        struct pd_copyin c = { .st = b->st, .ctxfd = b->ctxfd, .srcs = w + first, .n_srcs = n - 1 - first,
                               .dest = dest, .top_first = tf, .n = b->n };
        if (chown_spec && b->live && !b->live_exec) {
                /* the key's first pass starts no sandbox: the spec as written */
                c.uid = c.gid = 0;
        } else if (chown_spec && b->live) {
                json_t *u = NULL;
                if ((r = pd_live_user(&b->lv, chown_spec, &u, err)) < 0) {
                        pd_error_prefix(err, "line %u: --chown", s->line);
                        goto out;
                }
                c.uid = (uint32_t)json_integer_value(json_object_get(u, "uid"));
                c.gid = (uint32_t)json_integer_value(json_object_get(u, "gid"));
                json_decref(u);
        } else if (chown_spec) {
                _pd_cleanup_free_ char *pw = pd_image_read_file(b->st, tf, b->n, "etc/passwd");
                _pd_cleanup_free_ char *gr = pd_image_read_file(b->st, tf, b->n, "etc/group");
                json_t *u = NULL;
                if ((r = pd_image_resolve_user(chown_spec, pw, gr, &u, err)) < 0) {
                        pd_error_prefix(err, "line %u: --chown", s->line);
                        goto out;
                }
                c.uid = (uint32_t)json_integer_value(json_object_get(u, "uid"));
                c.gid = (uint32_t)json_integer_value(json_object_get(u, "gid"));
                json_decref(u);
        }
        /* the key covers what is copied, not only the instruction */
        struct pd_sha256 *h = pd_sha256_new();
        if (!h) {
                r = pd_error_set(err, ENOMEM, "hash");
                goto out;
        }
        char ids[200];
        if (b->live)
                snprintf(ids, sizeof ids, "chown %.100s", chown_spec ? chown_spec : "");
        else
                snprintf(ids, sizeof ids, "%u:%u", c.uid, c.gid);
        pd_sha256_update(h, ids, strlen(ids) + 1);
        pd_sha256_update(h, dest, strlen(dest) + 1);
        r = pd_copyin(&c, -1, h, NULL, err);
        char content[65];
        pd_sha256_final(h, content);
        pd_sha256_free(h);
        if (r < 0) {
                pd_error_prefix(err, "line %u", s->line);
                goto out;
        }
        chain(b, "COPY", content);
        if (b->live) {
                if (b->live_exec && (r = pd_live_copy(&b->lv, &c, err)) < 0)
                        pd_error_prefix(err, "line %u", s->line);
                goto out;
        }
        char hex[65];
        if (cache_get(b, hex)) {
                pd_image_emit(b->o, PD_IMAGE_EV_CACHED, "step", NULL, 0, 0);
                r = push_layer(b, hex, err);
                goto out;
        }
        char tmp[PATH_MAX], tree[PATH_MAX + 8];
        if ((r = pd_layers_begin(b->st, tmp, sizeof tmp, err)) < 0)
                goto out;
        snprintf(tree, sizeof tree, "%s/tree", tmp);
        {
                _pd_cleanup_close_ int root = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                uint64_t bytes = 0;
                if (root < 0)
                        r = pd_error_set(err, errno, "open '%s'", tree);
                else if ((r = pd_copyin(&c, root, NULL, &bytes, err)) == 0)
                        r = pd_layers_commit(b->st, tmp, b->key, bytes, "recipe COPY", err);
        }
        if (r < 0) {
                pd_rm_rf(tmp, NULL);
                pd_error_prefix(err, "line %u", s->line);
                goto out;
        }
        cache_put(b, b->key);
        r = push_layer(b, b->key, err);
out:
        pd_recipe_words_free(w);
        return r;
}

/* WORKDIR: the directory exists afterwards, as in Docker (a layer with
 * just it when the image lacks it). */
static int workdir_step(struct build *b, const char *dir, struct pd_error *err)
{
        if (b->live) {
                if (!b->live_exec)
                        return 0;
                const char *argv[] = { "mkdir", "-p", "--", dir, NULL };
                char out[300];
                int code;
                int r = pd_live_exec(&b->lv, argv, NULL, 0, out, sizeof out, &code, err);
                if (r == 0 && code != 0)
                        r = pd_error_setx(err, EIO, "WORKDIR %s: mkdir failed: %s", dir, out);
                return r;
        }
        struct stat s;
        _pd_cleanup_free_ char(*tf)[65] = top_first(b);
        int fd = b->n ? pd_image_lookup(b->st, tf, b->n, dir + 1, &s) : -ENOENT;
        if (fd >= 0) {
                close(fd);
                return 0;
        }
        char hex[65];
        if (cache_get(b, hex))
                return push_layer(b, hex, err);
        char tmp[PATH_MAX], tree[PATH_MAX + 8];
        int r = pd_layers_begin(b->st, tmp, sizeof tmp, err);
        if (r < 0)
                return r;
        snprintf(tree, sizeof tree, "%s/tree", tmp);
        char p[PATH_MAX * 2];
        snprintf(p, sizeof p, "%s%s", tree, dir);
        if (pd_mkdir_p(p, 0755, err) < 0) {
                pd_rm_rf(tmp, NULL);
                return -1;
        }
        /* owners: the store's root, like the rest of a made layer */
        for (char *q = p + strlen(tree); *q; q++) {
                if (*q != '/' || q == p + strlen(tree))
                        continue;
                *q = '\0';
                (void)chown(p, PD_STORE_UID_BASE, PD_STORE_UID_BASE);
                *q = '/';
        }
        (void)chown(p, PD_STORE_UID_BASE, PD_STORE_UID_BASE);
        if ((r = pd_layers_commit(b->st, tmp, b->key, 0, "recipe WORKDIR", err)) < 0) {
                pd_rm_rf(tmp, NULL);
                return r;
        }
        cache_put(b, b->key);
        return push_layer(b, b->key, err);
}

static json_t *command_array(const struct pd_recipe_step *s, const char *text, struct pd_error *err)
{
        if (s->json) {
                char **w = pd_recipe_words(text, true, err);
                if (!w)
                        return NULL;
                json_t *a = json_array();
                for (char **p = w; *p; p++)
                        json_array_append_new(a, json_string(*p));
                pd_recipe_words_free(w);
                return a;
        }
        return json_pack("[s, s, s]", "/bin/sh", "-c", text);
}

static int do_step(struct build *b, const struct pd_recipe_step *s, unsigned total, struct pd_error *err)
{
        char head[160];
        snprintf(head, sizeof head, "step %u/%u: %s %.100s%s", b->step, total, pd_recipe_op_name(s->op), s->text,
                 strlen(s->text) > 100 ? "..." : "");
        /* a live build's first pass (the key only) is silent after FROM,
         * and its second says FROM once more */
        if (!(b->live && !b->live_exec) && !(b->live_exec && s->op == PD_R_FROM))
                pd_image_emit(b->o, PD_IMAGE_EV_STEP, head, NULL, 0, 0);
        /* RUN's text is the shell's to expand; everything else is ours */
        _pd_cleanup_free_ char *text = s->op == PD_R_RUN || s->op == PD_R_CMD || s->op == PD_R_ENTRYPOINT
                                               ? strdup(s->text)
                                       : s->op == PD_R_FROM ? pd_recipe_expand(s->text, b->pre, b->n_pre, err)
                                                            : expand(b, s->text, err);
        if (!text)
                return pd_error_prefix(err, "line %u", s->line);
        int r = 0;
        switch (s->op) {
        case PD_R_FROM: {
                char **w = pd_recipe_words(text, false, err);
                if (!w)
                        return -1;
                if (!w[0] || (w[1] && (strcasecmp(w[1], "AS") || !w[2] || w[3])))
                        r = pd_error_setx(err, EINVAL, "line %u: FROM IMAGE [AS NAME] expected", s->line);
                else
                        r = from(b, w[0], err);
                pd_recipe_words_free(w);
                return r;
        }
        case PD_R_ARG: {
                char *eq = strchr(text, '=');
                char name[256];
                snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - text) : (int)strlen(text), text);
                const char *v = arg_value(b->cli_args, b->n_cli, name);
                if (!v)
                        v = arg_value(b->pre, b->n_pre, name);
                if (!v && eq)
                        v = eq + 1;
                char kv[4096];
                snprintf(kv, sizeof kv, "%s=%s", name, v ? v : "");
                chain(b, "ARG", kv);
                return set_arg(b->config ? b->args : b->pre, b->config ? &b->n_args : &b->n_pre, kv, err);
        }
        default:
                break;
        }
        if (!b->config)
                return pd_error_setx(err, EINVAL, "line %u: %s before FROM", s->line, pd_recipe_op_name(s->op));
        switch (s->op) {
        case PD_R_ENV:
        case PD_R_LABEL: {
                char **w = pd_recipe_words(text, false, err);
                if (!w)
                        return -1;
                if (w[0] && !strchr(w[0], '=') && s->op == PD_R_ENV) {
                        /* the old form: ENV NAME value words */
                        char kv[8192];
                        const char *v = strchr(text, ' ') ? strchr(text, ' ') + 1 : "";
                        snprintf(kv, sizeof kv, "%s=%s", w[0], v);
                        env_set(b->config, kv);
                } else {
                        for (char **p = w; *p && r == 0; p++) {
                                if (!strchr(*p, '=')) {
                                        r = pd_error_setx(err, EINVAL, "line %u: '%.60s' is not KEY=VALUE", s->line, *p);
                                } else if (s->op == PD_R_ENV) {
                                        env_set(b->config, *p);
                                } else {
                                        json_t *labels = json_object_get(b->config, "Labels");
                                        if (!json_is_object(labels)) {
                                                labels = json_object();
                                                json_object_set_new(b->config, "Labels", labels);
                                        }
                                        char *eq = strchr(*p, '=');
                                        *eq = '\0';
                                        json_object_set_new(labels, *p, json_string(eq + 1));
                                }
                        }
                }
                pd_recipe_words_free(w);
                chain(b, pd_recipe_op_name(s->op), text);
                return r;
        }
        case PD_R_WORKDIR: {
                char dir[PATH_MAX];
                abs_path(b, text, dir, sizeof dir);
                size_t dl = strlen(dir);
                if (dl > 1 && dir[dl - 1] == '/')
                        dir[dl - 1] = '\0';
                json_object_set_new(b->config, "WorkingDir", json_string(dir));
                chain(b, "WORKDIR", dir);
                return workdir_step(b, dir, err);
        }
        case PD_R_USER:
                json_object_set_new(b->config, "User", json_string(text));
                chain(b, "USER", text);
                return 0;
        case PD_R_CMD:
        case PD_R_ENTRYPOINT: {
                json_t *a = command_array(s, text, err);
                if (!a)
                        return pd_error_prefix(err, "line %u", s->line);
                json_object_set_new(b->config, s->op == PD_R_CMD ? "Cmd" : "Entrypoint", a);
                chain(b, pd_recipe_op_name(s->op), text);
                return 0;
        }
        case PD_R_COPY:
        case PD_R_ADD:
                return copy_step(b, s, text, err);
        case PD_R_RUN: {
                chain(b, s->json ? "RUN json" : "RUN", text);
                /* a RUN with a network is another step than one without
                 * (none adds nothing: caches made before stay valid) */
                _pd_cleanup_free_ char *net = pd_image_run_net_key(b->o);
                if (net)
                        chain(b, "RUN network", net);
                char hex[65];
                if (b->live && !b->live_exec)
                        return 0;
                if (!b->live && cache_get(b, hex)) {
                        pd_image_emit(b->o, PD_IMAGE_EV_CACHED, "step", NULL, 0, 0);
                        return push_layer(b, hex, err);
                }
                char **argv;
                if (s->json) {
                        argv = pd_recipe_words(text, true, err);
                } else {
                        argv = calloc(4, sizeof *argv);
                        if (argv) {
                                argv[0] = strdup("/bin/sh");
                                argv[1] = strdup("-c");
                                argv[2] = strdup(text);
                        }
                }
                if (!argv || !argv[0])
                        return argv ? pd_error_setx(err, EINVAL, "line %u: empty RUN", s->line)
                                    : pd_error_set(err, ENOMEM, "RUN");
                r = b->live ? run_live(b, argv, err) : run_step(b, argv, err);
                pd_recipe_words_free(argv);
                return r < 0 ? pd_error_prefix(err, "line %u", s->line) : 0;
        }
        default:
                return pd_error_setx(err, EINVAL, "line %u: unexpected instruction", s->line);
        }
}

static int read_recipe(const char *path, char **out, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat s;
        if (fd < 0 || fstat(fd, &s) < 0)
                return pd_error_set(err, errno, "recipe '%.200s'", path);
        if (!S_ISREG(s.st_mode) || s.st_size > PD_RECIPE_MAX_BYTES)
                return pd_error_setx(err, EINVAL, "recipe '%.200s' is not a regular file of at most %u bytes", path,
                                     PD_RECIPE_MAX_BYTES);
        char *buf = malloc((size_t)s.st_size + 1);
        if (!buf)
                return pd_error_set(err, ENOMEM, "recipe");
        ssize_t n = pd_read_all(fd, buf, (size_t)s.st_size);
        buf[n > 0 ? n : 0] = '\0';
        if (memchr(buf, '\0', n > 0 ? (size_t)n : 0)) {
                free(buf);
                return pd_error_setx(err, EINVAL, "recipe '%.200s' is not text", path);
        }
        *out = buf;
        return 0;
}

/* The start and ready commands a recipe sets (docs/templates.md "Start
 * and ready commands"): LABEL paddock.start-cmd=... paddock.ready-cmd=...
 * paddock.ready-timeout=N (E2B's setStartCmd becomes those) into *out, or
 * NULL. A ready-timeout that is not a whole number of seconds in 1..600 is
 * refused: a silent 60 would hide the recipe's mistake. */
static int start_of(json_t *config, json_t **out, struct pd_error *err)
{
        *out = NULL;
        json_t *labels = json_object_get(config, "Labels");
        const char *sc = json_string_value(json_object_get(labels, "paddock.start-cmd"));
        const char *rc = json_string_value(json_object_get(labels, "paddock.ready-cmd"));
        json_t *tv = json_object_get(labels, "paddock.ready-timeout");
        const char *to = json_string_value(tv);
        long t = 60;
        if (tv) {
                char *end = NULL;
                errno = 0;
                t = to && *to >= '0' && *to <= '9' ? strtol(to, &end, 10) : -1;
                if (!to || errno || t < 1 || t > 600 || !end || *end)
                        return pd_error_setx(err, EINVAL, "LABEL paddock.ready-timeout=%.40s: the ready timeout is "
                                             "a whole number of seconds from 1 to 600", to ? to : "?");
        }
        if (!sc || !*sc)
                return 0;
        *out = json_pack("{s:s, s:s, s:I}", "cmd", sc, "ready", rc ? rc : "", "timeout", (json_int_t)t);
        return *out ? 0 : pd_error_set(err, ENOMEM, "start command");
}

/* The build's check of a start command: started in sb as the template's
 * user, ready within the timeout, then killed (the snapshot keeps files,
 * not processes). */
static int check_start(struct build *b, struct pd_live *lv, json_t *start, struct pd_error *err)
{
        const char *user = json_string_value(json_object_get(b->config, "User"));
        uint32_t uid = 1000, gid = 1000;
        char home[PATH_MAX] = "/home/user", uname[80] = "user";
        if (user && *user) {
                json_t *u = NULL;
                if (pd_live_user(lv, user, &u, err) < 0)
                        return pd_error_prefix(err, "USER");
                uid = (uint32_t)json_integer_value(json_object_get(u, "uid"));
                gid = (uint32_t)json_integer_value(json_object_get(u, "gid"));
                snprintf(home, sizeof home, "%s", json_string_value(json_object_get(u, "home")) ?: "/");
                snprintf(uname, sizeof uname, "%s", json_string_value(json_object_get(u, "name")) ?: "user");
                json_decref(u);
        }
        const char *env[MAX_VARS + 8];
        size_t ne = 0;
        char homev[PATH_MAX + 8], userv[100];
        snprintf(homev, sizeof homev, "HOME=%s", home);
        snprintf(userv, sizeof userv, "USER=%s", uname);
        env[ne++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        env[ne++] = homev;
        env[ne++] = userv;
        env[ne++] = "LANG=C.UTF-8";
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(b->config, "Env"), i, e) if (ne < MAX_VARS + 8 && json_string_value(e))
                env[ne++] = json_string_value(e);
        const char *wd = json_string_value(json_object_get(b->config, "WorkingDir"));
        struct pd_template_start ts = { .start = json_string_value(json_object_get(start, "cmd")),
                                        .ready = json_string_value(json_object_get(start, "ready")),
                                        .uid = uid, .gid = gid, .cwd = wd && *wd ? wd : home, .env = env,
                                        .n_env = ne,
                                        .timeout_ms =
                                                (int)json_integer_value(json_object_get(start, "timeout")) * 1000 };
        char head[200];
        snprintf(head, sizeof head, "checking the start command (ready: %.100s)",
                 ts.ready && *ts.ready ? ts.ready : "at once");
        pd_image_emit(b->o, PD_IMAGE_EV_STEP, head, NULL, 0, 0);
        int r = pd_live_sandbox(lv, err);
        uint32_t pid = 0;
        if (r == 0 && (r = pd_template_start(lv->sb, &ts, &pid, err)) < 0)
                pd_error_prefix(err, "the start command");
        if (r == 0 && pid) {
                /* gone before the snapshot: a sandbox starts it again */
                int fd = pd_sandbox_connect(lv->sb, NULL);
                struct pd_client c;
                if (fd >= 0 && pd_client_connect(&c, fd, "paddock-build", NULL) == 0) {
                        (void)pd_client_signal(&c, pid, SIGKILL, true, NULL);
                        pd_client_close(&c);
                }
        }
        if (r == 0)
                pd_image_emit(b->o, PD_IMAGE_EV_STEP, "the start command is ready", NULL, 0, 0);
        return r;
}

static void build_reset(struct build *b)
{
        for (unsigned i = 0; i < b->n_args; i++)
                free(b->args[i]);
        for (unsigned i = 0; i < b->n_pre; i++)
                free(b->pre[i]);
        b->n_args = b->n_pre = 0;
        b->n = 0;
        json_decref(b->config);
        b->config = NULL;
        memset(b->key, 0, sizeof b->key);
        b->live = false;
}

static int run_steps(struct build *b, struct pd_recipe *rec, struct pd_error *err)
{
        int r = 0;
        for (unsigned i = 0; i < rec->n && r == 0; i++) {
                b->step = i + 1;
                r = do_step(b, &rec->steps[i], rec->n, err);
        }
        return r;
}

int pd_image_build(struct pd_state *st, const char *name, const char *recipe_path, const char *context,
                   char *const *build_args, unsigned n_args, const struct pd_image_opts *o, struct pd_error *err)
{
        int r = pd_image_name_check(name, err);
        if (r < 0)
                return r;
        _pd_cleanup_free_ char *text = NULL;
        if ((r = read_recipe(recipe_path, &text, err)) < 0)
                return r;
        struct pd_recipe *rec = calloc(1, sizeof *rec);
        if (!rec)
                return pd_error_set(err, ENOMEM, "recipe");
        if ((r = pd_recipe_parse(text, rec, err)) < 0) {
                free(rec);
                return pd_error_prefix(err, "recipe '%.200s'", recipe_path);
        }
        struct build b = { .st = st, .o = o, .cli_args = build_args, .n_cli = n_args, .ctxfd = -1 };
        b.ctxfd = open(context, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (b.ctxfd < 0) {
                r = pd_error_set(err, errno, "build context '%.200s'", context);
                goto out;
        }
        /* prune waits for the whole build */
        int gc = pd_layers_lock(st, false, err);
        if (gc < 0) {
                r = gc;
                goto out;
        }
        r = run_steps(&b, rec, err);
        if (r == 0 && b.n == 0 && !b.live)
                r = pd_error_setx(err, EINVAL, "the recipe makes no layer (FROM scratch and nothing copied)");
        if (r == 0) {
                /* unchanged: the template is already this */
                json_t *old = pd_image_config(st, name);
                const char *od = json_string_value(json_object_get(old, "digest"));
                char digest[80];
                snprintf(digest, sizeof digest, "recipe:%s", b.key);
                bool same = od && !strcmp(od, digest) &&
                            (b.live ? pd_template_is_built_snapshot(st, name) : pd_template_is_image(st, name));
                json_t *start = NULL;
                r = start_of(b.config, &start, err);
                if (r < 0) {
                        /* refused before anything runs or is registered */
                } else if (same) {
                        pd_image_emit(o, PD_IMAGE_EV_STEP, "unchanged", NULL, 0, 0);
                } else if (b.live) {
                        /* the second pass: the steps, in the sandbox */
                        build_reset(&b);
                        b.live_exec = true;
                        r = run_steps(&b, rec, err);
                        json_decref(start);
                        start = NULL;
                        if (r == 0)
                                r = start_of(b.config, &start, err);
                        if (r == 0 && start)
                                r = check_start(&b, &b.lv, start, err);
                        json_t *run = NULL;
                        const char *user = json_string_value(json_object_get(b.config, "User"));
                        if (r == 0 && user && *user && pd_live_user(&b.lv, user, &run, err) < 0)
                                r = pd_error_prefix(err, "USER");
                        if (r == 0) {
                                json_t *doc = json_pack("{s:s, s:s, s:s, s:O, s:I}", "kind", "recipe", "source",
                                                        recipe_path, "digest", digest, "config", b.config, "created",
                                                        (json_int_t)time(NULL));
                                if (run)
                                        json_object_set(doc, "run", run);
                                if (start)
                                        json_object_set(doc, "start", start);
                                json_object_set_new(doc, "parent", json_string(b.lv.parent));
                                pd_image_emit(o, PD_IMAGE_EV_STEP, "snapshotting the build's sandbox", NULL, 0, 0);
                                r = pd_live_finish(&b.lv, name, doc, err);
                                json_decref(doc);
                        }
                        json_decref(run);
                } else {
                        struct pd_image_opts ro = *o;
                        ro.replace = true;
                        json_t *meta = json_pack("{s:s, s:s, s:s}", "kind", "recipe", "source", recipe_path, "digest",
                                                 digest);
                        if (start)
                                json_object_set(meta, "start", start);
                        if (start) {
                                /* the start command checked in a sandbox of
                                 * the result before it is registered */
                                char tname[65];
                                snprintf(tname, sizeof tname, "paddock-build-%d-start", (int)getpid());
                                struct pd_image_opts quiet = { .replace = true };
                                json_t *bm = json_pack("{s:s}", "kind", "build");
                                r = pd_image_register(st, tname, b.layers, b.n, b.config, bm, &quiet, err);
                                json_decref(bm);
                                if (r == 0) {
                                        struct pd_live lv = { .st = st };
                                        snprintf(lv.parent, sizeof lv.parent, "%s", tname);
                                        r = check_start(&b, &lv, start, err);
                                        pd_live_end(&lv);
                                        struct pd_error e3;
                                        (void)pd_image_remove(st, tname, &e3);
                                }
                        }
                        /* an earlier build of this name made on base: the
                         * new one is registered under a name of its own and
                         * swapped in (pd_snapshot_swap) once whole, so a
                         * failure on the way leaves the old one usable */
                        bool over_snapshot = r == 0 && pd_template_is_built_snapshot(st, name);
                        char newname[65];
                        snprintf(newname, sizeof newname, "paddock-build-%d-new", (int)getpid());
                        if (r == 0) {
                                pd_image_emit(o, PD_IMAGE_EV_STEP, "registering", NULL, 0, 0);
                                struct pd_error e3;
                                if (over_snapshot)
                                        (void)pd_image_remove(st, newname, &e3);
                                r = pd_image_register(st, over_snapshot ? newname : name, b.layers, b.n, b.config,
                                                      meta, &ro, err);
                                if (r == 0 && over_snapshot) {
                                        if ((r = pd_snapshot_swap(st, newname, name, err)) < 0)
                                                pd_error_prefix(err, "replace template '%s'", name);
                                        /* the new one's on failure, the old one's after the swap */
                                        (void)pd_image_remove(st, newname, &e3);
                                }
                        }
                        json_decref(meta);
                }
                json_decref(start);
                json_decref(old);
        }
        close(gc);
out:
        pd_live_end(&b.lv);
        if (b.ctxfd >= 0)
                close(b.ctxfd);
        for (unsigned i = 0; i < b.n_args; i++)
                free(b.args[i]);
        for (unsigned i = 0; i < b.n_pre; i++)
                free(b.pre[i]);
        free(b.layers);
        json_decref(b.config);
        pd_recipe_free(rec);
        free(rec);
        return r < 0 ? pd_error_prefix(err, "build '%s'", name) : 0;
}
