/* Listing, inspecting, removing and pruning templates (image.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/digest.h"
#include "image/image.h"
#include "image/layers.h"
#include "lib/teardown.h"
#include "lib/template.h"
#include "lib/util.h"

/* Live users of a template or snapshot (the same rule as snapshot.c:
 * a sandbox whose runtime dir exists, a snapshot that exists). */
static json_t *users_of(struct pd_state *st, const char *name)
{
        json_t *a = json_array();
        char p[PATH_MAX];
        snprintf(p, sizeof p, "templates/%s/users", name);
        int fd = openat(st->dirfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return a;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char q[PATH_MAX];
                bool snap = de->d_name[0] == '@';
                if (snap)
                        snprintf(q, sizeof q, "templates/%s/snapshot", de->d_name + 1);
                else
                        snprintf(q, sizeof q, "sandboxes/%s", de->d_name);
                if (faccessat(snap ? st->dirfd : st->rundirfd, q, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                        json_array_append_new(a, json_pack("{s:s, s:s}", "kind", snap ? "snapshot" : "sandbox", "id",
                                                           snap ? de->d_name + 1 : de->d_name));
        }
        closedir(d);
        return a;
}

/* How many image templates use each layer: {hex: count}. */
static json_t *layer_refs(struct pd_state *st)
{
        json_t *refs = json_object();
        int fd = openat(st->dirfd, "templates", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return refs;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || !pd_template_is_image(st, de->d_name))
                        continue;
                struct pd_template t;
                struct pd_spec spec;
                struct pd_error e;
                pd_spec_defaults(&spec);
                spec.template_name = de->d_name;
                if (pd_template_resolve(st, &spec, &t, &e) < 0)
                        continue;
                for (unsigned i = 0; i < t.n_layers; i++) {
                        json_t *c = json_object_get(refs, t.layers[i]);
                        json_object_set_new(refs, t.layers[i], json_integer(c ? json_integer_value(c) + 1 : 1));
                }
        }
        closedir(d);
        return refs;
}

static json_t *describe(struct pd_state *st, const char *name, json_t *refs, bool detail)
{
        char p[PATH_MAX];
        struct stat sb;
        json_t *o = NULL;
        if (pd_template_is_image(st, name)) {
                json_t *cfg = pd_image_config(st, name);
                json_t *layers = json_object_get(cfg, "layers");
                uint64_t total = 0, own = 0;
                size_t i;
                json_t *l;
                json_array_foreach(layers, i, l) {
                        uint64_t b = pd_layers_layer_bytes(st, json_string_value(l));
                        total += b;
                        if (json_integer_value(json_object_get(refs, json_string_value(l))) <= 1)
                                own += b;
                }
                o = json_pack("{s:s, s:s, s:O?, s:O?, s:I, s:I, s:I, s:I, s:O?}", "name", name, "kind",
                              json_string_value(json_object_get(cfg, "kind")) ? json_string_value(json_object_get(cfg, "kind"))
                                                                              : "image",
                              "source", json_object_get(cfg, "source"), "digest", json_object_get(cfg, "digest"), "layers",
                              (json_int_t)json_array_size(layers), "bytes_total", (json_int_t)total, "bytes_own",
                              (json_int_t)own, "bytes_shared", (json_int_t)(total - own), "created",
                              json_object_get(cfg, "created"));
                if (detail && o) {
                        json_object_set(o, "config", json_object_get(cfg, "config"));
                        json_object_set(o, "run", json_object_get(cfg, "run"));
                        json_object_set(o, "layer_ids", layers);
                        json_object_set(o, "start", json_object_get(cfg, "start"));
                }
                json_decref(cfg);
        } else if (pd_snapshot_is(st, name)) {
                char parent[65] = "";
                (void)pd_snapshot_parent(st, name, parent);
                snprintf(p, sizeof p, "templates/%s/snapshot", name);
                json_int_t created = fstatat(st->dirfd, p, &sb, 0) == 0 ? (json_int_t)sb.st_mtime : 0;
                json_t *cfg = pd_template_is_built_snapshot(st, name) ? pd_image_config(st, name) : NULL;
                o = json_pack("{s:s, s:s, s:s, s:I}", "name", name, "kind", cfg ? "recipe" : "snapshot", "source",
                              parent, "created", created);
                /* a recipe built on base or a snapshot: what it runs */
                if (o && cfg) {
                        json_object_set(o, "digest", json_object_get(cfg, "digest"));
                        if (detail) {
                                json_object_set(o, "config", json_object_get(cfg, "config"));
                                json_object_set(o, "run", json_object_get(cfg, "run"));
                                json_object_set(o, "start", json_object_get(cfg, "start"));
                        }
                }
                json_decref(cfg);
        } else {
                snprintf(p, sizeof p, "templates/%s/rootfs", name);
                if (fstatat(st->dirfd, p, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(sb.st_mode))
                        return NULL;
                o = json_pack("{s:s, s:s, s:I}", "name", name, "kind", strcmp(name, "base") ? "directory" : "builtin",
                              "created", (json_int_t)sb.st_mtime);
        }
        if (o) {
                json_t *u = users_of(st, name);
                json_object_set_new(o, "used_by", json_integer((json_int_t)json_array_size(u)));
                if (detail)
                        json_object_set_new(o, "users", u);
                else
                        json_decref(u);
        }
        return o;
}

int pd_image_list(struct pd_state *st, json_t **out, struct pd_error *err)
{
        json_t *arr = json_array(), *refs = layer_refs(st);
        int fd = openat(st->dirfd, "templates", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.' || pd_template_name_check(de->d_name) < 0)
                                continue;
                        json_t *o = describe(st, de->d_name, refs, false);
                        if (o)
                                json_array_append_new(arr, o);
                }
                closedir(d);
        } else if (fd >= 0) {
                close(fd);
        }
        json_decref(refs);
        *out = arr;
        return 0;
}

int pd_image_inspect(struct pd_state *st, const char *name, json_t **out, struct pd_error *err)
{
        if (pd_template_name_check(name) < 0)
                return pd_error_setx(err, EINVAL, "invalid template name '%.80s'", name);
        json_t *refs = layer_refs(st);
        *out = describe(st, name, refs, true);
        json_decref(refs);
        if (!*out)
                return pd_error_setx(err, ENOENT, "no template '%s'", name);
        return 0;
}

/* After a remove: the layers of ids (the removed template's) that no
 * template uses any more go too. Only when no pull or build is between
 * unpacking and registering (they hold the store's lock shared and may be
 * about to use one of them): else they stay for `template prune`. */
static void drop_unused_layers(struct pd_state *st, json_t *ids)
{
        struct pd_error e;
        _pd_cleanup_close_ int d = pd_layers_dir(st, &e);
        if (d < 0 || !json_array_size(ids))
                return;
        _pd_cleanup_close_ int lk = openat(d, ".gc.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0)
                return;
        json_t *refs = layer_refs(st);
        size_t i;
        json_t *l;
        json_array_foreach(ids, i, l) {
                const char *hex = json_string_value(l);
                if (!hex || !pd_digest_hex_ok(hex) || json_object_get(refs, hex))
                        continue;
                char p[PATH_MAX], gone[PATH_MAX];
                snprintf(p, sizeof p, "%s/layers/%s", st->dir, hex);
                snprintf(gone, sizeof gone, "%s/layers/.tmp-gone-%s", st->dir, hex);
                /* out of the store by a rename, then deleted */
                if (rename(p, gone) == 0)
                        (void)pd_rm_rf(gone, NULL);
        }
        json_decref(refs);
}

int pd_image_remove(struct pd_state *st, const char *name, struct pd_error *err)
{
        if (pd_template_name_check(name) < 0)
                return pd_error_setx(err, EINVAL, "invalid template name '%.80s'", name);
        if (!strcmp(name, "base"))
                return pd_error_setx(err, EINVAL, "'base' is built in");
        /* a `paddock run` that used it may still be tearing down (its
         * runtime dir, which makes it a user, goes last): not "in use"
         * for that. Before the template lock, which its teardown takes. */
        (void)pd_teardown_wait(st);
        if (pd_snapshot_is(st, name))
                return pd_snapshot_delete(st, name, err);
        if (!pd_template_is_image(st, name)) {
                char p[PATH_MAX];
                snprintf(p, sizeof p, "templates/%s", name);
                if (faccessat(st->dirfd, p, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                        return pd_error_setx(err, ENOTSUP, "template '%s' is a registered host directory copy, not "
                                             "an image template", name);
                return pd_error_setx(err, ENOENT, "no template '%s'", name);
        }
        _pd_cleanup_close_ int lock = pd_template_lock(st, err);
        if (lock < 0)
                return lock;
        char who[80];
        if (pd_template_user(st, name, who, sizeof who)) {
                if (who[0] == '@')
                        return pd_error_setx(err, EBUSY, "template '%s' is in use: snapshot '%s' stacks on it "
                                             "(remove that first)", name, who + 1);
                return pd_error_setx(err, EBUSY, "template '%s' is in use by sandbox %s (remove that first)", name,
                                     who);
        }
        json_t *doc = pd_image_config(st, name);
        char from[PATH_MAX], to[PATH_MAX];
        snprintf(from, sizeof from, "%s/templates/%s", st->dir, name);
        snprintf(to, sizeof to, "%s/templates/.deleted-%s-%d", st->dir, name, (int)getpid());
        /* rename first: a half-removed tree never answers to the name */
        if (rename(from, to) < 0) {
                json_decref(doc);
                return pd_error_set(err, errno, "remove template '%s'", name);
        }
        (void)pd_rm_rf(to, NULL);
        close(lock);
        lock = -1;
        drop_unused_layers(st, json_object_get(doc, "layers"));
        json_decref(doc);
        return 0;
}

static void rm_entries(const char *dir, const char *prefix, unsigned *count)
{
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
                    (prefix && strncmp(de->d_name, prefix, strlen(prefix))))
                        continue;
                char p[PATH_MAX];
                snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
                if (pd_rm_rf(p, NULL) == 0 && count)
                        (*count)++;
        }
        closedir(d);
}

int pd_image_prune(struct pd_state *st, struct pd_prune_result *res, struct pd_error *err)
{
        memset(res, 0, sizeof *res);
        /* no pull or build is between unpacking and registering now */
        _pd_cleanup_close_ int gc = pd_layers_lock(st, true, err);
        if (gc < 0)
                return gc;
        char p[PATH_MAX];
        /* leftovers of crashed pulls and builds, and the caches */
        snprintf(p, sizeof p, "%s/templates", st->dir);
        rm_entries(p, ".new-", NULL);
        rm_entries(p, ".deleted-", NULL);
        /* the image-so-far templates of builds that died (none runs now:
         * builds hold the store's lock) */
        DIR *td = opendir(p);
        if (td) {
                struct dirent *de;
                while ((de = readdir(td)))
                        if (!strncmp(de->d_name, "paddock-build-", 14)) {
                                struct pd_error e2;
                                (void)pd_image_remove(st, de->d_name, &e2);
                        }
                closedir(td);
        }
        snprintf(p, sizeof p, "%s/images/blobs/sha256", st->dir);
        rm_entries(p, NULL, &res->blobs);
        snprintf(p, sizeof p, "%s/images", st->dir);
        rm_entries(p, "tmp-", NULL);
        snprintf(p, sizeof p, "%s/images/steps", st->dir);
        rm_entries(p, NULL, NULL);
        json_t *refs = layer_refs(st);
        _pd_cleanup_close_ int lfd = pd_layers_dir(st, err);
        if (lfd < 0) {
                json_decref(refs);
                return lfd;
        }
        int dup = openat(lfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        bool tmp = !strncmp(de->d_name, ".tmp-", 5);
                        if (!tmp && (de->d_name[0] == '.' || json_object_get(refs, de->d_name)))
                                continue;
                        uint64_t b = tmp ? 0 : pd_layers_layer_bytes(st, de->d_name);
                        snprintf(p, sizeof p, "%s/layers/%s", st->dir, de->d_name);
                        if (pd_rm_rf(p, NULL) == 0 && !tmp) {
                                res->layers++;
                                res->bytes += b;
                        }
                }
                closedir(d);
        }
        json_decref(refs);
        return 0;
}
