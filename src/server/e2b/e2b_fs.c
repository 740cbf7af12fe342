/* E2B envd filesystem (docs/e2b.md): filesystem.Filesystem/{Stat, ListDir,
 * MakeDir, Move, Remove, WatchDir} over the Connect protocol, and the REST
 * /files (multipart or raw upload, download), all on the agent's FILE_*
 * and WATCH requests, which resolve every path inside the sandbox. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/e2b/e2b.h"
#include "server/core/store.h"
#include "lib/util.h"

#define CALL_TIMEOUT_MS 30000
#define UPLOAD_MAX_FILES 1024

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
        return o;
}

/* The one entry of a reply as JSON (NULL: none); frees es. */
static json_t *take_entry(struct pd_entries *es)
{
        json_t *o = es->n ? pd_e2b_entry_json(&es->v[0]) : NULL;
        pd_entries_free(es);
        return o;
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
                     const struct pd_route_user *u)
{
        json_t *f = json_pack("{s:s, s:s, s:s}", "path", path, "user", u->name, "via", "e2b");
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
        int k = pd_route_agent(c->s, &conn, &err);
        if (k >= 0) {
                k = fs_call(&conn, type, &f, path2, depth, &es, &err);
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
        pd_client_close(&conn);
        if (type != FS_STAT && type != FS_LIST)
                audit_fs(r, c, event, path, k, &u);
        if (k < 0) {
                pd_entries_free(&es);
                if (k == -EEXIST)
                        return pd_e2b_connect_error(r, 409, "already_exists", "%s", err.msg);
                if (k == -ENOENT)
                        return pd_e2b_connect_error(r, 404, "not_found", "%s", err.msg);
                return pd_e2b_connect_agent_error(r, k, err.msg);
        }
        json_t *out;
        if (type == FS_LIST) {
                json_t *arr = json_array();
                for (size_t i = 0; i < es.n; i++)
                        json_array_append_new(arr, pd_e2b_entry_json(&es.v[i]));
                pd_entries_free(&es);
                out = json_pack("{s:o}", "entries", arr);
        } else if (type == FS_REMOVE) {
                out = json_object();
        } else {
                json_t *e = take_entry(&es);
                out = e ? json_pack("{s:o}", "entry", e) : json_object();
        }
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

static void watch_frame(struct pd_e2b_stream *st, const struct pd_frame_hdr *h, const uint8_t *p)
{
        if (h->type != PD_T_WATCH_EVENT)
                return;
        struct pd_error err = { 0 };
        struct pd_watch_ev we;
        if (pd_watch_event_decode(p, h->len, &we, &err) < 0) {
                /* the agent is not to be trusted any more: end the stream */
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
                if (temp)
                        return;
        }
        if (temp)
                return;
        json_t *n = json_string(name);
        if (!n)
                return;
        pd_e2b_stream_msg(st, 0,
                          json_pack("{s:{s:O, s:s}}", "filesystem", "name", n, "type", event_type(ev)));
        if (pending == 2 && ev == PD_WE_CREATE)
                pd_e2b_stream_msg(st, 0, json_pack("{s:{s:O, s:s}}", "filesystem", "name", n, "type",
                                                   event_type(PD_WE_WRITE)));
        json_decref(n);
}

static void watch_idle(struct pd_e2b_stream *st)
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
        struct pd_e2b_stream *st = pd_e2b_stream_new(r, c->s);
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
                k = pd_client_watch(&st->cl, &f, json_is_true(json_object_get(body, "recursive")), &id, &err);
        if (k < 0) {
                enum MHD_Result ret = pd_e2b_stream_error_reply(r, pd_e2b_connect_code(k), "%s", err.msg);
                pd_e2b_stream_free(st);
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
        return pd_e2b_stream_reply(r, st, 200, "application/connect+json");
}

/* ---- REST /files ---- */

struct upload {
        struct pd_client conn;
        bool opened, raw, failed_started;
        struct MHD_PostProcessor *pp;
        struct pd_route_user u;
        uint32_t wid;           /* FILE_WRITE id in flight, 0 = none */
        char cur[PATH_MAX];
        uint64_t cur_bytes;
        unsigned n_files;
        json_t *results;
        int err;                /* first error (negative errno) */
        char msg[256];
        struct pd_e2b_call *c;
        struct pd_req *r;
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
        json_t *path = json_object_get(e, "path"), *name = json_object_get(e, "name");
        /* a path or name that is not UTF-8 is left out of the entry */
        json_t *res = json_pack("{s:s, s:s, s:s}", "path", u->cur, "name", "", "type", "file");
        if (path)
                json_object_set(res, "path", path);
        if (name)
                json_object_set(res, "name", name);
        json_array_append_new(u->results, res);
        json_decref(e);
        pd_audit(u->r->srv, u->c->s->id, u->c->s->key_id, "file.write",
                 json_pack("{s:s, s:s, s:I, s:s}", "path", u->cur, "user", u->u.name, "bytes",
                           (json_int_t)u->cur_bytes, "via", "e2b"));
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
        struct pd_error err = { 0 };
        /* envd creates missing parent directories */
        const char *sl = strrchr(path, '/');
        if (sl && sl != path) {
                char dir[PATH_MAX];
                snprintf(dir, sizeof dir, "%.*s", (int)(sl - path), path);
                const struct pd_file_req fd = { .path = dir, .uid = u->u.uid, .gid = u->u.gid };
                int k = pd_client_mkdir(&u->conn, &fd, -1, true, NULL, &err);
                if (k < 0 && k != -EEXIST) {
                        up_fail(u, k, err.msg);
                        return false;
                }
        }
        const struct pd_file_req f = { .path = path, .uid = u->u.uid, .gid = u->u.gid };
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
        const char *enc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Encoding");
        if (enc && strcasecmp(enc, "identity")) {
                up_fail(u, -ENOTSUP, "Content-Encoding is not supported (send the bytes uncompressed)");
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
        if (u->pp) {
                if (MHD_post_process(u->pp, chunk, len) != MHD_YES)
                        up_fail(u, -EINVAL, "malformed multipart/form-data body");
        } else if (u->raw && u->wid) {
                up_data(u, chunk, len);
        }
        return MHD_YES;
}

void pd_e2b_files_free(struct pd_e2b_call *c)
{
        struct upload *u = c->upload;
        if (!u)
                return;
        if (u->pp)
                MHD_destroy_post_processor(u->pp);
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
static void dl_data(struct pd_e2b_stream *st, const uint8_t *p, size_t n)
{
        if (st->size != MHD_SIZE_UNKNOWN && n > st->size - st->sent) {
                st->done = st->failed = true;   /* more than announced */
                return;
        }
        st->sent += n;
        if (n && pd_e2b_stream_put(st, p, n) < 0)
                st->done = st->failed = true;
}

static void dl_end(struct pd_e2b_stream *st)
{
        st->done = true;
        st->failed = st->size != MHD_SIZE_UNKNOWN && st->sent != st->size;
}

static void dl_frame(struct pd_e2b_stream *st, const struct pd_frame_hdr *h, const uint8_t *p)
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

static void dl_fail(struct pd_e2b_stream *st, int k)
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
        struct pd_e2b_stream *st = pd_e2b_stream_new(r, c->s);
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
                pd_e2b_stream_free(st);
                return ret;
        }
        st->on_frame = dl_frame;
        st->on_fail = dl_fail;
        st->idle_ms = CALL_TIMEOUT_MS;
        return pd_e2b_stream_reply(r, st, 200, "application/octet-stream");
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
