/* Image templates (image.h): registering one from store layers (with its
 * own small top layer), and listing, inspecting, removing, pruning. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "image/image.h"
#include "lib/openat2.h"
#include "image/layers.h"
#include "lib/teardown.h"
#include "lib/template.h"
#include "lib/util.h"

#define S PD_STORE_UID_BASE

int pd_image_name_check(const char *name, struct pd_error *err)
{
        if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
                return pd_error_setx(err, EINVAL, "template name '%.80s' looks like a path; names are "
                                     "[a-z0-9-]{1,64} (DESIGN §4: a name, never a path)", name);
        if (pd_template_name_check(name) < 0)
                return pd_error_setx(err, EINVAL, "invalid template name '%.80s' (names are [a-z0-9-]{1,64})", name);
        if (!strcmp(name, "base"))
                return pd_error_setx(err, EINVAL, "'base' is the built-in template; pick another name");
        if (!strncmp(name, "fork-", 5) || !strncmp(name, "paddock-", 8))
                return pd_error_setx(err, EINVAL, "names starting with 'fork-' or 'paddock-' are reserved");
        return 0;
}

void pd_image_emit(const struct pd_image_opts *o, enum pd_image_event_kind kind, const char *text,
                   const char *layer, uint64_t done, uint64_t total)
{
        if (!o || !o->progress)
                return;
        struct pd_image_event ev = { kind, text, layer, done, total };
        o->progress(&ev, o->arg);
}

/* ---- looking into an image's layers (top first) ---- */

static int tree_fd(struct pd_state *st, const char *hex)
{
        char p[128];
        snprintf(p, sizeof p, "layers/%s/tree", hex);
        return openat(st->dirfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static bool is_whiteout(const struct stat *s)
{
        return S_ISCHR(s->st_mode) && s->st_rdev == makedev(0, 0);
}

static bool is_opaque(int dfd)
{
        char v[4];
        ssize_t n = fgetxattr(dfd, "user.overlay.opaque", v, sizeof v);
        return n == 1 && v[0] == 'y';
}

/* What path (relative, no symlinks followed) is in the merged image: an
 * O_RDONLY fd (O_PATH for non-files) and its stat, or -ENOENT. */
int pd_image_lookup(struct pd_state *st, char (*top_first)[65], unsigned n, const char *path, struct stat *out)
{
        for (unsigned l = 0; l < n; l++) {
                int d = tree_fd(st, top_first[l]);
                if (d < 0)
                        return -errno;
                char buf[PATH_MAX];
                snprintf(buf, sizeof buf, "%s", path);
                char *save = NULL;
                bool hidden = false;
                for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                        bool last = !save || !*save;
                        struct stat s;
                        if (fstatat(d, c, &s, AT_SYMLINK_NOFOLLOW) < 0) {
                                /* absent here: an opaque directory hides the rest */
                                hidden = is_opaque(d);
                                break;
                        }
                        if (is_whiteout(&s)) {
                                hidden = true;
                                break;
                        }
                        if (last) {
                                int fd = openat(d, c, (S_ISREG(s.st_mode) ? O_RDONLY : O_PATH) | O_NOFOLLOW | O_CLOEXEC);
                                close(d);
                                if (fd >= 0)
                                        *out = s;
                                return fd < 0 ? -errno : fd;
                        }
                        if (!S_ISDIR(s.st_mode)) {
                                hidden = true;
                                break;
                        }
                        int nd = openat(d, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        close(d);
                        d = nd;
                        if (d < 0)
                                return -errno;
                }
                if (d >= 0)
                        close(d);
                if (hidden)
                        return -ENOENT;
        }
        return -ENOENT;
}

static bool exists(struct pd_state *st, char (*top_first)[65], unsigned n, const char *path)
{
        struct stat s;
        int fd = pd_image_lookup(st, top_first, n, path, &s);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

/* A small text file of the image (passwd, group) into a malloc'd string. */
char *pd_image_read_file(struct pd_state *st, char (*top_first)[65], unsigned n, const char *path)
{
        struct stat s;
        int fd = pd_image_lookup(st, top_first, n, path, &s);
        if (fd < 0)
                return NULL;
        char *buf = NULL;
        if (S_ISREG(s.st_mode) && s.st_size < (1 << 20) && (buf = malloc((size_t)s.st_size + 1))) {
                ssize_t r = pd_read_all(fd, buf, (size_t)s.st_size);
                buf[r > 0 ? r : 0] = '\0';
        }
        close(fd);
        return buf;
}

/* Field f (0-based) of the colon-separated line of the account whose
 * field key_field equals key. */
static bool db_find(const char *db, unsigned key_field, const char *key, char fields[7][256])
{
        if (!db)
                return false;
        for (const char *line = db; *line;) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t)(end - line) : strlen(line);
                unsigned f = 0;
                size_t k = 0;
                memset(fields, 0, 7 * 256);
                for (size_t i = 0; i < len && f < 7; i++) {
                        if (line[i] == ':') {
                                f++;
                                k = 0;
                        } else if (k < 255) {
                                fields[f][k++] = line[i];
                        }
                }
                if (f >= 2 && !strcmp(fields[key_field], key))
                        return true;
                line = end ? end + 1 : line + len;
        }
        return false;
}

static bool all_digits(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* The image's User ("name", "uid", "name:group", "uid:gid") as ids and a
 * home, against its own passwd and group. */
int pd_image_resolve_user(const char *spec, const char *passwd, const char *group, json_t **out, struct pd_error *err)
{
        char u[256], g[256] = "";
        snprintf(u, sizeof u, "%s", spec);
        char *colon = strchr(u, ':');
        if (colon) {
                *colon = '\0';
                snprintf(g, sizeof g, "%s", colon + 1);
        }
        char f[7][256];
        unsigned long uid, gid;
        const char *home = "/", *name = u;
        bool found = all_digits(u) ? db_find(passwd, 2, u, f) : db_find(passwd, 0, u, f);
        if (found) {
                uid = strtoul(f[2], NULL, 10);
                gid = strtoul(f[3], NULL, 10);
                home = f[5][0] ? f[5] : "/";
                name = f[0];
        } else if (all_digits(u)) {
                uid = gid = strtoul(u, NULL, 10);
        } else {
                return pd_error_setx(err, ENOENT, "the image's User '%.64s' is not in its /etc/passwd", spec);
        }
        if (*g) {
                char gf[7][256];
                if (all_digits(g))
                        gid = strtoul(g, NULL, 10);
                else if (db_find(group, 0, g, gf))
                        gid = strtoul(gf[2], NULL, 10);
                else
                        return pd_error_setx(err, ENOENT, "the image's User group '%.64s' is not in its /etc/group", g);
        }
        if (uid >= PD_STORE_ID_RANGE || gid >= PD_STORE_ID_RANGE)
                return pd_error_setx(err, ERANGE, "the image's User '%.64s' is outside 0..65535", spec);
        *out = json_pack("{s:s, s:I, s:I, s:s}", "name", name, "uid", (json_int_t)uid, "gid", (json_int_t)gid,
                         "home", home);
        return 0;
}

/* ---- the template's own layer ---- */

static int put_file(int dfd, const char *name, const char *text, mode_t mode, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0 || pd_write_all(fd, text, strlen(text)) < 0 || fchown(fd, S, S) < 0 || fchmod(fd, mode) < 0)
                return pd_error_set(err, errno ? errno : EIO, "write '%s' of the template's own layer", name);
        return 0;
}

static int put_dir(int dfd, const char *name, mode_t mode, uint32_t owner, struct pd_error *err)
{
        if (mkdirat(dfd, name, mode) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s' in the template's own layer", name);
        if (fchownat(dfd, name, owner, owner, AT_SYMLINK_NOFOLLOW) < 0 || fchmodat(dfd, name, mode, 0) < 0)
                return pd_error_set(err, errno, "set up '%s' in the template's own layer", name);
        return 0;
}

/* rootfs/: mount points and the usual directories the image lacks,
 * /home/user, the `user` account (uid 1000) if the image has no uid 1000,
 * hosts and hostname; run: the default user it found for the image. */
static int own_layer(struct pd_state *st, int rootfd, char (*tf)[65], unsigned n, json_t *config, json_t **run,
                     struct pd_error *err)
{
        static const struct { const char *path; mode_t mode; } dirs[] = {
                { "proc", 0555 }, { "sys", 0555 }, { "dev", 0755 }, { "tmp", 01777 }, { "root", 0700 },
                { "home", 0755 }, { "mnt", 0755 },
        };
        int r;
        if (fchown(rootfd, S, S) < 0 || fchmod(rootfd, 0755) < 0)
                return pd_error_set(err, errno, "set up the template's own layer");
        for (size_t i = 0; i < PD_ARRAY_SIZE(dirs); i++)
                if (!exists(st, tf, n, dirs[i].path) && (r = put_dir(rootfd, dirs[i].path, dirs[i].mode, S, err)) < 0)
                        return r;
        if ((r = put_dir(rootfd, "run", 0755, S, err)) < 0 || (r = put_dir(rootfd, "run/paddock", 0755, S, err)) < 0 ||
            (r = put_dir(rootfd, "etc", 0755, S, err)) < 0)
                return r;
        if (!exists(st, tf, n, "home/user")) {
                if ((r = put_dir(rootfd, "home", 0755, S, err)) < 0 ||
                    (r = put_dir(rootfd, "home/user", 0755, S + PD_USER_UID, err)) < 0)
                        return r;
        }
        _pd_cleanup_close_ int etc = openat(rootfd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (etc < 0)
                return pd_error_set(err, errno, "open the template's etc");
        _pd_cleanup_free_ char *passwd = pd_image_read_file(st, tf, n, "etc/passwd");
        _pd_cleanup_free_ char *group = pd_image_read_file(st, tf, n, "etc/group");
        const char *shell = exists(st, tf, n, "bin/bash") ? "/bin/bash" : "/bin/sh";
        char f[7][256], line[512];
        /* passwd and group: the image's, plus `user` (uid 1000) when it
         * has no uid 1000 (see docs/templates.md, "Users") */
        size_t plen = passwd ? strlen(passwd) : 0;
        _pd_cleanup_free_ char *np = malloc(plen + 1024);
        if (!np)
                return pd_error_set(err, ENOMEM, "passwd");
        if (passwd) {
                memcpy(np, passwd, plen + 1);
        } else {
                snprintf(np, 1024, "root:x:0:0:root:/root:%s\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
                         shell);
                plen = strlen(np);
        }
        if (plen && np[plen - 1] != '\n')
                strcat(np, "\n");
        if (!db_find(np, 2, "1000", f) && !db_find(np, 0, "user", f)) {
                snprintf(line, sizeof line, "user:x:1000:1000:user:/home/user:%s\n", shell);
                strcat(np, line);
        }
        size_t glen = group ? strlen(group) : 0;
        _pd_cleanup_free_ char *ng = malloc(glen + 1024);
        if (!ng)
                return pd_error_set(err, ENOMEM, "group");
        if (group)
                memcpy(ng, group, glen + 1);
        else
                snprintf(ng, 1024, "root:x:0:\nnogroup:x:65534:\n");
        glen = strlen(ng);
        if (glen && ng[glen - 1] != '\n')
                strcat(ng, "\n");
        if (!db_find(ng, 2, "1000", f) && !db_find(ng, 0, "user", f))
                strcat(ng, "user:x:1000:\n");
        if ((r = put_file(etc, "passwd", np, 0644, err)) < 0 || (r = put_file(etc, "group", ng, 0644, err)) < 0 ||
            (r = put_file(etc, "hosts", "127.0.0.1\tlocalhost paddock\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                          0644, err)) < 0 ||
            (r = put_file(etc, "hostname", "paddock\n", 0644, err)) < 0 ||
            (r = put_file(etc, "resolv.conf", "# no network in this sandbox\n", 0644, err)) < 0)
                return r;
        /* the default user: the image's User, else paddock's `user` */
        const char *user = json_string_value(json_object_get(config, "User"));
        if (user && *user)
                return pd_image_resolve_user(user, np, ng, run, err);
        *run = json_pack("{s:s, s:I, s:I, s:s}", "name", "user", "uid", (json_int_t)PD_USER_UID, "gid",
                         (json_int_t)PD_USER_UID, "home", "/home/user");
        return 0;
}

/* ---- registering ---- */

static int write_json(int dfd, const char *name, json_t *j, struct pd_error *err)
{
        char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!text)
                return pd_error_set(err, ENOMEM, "encode %s", name);
        _pd_cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        int r = fd < 0 ? -errno : pd_write_all(fd, text, strlen(text));
        free(text);
        return r < 0 ? pd_error_set(err, -r, "write %s", name) : 0;
}

/* Install the directory tmp as templates/<name>: a new name by rename; an
 * image template of that name (opts->replace) by exchange, refused while
 * something uses it. Under the templates' lock. */
static int install(struct pd_state *st, const char *tmp, const char *name, const struct pd_image_opts *o,
                   struct pd_error *err)
{
        /* a `paddock run` that used the old one may still be tearing
         * down: not "in use" for that (pd_image_remove) */
        (void)pd_teardown_wait(st);
        _pd_cleanup_close_ int lock = pd_template_lock(st, err);
        if (lock < 0)
                return lock;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/templates/%s", st->dir, name);
        if (rename(tmp, path) == 0)
                return 0;
        if (errno != EEXIST && errno != ENOTEMPTY)
                return pd_error_set(err, errno, "install template '%s'", name);
        if (!pd_template_is_image(st, name) || pd_snapshot_is(st, name))
                return pd_error_setx(err, EEXIST, "a template or snapshot named '%s' exists already and is not "
                                     "an image template", name);
        if (!o->replace)
                return pd_error_setx(err, EEXIST, "template '%s' exists already (`paddock template rm %s` first, "
                                     "or --replace)", name, name);
        char who[80];
        if (pd_template_user(st, name, who, sizeof who))
                return pd_error_setx(err, EBUSY, "template '%s' is in use by %s%s; it can be replaced once "
                                     "nothing uses it", name, who[0] == '@' ? "snapshot " : "sandbox ",
                                     who[0] == '@' ? who + 1 : who);
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) < 0)
                return pd_error_set(err, errno, "replace template '%s'", name);
        /* tmp now holds the old one */
        pd_rm_rf(tmp, NULL);
        return 0;
}

int pd_image_register(struct pd_state *st, const char *name, char (*layers)[65], unsigned n, json_t *config,
                      json_t *meta, const struct pd_image_opts *o, struct pd_error *err)
{
        if (n == 0)
                return pd_error_setx(err, EINVAL, "an image with no layers");
        char flat[65];
        char(*use)[65] = layers;
        unsigned nuse = n;
        _pd_cleanup_free_ char(*merged)[65] = NULL;
        if (n > PD_MAX_IMAGE_LAYERS) {
                /* overlay and the start path take so many lower layers:
                 * the bottom ones become one */
                unsigned k = n - PD_MAX_IMAGE_LAYERS + 1;
                pd_image_emit(o, PD_IMAGE_EV_STEP, "flattening the bottom layers (more than the overlay limit)",
                              NULL, 0, 0);
                int r = pd_image_flatten(st, layers, k, flat, err);
                if (r < 0)
                        return r;
                merged = calloc(PD_MAX_IMAGE_LAYERS, 65);
                if (!merged)
                        return pd_error_set(err, ENOMEM, "layers");
                memcpy(merged[0], flat, 65);
                for (unsigned i = k; i < n; i++)
                        memcpy(merged[i - k + 1], layers[i], 65);
                use = merged;
                nuse = PD_MAX_IMAGE_LAYERS;
        }
        char tf[PD_MAX_IMAGE_LAYERS][65];
        for (unsigned i = 0; i < nuse; i++)
                memcpy(tf[i], use[nuse - 1 - i], 65);

        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/templates/.new-%s-%d", st->dir, name, (int)getpid());
        pd_rm_rf(tmp, NULL);
        if (pd_mkdir_p(tmp, 0755, err) < 0)
                return -1;
        (void)chmod(tmp, 0755);
        int r;
        json_t *run = NULL, *doc = NULL;
        _pd_cleanup_close_ int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
                r = pd_error_set(err, errno, "open '%s'", tmp);
                goto fail;
        }
        if (mkdirat(dfd, "rootfs", 0755) < 0 || mkdirat(dfd, "users", 0700) < 0) {
                r = pd_error_set(err, errno, "create '%s/rootfs'", tmp);
                goto fail;
        }
        {
                _pd_cleanup_close_ int rootfd = openat(dfd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (rootfd < 0) {
                        r = pd_error_set(err, errno, "open '%s/rootfs'", tmp);
                        goto fail;
                }
                if ((r = own_layer(st, rootfd, tf, nuse, config, &run, err)) < 0)
                        goto fail;
        }
        json_t *ids = json_array();
        uint64_t total = 0;
        for (unsigned i = 0; i < nuse; i++) {
                json_array_append_new(ids, json_string(use[i]));
                total += pd_layers_layer_bytes(st, use[i]);
        }
        doc = json_deep_copy(meta ? meta : json_object());
        if (!doc)
                doc = json_object();
        json_object_set_new(doc, "config", config ? json_deep_copy(config) : json_object());
        json_object_set_new(doc, "run", run);
        run = NULL;
        json_object_set_new(doc, "layers", ids);
        json_object_set_new(doc, "bytes", json_integer((json_int_t)total));
        json_object_set_new(doc, "created", json_integer((json_int_t)time(NULL)));
        if ((r = write_json(dfd, "config.json", doc, err)) < 0)
                goto fail;
        /* the list the start path reads: top first, written last (its
         * presence makes the directory an image template) */
        {
                char buf[PD_MAX_IMAGE_LAYERS * 66 + 1];
                size_t len = 0;
                for (unsigned i = 0; i < nuse; i++)
                        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\n", tf[i]);
                _pd_cleanup_close_ int fd = openat(dfd, "layers", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (fd < 0 || pd_write_all(fd, buf, len) < 0) {
                        r = pd_error_set(err, errno ? errno : EIO, "write the layer list");
                        goto fail;
                }
        }
        if ((r = install(st, tmp, name, o, err)) < 0)
                goto fail;
        json_decref(doc);
        return 0;
fail:
        json_decref(run);
        json_decref(doc);
        pd_rm_rf(tmp, NULL);
        return r;
}

json_t *pd_image_config(struct pd_state *st, const char *name)
{
        char p[PATH_MAX];
        if (pd_template_name_check(name) < 0)
                return NULL;
        snprintf(p, sizeof p, "%s/templates/%s/config.json", st->dir, name);
        return json_load_file(p, 0, NULL);
}
