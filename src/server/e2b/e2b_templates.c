/* E2B's template build API (docs/e2b.md "Templates"), what the SDK v2's
 * Template.build() calls, on the native builder (api/templates.h):
 *
 *   POST /v3/templates                               reserve: templateID, buildID
 *   GET  /templates/{templateID}/files/{hash}        {present, url}: a signed upload URL
 *   PUT  /e2b/template-files/{templateID}/{hash}     the upload (the URL; no API key)
 *   POST /v2/templates/{templateID}/builds/{buildID} steps -> recipe -> build
 *   GET  /templates/{templateID}/builds/{buildID}/status
 *   GET  /templates/aliases/{alias}                  404 / 403 / 200
 *
 * The templateID is the template's name (E2B's alias; a ":tag" and the
 * tags name the build: e2b_tags.c). The reservation is a native build record (owner, status
 * "waiting"); next to it, <state>/e2b-templates/<name>/ holds build_id and
 * files/<hash>, the uploaded tars, checked when they arrive as the native
 * context upload is (pd_tpl_untar) and kept for the next build of the
 * template (then "present"). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/template.h"
#include "lib/util.h"
#include "server/api/templates.h"
#include "server/core/log.h"
#include "server/core/store.h"
#include "server/e2b/e2b.h"

#define LOG_ENTRIES_MAX 100
#define RECIPE_NAME "e2b.recipe"

static void e2b_dir(struct pd_server *srv, const char *name, char *out, size_t size)
{
        snprintf(out, size, "%s/e2b-templates/%s", srv->state.dir, name);
}

static bool hash_ok(const char *h)
{
        return strlen(h) == 64 && strspn(h, "0123456789abcdef") == 64;
}

/* The first line of a small record file (e2b.h). */
int pd_e2b_read_line(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        close(fd);
        if (n < 0)
                return -EIO;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        return 0;
}

static int write_text(const char *path, const char *text)
{
        char tmp[PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s.new", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        int r = pd_write_all(fd, text, strlen(text));
        close(fd);
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        return r < 0 ? r : 0;
}

/* The templateID of the path: a record of this key's (its own build
 * record; a template without one is the operator's and has no build
 * here). false with a 404 queued. */
static bool own_record(struct pd_req *r, const char *name, enum MHD_Result *ret)
{
        char owner[40], status[16];
        if (pd_template_name_check(name) == 0) {
                pd_tpl_status(r->srv, name, status, NULL, 0);
                if (status[0] && pd_tpl_visible(r->srv, name, r->key.id, owner) && owner[0])
                        return true;
        }
        *ret = pd_e2b_reply_error(r, 404, "template '%.64s' not found", name);
        return false;
}

/* And the build of the path is the template's current one. */
static bool own_build(struct pd_req *r, enum MHD_Result *ret)
{
        const char *name = r->params[0], *build = r->params[1];
        char p[PATH_MAX + 16], id[64];
        if (!own_record(r, name, ret))
                return false;
        /* (a native build of the name since has no E2B build: e2b_tags.c) */
        char rec[PATH_MAX], source[16];
        pd_tpl_dir(r->srv, name, rec, sizeof rec);
        snprintf(p, sizeof p, "%.*s/source", (int)(sizeof p - 8), rec);
        bool e2b = pd_e2b_read_line(p, source, sizeof source) == 0 && !strcmp(source, "e2b");
        e2b_dir(r->srv, name, p, sizeof p);
        strcat(p, "/build_id");
        if (!e2b || pd_e2b_read_line(p, id, sizeof id) < 0 || !pd_e2b_streq(id, build)) {
                *ret = pd_e2b_reply_error(r, 404, "build '%.64s' of template '%s' not found", build, name);
                return false;
        }
        return true;
}

/* ---- POST /v3/templates ---- */

static enum MHD_Result request_build(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        enum MHD_Result ret;
        json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        const char *full = json_string_value(json_object_get(body, "name"));
        if (!full)
                full = json_string_value(json_object_get(body, "alias"));
        char name[80], why[640], dir[PATH_MAX], p[PATH_MAX + 32];
        json_t *tags = json_object_get(body, "tags");
        bool tags_ok = !tags || json_is_null(tags) || json_is_array(tags);
        size_t i;
        json_t *t;
        if (json_is_array(tags))
                json_array_foreach(tags, i, t) tags_ok = tags_ok && json_is_string(t) &&
                                                        pd_e2b_tag_ok(json_string_value(t));
        if (!full || strlen(full) >= sizeof name) {
                json_decref(body);
                return pd_e2b_reply_error(r, 400, "name is required (NAME or NAME:TAG)");
        }
        snprintf(name, sizeof name, "%s", full);
        char *tag = strchr(name, ':');
        if (tag)
                *tag++ = '\0';
        if (pd_template_name_check(name) < 0 || (tag && !pd_e2b_tag_ok(tag)) || !tags_ok) {
                json_decref(body);
                return pd_e2b_reply_error(r, 400, "invalid template name '%.80s' (names are [a-z0-9-]{1,64}, "
                                          "with an optional :TAG; tags an array of tags: 1 to 128 of "
                                          "[A-Za-z0-9_.-], a word character first)", full);
        }
        json_t *out_tags = json_array();
        if (tag)
                json_array_append_new(out_tags, json_string(tag));
        if (json_is_array(tags))
                json_array_foreach(tags, i, t) json_array_append(out_tags, t);
        if (!json_array_size(out_tags))
                json_array_append_new(out_tags, json_string("default"));
        json_decref(body);
        unsigned st = pd_tpl_reserve(r->srv, name, r->key.id, "e2b", why, sizeof why);
        if (st) {
                json_decref(out_tags);
                return pd_e2b_reply_error(r, st, "%s", why);
        }
        /* nothing runs until the build's start: "waiting" (E2B's word), not
         * counted among the builds under way */
        pd_tpl_set_status(r->srv, name, "waiting", NULL);
        unsigned char rnd[16];
        char build[40];
        if (RAND_bytes(rnd, sizeof rnd) != 1) {
                pd_tpl_unreserve(r->srv, name);
                json_decref(out_tags);
                return pd_e2b_reply_error(r, 500, "no randomness");
        }
        rnd[6] = (rnd[6] & 0x0f) | 0x40;
        rnd[8] = (rnd[8] & 0x3f) | 0x80;
        snprintf(build, sizeof build, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", rnd[0],
                 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7], rnd[8], rnd[9], rnd[10], rnd[11], rnd[12],
                 rnd[13], rnd[14], rnd[15]);
        e2b_dir(r->srv, name, dir, sizeof dir);
        /* uploads kept from an earlier build are this key's only: a name
         * deleted and taken by another key starts with none */
        char prev[64];
        snprintf(p, sizeof p, "%s/owner", dir);
        if (pd_e2b_read_line(p, prev, sizeof prev) < 0 || strcmp(prev, r->key.id))
                (void)pd_rm_rf(dir, NULL);
        snprintf(p, sizeof p, "%s/files", dir);
        int k = pd_mkdir_p(p, 0700, NULL);
        snprintf(p, sizeof p, "%s/owner", dir);
        if (k == 0)
                k = write_text(p, r->key.id);
        snprintf(p, sizeof p, "%s/build_id", dir);
        /* the build's tags (e2b_tags.c), which replace those of the build
         * before: paddock keeps one build a template */
        if (k < 0 || write_text(p, build) < 0 || pd_e2b_tags_record(r->srv, name, build, out_tags) < 0) {
                pd_tpl_unreserve(r->srv, name);
                json_decref(out_tags);
                return pd_e2b_reply_error(r, 500, "cannot write the build record");
        }
        pd_log("info", "template=%s e2b request key=%s build=%s", name, r->key.id, build);
        return pd_reply_json(r, 202, json_pack("{s:s, s:s, s:o, s:b, s:[s], s:[s]}", "templateID", name, "buildID",
                                               build, "tags", out_tags, "public", 0, "names", name, "aliases",
                                               name));
}

/* ---- files ---- */

static void upload_token(struct pd_server *srv, const char *owner, const char *name, const char *hash,
                         char out[PD_TOKEN_LEN + 1])
{
        char label[200];
        snprintf(label, sizeof label, "e2b-template-file:%s:%s:%s", owner, name, hash);
        if (pd_token(srv, label, out) < 0)
                out[0] = '\0';
}

static enum MHD_Result file_link(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        enum MHD_Result ret;
        const char *name = r->params[0], *hash = r->params[1];
        if (!own_record(r, name, &ret))
                return ret;
        if (!hash_ok(hash))
                return pd_e2b_reply_error(r, 400, "hash must be 64 lowercase hex characters (sha256)");
        char p[PATH_MAX + 100], tok[PD_TOKEN_LEN + 1], url[1024];
        e2b_dir(r->srv, name, p, sizeof p);
        strcat(p, "/files/");
        strcat(p, hash);
        struct stat sb;
        bool present = lstat(p, &sb) == 0 && S_ISREG(sb.st_mode);
        upload_token(r->srv, r->key.id, name, hash, tok);
        if (!tok[0])
                return pd_e2b_reply_error(r, 500, "cannot sign the upload URL");
        /* on the address the client reached us at (its Host, when it is a
         * plain host[:port]) */
        const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
        if (!host || !*host || strlen(host) > 255 ||
            strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != strlen(host))
                host = "localhost";
        snprintf(url, sizeof url, "http://%s/e2b/template-files/%s/%s?token=%s", host, name, hash, tok);
        return pd_reply_json(r, 201, json_pack("{s:b, s:s}", "present", present, "url", url));
}

struct upload {
        int fd;
        uint64_t len, want;
        struct pd_deferred_error fail;
        char dir[PATH_MAX];
};

static void upload_free(struct pd_req *r, struct upload *u)
{
        if (u->fd >= 0)
                close(u->fd);
        free(u);
        r->route_state = NULL;
}

static enum MHD_Result file_put(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct upload *u = r->route_state;
        const char *name = r->params[0], *hash = r->params[1];
        if (!chunk_len) {
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
                char owner[40], status[16], tok[PD_TOKEN_LEN + 1];
                const char *given = pd_req_query(r, "token");
                const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
                bool known = pd_template_name_check(name) == 0 && hash_ok(hash);
                if (known) {
                        pd_tpl_status(r->srv, name, status, NULL, 0);
                        (void)pd_tpl_visible(r->srv, name, "", owner);
                        known = status[0] && owner[0];
                }
                if (known)
                        upload_token(r->srv, owner, name, hash, tok);
                /* the URL's signature: the key that asked for it owns the
                 * template still */
                if (!known || !given || !tok[0] || !pd_e2b_streq(given, tok))
                        pd_deferred_fail(&u->fail, 403, "forbidden", "this upload URL is not valid (GET "
                                         "/templates/{templateID}/files/{hash} gives one)");
                else if (!cl)
                        pd_deferred_fail(&u->fail, 411, "length_required", "the upload needs a Content-Length");
                else if (strtoull(cl, NULL, 10) > PD_TPL_CONTEXT_MAX)
                        pd_deferred_fail(&u->fail, 413, "too_large", "the upload is over %llu bytes",
                                         (unsigned long long)PD_TPL_CONTEXT_MAX);
                e2b_dir(r->srv, name, u->dir, sizeof u->dir);
                char files[PATH_MAX + 8];
                snprintf(files, sizeof files, "%s/files", u->dir);
                if (!u->fail.status && (pd_mkdir_p(files, 0700, NULL) < 0 ||
                                        (u->fd = open(files, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0))
                        pd_deferred_fail(&u->fail, 500, "internal", "cannot hold the upload");
        }
        if (chunk) {
                pd_tpl_hold_chunk(u->fd, &u->len, "the upload", &u->fail, chunk, *chunk_len);
                *chunk_len = 0;
                return MHD_YES;
        }
        enum MHD_Result ret;
        if (u->fail.status) {
                ret = pd_reply_error(r, u->fail.status, u->fail.code, "%s", u->fail.msg);
                upload_free(r, u);
                return ret;
        }
        /* checked now, as a context upload is: unpacked into a scratch
         * directory that the check leaves or removes */
        char tmp[PATH_MAX + 64], why[640], dst[PATH_MAX + 100], fdp[64];
        snprintf(tmp, sizeof tmp, "%s/.check-%s-%d", u->dir, hash, (int)gettid());
        (void)pd_rm_rf(tmp, NULL);
        int k = pd_tpl_untar(u->fd, tmp, why, sizeof why);
        (void)pd_rm_rf(tmp, NULL);
        if (k < 0) {
                upload_free(r, u);
                return pd_reply_error(r, 400, "bad_request", "%s", why);
        }
        snprintf(dst, sizeof dst, "%s/files/%s", u->dir, hash);
        snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", u->fd);
        (void)unlink(dst);
        if (linkat(AT_FDCWD, fdp, AT_FDCWD, dst, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST) {
                upload_free(r, u);
                return pd_reply_error(r, 500, "internal", "cannot keep the upload");
        }
        pd_log("info", "template=%s e2b upload hash=%.12s bytes=%" PRIu64, name, hash, u->len);
        upload_free(r, u);
        return pd_reply_empty(r, 200);
}

/* ---- POST /v2/templates/{templateID}/builds/{buildID} ---- */

/* The uploads a build's steps name, unpacked into its context as f-<hash>. */
struct uploads {
        json_t *hashes;
        const char *dir;
};

static int unpack_uploads(struct pd_server *srv, const char *rec, void *arg, struct pd_error *err)
{
        struct uploads *up = arg;
        const char *h;
        json_t *unused;
        char why[640];
        json_object_foreach(up->hashes, h, unused) {
                char src[PATH_MAX + 100], to[PATH_MAX + 100];
                snprintf(src, sizeof src, "%s/files/%s", up->dir, h);
                snprintf(to, sizeof to, "%s/context/f-%s", rec, h);
                int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                int k = fd < 0 ? -1 : pd_tpl_untar(fd, to, why, sizeof why);
                if (fd >= 0)
                        close(fd);
                if (k < 0)
                        return pd_error_setx(err, EIO, "unpack upload %.12s: %s", h, fd < 0 ? "gone" : why);
        }
        return 0;
}

static enum MHD_Result start_build(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        enum MHD_Result ret;
        const char *name = r->params[0];
        if (!own_build(r, &ret))
                return ret;
        char status[16], why[640], dir[PATH_MAX], p[PATH_MAX + 200];
        pd_tpl_status(r->srv, name, status, NULL, 0);
        if (strcmp(status, "waiting"))
                return pd_e2b_reply_error(r, 409, "build of template '%s' was started already (%s)", name, status);
        json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        /* a base template: an image template this key may see (the
         * recipe check would take an unknown name for a short reference) */
        const char *from_tpl = json_string_value(json_object_get(body, "fromTemplate"));
        char owner[40];
        bool buildable = from_tpl && (!strcmp(from_tpl, "base") || pd_template_is_image(&r->srv->state, from_tpl) ||
                                      pd_template_is_built_snapshot(&r->srv->state, from_tpl));
        if (from_tpl && !json_object_get(body, "fromImage") && pd_template_name_check(from_tpl) == 0 &&
            (!buildable || !pd_tpl_visible(r->srv, from_tpl, r->key.id, owner))) {
                ret = pd_e2b_reply_error(r, 404, "unknown template '%s'", from_tpl);
                json_decref(body);
                return ret;
        }
        /* the uploads there are */
        json_t *hashes = json_object();
        e2b_dir(r->srv, name, dir, sizeof dir);
        json_t *steps = json_object_get(body, "steps");
        size_t i;
        json_t *s;
        json_array_foreach(steps, i, s) {
                const char *h = json_string_value(json_object_get(s, "filesHash"));
                struct stat sb;
                if (!h || !hash_ok(h))
                        continue;
                snprintf(p, sizeof p, "%s/files/%s", dir, h);
                if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode))
                        json_object_set_new(hashes, h, json_true());
        }
        char *recipe = pd_e2b_recipe(body, hashes, why, sizeof why);
        json_decref(body);
        unsigned st = recipe ? pd_tpl_recipe_check(r->srv, r->key.id, recipe, why, sizeof why) : 400;
        if (st) {
                free(recipe);
                json_decref(hashes);
                return pd_e2b_reply_error(r, st, "%s", why);
        }
        /* the record again, now under way (the limit of builds, the
         * replacement of the template: pd_tpl_launch's); RUN steps get the
         * network E2B's builder has, as far as this server lets E2B have it */
        struct uploads up = { .hashes = hashes, .dir = dir };
        _pd_cleanup_json_ json_t *net = pd_e2b_build_network(r->srv);
        struct pd_tpl_launch l = { .name = name, .key = &r->key, .source = "e2b", .recipe_text = recipe,
                                   .recipe_rel = RECIPE_NAME, .network = net, .prepare = unpack_uploads, .arg = &up,
                                   .keep_failed = true };
        st = pd_tpl_launch(r->srv, &l, why, sizeof why);
        free(recipe);
        json_decref(hashes);
        if (st)
                return pd_e2b_reply_error(r, st, "%s", why);
        pd_log("info", "template=%s e2b build key=%s build=%s", name, r->key.id, r->params[1]);
        return pd_reply_empty(r, 202);
}

/* ---- GET .../status ---- */

static enum MHD_Result build_status(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        enum MHD_Result ret;
        const char *name = r->params[0];
        if (!own_build(r, &ret))
                return ret;
        long long off = 0;
        const char *q = pd_req_query(r, "logsOffset");
        if (q) {
                char *end;
                errno = 0;
                off = strtoll(q, &end, 10);
                if (!*q || *end || errno || off < 0)
                        return pd_e2b_reply_error(r, 400, "logsOffset must be a count of log entries (>= 0)");
        }
        char status[16], error[512], p[PATH_MAX + 16];
        pd_tpl_status(r->srv, name, status, error, sizeof error);
        const char *e2b = !strcmp(status, "waiting") ? "waiting"
                        : !strcmp(status, "ready")   ? "ready"
                        : !strcmp(status, "failed")  ? "error"
                                                     : "building";
        bool over = !strcmp(e2b, "ready") || !strcmp(e2b, "error");
        /* the log: one entry a line; offset and limit count entries */
        json_t *entries = json_array(), *logs = json_array();
        pd_tpl_dir(r->srv, name, p, sizeof p);
        strcat(p, "/log");
        FILE *f = fopen(p, "re");
        char ts[32] = "";
        struct stat sb;
        if (f && fstat(fileno(f), &sb) == 0)
                pd_rfc3339_ms((uint64_t)sb.st_mtim.tv_sec * 1000u + (uint64_t)sb.st_mtim.tv_nsec / 1000000u, ts);
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        long long idx = 0;
        while (f && (n = getline(&line, &cap, f)) >= 0 && json_array_size(entries) < LOG_ENTRIES_MAX) {
                /* a last line without its newline: still being written
                 * while the build runs (the next poll has it), the end
                 * once it is over */
                if (line[n - 1] != '\n' && !over)
                        break;
                if (line[n - 1] == '\n')
                        line[n - 1] = '\0';
                if (idx++ < off)
                        continue;
                json_t *m = json_string(line);
                if (!m)
                        m = json_string("(a line that is not UTF-8)");
                json_array_append_new(entries, json_pack("{s:s, s:s, s:O}", "timestamp", ts, "level", "info",
                                                         "message", m));
                json_array_append_new(logs, m);
        }
        free(line);
        if (f)
                fclose(f);
        json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o}", "templateID", name, "buildID", r->params[1], "status", e2b,
                              "logEntries", entries, "logs", logs);
        if (!strcmp(e2b, "error"))
                json_object_set_new(o, "reason", json_pack("{s:s}", "message", error[0] ? error : "the build failed"));
        return pd_reply_json(r, 200, o);
}

/* ---- GET /templates/aliases/{alias} ---- */

static enum MHD_Result alias_get(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        const char *name = r->params[0];
        char owner[40], status[16];
        if (pd_template_name_check(name) < 0)
                return pd_e2b_reply_error(r, 404, "template alias '%.64s' not found", name);
        pd_tpl_status(r->srv, name, status, NULL, 0);
        bool known = !strcmp(name, "base") || status[0] ||
                     (pd_store_template_exists(r->srv->store, name) &&
                      (!pd_snapshot_is(&r->srv->state, name) || pd_template_is_built_snapshot(&r->srv->state, name)));
        if (!known)
                return pd_e2b_reply_error(r, 404, "template alias '%s' not found", name);
        if (!pd_tpl_visible(r->srv, name, r->key.id, owner))
                return pd_e2b_reply_error(r, 403, "template alias '%s' belongs to another key", name);
        return pd_reply_json(r, 200, json_pack("{s:s, s:b}", "templateID", name, "public", !owner[0]));
}

const struct pd_route pd_routes_e2b_templates[] = {
        { "POST", "/v3/templates", request_build, 0, 0 },
        { "GET", "/templates/{templateID}/files/{hash}", file_link, 0, 0 },
        { "PUT", "/e2b/template-files/{templateID}/{hash}", file_put, PD_ROUTE_PUBLIC | PD_ROUTE_STREAM_BODY, 0 },
        { "POST", "/v2/templates/{templateID}/builds/{buildID}", start_build, 0, 0 },
        { "GET", "/templates/{templateID}/builds/{buildID}/status", build_status, 0, 0 },
        { "GET", "/templates/aliases/{alias}", alias_get, 0, 0 },
        { 0 },
};
