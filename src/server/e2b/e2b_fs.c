/* E2B envd filesystem (docs/e2b.md): filesystem.Filesystem/{Stat, ListDir,
 * MakeDir, Move, Remove, WatchDir} over the Connect protocol, and the REST
 * /files (multipart or raw upload, download), all on the agent's FILE_*
 * and WATCH requests, which resolve every path inside the sandbox. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "server/e2b/e2b.h"
#include "server/core/store.h"
#include "lib/util.h"

#define CALL_TIMEOUT_MS 30000
#define UPLOAD_MAX_FILES 1024
/* envd's limits on a file's metadata (spec/envd/envd.yaml, POST /files) */
#define META_PREFIX_LEN 9               /* "user.e2b." */
#define META_KEY_MAX 246                /* XATTR_NAME_MAX less that prefix */
#define META_TOTAL_MAX 4096             /* keys, values and a prefix per key */
#define META_MAX 256

/* ---- entries ---- */

static void perm_string(uint32_t ft, uint32_t mode, char out[11])
{
        out[0] = ft == PD_FT_DIR ? 'd' : ft == PD_FT_SYMLINK ? 'l' : '-';
        const char *rwx = "rwxrwxrwx";
        for (int i = 0; i < 9; i++)
                out[1 + i] = (mode & (1u << (8 - i))) ? rwx[i] : '-';
        out[10] = '\0';
}

static const char *uid_name(uint32_t id, char *buf, size_t n)
{
        if (id == 0)
                return "root";
        if (id == 1000)
                return "user";
        snprintf(buf, n, "%u", id);
        return buf;
}

json_t *pd_e2b_entry_json(const struct pd_entry *e)
{
        json_t *o = json_object();
        pd_route_entry_names(e, o, "symlinkTarget");
        uint32_t ft = e->ftype, mode = e->mode, uid = e->uid, gid = e->gid;
        uint64_t size = e->size, mtime = e->mtime_ns;
        char t[32], perm[11], ub[16], gb[16], sz[24];
        pd_rfc3339_ms(mtime / 1000000u, t);
        perm_string(ft, mode, perm);
        snprintf(sz, sizeof sz, "%" PRIu64, size);
        json_object_set_new(o, "type", json_string(ft == PD_FT_DIR       ? "FILE_TYPE_DIRECTORY"
                                                   : ft == PD_FT_SYMLINK ? "FILE_TYPE_SYMLINK"
                                                   : ft == PD_FT_FILE    ? "FILE_TYPE_FILE"
                                                                         : "FILE_TYPE_UNSPECIFIED"));
        json_object_set_new(o, "size", json_string(sz));
        json_object_set_new(o, "mode", json_integer(mode & 07777));
        json_object_set_new(o, "permissions", json_string(perm));
        json_object_set_new(o, "owner", json_string(uid_name(uid, ub, sizeof ub)));
        json_object_set_new(o, "group", json_string(uid_name(gid, gb, sizeof gb)));
        json_object_set_new(o, "modifiedTime", json_string(t));
        /* user.e2b.* xattrs (envd 0.6.2); none: no field, as envd */
        json_t *meta = e->n_meta ? json_object() : NULL;
        for (size_t i = 0; i < e->n_meta; i++) {
                json_t *v = json_string(e->meta[i].val);
                if (v && json_object_set_new(meta, e->meta[i].key, v) < 0)
                        json_decref(v);
        }
        if (meta && json_object_size(meta))
                json_object_set_new(o, "metadata", meta);
        else
                json_decref(meta);
        return o;
}

/* The one entry of a reply as JSON (NULL: none); frees es. */
static json_t *take_entry(struct pd_entries *es)
{
        json_t *o = es->n ? pd_e2b_entry_json(&es->v[0]) : NULL;
        pd_entries_free(es);
        return o;
}

/* ---- listing order and symlink targets (as envd shows them) ---- */

/* envd walks a directory tree in lexical order, depth first: compare
 * paths component by component ('/' sorts before every other byte). */
static int cmp_walk(const void *a, const void *b)
{
        const unsigned char *x = (const unsigned char *)((const struct pd_entry *)a)->path;
        const unsigned char *y = (const unsigned char *)((const struct pd_entry *)b)->path;
        for (;; x++, y++) {
                unsigned cx = *x == '/' ? 1u : *x, cy = *y == '/' ? 1u : *y;
                if (cx != cy || !cx)
                        return (int)cx - (int)cy;
        }
}

/* Symlink resolution with agent lstats, one per path component, so a
 * listing full of links has a budget; past it, the link's own text
 * joined to its directory is shown (lexically cleaned). */
#define LINK_HOPS_MAX 40
#define LINK_STATS_MAX 2048

struct link_ctx {
        struct pd_client *conn;
        const struct pd_route_user *u;
        unsigned stats;                 /* agent calls made */
        char dir_in[PATH_MAX], dir_out[PATH_MAX];       /* last parent resolved */
};

/* Append component c (len n) to the absolute path p, handling "." and "..". */
static bool push_comp(char *p, const char *c, size_t n)
{
        if (!n || (n == 1 && c[0] == '.'))
                return true;
        size_t l = strlen(p);
        if (n == 2 && c[0] == '.' && c[1] == '.') {
                char *sl = strrchr(p, '/');
                if (sl)
                        *sl = '\0';
                return true;
        }
        if (l + 1 + n >= PATH_MAX)
                return false;
        p[l] = '/';
        memcpy(p + l + 1, c, n);
        p[l + 1 + n] = '\0';
        return true;
}

/* filepath.EvalSymlinks of an absolute path inside the sandbox, as the
 * call's user sees it; -ENOENT when something on the way is missing,
 * -E2BIG when over the budget, -ELOOP past LINK_HOPS_MAX links. */
static int eval_links(struct link_ctx *x, const char *path, char out[PATH_MAX])
{
        char pending[2 * PATH_MAX], done[PATH_MAX] = "";
        if (snprintf(pending, sizeof pending, "%s", path) >= (int)sizeof pending)
                return -ENAMETOOLONG;
        unsigned hops = 0;
        const char *p = pending;
        while (*p) {
                while (*p == '/')
                        p++;
                size_t n = strcspn(p, "/");
                if (!n)
                        break;
                char before[PATH_MAX];
                memcpy(before, done, sizeof before);
                if (!push_comp(done, p, n))
                        return -ENAMETOOLONG;
                p += n;
                if ((n == 1 && p[-1] == '.') || (n == 2 && p[-1] == '.' && p[-2] == '.') || !done[0])
                        continue;
                if (++x->stats > LINK_STATS_MAX)
                        return -E2BIG;
                const struct pd_file_req f = { .path = done, .uid = x->u->uid, .gid = x->u->gid };
                struct pd_entries es = { 0 };
                struct pd_error err = { 0 };
                int k = pd_client_stat(x->conn, &f, &es, &err);
                if (k < 0 || es.n != 1) {
                        pd_entries_free(&es);
                        return k < 0 ? k : -EIO;
                }
                if (es.v[0].ftype == PD_FT_SYMLINK && es.v[0].link) {
                        if (++hops > LINK_HOPS_MAX) {
                                pd_entries_free(&es);
                                return -ELOOP;
                        }
                        /* the link's text replaces its component */
                        char rest[2 * PATH_MAX];
                        int m = snprintf(rest, sizeof rest, "%s/%s", es.v[0].link, p);
                        pd_entries_free(&es);
                        if (m < 0 || (size_t)m >= sizeof pending)
                                return -ENAMETOOLONG;
                        memcpy(pending, rest, (size_t)m + 1);
                        p = pending;
                        if (pending[0] == '/')
                                done[0] = '\0';
                        else
                                memcpy(done, before, sizeof done);
                        continue;
                }
                pd_entries_free(&es);
        }
        snprintf(out, PATH_MAX, "%s", done[0] ? done : "/");
        return 0;
}

/* envd's symlinkTarget: the absolute path the link resolves to, or the
 * link's own path when it does not resolve. */
static void link_target(struct link_ctx *x, const struct pd_entry *e, char out[PATH_MAX])
{
        snprintf(out, PATH_MAX, "%s", e->path);
        const char *sl = strrchr(e->path, '/');
        if (!e->link || !sl || e->path[0] != '/')
                return;
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", (int)(sl - e->path), e->path);
        if (!x->dir_in[0] || strcmp(dir, x->dir_in)) {
                if (eval_links(x, dir[0] ? dir : "/", x->dir_out) < 0)
                        return;
                snprintf(x->dir_in, sizeof x->dir_in, "%s", dir);
        }
        char joined[2 * PATH_MAX + 2];
        if (e->link[0] == '/')
                snprintf(joined, sizeof joined, "%s", e->link);
        else
                snprintf(joined, sizeof joined, "%s/%s", strcmp(x->dir_out, "/") ? x->dir_out : "", e->link);
        char r[PATH_MAX];
        int k = eval_links(x, joined, r);
        if (k == 0) {
                snprintf(out, PATH_MAX, "%s", r);
        } else if (k == -E2BIG || k == -EIO) {
                /* over the budget: the lexical join, cleaned */
                char c[PATH_MAX] = "";
                const char *p = joined;
                while (*p) {
                        while (*p == '/')
                                p++;
                        size_t n = strcspn(p, "/");
                        if (!n || !push_comp(c, p, n))
                                break;
                        p += n;
                }
                snprintf(out, PATH_MAX, "%s", c[0] ? c : "/");
        }
}

/* An entry's JSON with envd's symlinkTarget. */
static json_t *entry_json_resolved(struct link_ctx *x, const struct pd_entry *e)
{
        json_t *o = pd_e2b_entry_json(e);
        if (o && e->ftype == PD_FT_SYMLINK && e->link) {
                char t[PATH_MAX];
                link_target(x, e, t);
                json_t *js = json_string(t);
                if (js)
                        json_object_set_new(o, "symlinkTarget", js);
        }
        return o;
}

/* ---- the default user's writes (docs/e2b.md, "Files and users") ----
 *
 * envd runs as root: it writes files and makes directories anywhere and
 * only hands them to the call's user. Here the agent works with the call's
 * user's rights; where those refuse a write or a directory that envd would
 * make (say /data/out.txt as "user"), that one write goes with root's
 * rights inside the sandbox, and what it makes belongs to root. The API
 * caller can run anything as root anyway (user: 'root'); the sandbox, not
 * its users, is the boundary. */

/* Could u make an entry in directory dir (as its mode bits say)? When
 * unsure (no such directory, a link), yes: the real call decides. */
static bool user_may_write(struct pd_client *conn, const struct pd_route_user *u, const char *dir)
{
        if (u->uid == 0)
                return true;
        const struct pd_file_req f = { .path = dir, .uid = u->uid, .gid = u->gid };
        struct pd_entries es = { 0 };
        struct pd_error err = { 0 };
        bool ok = true;
        if (pd_client_stat(conn, &f, &es, &err) == 0 && es.n == 1 && es.v[0].ftype == PD_FT_DIR) {
                const struct pd_entry *e = &es.v[0];
                uint32_t bit = e->uid == u->uid ? 0200 : e->gid == u->gid ? 020 : 02;
                ok = (e->mode & bit) != 0;
        }
        pd_entries_free(&es);
        return ok;
}

/* path as an absolute path for u (relative: under u's home), into out. */
static bool abs_for(const struct pd_route_user *u, const char *path, char out[PATH_MAX])
{
        int n = path[0] == '/' ? snprintf(out, PATH_MAX, "%s", path)
                               : snprintf(out, PATH_MAX, "%s/%s", u->home, path);
        return n > 0 && n < PATH_MAX;
}

/* ---- unary calls ---- */

static bool path_of(json_t *body, const char *field, const char **out)
{
        json_t *j = json_object_get(body, field);
        if (!json_is_string(j) || !json_string_length(j) || json_string_length(j) >= PATH_MAX ||
            strlen(json_string_value(j)) != json_string_length(j))
                return false;
        *out = json_string_value(j);
        return true;
}

static void audit_fs(struct pd_req *r, struct pd_e2b_call *c, const char *event, const char *path, int k,
                     const struct pd_route_user *u, bool as_root)
{
        json_t *f = json_pack("{s:s, s:s, s:s}", "path", path, "user", u->name, "via", "e2b");
        if (as_root)
                json_object_set_new(f, "as_root", json_true());
        if (k < 0)
                json_object_set_new(f, "error", json_string(strerror(-k)));
        pd_audit(r->srv, c->s->id, c->s->key_id, event, f);
}

enum fs_call { FS_STAT, FS_LIST, FS_MKDIR, FS_MOVE, FS_REMOVE };

static int fs_call(struct pd_client *conn, enum fs_call type, const struct pd_file_req *f, const char *to,
                   uint32_t depth, struct pd_entries *out, struct pd_error *err)
{
        switch (type) {
        case FS_STAT: return pd_client_stat(conn, f, out, err);
        case FS_LIST: return pd_client_list_dir(conn, f, depth, out, err);
        case FS_MKDIR: return pd_client_mkdir(conn, f, -1, true, out, err);
        case FS_MOVE: return pd_client_move(conn, f, to, out, err);
        default: return pd_client_remove(conn, f, err);
        }
}

enum MHD_Result pd_e2b_fs_unary(struct pd_req *r, struct pd_e2b_call *c, const char *method, json_t *body)
{
        struct pd_route_user u;
        if (!pd_e2b_call_user(c, &u))
                return pd_e2b_connect_error(r, 400, "invalid_argument", "unknown user");
        enum fs_call type;
        const char *path = NULL, *path2 = NULL, *event;
        if (!strcmp(method, "Stat")) {
                type = FS_STAT;
                event = "file.stat";
        } else if (!strcmp(method, "ListDir")) {
                type = FS_LIST;
                event = "file.list";
        } else if (!strcmp(method, "MakeDir")) {
                type = FS_MKDIR;
                event = "file.mkdir";
        } else if (!strcmp(method, "Move")) {
                type = FS_MOVE;
                event = "file.move";
        } else if (!strcmp(method, "Remove")) {
                type = FS_REMOVE;
                event = "file.remove";
        } else {
                return pd_e2b_connect_error(r, 501, "unimplemented", "filesystem.Filesystem/%s is not implemented",
                                            method);
        }
        if (type == FS_MOVE) {
                if (!path_of(body, "source", &path) || !path_of(body, "destination", &path2))
                        return pd_e2b_connect_error(r, 400, "invalid_argument", "source and destination required");
        } else if (!path_of(body, "path", &path)) {
                return pd_e2b_connect_error(r, 400, "invalid_argument", "path required");
        }
        uint32_t depth = 1;
        if (type == FS_LIST) {
                json_t *d = json_object_get(body, "depth");
                json_int_t v = json_is_integer(d) ? json_integer_value(d) : 1;
                depth = (uint32_t)(v < 1 ? 1 : v > 64 ? 64 : v);
        }
        const struct pd_file_req f = { .path = path, .uid = u.uid, .gid = u.gid };
        struct pd_client conn;
        struct pd_error err = { 0 };
        struct pd_entries es = { 0 };
        bool as_root = false;
        int k = pd_route_agent(c->s, &conn, &err);
        if (k >= 0) {
                k = fs_call(&conn, type, &f, path2, depth, &es, &err);
                /* a directory envd (root) could make: made with root's rights */
                char abs[PATH_MAX];
                if ((k == -EACCES || k == -EPERM) && type == FS_MKDIR && u.uid != 0 && abs_for(&u, path, abs)) {
                        const struct pd_file_req fr = { .path = abs, .uid = 0, .gid = 0 };
                        pd_entries_free(&es);
                        k = fs_call(&conn, type, &fr, NULL, depth, &es, &err);
                        as_root = k >= 0;
                }
                /* E2B's Move creates the destination's directory */
                if (k == -ENOENT && type == FS_MOVE && strchr(path2, '/')) {
                        char dir[PATH_MAX];
                        snprintf(dir, sizeof dir, "%s", path2);
                        char *sl = strrchr(dir, '/');
                        if (sl && sl != dir) {
                                *sl = '\0';
                                const struct pd_file_req fd = { .path = dir, .uid = u.uid, .gid = u.gid };
                                struct pd_error e2 = { 0 };
                                if (pd_client_mkdir(&conn, &fd, -1, true, NULL, &e2) == 0)
                                        k = fs_call(&conn, type, &f, path2, depth, &es, &err);
                        }
                }
        }
        /* envd removes with os.RemoveAll: a path that is not there is
         * already removed */
        if (k == -ENOENT && type == FS_REMOVE)
                k = 0;
        if (type != FS_STAT && type != FS_LIST)
                audit_fs(r, c, event, path, k, &u, as_root);
        if (k < 0) {
                pd_client_close(&conn);
                pd_entries_free(&es);
                if (k == -EEXIST)
                        return pd_e2b_connect_error(r, 409, "already_exists", "%s", err.msg);
                if (k == -ENOENT)
                        return pd_e2b_connect_error(r, 404, "not_found", "%s", err.msg);
                return pd_e2b_connect_agent_error(r, k, err.msg);
        }
        struct link_ctx lx = { .conn = &conn, .u = &u };
        json_t *out;
        if (type == FS_LIST) {
                qsort(es.v, es.n, sizeof *es.v, cmp_walk);
                json_t *arr = json_array();
                for (size_t i = 0; i < es.n; i++)
                        json_array_append_new(arr, entry_json_resolved(&lx, &es.v[i]));
                out = json_pack("{s:o}", "entries", arr);
        } else if (type == FS_REMOVE || !es.n) {
                out = json_object();
        } else {
                json_t *e = entry_json_resolved(&lx, &es.v[0]);
                out = e ? json_pack("{s:o}", "entry", e) : json_object();
        }
        pd_entries_free(&es);
        pd_client_close(&conn);
        return pd_reply_json(r, 200, out);
}

/* ---- WatchDir ---- */

static const char *event_type(uint32_t e)
{
        switch (e) {
        case PD_WE_CREATE: return "EVENT_TYPE_CREATE";
        case PD_WE_WRITE: return "EVENT_TYPE_WRITE";
        case PD_WE_REMOVE: return "EVENT_TYPE_REMOVE";
        case PD_WE_RENAME: return "EVENT_TYPE_RENAME";
        case PD_WE_CHMOD: return "EVENT_TYPE_CHMOD";
        default: return "EVENT_TYPE_UNSPECIFIED";
        }
}

/* One filesystem event; entry (may be NULL) is the entry info asked for
 * with includeEntry (envd 0.6.3). */
static void watch_send(struct pd_agent_stream *st, json_t *name, uint32_t ev, json_t *entry)
{
        json_t *fe = json_pack("{s:O, s:s}", "name", name, "type", event_type(ev));
        if (fe && entry)
                json_object_set(fe, "entry", entry);
        if (fe)
                pd_e2b_stream_msg(st, 0, json_pack("{s:o}", "filesystem", fe));
}

static void watch_frame(struct pd_agent_stream *st, const struct pd_frame_hdr *h, const uint8_t *p)
{
        if (h->type != PD_T_WATCH_EVENT)
                return;
        struct pd_error err = { 0 };
        struct pd_watch_ev we;
        struct pd_entries es = { 0 };
        if (pd_watch_event_decode(p, h->len, &we, &err) < 0 || pd_entries_decode(p, h->len, 0, 1, &es, &err) < 0) {
                /* the agent is not to be trusted any more: end the stream */
                pd_entries_free(&es);
                pd_e2b_stream_end_error(st, "internal", err.msg);
                return;
        }
        const char *name = we.name;
        uint32_t ev = we.event;
        /* The agent reports both halves of a rename as RENAME, in inotify's
         * order (from, then to). envd (fsnotify) reports the old name as
         * RENAME and the new one as CREATE: pair them up. The agent's own
         * upload temp files (write to a temp, rename over) are hidden; their
         * rename becomes CREATE + WRITE of the target, as envd's in-place
         * write would show. */
        const char *base = strrchr(name, '/');
        base = base ? base + 1 : name;
        bool temp = !strncmp(base, ".paddock-upload-", 16);
        int pending = st->kind;
        st->kind = 0;
        if (ev == PD_WE_RENAME && pending) {
                ev = PD_WE_CREATE;
        } else if (ev == PD_WE_RENAME) {
                st->kind = temp ? 2 : 1;
        }
        json_t *n = temp ? NULL : json_string(name);
        json_t *entry = n && es.n ? pd_e2b_entry_json(&es.v[0]) : NULL;
        pd_entries_free(&es);
        if (!n)
                return;
        watch_send(st, n, ev, entry);
        if (pending == 2 && ev == PD_WE_CREATE)
                watch_send(st, n, PD_WE_WRITE, entry);
        json_decref(entry);
        json_decref(n);
}

static void watch_idle(struct pd_agent_stream *st)
{
        pd_e2b_stream_msg(st, 0, json_pack("{s:{}}", "keepalive"));
}

enum MHD_Result pd_e2b_fs_watch(struct pd_req *r, struct pd_e2b_call *c, json_t *body)
{
        struct pd_route_user u;
        const char *path;
        if (!pd_e2b_call_user(c, &u))
                return pd_e2b_stream_error_reply(r, "invalid_argument", "unknown user");
        if (!path_of(body, "path", &path))
                return pd_e2b_stream_error_reply(r, "invalid_argument", "path required");
        struct pd_agent_stream *st = pd_e2b_stream_new(r, c->s);
        if (!st)
                return MHD_NO;
        c->s = NULL;
        struct pd_error err = { 0 };
        int k = pd_route_agent(st->s, &st->cl, &err);
        /* WATCH does not say whether the path is a directory: stat first,
         * so a missing path is not_found and a file is invalid_argument */
        const struct pd_file_req f = { .path = path, .uid = u.uid, .gid = u.gid };
        struct pd_entries es = { 0 };
        if (k >= 0)
                k = pd_client_stat(&st->cl, &f, &es, &err);
        if (k >= 0 && (es.n != 1 || es.v[0].ftype != PD_FT_DIR))
                k = pd_error_setx(&err, ENOTDIR, "path '%s' is not a directory", path);
        pd_entries_free(&es);
        uint32_t id;
        if (k >= 0)
                k = pd_client_watch_entries(&st->cl, &f, json_is_true(json_object_get(body, "recursive")),
                                            json_is_true(json_object_get(body, "includeEntry")),
                                            !json_is_true(json_object_get(body, "allowNetworkMounts")), &id, &err);
        if (k < 0) {
                enum MHD_Result ret = pd_e2b_stream_error_reply(r, pd_e2b_connect_code(k), "%s", err.msg);
                pd_agent_stream_free(st);
                return ret;
        }
        pd_audit(r->srv, st->s->id, st->s->key_id, "file.watch",
                 json_pack("{s:s, s:s, s:s}", "path", path, "user", u.name, "via", "e2b"));
        st->on_frame = watch_frame;
        st->on_idle = watch_idle;
        const char *ka = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
        long kas = ka ? strtol(ka, NULL, 10) : 0;
        st->idle_ms = kas > 0 && kas <= 300 ? (int)(kas * 500) : 25000;
        pd_e2b_stream_msg(st, 0, json_pack("{s:{}}", "start"));
        return pd_agent_stream_reply(r, st, 200, "application/connect+json");
}

/* ---- REST /files ---- */

struct upload {
        struct pd_client conn;
        bool opened, raw, failed_started;
        struct MHD_PostProcessor *pp;
        z_stream *z;            /* Content-Encoding: gzip: the body inflated first */
        bool z_end;             /* the gzip stream ended */
        struct pd_route_user u;
        uint32_t wid;           /* FILE_WRITE id in flight, 0 = none */
        bool as_root;           /* this file goes with root's rights */
        char cur[PATH_MAX];
        uint64_t cur_bytes;
        unsigned n_files;
        json_t *results;
        int err;                /* first error (negative errno) */
        char msg[256];
        struct pd_e2b_call *c;
        struct pd_req *r;
        /* X-Metadata-* headers: what every file of the upload gets */
        struct up_meta {
                const char *kv[2 * META_MAX];   /* key (lowercased, in keys), value (MHD's) */
                char keys[META_MAX][META_KEY_MAX + 1];
                size_t n, bytes;
                bool bad;
                char why[160];
        } meta;
};

static void up_fail(struct upload *u, int k, const char *msg)
{
        if (u->err)
                return;
        u->err = k ? k : -EIO;
        snprintf(u->msg, sizeof u->msg, "%s", msg && *msg ? msg : strerror(-u->err));
}

/* Finish the file in flight: END, then its REPLY. */
static void up_end_file(struct upload *u)
{
        if (!u->wid)
                return;
        uint32_t id = u->wid;
        u->wid = 0;
        int k = pd_client_write_data(&u->conn, id, NULL, 0, true);
        if (k < 0) {
                up_fail(u, k, "agent connection");
                return;
        }
        pd_route_watch(&u->conn, u->r->srv, NULL, u->c->s);
        struct pd_error err = { 0 };
        struct pd_entries es;
        k = pd_client_write_finish(&u->conn, id, &es, CALL_TIMEOUT_MS, &err);
        if (k < 0) {
                up_fail(u, k, err.msg);
                return;
        }
        json_t *e = take_entry(&es);
        json_t *path = json_object_get(e, "path"), *name = json_object_get(e, "name"),
               *meta = json_object_get(e, "metadata");
        /* a path or name that is not UTF-8 is left out of the entry */
        json_t *res = json_pack("{s:s, s:s, s:s}", "path", u->cur, "name", "", "type", "file");
        if (path)
                json_object_set(res, "path", path);
        if (name)
                json_object_set(res, "name", name);
        if (meta)
                json_object_set(res, "metadata", meta);
        json_array_append_new(u->results, res);
        json_decref(e);
        pd_audit(u->r->srv, u->c->s->id, u->c->s->key_id, "file.write",
                 json_pack("{s:s, s:s, s:I, s:s, s:b}", "path", u->cur, "user", u->u.name, "bytes",
                           (json_int_t)u->cur_bytes, "via", "e2b", "as_root", u->as_root));
}

static bool up_begin_file(struct upload *u, const char *path)
{
        up_end_file(u);
        if (u->err)
                return false;
        if (!*path || strlen(path) >= sizeof u->cur || ++u->n_files > UPLOAD_MAX_FILES) {
                up_fail(u, -EINVAL, "bad or missing file path");
                return false;
        }
        snprintf(u->cur, sizeof u->cur, "%s", path);
        u->cur_bytes = 0;
        u->as_root = false;
        struct pd_error err = { 0 };
        char abs[PATH_MAX];
        uint32_t uid = u->u.uid, gid = u->u.gid;
        /* envd creates missing parent directories */
        const char *sl = strrchr(path, '/');
        if (sl && sl != path) {
                char dir[PATH_MAX];
                snprintf(dir, sizeof dir, "%.*s", (int)(sl - path), path);
                const struct pd_file_req fd = { .path = dir, .uid = uid, .gid = gid };
                int k = pd_client_mkdir(&u->conn, &fd, -1, true, NULL, &err);
                if ((k == -EACCES || k == -EPERM) && uid != 0 && abs_for(&u->u, dir, abs)) {
                        const struct pd_file_req fr = { .path = abs, .uid = 0, .gid = 0 };
                        k = pd_client_mkdir(&u->conn, &fr, -1, true, NULL, &err);
                }
                if (k < 0 && k != -EEXIST) {
                        up_fail(u, k, err.msg);
                        return false;
                }
        }
        /* the write's own rights: the directory it lands in says (its
         * error would only come after the bytes) */
        char dir[PATH_MAX];
        if (uid != 0 && abs_for(&u->u, path, abs)) {
                snprintf(dir, sizeof dir, "%s", abs);
                char *d = strrchr(dir, '/');
                if (d)
                        d == dir ? (void)(d[1] = '\0') : (void)(*d = '\0');
                if (!user_may_write(&u->conn, &u->u, dir)) {
                        u->as_root = true;
                        uid = gid = 0;
                        path = abs;
                }
        }
        const struct pd_file_req f = { .path = path, .uid = uid, .gid = gid, .meta = u->meta.kv,
                                       .n_meta = u->meta.n };
        int k = pd_client_write_open(&u->conn, &f, -1, &u->wid);
        if (k < 0) {
                u->wid = 0;
                up_fail(u, k, "agent connection");
                return false;
        }
        return true;
}

static void up_data(struct upload *u, const char *data, size_t n)
{
        for (size_t off = 0; off < n && !u->err; off += PD_DATA_CHUNK) {
                size_t len = n - off < PD_DATA_CHUNK ? n - off : PD_DATA_CHUNK;
                int k = pd_client_write_data(&u->conn, u->wid, data + off, len, false);
                if (k >= 0)
                        k = pd_client_flush(&u->conn, CALL_TIMEOUT_MS);
                if (k < 0)
                        up_fail(u, k, "agent connection");
        }
        u->cur_bytes += n;
        /* an early ERROR (no space...) ends the upload */
        struct pd_error err = { 0 };
        int k = u->err ? 0 : pd_client_write_check(&u->conn, u->wid, &err);
        if (k < 0) {
                up_fail(u, k, err.msg);
                u->wid = 0;
        }
}

static enum MHD_Result post_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                 const char *content_type, const char *transfer_encoding, const char *data,
                                 uint64_t off, size_t size)
{
        struct upload *u = cls;
        if (u->err)
                return MHD_YES;
        if (!key || strcmp(key, "file"))
                return MHD_YES;
        bool new_part = off == 0 && (!u->wid || u->cur_bytes > 0 || (filename && strcmp(filename, u->cur)));
        if (new_part) {
                const char *qpath = pd_req_query(u->r, "path");
                const char *path = qpath && *qpath && u->n_files == 0 ? qpath : filename;
                if (!path || !up_begin_file(u, path))
                        return MHD_YES;
        }
        if (size && u->wid)
                up_data(u, data, size);
        return MHD_YES;
}

static bool meta_printable(const char *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] > 0x7e)
                        return false;
        return true;
}

/* One request header: an X-Metadata-<key> becomes an item (as envd:
 * the key lowercased, the first of repeated headers wins). */
static enum MHD_Result meta_header(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
        struct up_meta *m = cls;
        if (m->bad || strncasecmp(name, "X-Metadata-", 11))
                return MHD_YES;
        const char *key = name + 11;
        size_t kl = strlen(key), vl = value ? strlen(value) : 0;
        if (!kl || kl > META_KEY_MAX || !meta_printable(key, kl) || strchr(key, '/')) {
                snprintf(m->why, sizeof m->why, "invalid metadata key '%.64s' (printable ASCII, 1..%d bytes)", key,
                         META_KEY_MAX);
                m->bad = true;
                return MHD_NO;
        }
        if (!meta_printable(value ? value : "", vl)) {
                snprintf(m->why, sizeof m->why, "invalid metadata value for key '%.64s' (printable ASCII)", key);
                m->bad = true;
                return MHD_NO;
        }
        char low[META_KEY_MAX + 1];
        for (size_t i = 0; i <= kl; i++)
                low[i] = (char)tolower((unsigned char)key[i]);
        for (size_t i = 0; i < m->n; i++)
                if (!strcmp(m->keys[i], low))
                        return MHD_YES;
        m->bytes += META_PREFIX_LEN + kl + vl;
        if (m->n == META_MAX || m->bytes > META_TOTAL_MAX) {
                snprintf(m->why, sizeof m->why, "metadata too large (at most %d bytes: keys, values and %d per key)",
                         META_TOTAL_MAX, META_PREFIX_LEN);
                m->bad = true;
                return MHD_NO;
        }
        memcpy(m->keys[m->n], low, kl + 1);
        m->kv[2 * m->n] = m->keys[m->n];
        m->kv[2 * m->n + 1] = value ? value : "";
        m->n++;
        return MHD_YES;
}

static bool up_open(struct pd_req *r, struct pd_e2b_call *c, struct upload *u)
{
        u->c = c;
        u->r = r;
        pd_client_init(&u->conn);
        u->results = json_array();
        if (!pd_e2b_call_user(c, &u->u)) {
                up_fail(u, -EINVAL, "unknown user");
                return false;
        }
        /* metadata checked before anything is written */
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, meta_header, &u->meta);
        if (u->meta.bad) {
                up_fail(u, -EINVAL, u->meta.why);
                return false;
        }
        const char *enc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Encoding");
        if (enc && !strcasecmp(enc, "gzip")) {
                /* as envd: the whole body (multipart or raw) is gzip */
                u->z = calloc(1, sizeof *u->z);
                if (!u->z || inflateInit2(u->z, 16 + MAX_WBITS) != Z_OK) {
                        free(u->z);
                        u->z = NULL;
                        up_fail(u, -ENOMEM, "cannot start gzip decoding");
                        return false;
                }
        } else if (enc && strcasecmp(enc, "identity")) {
                up_fail(u, -ENOTSUP, "Content-Encoding must be gzip or identity");
                return false;
        }
        struct pd_error err = { 0 };
        int k = pd_route_agent(c->s, &u->conn, &err);
        if (k < 0) {
                up_fail(u, k, err.msg);
                return false;
        }
        u->opened = true;
        const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
        if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
                u->pp = MHD_create_post_processor(r->conn, 64 * 1024, post_iter, u);
                if (!u->pp) {
                        up_fail(u, -EINVAL, "bad multipart/form-data (boundary?)");
                        return false;
                }
        } else {
                u->raw = true;
                const char *path = pd_req_query(r, "path");
                if (!path || !*path) {
                        up_fail(u, -EINVAL, "path is required for a raw upload");
                        return false;
                }
                if (!up_begin_file(u, path))
                        return false;
        }
        return true;
}

/* Bytes of the (decoded) body to the multipart parser or the raw file. */
static void up_feed(struct upload *u, const char *data, size_t len)
{
        if (u->pp) {
                if (MHD_post_process(u->pp, data, len) != MHD_YES)
                        up_fail(u, -EINVAL, "malformed multipart/form-data body");
        } else if (u->raw && u->wid) {
                up_data(u, data, len);
        }
}

/* A gzip body: inflated in pieces as it comes (never all of it in memory;
 * what it inflates to is bounded by the sandbox's disk, as any upload). */
static void up_inflate(struct upload *u, const char *data, size_t len)
{
        char out[64 * 1024];
        u->z->next_in = (Bytef *)data;
        u->z->avail_in = (uInt)len;
        while (!u->err && (u->z->avail_in || !u->z_end)) {
                if (u->z_end) {
                        /* another gzip member (gzip allows several) */
                        if (inflateReset(u->z) != Z_OK) {
                                up_fail(u, -EINVAL, "the body is not valid gzip");
                                return;
                        }
                        u->z_end = false;
                }
                u->z->next_out = (Bytef *)out;
                u->z->avail_out = sizeof out;
                int zr = inflate(u->z, Z_NO_FLUSH);
                if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
                        up_fail(u, -EINVAL, "the body is not valid gzip");
                        return;
                }
                size_t n = sizeof out - u->z->avail_out;
                if (n)
                        up_feed(u, out, n);
                if (zr == Z_STREAM_END)
                        u->z_end = true;
                if (zr == Z_BUF_ERROR || (!n && !u->z->avail_in))
                        return;         /* needs more input */
        }
}

enum MHD_Result pd_e2b_files_chunk(struct pd_req *r, struct pd_e2b_call *c, const char *chunk, size_t len)
{
        if (strcmp(r->method, "POST"))
                return MHD_YES;
        struct upload *u = c->upload;
        if (!u) {
                u = calloc(1, sizeof *u);
                if (!u)
                        return MHD_NO;
                c->upload = u;
                up_open(r, c, u);
        }
        if (u->err)
                return MHD_YES;
        if (u->z)
                up_inflate(u, chunk, len);
        else
                up_feed(u, chunk, len);
        return MHD_YES;
}

void pd_e2b_files_free(struct pd_e2b_call *c)
{
        struct upload *u = c->upload;
        if (!u)
                return;
        if (u->pp)
                MHD_destroy_post_processor(u->pp);
        if (u->z) {
                inflateEnd(u->z);
                free(u->z);
        }
        pd_client_close(&u->conn);
        json_decref(u->results);
        free(u);
        c->upload = NULL;
}

static enum MHD_Result files_error(struct pd_req *r, int k, const char *msg)
{
        unsigned st;
        switch (-k) {
        case ENOENT: st = 404; break;
        case EINVAL:
        case EISDIR:
        case ENOTDIR:
        case ENAMETOOLONG:
        case ELOOP:
        case ENOTSUP: st = 400; break;
        case EACCES:
        case EPERM: st = 403; break;
        case ENOSPC:
        case EDQUOT:
        case EFBIG: st = 507; break;
        case EBUSY: st = 409; break;
        default: st = 500; break;
        }
        return pd_reply_json(r, st, json_pack("{s:i, s:s}", "code", (int)st, "message", msg && *msg ? msg : strerror(-k)));
}

/* Download: FILE_READ with DESCRIBE, DATA frames relayed as they come,
 * under the Content-Length the agent announced from the fd it opened (a
 * file of unknown length, procfs, goes chunked). Anything short of a REPLY
 * after all the bytes aborts the connection: never a short 200 (see
 * routes_files.c, route_download). */
static void dl_data(struct pd_agent_stream *st, const uint8_t *p, size_t n)
{
        if (st->size != MHD_SIZE_UNKNOWN && n > st->size - st->sent) {
                st->done = st->failed = true;   /* more than announced */
                return;
        }
        st->sent += n;
        if (n && pd_agent_stream_put(st, p, n) < 0)
                st->done = st->failed = true;
}

static void dl_end(struct pd_agent_stream *st)
{
        st->done = true;
        st->failed = st->size != MHD_SIZE_UNKNOWN && st->sent != st->size;
}

static void dl_frame(struct pd_agent_stream *st, const struct pd_frame_hdr *h, const uint8_t *p)
{
        if (h->id != st->id)
                return;
        if (h->type == PD_T_DATA) {
                dl_data(st, p, h->len);
        } else if (h->type == PD_T_REPLY) {
                dl_end(st);
        } else if (h->type == PD_T_ERROR) {
                st->done = st->failed = true;   /* a read failed midway */
        }
}

static void dl_fail(struct pd_agent_stream *st, int k)
{
        st->done = st->failed = true;
}

static enum MHD_Result files_download(struct pd_req *r, struct pd_e2b_call *c)
{
        struct pd_route_user u;
        const char *path = pd_req_query(r, "path");
        if (!pd_e2b_call_user(c, &u))
                return files_error(r, -EINVAL, "unknown user");
        if (!path || !*path)
                return files_error(r, -EINVAL, "path is required");
        struct pd_agent_stream *st = pd_e2b_stream_new(r, c->s);
        if (!st)
                return MHD_NO;
        c->s = NULL;
        struct pd_error err = { 0 };
        int k = pd_route_agent(st->s, &st->cl, &err);
        /* the first frame tells a missing file from a present one, and
         * (FILE_OPENED) how long it is */
        struct pd_read rd = { 0 };
        if (k >= 0) {
                pd_route_watch(&st->cl, r->srv, r->conn, st->s);
                const struct pd_file_req f = { .path = path, .uid = u.uid, .gid = u.gid };
                k = pd_client_read_open(&st->cl, &f, &rd, &err);
        }
        st->id = rd.id;
        if (k >= 0 && rd.size_known)
                st->size = rd.size;
        /* an agent without DESCRIBE: DATA (or its REPLY) first */
        if (k >= 0 && rd.has_first)
                dl_data(st, rd.first, rd.first_len);
        if (k >= 0 && rd.done)
                dl_end(st);
        pd_audit(r->srv, st->s->id, st->s->key_id, "file.read",
                 json_pack("{s:s, s:s, s:s}", "path", path, "user", u.name, "via", c->signed_ok ? "e2b-signed-url" : "e2b"));
        if (k < 0) {
                enum MHD_Result ret = files_error(r, k, err.msg);
                pd_agent_stream_free(st);
                return ret;
        }
        st->on_frame = dl_frame;
        st->on_fail = dl_fail;
        st->idle_ms = CALL_TIMEOUT_MS;
        return pd_agent_stream_reply(r, st, 200, "application/octet-stream");
}

enum MHD_Result pd_e2b_files_finish(struct pd_req *r, struct pd_e2b_call *c)
{
        if (!strcmp(r->method, "GET"))
                return files_download(r, c);
        if (strcmp(r->method, "POST"))
                return files_error(r, -EINVAL, "method not allowed");
        struct upload *u = c->upload;
        if (!u) {
                /* an empty body: an empty raw file */
                u = calloc(1, sizeof *u);
                if (!u)
                        return MHD_NO;
                c->upload = u;
                up_open(r, c, u);
        }
        if (u->z && !u->err && !u->z_end)
                up_fail(u, -EINVAL, "the gzip body is truncated");
        if (u->pp) {
                MHD_destroy_post_processor(u->pp);      /* flushes the last part */
                u->pp = NULL;
        }
        if (!u->err)
                up_end_file(u);
        if (u->err)
                return files_error(r, u->err, u->msg);
        if (json_array_size(u->results) == 0)
                return files_error(r, -EINVAL, "no file in the request (multipart part 'file')");
        return pd_reply_json(r, 200, json_incref(u->results));
}
