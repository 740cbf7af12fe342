/* E2B's template tags (docs/e2b.md "Templates"), the SDK v2's
 * Template.assignTags / removeTags / getTags:
 *
 *   POST   /templates/tags               {target: "NAME[:TAG]", tags}  201 {buildID, tags}
 *   DELETE /templates/tags               {name, tags}                  204
 *          (without a body: the delete of a snapshot named "tags",
 *          DELETE /templates/{id} of e2b_snapshots.c, which this shadows)
 *   GET    /templates/{templateID}/tags                                200 [{tag, buildID, createdAt}]
 *
 * and Sandbox.create('NAME:TAG'). A tag is another name of one build of
 * an E2B-built template. paddock keeps one build per template (a build
 * replaces the template), so every tag names the current build: the
 * request of a new build (POST /v3/templates) records its own tags and
 * drops those of the build before it, whose root is about to go. The
 * tags live next to the build id, in <state>/e2b-templates/<name>/tags (a
 * JSON array, written then renamed): they outlive a server restart and go
 * with the template's E2B record, and with its build record: a native
 * build of the name (after a native delete, or replacing it) drops them. Only the key that owns the template sees
 * or changes them (another key's template is unknown: 404, as the build
 * routes answer). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/template.h"
#include "lib/util.h"
#include "server/api/templates.h"
#include "server/core/log.h"
#include "server/core/store.h"
#include "server/e2b/e2b.h"

#define TAG_MAX 128
#define TAGS_MAX 64             /* tags on one template */

/* assign and remove read, change and rewrite the file */
static pthread_mutex_t tags_lock = PTHREAD_MUTEX_INITIALIZER;

static void e2b_file(struct pd_server *srv, const char *name, const char *leaf, char *out, size_t size)
{
        snprintf(out, size, "%s/e2b-templates/%s/%s", srv->state.dir, name, leaf);
}

/* createdAt: the wall clock (pd_now_ms is the monotonic one, which made
 * dates in 1970) */
static uint64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool pd_e2b_tag_ok(const char *t)
{
        /* Docker's tag grammar: a word character first, then word
         * characters, '.' and '-' */
        static const char word[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
        size_t n = strlen(t);
        return n >= 1 && n <= TAG_MAX && strchr(word, t[0]) &&
               strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* The template's current build id when key owns it (its build record and
 * its E2B record both), else "" */
static void own_build_id(struct pd_server *srv, const char *name, const char *key_id, char build[64])
{
        char owner[40], status[16], p[PATH_MAX + 80], e2b_owner[40];
        build[0] = '\0';
        if (pd_template_name_check(name) < 0)
                return;
        pd_tpl_status(srv, name, status, NULL, 0);
        if (!status[0] || !pd_tpl_visible(srv, name, key_id, owner) || !owner[0])
                return;
        e2b_file(srv, name, "owner", p, sizeof p);
        if (pd_e2b_read_line(p, e2b_owner, sizeof e2b_owner) < 0 || strcmp(e2b_owner, key_id))
                return;
        /* the template's build is E2B's only while its record says so: a
         * native build of the name since (after a delete, or replacing it)
         * made a template these tags never named. Its build id and tags
         * are stale: dropped, so a later E2B build starts with its own. */
        char rec[PATH_MAX], source[16];
        pd_tpl_dir(srv, name, rec, sizeof rec);
        snprintf(p, sizeof p, "%s/source", rec);
        if (pd_e2b_read_line(p, source, sizeof source) < 0 || strcmp(source, "e2b")) {
                e2b_file(srv, name, "tags", p, sizeof p);
                (void)unlink(p);
                e2b_file(srv, name, "build_id", p, sizeof p);
                (void)unlink(p);
                return;
        }
        e2b_file(srv, name, "build_id", p, sizeof p);
        if (pd_e2b_read_line(p, build, 64) < 0)
                build[0] = '\0';
}

/* The tags of build (entries of another build are stale: dropped). */
static json_t *load_tags(struct pd_server *srv, const char *name, const char *build)
{
        char p[PATH_MAX + 80];
        e2b_file(srv, name, "tags", p, sizeof p);
        json_t *all = json_load_file(p, 0, NULL), *out = json_array(), *e;
        size_t i;
        if (json_is_array(all))
                json_array_foreach(all, i, e) {
                        const char *t = json_string_value(json_object_get(e, "tag"));
                        const char *b = json_string_value(json_object_get(e, "buildID"));
                        if (t && b && !strcmp(b, build) && json_is_string(json_object_get(e, "createdAt")))
                                json_array_append(out, e);
                }
        json_decref(all);
        return out;
}

static int save_tags(struct pd_server *srv, const char *name, json_t *tags)
{
        char p[PATH_MAX + 80], tmp[PATH_MAX + 90];
        e2b_file(srv, name, "tags", p, sizeof p);
        snprintf(tmp, sizeof tmp, "%s.new", p);
        if (json_dump_file(tags, tmp, JSON_COMPACT) < 0)
                return -EIO;
        int fd = open(tmp, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                (void)fsync(fd);
                close(fd);
        }
        if (rename(tmp, p) < 0) {
                int e = -errno;
                (void)unlink(tmp);
                return e;
        }
        return 0;
}

static json_t *find_tag(json_t *tags, const char *tag)
{
        size_t i;
        json_t *e;
        json_array_foreach(tags, i, e) {
                if (!strcmp(json_string_value(json_object_get(e, "tag")), tag))
                        return e;
        }
        return NULL;
}

static bool has_string(json_t *strings, const char *s)
{
        size_t i;
        json_t *e;
        json_array_foreach(strings, i, e) {
                if (!strcmp(json_string_value(e), s))
                        return true;
        }
        return false;
}

static void add_tag(json_t *tags, const char *tag, const char *build, const char *now)
{
        if (!find_tag(tags, tag))
                json_array_append_new(tags, json_pack("{s:s, s:s, s:s}", "tag", tag, "buildID", build, "createdAt",
                                                      now));
}

int pd_e2b_tags_record(struct pd_server *srv, const char *name, const char *build, json_t *tags)
{
        char now[32];
        pd_rfc3339_ms(wall_ms(), now);
        json_t *list = json_array(), *t;
        size_t i;
        json_array_foreach(tags, i, t) add_tag(list, json_string_value(t), build, now);
        pthread_mutex_lock(&tags_lock);
        int k = save_tags(srv, name, list);
        pthread_mutex_unlock(&tags_lock);
        json_decref(list);
        return k;
}

int pd_e2b_tag_resolve(struct pd_server *srv, const char *key_id, const char *ref, char *name, size_t size)
{
        const char *colon = strchr(ref, ':');
        if (!colon || (size_t)(colon - ref) >= size)
                return -ENOENT;
        snprintf(name, size, "%.*s", (int)(colon - ref), ref);
        char build[64];
        own_build_id(srv, name, key_id, build);
        if (!build[0] || !pd_e2b_tag_ok(colon + 1))
                return -ENOENT;
        pthread_mutex_lock(&tags_lock);
        json_t *tags = load_tags(srv, name, build);
        pthread_mutex_unlock(&tags_lock);
        bool found = find_tag(tags, colon + 1) != NULL;
        json_decref(tags);
        return found ? 0 : -ENOENT;
}

/* A tag of the request: "TAG", or "NAME:TAG" of the template itself (a
 * ':' with nothing before or after it is refused, as E2B does). */
static bool request_tag(const char *given, const char *name, char tag[TAG_MAX + 1])
{
        const char *colon = strchr(given, ':');
        const char *t = given;
        if (colon) {
                size_t n = (size_t)(colon - given);
                if (n == 0 || strlen(name) != n || strncmp(given, name, n))
                        return false;
                t = colon + 1;
        }
        if (!pd_e2b_tag_ok(t))
                return false;
        snprintf(tag, TAG_MAX + 1, "%s", t);
        return true;
}

/* The body's tags (an array of 1..TAGS_MAX strings) as bare tags, or NULL
 * with a 400 queued. */
static json_t *body_tags(struct pd_req *r, json_t *body, const char *name, enum MHD_Result *ret)
{
        json_t *tags = json_object_get(body, "tags"), *t, *out;
        size_t i;
        if (!json_is_array(tags) || !json_array_size(tags) || json_array_size(tags) > TAGS_MAX) {
                *ret = pd_e2b_reply_error(r, 400, "tags must be an array of 1 to %d tags", TAGS_MAX);
                return NULL;
        }
        out = json_array();
        json_array_foreach(tags, i, t) {
                char tag[TAG_MAX + 1];
                if (!json_is_string(t) || !request_tag(json_string_value(t), name, tag)) {
                        *ret = pd_e2b_reply_error(r, 400, "invalid tag '%.140s': a tag is 1 to %d of [A-Za-z0-9_.-] "
                                                  "(not starting with '.' or '-'), or '%s:TAG'",
                                                  json_is_string(t) ? json_string_value(t) : "(not a string)",
                                                  TAG_MAX, name);
                        json_decref(out);
                        return NULL;
                }
                json_array_append_new(out, json_string(tag));
        }
        return out;
}

/* ---- POST /templates/tags ---- */

static enum MHD_Result assign_tags(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        enum MHD_Result ret;
        _pd_cleanup_json_ json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        const char *target = json_string_value(json_object_get(body, "target"));
        char name[80], build[64];
        const char *colon = target ? strchr(target, ':') : NULL;
        if (!target || (colon ? (size_t)(colon - target) : strlen(target)) >= sizeof name)
                return pd_e2b_reply_error(r, 400, "target is required (NAME:TAG, the build to tag)");
        snprintf(name, sizeof name, "%.*s", (int)(colon ? colon - target : (int)strlen(target)), target);
        if (pd_template_name_check(name) < 0 || (colon && !pd_e2b_tag_ok(colon + 1)))
                return pd_e2b_reply_error(r, 400, "invalid target '%.140s' (NAME:TAG: a name is [a-z0-9-]{1,64}, "
                                          "a tag 1 to %d of [A-Za-z0-9_.-])", target, TAG_MAX);
        _pd_cleanup_json_ json_t *want = body_tags(r, body, name, &ret);
        if (!want)
                return ret;
        /* the build id read under the lock: a new build's request records
         * its tags under it too, after its build id */
        pthread_mutex_lock(&tags_lock);
        own_build_id(r->srv, name, r->key.id, build);
        if (!build[0]) {
                pthread_mutex_unlock(&tags_lock);
                return pd_e2b_reply_error(r, 404, "template '%s' not found", name);
        }
        json_t *tags = load_tags(r->srv, name, build);
        /* the target's tag names the build (the only one: any tag of the
         * template does) */
        if (colon && !find_tag(tags, colon + 1)) {
                pthread_mutex_unlock(&tags_lock);
                json_decref(tags);
                return pd_e2b_reply_error(r, 404, "tag '%s' of template '%s' not found", colon + 1, name);
        }
        char now[32];
        pd_rfc3339_ms(wall_ms(), now);
        size_t i;
        json_t *t;
        json_array_foreach(want, i, t) add_tag(tags, json_string_value(t), build, now);
        int k = json_array_size(tags) > TAGS_MAX ? -E2BIG : save_tags(r->srv, name, tags);
        pthread_mutex_unlock(&tags_lock);
        json_decref(tags);
        if (k == -E2BIG)
                return pd_e2b_reply_error(r, 400, "a template has at most %d tags", TAGS_MAX);
        if (k < 0)
                return pd_e2b_reply_error(r, 500, "cannot write the tags of template '%s'", name);
        pd_log("info", "template=%s e2b tags assigned key=%s build=%s n=%zu", name, r->key.id, build,
               json_array_size(want));
        return pd_reply_json(r, 201, json_pack("{s:s, s:O}", "buildID", build, "tags", want));
}

/* ---- DELETE /templates/tags ---- */

static enum MHD_Result remove_tags(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        /* no body: not removeTags (which always sends one) but the
         * snapshot delete DELETE /templates/{id} of a snapshot named
         * "tags", which this route shadows */
        if (!r->body_len)
                return pd_e2b_snapshot_delete(r, "tags");
        enum MHD_Result ret;
        _pd_cleanup_json_ json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        const char *name = json_string_value(json_object_get(body, "name"));
        if (!name || pd_template_name_check(name) < 0)
                return pd_e2b_reply_error(r, 400, "name must be a template name ([a-z0-9-]{1,64})");
        _pd_cleanup_json_ json_t *gone = body_tags(r, body, name, &ret);
        if (!gone)
                return ret;
        char build[64];
        pthread_mutex_lock(&tags_lock);
        own_build_id(r->srv, name, r->key.id, build);
        if (!build[0]) {
                pthread_mutex_unlock(&tags_lock);
                return pd_e2b_reply_error(r, 404, "template '%s' not found", name);
        }
        json_t *tags = load_tags(r->srv, name, build), *t;
        size_t i;
        /* all or nothing: an unknown tag changes nothing */
        const char *missing = NULL;
        json_array_foreach(gone, i, t) {
                if (!missing && !find_tag(tags, json_string_value(t)))
                        missing = json_string_value(t);
        }
        int k = 0;
        if (!missing) {
                json_t *keep = json_array(), *e;
                json_array_foreach(tags, i, e) {
                        if (!has_string(gone, json_string_value(json_object_get(e, "tag"))))
                                json_array_append(keep, e);
                }
                k = save_tags(r->srv, name, keep);
                json_decref(keep);
        }
        pthread_mutex_unlock(&tags_lock);
        json_decref(tags);
        if (missing)
                return pd_e2b_reply_error(r, 404, "tag '%s' of template '%s' not found", missing, name);
        if (k < 0)
                return pd_e2b_reply_error(r, 500, "cannot write the tags of template '%s'", name);
        pd_log("info", "template=%s e2b tags removed key=%s n=%zu", name, r->key.id, json_array_size(gone));
        return pd_reply_empty(r, 204);
}

/* ---- GET /templates/{templateID}/tags ---- */

static enum MHD_Result list_tags(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        (void)chunk;
        (void)chunk_len;
        const char *name = r->params[0];
        char build[64];
        own_build_id(r->srv, name, r->key.id, build);
        if (!build[0])
                return pd_e2b_reply_error(r, 404, "template '%.64s' not found", name);
        pthread_mutex_lock(&tags_lock);
        json_t *tags = load_tags(r->srv, name, build);
        pthread_mutex_unlock(&tags_lock);
        return pd_reply_json(r, 200, tags);
}

/* Before pd_routes_e2b_snapshots: its DELETE /templates/{id} would take
 * DELETE /templates/tags. */
const struct pd_route pd_routes_e2b_tags[] = {
        { "POST", "/templates/tags", assign_tags, 0, 0 },
        { "DELETE", "/templates/tags", remove_tags, 0, 0 },
        { "GET", "/templates/{templateID}/tags", list_tags, 0, 0 },
        { 0 },
};
