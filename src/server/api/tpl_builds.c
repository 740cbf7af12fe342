/* Template builds the server runs for a key (templates.h): records, who
 * sees what, the registry allowlist, the context upload's unpacking and
 * the build child. The build is the local CLI's own code (`paddock
 * template pull|build`) run as a child with --no-local (no host sources)
 * and --status-file: the server needs no thread of its own per build,
 * and a build survives a restart of the server as sandboxes do. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/image.h"
#include "image/recipe.h"
#include "lib/template.h"
#include "lib/util.h"
#include "server/api/templates.h"
#include "server/core/log.h"

extern char **environ;

void pd_tpl_dir(struct pd_server *srv, const char *name, char *out, size_t size)
{
        snprintf(out, size, "%s/template-builds/%s", srv->state.dir, name);
}

static bool read_small(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, size - 1);
        close(fd);
        if (n < 0)
                return false;
        buf[n] = '\0';
        return true;
}

static int write_small(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        int r = pd_write_all(fd, text, strlen(text));
        close(fd);
        return r < 0 ? r : 0;
}

static void set_status(const char *dir, const char *status, const char *error)
{
        char p[PATH_MAX], tmp[PATH_MAX];
        snprintf(p, sizeof p, "%s/status", dir);
        snprintf(tmp, sizeof tmp, "%s/status.srv", dir);
        json_t *j = json_pack("{s:s}", "status", status);
        if (error)
                json_object_set_new(j, "error", json_string(error));
        if (json_dump_file(j, tmp, JSON_COMPACT) == 0)
                (void)rename(tmp, p);
        json_decref(j);
}

/* A record made by an admin key for a shared template: <dir>/shared. */
static bool record_shared(struct pd_server *srv, const char *name)
{
        char p[PATH_MAX];
        pd_tpl_dir(srv, name, p, sizeof p);
        strncat(p, "/shared", sizeof p - strlen(p) - 1);
        return faccessat(AT_FDCWD, p, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int pd_tpl_visible(struct pd_server *srv, const char *name, const char *key_id, char *owner)
{
        char p[PATH_MAX], buf[64];
        owner[0] = '\0';
        if (record_shared(srv, name))
                return 1;
        pd_tpl_dir(srv, name, p, sizeof p);
        strncat(p, "/owner", sizeof p - strlen(p) - 1);
        if (read_small(p, buf, sizeof buf)) {
                buf[strcspn(buf, "\n")] = '\0';
                snprintf(owner, 33, "%s", buf);
                return !strcmp(buf, key_id);
        }
        return 1;
}

void pd_tpl_status(struct pd_server *srv, const char *name, char status[16], char *error, size_t errsz)
{
        char p[PATH_MAX];
        status[0] = '\0';
        if (error && errsz)
                error[0] = '\0';
        pd_tpl_dir(srv, name, p, sizeof p);
        strncat(p, "/status", sizeof p - strlen(p) - 1);
        json_t *j = json_load_file(p, 0, NULL);
        if (!j)
                return;
        snprintf(status, 16, "%s", json_string_value(json_object_get(j, "status")) ?: "");
        if (error && errsz)
                snprintf(error, errsz, "%s", json_string_value(json_object_get(j, "error")) ?: "");
        json_decref(j);
        /* under way, by a child that is gone without a word (this server's
         * waiter would have said): one that ran when an earlier server
         * stopped, and died meanwhile */
        if (!strcmp(status, "queued") || !strcmp(status, "building")) {
                char pp[PATH_MAX], buf[32];
                pd_tpl_dir(srv, name, pp, sizeof pp);
                strncat(pp, "/pid", sizeof pp - strlen(pp) - 1);
                long pid = read_small(pp, buf, sizeof buf) ? strtol(buf, NULL, 10) : 0;
                if (pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
                        snprintf(status, 16, "failed");
                        if (error && errsz)
                                snprintf(error, errsz, "the build process ended without a result");
                }
        }
}

/* ---- image references ---- */

unsigned pd_tpl_ref_check(struct pd_server *srv, const char *ref, char *why, size_t whysz)
{
        size_t len = strlen(ref);
        if (!strncmp(ref, "docker://", 9)) {
                ref += 9;
                len -= 9;
        }
        /* the characters of a docker reference; never an option to skopeo */
        if (len == 0 || len > 255 || ref[0] == '-' ||
            strspn(ref, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") != len ||
            strstr(ref, "..") || strstr(ref, "//")) {
                snprintf(why, whysz, "malformed image reference '%.100s': expected REGISTRY/REPOSITORY[:TAG]"
                                     "[@sha256:DIGEST]", ref);
                return 400;
        }
        const char *slash = strchr(ref, '/');
        size_t hl = slash ? (size_t)(slash - ref) : 0;
        char host[256];
        snprintf(host, sizeof host, "%.*s", (int)hl, ref);
        const char *colon = strchr(host, ':');
        bool port_ok = !colon || (colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1));
        bool qualified = slash && hl > 0 && port_ok && slash[1] &&
                         (strchr(host, '.') || colon || !strcmp(host, "localhost"));
        if (!qualified) {
                /* a short name would be resolved through registries.conf's
                 * search list, past the allowlist; a transport (oci:,
                 * oci-archive:, containers-storage:, dir:...) names a host
                 * path or the host's storage (DESIGN §4) */
                snprintf(why, whysz, "image reference '%.100s' must name its registry (REGISTRY/REPOSITORY[:TAG]); "
                                     "host sources (oci:, oci-archive:, docker-archive:, containers-storage:, dir:) "
                                     "are for the local CLI only", ref);
                return 400;
        }
        for (unsigned i = 0; i < srv->cfg.n_template_registries; i++)
                if (!strcasecmp(srv->cfg.template_registries[i], host))
                        return 0;
        if (!srv->cfg.n_template_registries)
                snprintf(why, whysz, "this server pulls images from no registry: the operator allows one with "
                                     "`paddock serve --template-registry HOST[:PORT]`");
        else
                snprintf(why, whysz, "registry '%s' is not allowed on this server (paddock serve "
                                     "--template-registry names the allowed ones)", host);
        return 403;
}

unsigned pd_tpl_recipe_check(struct pd_server *srv, const char *key_id, const char *recipe, char *why,
                             size_t whysz)
{
        struct pd_recipe *rc = calloc(1, sizeof *rc);
        struct pd_error err = { 0 };
        if (!rc) {
                snprintf(why, whysz, "out of memory");
                return 500;
        }
        unsigned st = 0;
        if (pd_recipe_parse(recipe, rc, &err) < 0) {
                snprintf(why, whysz, "recipe: %s", err.msg);
                st = 400;
        }
        for (unsigned i = 0; !st && i < rc->n; i++) {
                if (rc->steps[i].op != PD_R_FROM)
                        continue;
                char what[300];
                snprintf(what, sizeof what, "%s", rc->steps[i].text);
                what[strcspn(what, " \t")] = '\0';
                char owner[40];
                if (strchr(what, '$')) {
                        snprintf(why, whysz, "recipe line %u: FROM with a variable is not taken over HTTP (the "
                                             "registry must be known before the build)", rc->steps[i].line);
                        st = 400;
                } else if (!strcmp(what, "scratch") || !strcmp(what, "base")) {
                        /* base: the build runs in a sandbox of it and
                         * snapshots that (image/build_live.h) */
                        continue;
                } else if (pd_template_name_check(what) == 0 &&
                           (pd_template_is_image(&srv->state, what) ||
                            pd_template_is_built_snapshot(&srv->state, what))) {
                        if (!pd_tpl_visible(srv, what, key_id, owner)) {
                                snprintf(why, whysz, "recipe line %u: unknown template '%s'", rc->steps[i].line,
                                         what);
                                st = 404;
                        }
                } else if ((st = pd_tpl_ref_check(srv, what, why, whysz))) {
                        char m[512];
                        snprintf(m, sizeof m, "recipe line %u: FROM %s", rc->steps[i].line, why);
                        snprintf(why, whysz, "%s", m);
                } else if (pd_template_name_check(what) == 0 && pd_snapshot_is(&srv->state, what)) {
                        /* the builder would take a template of that name
                         * before a registry image: a snapshot (a key's own,
                         * through /snapshots) is not a build base over HTTP */
                        snprintf(why, whysz, "recipe line %u: unknown template '%s' (a snapshot is a build base "
                                             "for the local CLI only)", rc->steps[i].line, what);
                        st = 404;
                }
        }
        pd_recipe_free(rc);
        free(rc);
        return st;
}

/* ---- records ---- */

static unsigned builds_under_way(struct pd_server *srv)
{
        char p[PATH_MAX], status[16];
        snprintf(p, sizeof p, "%s/template-builds", srv->state.dir);
        DIR *d = opendir(p);
        unsigned n = 0;
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                pd_tpl_status(srv, de->d_name, status, NULL, 0);
                n += !strcmp(status, "queued") || !strcmp(status, "building");
        }
        if (d)
                closedir(d);
        return n;
}

unsigned pd_tpl_reserve(struct pd_server *srv, const char *name, const char *key_id, const char *source,
                        char *why, size_t whysz)
{
        struct pd_key k = { 0 };
        snprintf(k.id, sizeof k.id, "%s", key_id);
        return pd_tpl_reserve_as(srv, name, &k, false, source, why, whysz);
}

unsigned pd_tpl_reserve_as(struct pd_server *srv, const char *name, const struct pd_key *key, bool shared,
                           const char *source, char *why, size_t whysz)
{
        const char *key_id = key->id;
        if (shared && !key->admin) {
                snprintf(why, whysz, "only an admin key (`paddock key create --admin`) may make shared templates");
                return 403;
        }
        if (!strcmp(name, "base")) {
                snprintf(why, whysz, "'base' is built in (the host's /usr): no key replaces it");
                return shared ? 403 : 409;
        }
        char dir[PATH_MAX], p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/template-builds", srv->state.dir);
        if (pd_mkdir_p(p, 0700, NULL) < 0) {
                snprintf(why, whysz, "cannot make %s", p);
                return 500;
        }
        if (builds_under_way(srv) >= PD_TPL_BUILDS_MAX) {
                snprintf(why, whysz, "%u template builds are under way on this server; try again when one has "
                                     "ended", PD_TPL_BUILDS_MAX);
                return 429;
        }
        pd_tpl_dir(srv, name, dir, sizeof dir);
        bool had_record = false;
        for (int attempt = 0; attempt < 2; attempt++) {
                if (mkdir(dir, 0700) == 0)
                        break;
                char owner[40], status[16];
                if (errno != EEXIST || attempt) {
                        snprintf(why, whysz, "template '%s' is being created by another request", name);
                        return 409;
                }
                /* a record this request may replace: the key's own one,
                 * or (shared, by an admin key) a shared one */
                bool mine = pd_tpl_visible(srv, name, key_id, owner) && (shared ? !owner[0] : owner[0] != '\0');
                if (!mine) {
                        snprintf(why, whysz, "the name '%s' is taken (names are one namespace for all keys%s)", name,
                                 shared ? "; an admin key replaces shared templates, not a key's own" :
                                 !owner[0] && key->admin ? "; an admin key replaces a shared template with "
                                                           "\"shared\": true" : "");
                        return 409;
                }
                pd_tpl_status(srv, name, status, NULL, 0);
                if (!strcmp(status, "queued") || !strcmp(status, "building")) {
                        snprintf(why, whysz, "template '%s' is being built (GET /api/v1/templates/%s)", name, name);
                        return 409;
                }
                /* the key's own finished record: the new build replaces it
                 * (and its template, unless in use: the build says so) */
                char gone[PATH_MAX + 64];
                snprintf(gone, sizeof gone, "%s/template-builds/.gone-%s-%d", srv->state.dir, name, (int)gettid());
                if (rename(dir, gone) == 0)
                        (void)pd_rm_rf(gone, NULL);
                had_record = true;
        }
        /* a template of this name that no record of this key owns: the
         * operator's (shared), or a snapshot */
        snprintf(p, sizeof p, "%s/templates/%s", srv->state.dir, name);
        struct stat sbuf;
        bool exists = lstat(p, &sbuf) == 0;
        /* an admin key's shared build replaces the operator's image
         * template of that name (the build refuses while it is in use) */
        /* (a recipe built on base is a snapshot with a config.json: a
         * build's own, which a build replaces like an image template) */
        bool built = pd_template_is_image(&srv->state, name) || pd_template_is_built_snapshot(&srv->state, name);
        if (exists && ((!had_record && !shared) || !built ||
                       (pd_snapshot_is(&srv->state, name) && !pd_template_is_built_snapshot(&srv->state, name)))) {
                pd_tpl_unreserve(srv, name);
                snprintf(why, whysz, "the name '%s' is taken (names are one namespace for all keys)%s", name,
                         shared && !pd_snapshot_is(&srv->state, name)
                                 ? "; a registered host directory copy is replaced on the host only" :
                         !shared && key->admin ? "; an admin key replaces a shared template with \"shared\": true" :
                                                 "");
                return 409;
        }
        snprintf(p, sizeof p, "%s/owner", dir);
        char text[64];
        snprintf(text, sizeof text, "%s\n", key_id);
        if (write_small(p, text) < 0) {
                pd_tpl_unreserve(srv, name);
                snprintf(why, whysz, "cannot write the build record");
                return 500;
        }
        snprintf(p, sizeof p, "%s/shared", dir);
        if (shared && write_small(p, "") < 0) {
                pd_tpl_unreserve(srv, name);
                snprintf(why, whysz, "cannot write the build record");
                return 500;
        }
        snprintf(p, sizeof p, "%s/source", dir);
        (void)write_small(p, source);
        set_status(dir, "queued", NULL);
        return 0;
}

void pd_tpl_set_status(struct pd_server *srv, const char *name, const char *status, const char *error)
{
        char dir[PATH_MAX];
        pd_tpl_dir(srv, name, dir, sizeof dir);
        set_status(dir, status, error);
}

void pd_tpl_unreserve(struct pd_server *srv, const char *name)
{
        char dir[PATH_MAX], gone[PATH_MAX + 64];
        pd_tpl_dir(srv, name, dir, sizeof dir);
        /* renamed away first: the waiter of a build child that is still
         * being reaped writes its status under the old name, which is
         * then gone, instead of into a directory half removed (whose
         * rmdir would fail and leave the record) */
        snprintf(gone, sizeof gone, "%s/template-builds/.gone-%s-%d", srv->state.dir, name, (int)gettid());
        if (rename(dir, gone) == 0)
                (void)pd_rm_rf(gone, NULL);
        else
                (void)pd_rm_rf(dir, NULL);
}

/* ---- the build child ---- */

struct waiter {
        pid_t pid;
        char dir[PATH_MAX];
        dev_t dev;      /* the record's directory when the build started: */
        ino_t ino;      /* a new record under the same name is not this one's */
};

/* Reap the child; a child that ended without saying how (killed, or
 * failed before it wrote a status) leaves "failed". */
static void *wait_build(void *arg)
{
        struct waiter *w = arg;
        int ws = 0;
        while (waitpid(w->pid, &ws, 0) < 0 && errno == EINTR)
                ;
        /* reaped late, after the record was deleted or replaced by a new
         * build of the same name: that record is not this child's to judge */
        struct stat now;
        if (stat(w->dir, &now) < 0 || now.st_dev != w->dev || now.st_ino != w->ino) {
                free(w);
                return NULL;
        }
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/status", w->dir);
        json_t *j = json_load_file(p, 0, NULL);
        const char *s = json_string_value(json_object_get(j, "status"));
        if (!s || (strcmp(s, "ready") && strcmp(s, "failed"))) {
                char why[96];
                if (WIFSIGNALED(ws))
                        snprintf(why, sizeof why, "the build process was killed by signal %d", WTERMSIG(ws));
                else
                        snprintf(why, sizeof why, "the build process exited with status %d", WEXITSTATUS(ws));
                set_status(w->dir, "failed", why);
        }
        json_decref(j);
        free(w);
        return NULL;
}

int pd_tpl_start(struct pd_server *srv, const char *name, const char *ref, const char *recipe_rel,
                 char *const *build_args, unsigned n_args, struct pd_error *err)
{
        char exe[PATH_MAX], dir[PATH_MAX], status[PATH_MAX + 16], logp[PATH_MAX + 16], recipe[PATH_MAX + 64],
                ctx[PATH_MAX + 16];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
                return pd_error_set(err, errno, "find paddock's own binary");
        exe[n] = '\0';
        pd_tpl_dir(srv, name, dir, sizeof dir);
        snprintf(status, sizeof status, "%s/status", dir);
        snprintf(logp, sizeof logp, "%s/log", dir);
        snprintf(ctx, sizeof ctx, "%s/context", dir);
        struct pd_strv av = { 0 };
        int r = 0;
        const char *fixed[] = { exe, "template", ref ? "pull" : "build", "--no-local", "--replace", "--status-file",
                                status, "--state-dir", srv->state.dir };
        for (size_t i = 0; i < PD_ARRAY_SIZE(fixed) && r == 0; i++)
                r = pd_strv_add(&av, fixed[i]);
        /* an uploaded archive (tpl_upload.c): the one host source the
         * child may read, in the record's own directory */
        if (ref && (!strncmp(ref, "oci-archive:", 12) || !strncmp(ref, "docker-archive:", 15)))
                r = r ?: pd_strv_add(&av, "--uploaded-archive");
        /* every registry pull of the build (an image, a recipe's FROM)
         * reaches the allowed registries only, redirects included */
        for (unsigned i = 0; i < srv->cfg.n_template_registries && r == 0; i++) {
                r = pd_strv_add(&av, "--egress-allow");
                r = r ?: pd_strv_add(&av, srv->cfg.template_registries[i]);
        }
        if (!srv->cfg.n_template_registries) {
                r = r ?: pd_strv_add(&av, "--egress-allow");
                r = r ?: pd_strv_add(&av, "-");
        }
        /* the RUN steps' network (network.json, tpl_launch.c), through
         * this server's router: its uplink and resolvers */
        char netf[PATH_MAX + 16];
        snprintf(netf, sizeof netf, "%s/network.json", dir);
        if (!ref && faccessat(AT_FDCWD, netf, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
                r = r ?: pd_strv_add(&av, "--network-file");
                r = r ?: pd_strv_add(&av, netf);
                if (srv->cfg.net_uplink) {
                        r = r ?: pd_strv_add(&av, "--net-uplink");
                        r = r ?: pd_strv_add(&av, srv->cfg.net_uplink);
                }
                if (srv->cfg.net_resolver) {
                        r = r ?: pd_strv_add(&av, "--net-resolver");
                        r = r ?: pd_strv_add(&av, srv->cfg.net_resolver);
                }
        }
        if (!ref) {
                snprintf(recipe, sizeof recipe, "%s/%s", ctx, recipe_rel);
                r = r ?: pd_strv_add(&av, "-f");
                r = r ?: pd_strv_add(&av, recipe);
                for (unsigned i = 0; i < n_args && r == 0; i++) {
                        r = pd_strv_add(&av, "--build-arg");
                        r = r ?: pd_strv_add(&av, build_args[i]);
                }
        }
        /* operands after "--": neither a name nor a reference is an option */
        r = r ?: pd_strv_add(&av, "--");
        r = r ?: pd_strv_add(&av, name);
        r = r ?: pd_strv_add(&av, ref ? ref : ctx);
        if (r < 0) {
                pd_strv_free(&av);
                return pd_error_set(err, ENOMEM, "build arguments");
        }
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t at;
        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&at);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, logp, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
        /* its own session: a signal to the server's terminal is not one to
         * the build; the default signal mask and dispositions */
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &all);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        pid_t pid;
        int e = posix_spawn(&pid, exe, &fa, &at, av.v, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
        pd_strv_free(&av);
        if (e)
                return pd_error_set(err, e, "start the build");
        struct waiter *w = calloc(1, sizeof *w);
        pthread_t t;
        pthread_attr_t ta;
        pthread_attr_init(&ta);
        pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
        struct stat dst;
        if (w && stat(dir, &dst) == 0) {
                w->pid = pid;
                snprintf(w->dir, sizeof w->dir, "%s", dir);
                w->dev = dst.st_dev;
                w->ino = dst.st_ino;
        } else {
                free(w);
                w = NULL;
        }
        if (!w || pthread_create(&t, &ta, wait_build, w) != 0) {
                /* nobody would reap it or report it: stop it */
                free(w);
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                pthread_attr_destroy(&ta);
                return pd_error_set(err, EAGAIN, "start the build's waiter");
        }
        pthread_attr_destroy(&ta);
        char pidp[PATH_MAX + 16], pidt[32];
        snprintf(pidp, sizeof pidp, "%s/pid", dir);
        snprintf(pidt, sizeof pidt, "%d\n", (int)pid);
        (void)write_small(pidp, pidt);
        pd_log("info", "template=%s build started pid=%d source=%s", name, (int)pid, ref ? ref : "recipe");
        return 0;
}

/* ---- the context upload ---- */

/* The directory that holds path's last component, under rootfd: made as
 * needed, never through a symlink (O_NOFOLLOW on each step). */
static int open_parent(int rootfd, const char *path, const char **base)
{
        char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s", path);
        int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
        char *p = buf, *slash;
        while (cur >= 0 && (slash = strchr(p, '/'))) {
                *slash = '\0';
                if (*p && strcmp(p, ".")) {
                        if (mkdirat(cur, p, 0755) < 0 && errno != EEXIST) {
                                close(cur);
                                return -errno;
                        }
                        int next = openat(cur, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        int e = errno;
                        close(cur);
                        if (next < 0)
                                return -(e == ELOOP ? ENOTDIR : e);
                        cur = next;
                }
                p = slash + 1;
        }
        *base = path + (p - buf);
        return cur;
}

static int put_entry(struct archive *a, struct archive_entry *e, int rootfd, const char *name, char *why,
                     size_t whysz)
{
        const char *base;
        int pfd = open_parent(rootfd, name, &base);
        if (pfd < 0) {
                snprintf(why, whysz, "context entry '%.200s': %s", name,
                         pfd == -ENOTDIR ? "a path through a symlink or a file" : strerror(-pfd));
                return -EINVAL;
        }
        int r = 0;
        mode_t type = archive_entry_filetype(e), perm = archive_entry_perm(e) & 0755;
        if (!*base) {
                r = 0;
        } else if (type == AE_IFDIR) {
                struct stat st;
                if (mkdirat(pfd, base, perm | 0700) < 0 &&
                    (errno != EEXIST || fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)))
                        r = -errno ?: -EEXIST;
        } else if (type == AE_IFLNK) {
                if (symlinkat(archive_entry_symlink(e) ?: "", pfd, base) < 0)
                        r = -errno;
        } else {
                int fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, perm);
                if (fd < 0) {
                        r = -errno;
                } else {
                        const void *buf;
                        size_t len;
                        int64_t off;
                        int k;
                        while ((k = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK)
                                if (pwrite(fd, buf, len, off) != (ssize_t)len) {
                                        k = ARCHIVE_FATAL;
                                        break;
                                }
                        if (k != ARCHIVE_EOF)
                                r = -EIO;
                        close(fd);
                }
        }
        close(pfd);
        if (r < 0)
                snprintf(why, whysz, "context entry '%.200s': %s", name,
                         r == -EEXIST ? "given twice" : strerror(-r));
        return r < 0 ? -EINVAL : 0;
}

int pd_tpl_untar(int tar_fd, const char *dir, char *why, size_t whysz)
{
        if (mkdir(dir, 0755) < 0) {
                snprintf(why, whysz, "cannot make the context directory");
                return -EIO;
        }
        int rootfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        bool opened;
        struct archive *a = pd_tpl_tar_open(tar_fd, &opened);
        int r = 0;
        if (rootfd < 0 || !opened) {
                snprintf(why, whysz, "the context is not a tar archive");
                r = -EINVAL;
        }
        struct archive_entry *e;
        const char *name;
        struct pd_tpl_tar_walk w = { .what = "context", .entry = "context", .max_entries = PD_TPL_CONTEXT_ENTRIES };
        while (r == 0 && (r = pd_tpl_tar_next(a, &w, &e, &name, why, whysz)) > 0)
                r = put_entry(a, e, rootfd, name, why, whysz);
        archive_read_free(a);
        if (rootfd >= 0)
                close(rootfd);
        if (r < 0)
                (void)pd_rm_rf(dir, NULL);
        return r;
}

unsigned pd_tpl_may_manage(const struct pd_key *key, const char *name, const char *owner, char *why, size_t whysz)
{
        if (!strcmp(name, "base")) {
                snprintf(why, whysz, "'base' is built in (the host's /usr): nobody removes it");
                return 403;
        }
        if (owner[0] || key->admin)
                return 0;
        snprintf(why, whysz, "template '%s' is shared (the operator's, or an admin key's): only an admin key "
                             "(`paddock key create --admin`) or `paddock template rm` on the host removes it", name);
        return 403;
}
