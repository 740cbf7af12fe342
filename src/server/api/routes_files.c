/* /sandboxes/{id}/files...: the file API through the agent's FILE_*
 * requests (proto.h). The agent resolves every path inside the sandbox's
 * own root with openat2(RESOLVE_IN_ROOT) under the caller's fsuid/fsgid; we
 * only refuse what is malformed before asking it (NUL bytes, over-long
 * names), so a bad request changes nothing and costs no agent round trip.
 *
 * Uploads stream: the body reaches us in chunks (PD_ROUTE_STREAM_BODY) and
 * leaves as DATA frames of at most PD_DATA_CHUNK bytes, so memory stays
 * bounded whatever the size. Downloads and watches are responses whose
 * reader blocks on the request's own agent connection (see procs_output.c). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/server.h"
#include "server/core/store.h"
#include "lib/util.h"

#define FILES_CALL_TIMEOUT_MS 30000
#define FILES_END_TIMEOUT_MS 120000     /* last DATA to REPLY: the agent may still be writing */
#define FILES_STREAM_BLOCK (256u << 10)
#define FILES_NAME_MAX 255

/* ------------------------------------------------------------------ */
/* request parsing                                                      */

/* NUL bytes, empty paths, names over 255 bytes and paths over PATH_MAX are
 * refused here. 0, or -EINVAL with msg filled. */
static int path_check(const char *p, size_t len, char *msg, size_t msgsz)
{
        if (!p || len == 0) {
                snprintf(msg, msgsz, "path is required");
                return -EINVAL;
        }
        if (memchr(p, '\0', len)) {
                snprintf(msg, msgsz, "path contains a NUL byte");
                return -EINVAL;
        }
        if (len >= PATH_MAX) {
                snprintf(msg, msgsz, "path of %zu bytes is too long (at most %d)", len, PATH_MAX - 1);
                return -EINVAL;
        }
        for (size_t i = 0; i < len;) {
                while (i < len && p[i] == '/')
                        i++;
                size_t j = i;
                while (j < len && p[j] != '/')
                        j++;
                if (j - i > FILES_NAME_MAX) {
                        snprintf(msg, msgsz, "path component of %zu bytes is too long (at most %d)", j - i,
                                 FILES_NAME_MAX);
                        return -EINVAL;
                }
                i = j;
        }
        return 0;
}

/* The query argument `name` as a validated path (MHD keeps the length, so
 * an escaped %00 is seen, not silently cut). */
static int query_path(struct pd_req *r, const char *name, const char **out, char *msg, size_t msgsz)
{
        const char *v = NULL;
        size_t len = 0;
        if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, name, strlen(name), &v, &len) != MHD_YES)
                v = NULL;
        int k = path_check(v, v ? len : 0, msg, msgsz);
        if (k < 0)
                return k;
        *out = v;
        return 0;
}

static int json_path(json_t *body, const char *name, const char **out, char *msg, size_t msgsz)
{
        json_t *j = json_object_get(body, name);
        if (!json_is_string(j)) {
                snprintf(msg, msgsz, "%s must be a path string", name);
                return -EINVAL;
        }
        int k = path_check(json_string_value(j), json_string_length(j), msg, msgsz);
        if (k < 0)
                return k;
        *out = json_string_value(j);
        return 0;
}

static bool parse_mode_str(const char *s, uint32_t *out)
{
        if (!s || !*s || strlen(s) > 6)
                return false;
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 8);
        if (errno || *end || v > 07777)
                return false;
        *out = (uint32_t)v;
        return true;
}

/* ------------------------------------------------------------------ */
/* agent answers to JSON                                                */

static const char *ftype_name(uint32_t t)
{
        switch (t) {
        case PD_FT_FILE: return "file";
        case PD_FT_DIR: return "dir";
        case PD_FT_SYMLINK: return "symlink";
        default: return "other";
        }
}

struct entry_info {
        uint32_t ftype;
        uint64_t size;
};

static json_t *entry_json(const struct pd_entry *e, struct entry_info *ei)
{
        json_t *o = json_object();
        pd_route_entry_names(e, o, "link_target");
        char t[32];
        pd_rfc3339_ms(e->mtime_ns / 1000000u, t);
        json_object_set_new(o, "type", json_string(ftype_name(e->ftype)));
        json_object_set_new(o, "size", json_integer((json_int_t)e->size));
        json_object_set_new(o, "mode", json_integer(e->mode));
        json_object_set_new(o, "uid", json_integer(e->uid));
        json_object_set_new(o, "gid", json_integer(e->gid));
        json_object_set_new(o, "modified_at", json_string(t));
        if (ei) {
                ei->ftype = e->ftype;
                ei->size = e->size;
        }
        return o;
}

/* The one entry of a reply (pd_entries holding one) as JSON; frees it. */
static json_t *take_entry(struct pd_entries *es)
{
        json_t *o = es->n ? entry_json(&es->v[0], NULL) : NULL;
        pd_entries_free(es);
        return o;
}

/* ------------------------------------------------------------------ */
/* one-shot calls: stat, list, mkdir, move, remove                      */

struct fctx {
        struct pd_srv_sandbox *s;
        struct pd_client c;
        struct pd_error err;
        struct pd_route_user u;
        struct pd_file_req f;           /* uid, gid of u; path set by the route */
};

static void fctx_close(struct pd_req *r, struct fctx *x)
{
        pd_client_close(&x->c);
        if (x->s)
                pd_server_sandbox_put(r->srv, x->s);
        x->s = NULL;
}

static bool fctx_open_(struct pd_req *r, struct fctx *x, const char *user, enum MHD_Result *ret)
{
        memset(x, 0, sizeof *x);
        pd_client_init(&x->c);
        if (!pd_route_user_parse(user, &x->u)) {
                *ret = pd_reply_error(r, 400, "bad_request", "user must be \"user\" or \"root\"");
                return false;
        }
        if (!(x->s = pd_route_sandbox(r, ret)))
                return false;
        int k = pd_route_agent(x->s, &x->c, &x->err);
        if (k < 0) {
                *ret = pd_route_reply_agent_error(r, k, &x->err);
                return false;
        }
        x->f.uid = x->u.uid;
        x->f.gid = x->u.gid;
        return true;
}

/* Sandbox, user (query or JSON field "user"), agent connection. On failure
 * x is already closed and *ret holds the answer. */
static bool fctx_open(struct pd_req *r, struct fctx *x, const char *user, enum MHD_Result *ret)
{
        if (fctx_open_(r, x, user, ret))
                return true;
        fctx_close(r, x);
        return false;
}

static void audit_file(struct pd_req *r, struct fctx *x, const char *event, json_t *fields, int k)
{
        json_object_set_new(fields, "user", json_string(x->u.name));
        if (k < 0)
                json_object_set_new(fields, "error", json_string(x->err.code ? x->err.msg : strerror(-k)));
        pd_audit(r->srv, x->s->id, r->key.id, event, fields);
}

static enum MHD_Result file_error(struct pd_req *r, int k, const struct pd_error *err)
{
        return pd_route_reply_agent_error(r, k, err);
}

/* The query argument "path", or a 400 answer in *ret. */
static bool req_path(struct pd_req *r, const char **path, enum MHD_Result *ret)
{
        char msg[256];
        if (query_path(r, "path", path, msg, sizeof msg) < 0) {
                *ret = pd_reply_error(r, 400, "bad_request", "%s", msg);
                return false;
        }
        return true;
}

/* Audit, answer (status with e, or the mapped error) and close x. */
static enum MHD_Result fctx_finish(struct pd_req *r, struct fctx *x, const char *event, json_t *fields, int k,
                                   unsigned status, json_t *e)
{
        audit_file(r, x, event, fields, k);
        enum MHD_Result ret = k < 0 ? file_error(r, k, &x->err) : pd_reply_json(r, status, e);
        fctx_close(r, x);
        return ret;
}

static enum MHD_Result route_stat(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        const char *path;
        struct fctx x;
        if (!req_path(r, &path, &ret) || !fctx_open(r, &x, pd_req_query(r, "user"), &ret))
                return ret;
        struct pd_entries es;
        x.f.path = path;
        int k = pd_client_stat(&x.c, &x.f, &es, &x.err);
        json_t *e = take_entry(&es);
        return fctx_finish(r, &x, "file.stat", json_pack("{s:s}", "path", path), k, 200, e);
}

static enum MHD_Result route_list(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        const char *path;
        if (!req_path(r, &path, &ret))
                return ret;
        uint32_t depth = 1;
        const char *qd = pd_req_query(r, "depth");
        if (qd) {
                char *end;
                errno = 0;
                unsigned long d = strtoul(qd, &end, 10);
                if (errno || *end || !*qd || d < 1 || d > 64)
                        return pd_reply_error(r, 400, "bad_request", "depth must be 1..64");
                depth = (uint32_t)d;
        }
        struct fctx x;
        if (!fctx_open(r, &x, pd_req_query(r, "user"), &ret))
                return ret;
        struct pd_entries es;
        x.f.path = path;
        int k = pd_client_list_dir(&x.c, &x.f, depth, &es, &x.err);
        audit_file(r, &x, "file.list", json_pack("{s:s,s:i}", "path", path, "depth", (int)depth), k);
        if (k < 0) {
                ret = k == -EMSGSIZE ? pd_reply_error(r, 413, "too_large", "%s", x.err.msg) : file_error(r, k, &x.err);
        } else {
                json_t *entries = json_array();
                for (size_t i = 0; i < es.n; i++)
                        json_array_append_new(entries, entry_json(&es.v[i], NULL));
                ret = pd_reply_json(r, 200, json_pack("{s:o}", "entries", entries));
        }
        pd_entries_free(&es);
        fctx_close(r, &x);
        return ret;
}

static const char *body_user(json_t *body)
{
        json_t *u = json_object_get(body, "user");
        return json_is_string(u) ? json_string_value(u) : u && !json_is_null(u) ? "?" : NULL;
}

static enum MHD_Result route_mkdir(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        char msg[256];
        const char *path;
        uint32_t mode = 0755;
        json_t *jm = json_object_get(body, "mode"), *jp = json_object_get(body, "parents");
        if (json_path(body, "path", &path, msg, sizeof msg) < 0) {
                ret = pd_reply_error(r, 400, "bad_request", "%s", msg);
                goto out_body;
        }
        if (jm && !json_is_null(jm)) {
                bool ok = json_is_integer(jm) ? json_integer_value(jm) >= 0 && json_integer_value(jm) <= 07777
                                              : json_is_string(jm) && parse_mode_str(json_string_value(jm), &mode);
                if (!ok) {
                        ret = pd_reply_error(r, 400, "bad_request", "mode must be 0..07777 (or an octal string)");
                        goto out_body;
                }
                if (json_is_integer(jm))
                        mode = (uint32_t)json_integer_value(jm);
        }
        if (jp && !json_is_boolean(jp) && !json_is_null(jp)) {
                ret = pd_reply_error(r, 400, "bad_request", "parents must be true or false");
                goto out_body;
        }
        struct fctx x;
        if (!fctx_open(r, &x, body_user(body), &ret))
                goto out_body;
        struct pd_entries es;
        x.f.path = path;
        int k = pd_client_mkdir(&x.c, &x.f, (int)mode, !json_is_false(jp), &es, &x.err);
        json_t *e = take_entry(&es);
        ret = fctx_finish(r, &x, "file.mkdir", json_pack("{s:s,s:i}", "path", path, "mode", (int)mode), k, 201, e);
out_body:
        json_decref(body);
        return ret;
}

static enum MHD_Result route_move(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        char msg[256];
        const char *from, *to;
        if (json_path(body, "from", &from, msg, sizeof msg) < 0 || json_path(body, "to", &to, msg, sizeof msg) < 0) {
                ret = pd_reply_error(r, 400, "bad_request", "%s", msg);
                goto out_body;
        }
        struct fctx x;
        if (!fctx_open(r, &x, body_user(body), &ret))
                goto out_body;
        struct pd_entries es;
        x.f.path = from;
        int k = pd_client_move(&x.c, &x.f, to, &es, &x.err);
        json_t *e = take_entry(&es);
        ret = fctx_finish(r, &x, "file.move", json_pack("{s:s,s:s}", "from", from, "to", to), k, 200, e);
out_body:
        json_decref(body);
        return ret;
}

static enum MHD_Result route_remove(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        const char *path;
        struct fctx x;
        if (!req_path(r, &path, &ret) || !fctx_open(r, &x, pd_req_query(r, "user"), &ret))
                return ret;
        x.f.path = path;
        int k = pd_client_remove(&x.c, &x.f, &x.err);
        audit_file(r, &x, "file.remove", json_pack("{s:s}", "path", path), k);
        ret = k < 0 ? file_error(r, k, &x.err) : pd_reply_empty(r, 204);
        fctx_close(r, &x);
        return ret;
}

/* ------------------------------------------------------------------ */
/* PUT .../files?path=: streamed upload                                 */

struct upload {
        struct fctx x;
        bool opened, sent_write;
        uint32_t id;
        int err;                /* first failure (-errno): the rest of the body is dropped */
        unsigned bad_status;    /* refused before the agent was asked */
        char bad_msg[256];
        uint8_t *buf;           /* bytes waiting to make a full DATA frame */
        size_t blen;
        uint64_t bytes;
        uint32_t mode;
        bool has_mode;
        char path[PATH_MAX];
};

static void upload_send(struct upload *u, bool end)
{
        if (u->err)
                return;
        int k = pd_client_write_data(&u->x.c, u->id, u->buf, u->blen, end);
        u->blen = 0;
        if (k >= 0)
                k = pd_client_flush(&u->x.c, FILES_END_TIMEOUT_MS);
        if (k < 0) {
                u->err = k;
                pd_error_set(&u->x.err, -k, "send to the sandbox agent");
                return;
        }
        /* did the agent give up on the transfer already (no space...)? */
        if (!end && (k = pd_client_write_check(&u->x.c, u->id, &u->x.err)) < 0)
                u->err = k;
}

static void upload_open(struct pd_req *r, struct upload *u)
{
        u->opened = true;
        pd_client_init(&u->x.c);
        const char *path, *qm = pd_req_query(r, "mode");
        if (query_path(r, "path", &path, u->bad_msg, sizeof u->bad_msg) < 0) {
                u->bad_status = 400;
                return;
        }
        snprintf(u->path, sizeof u->path, "%s", path);
        if (qm && !parse_mode_str(qm, &u->mode)) {
                u->bad_status = 400;
                snprintf(u->bad_msg, sizeof u->bad_msg, "mode must be octal, 0..07777");
                return;
        }
        u->has_mode = qm != NULL;
        if (!pd_route_user_parse(pd_req_query(r, "user"), &u->x.u)) {
                u->bad_status = 400;
                snprintf(u->bad_msg, sizeof u->bad_msg, "user must be \"user\" or \"root\"");
                return;
        }
        u->x.s = pd_server_sandbox_get(r->srv, r->params[0], &r->key);
        if (!u->x.s) {
                u->bad_status = 404;
                snprintf(u->bad_msg, sizeof u->bad_msg, "no sandbox '%s'", r->params[0]);
                return;
        }
        if (!(u->buf = malloc(PD_DATA_CHUNK))) {
                u->err = pd_error_set(&u->x.err, ENOMEM, "upload buffer");
                return;
        }
        int k = pd_route_agent(u->x.s, &u->x.c, &u->x.err);
        if (k < 0) {
                u->err = k;
                return;
        }
        u->x.f = (struct pd_file_req){ .path = u->path, .uid = u->x.u.uid, .gid = u->x.u.gid };
        if ((k = pd_client_write_open(&u->x.c, &u->x.f, u->has_mode ? (int)u->mode : -1, &u->id)) < 0 ||
            (k = pd_client_flush(&u->x.c, FILES_CALL_TIMEOUT_MS)) < 0) {
                u->err = k;
                pd_error_set(&u->x.err, -k, "send FILE_WRITE");
                return;
        }
        u->sent_write = true;
}

static void upload_free(struct pd_req *r, struct upload *u)
{
        fctx_close(r, &u->x);
        free(u->buf);
        free(u);
        r->route_state = NULL;
}

static enum MHD_Result upload_finish(struct pd_req *r, struct upload *u)
{
        if (u->bad_status)
                return pd_reply_error(r, u->bad_status, u->bad_status == 404 ? "not_found" : "bad_request", "%s",
                                      u->bad_msg);
        json_t *entry = NULL;
        if (!u->err) {
                upload_send(u, true);
                /* the agent may still be writing: its REPLY may take a while */
                pd_route_watch(&u->x.c, r->srv, NULL, u->x.s);
                struct pd_entries es;
                int k = u->err ? u->err : pd_client_write_finish(&u->x.c, u->id, &es, FILES_END_TIMEOUT_MS, &u->x.err);
                if (k < 0)
                        u->err = k;
                else
                        entry = take_entry(&es);
        }
        json_t *fields = json_pack("{s:s,s:I}", "path", u->path, "bytes", (json_int_t)u->bytes);
        if (u->has_mode)
                json_object_set_new(fields, "mode", json_integer(u->mode));
        audit_file(r, &u->x, "file.write", fields, u->err);
        if (!u->err)
                return pd_reply_json(r, 200, entry);
        json_decref(entry);
        if (u->err == -ENOSPC || u->err == -EDQUOT || u->err == -EFBIG)
                return pd_reply_error(r, 507, "no_space",
                                      "no space left in the sandbox's writable layer for '%s' (%s); the previous "
                                      "file, if any, is unchanged", u->path, u->x.err.msg);
        return file_error(r, u->err, &u->x.err);
}

static enum MHD_Result route_upload(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct upload *u = r->route_state;
        if (!chunk && !chunk_len) {
                /* the request ended early (client gone): closing the agent
                 * connection makes the agent drop the temporary file */
                if (u)
                        upload_free(r, u);
                return MHD_NO;
        }
        if (!u) {
                if (!(u = calloc(1, sizeof *u)))
                        return MHD_NO;
                r->route_state = u;
                upload_open(r, u);
        }
        if (chunk) {
                size_t len = *chunk_len;
                *chunk_len = 0;
                u->bytes += len;
                if (u->err || u->bad_status)
                        return MHD_YES;         /* discard: the answer is decided */
                while (len) {
                        size_t n = PD_DATA_CHUNK - u->blen < len ? PD_DATA_CHUNK - u->blen : len;
                        memcpy(u->buf + u->blen, chunk, n);
                        u->blen += n;
                        chunk += n;
                        len -= n;
                        if (u->blen == PD_DATA_CHUNK)
                                upload_send(u, false);
                }
                return MHD_YES;
        }
        enum MHD_Result ret = upload_finish(r, u);
        upload_free(r, u);
        return ret;
}

/* ------------------------------------------------------------------ */
/* GET .../files?path=: streamed download                               */

/* What a streamed response keeps of its request: the sandbox and the agent
 * connection whose request id is id. */
struct fstream {
        struct pd_server *srv;
        struct pd_srv_sandbox *s;
        struct pd_client c;
        uint32_t id;
};

/* Take x's sandbox and connection into f, then close x. */
static void fstream_take(struct fstream *f, struct pd_req *r, struct fctx *x, uint32_t id)
{
        f->srv = r->srv;
        f->s = PD_TAKE_PTR(x->s);
        f->c = x->c;
        pd_client_init(&x->c);
        pd_route_watch(&f->c, r->srv, r->conn, f->s);
        f->id = id;
        fctx_close(r, x);
}

static void fstream_release(struct fstream *f)
{
        pd_client_close(&f->c);
        if (f->s)
                pd_server_sandbox_put(f->srv, f->s);
}

/* A download is the inode the agent opened, with the length it announced
 * from that fd (FILE_OPENED): the answer's Content-Length. Fewer bytes than
 * that (the file truncated meanwhile, the agent's ERROR, the agent gone)
 * abort the connection: the client sees a failed transfer, never a short
 * 200. A file of unknown length (procfs) goes chunked; an ERROR then ends
 * the stream without its last chunk, an error to the client as well. */
struct download {
        struct fstream f;
        uint64_t size;          /* announced, or MHD_SIZE_UNKNOWN */
        uint64_t sent;
        enum { DL_MORE, DL_OK, DL_FAILED } end;
        const uint8_t *pend;    /* rest of the current DATA frame (in c's buffer) */
        size_t pend_len;
};

static void download_free(void *cls)
{
        struct download *d = cls;
        fstream_release(&d->f);
        free(d);
}

static ssize_t download_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct download *d = cls;
        for (;;) {
                if (d->pend_len) {
                        size_t n = d->pend_len < max ? d->pend_len : max;
                        if (d->size != MHD_SIZE_UNKNOWN && n > d->size - d->sent) {
                                /* more than announced: the agent is not to be trusted */
                                d->end = DL_FAILED;
                                d->pend_len = 0;
                                continue;
                        }
                        memcpy(buf, d->pend, n);
                        d->pend += n;
                        d->pend_len -= n;
                        d->sent += n;
                        return (ssize_t)n;
                }
                if (d->end == DL_FAILED)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (d->end == DL_OK)
                        return d->size == MHD_SIZE_UNKNOWN || d->sent == d->size ? MHD_CONTENT_READER_END_OF_STREAM
                                                                                  : MHD_CONTENT_READER_END_WITH_ERROR;
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k = pd_client_next(&d->f.c, &h, &p, FILES_CALL_TIMEOUT_MS);
                if (k < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (h.id != d->f.id)
                        continue;
                /* after the last DATA comes REPLY (all read) or ERROR (a
                 * read failed): only REPLY ends the body well */
                if (h.type == PD_T_ERROR)
                        d->end = DL_FAILED;
                else if (h.type == PD_T_REPLY)
                        d->end = DL_OK;
                else if (h.type == PD_T_DATA) {
                        d->pend = p;
                        d->pend_len = h.len;
                }
        }
}

static enum MHD_Result route_download(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        const char *path;
        struct fctx x;
        if (!req_path(r, &path, &ret) || !fctx_open(r, &x, pd_req_query(r, "user"), &ret))
                return ret;
        pd_route_watch(&x.c, r->srv, r->conn, x.s);
        struct pd_read rd;
        x.f.path = path;
        int k = pd_client_read_open(&x.c, &x.f, &rd, &x.err);
        uint64_t size = rd.size_known ? rd.size : MHD_SIZE_UNKNOWN;
        json_t *fields = json_pack("{s:s}", "path", path);
        if (size != MHD_SIZE_UNKNOWN)
                json_object_set_new(fields, "size", json_integer((json_int_t)size));
        audit_file(r, &x, "file.read", fields, k);
        if (k < 0) {
                ret = file_error(r, k, &x.err);
                fctx_close(r, &x);
                return ret;
        }
        struct download *d = calloc(1, sizeof *d);
        if (!d) {
                fctx_close(r, &x);
                return pd_reply_error(r, 500, "internal", "out of memory");
        }
        fstream_take(&d->f, r, &x, rd.id);
        d->size = size;
        /* a first DATA, still in d->f.c's buffer: nothing reads it before the reader */
        d->pend = rd.first;
        d->pend_len = rd.has_first ? rd.first_len : 0;
        if (rd.done)
                d->end = DL_OK;
        struct MHD_Response *resp = MHD_create_response_from_callback(size, FILES_STREAM_BLOCK, download_reader, d,
                                                                      download_free);
        if (!resp) {
                download_free(d);
                return pd_reply_error(r, 500, "internal", "cannot create a response");
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
        return pd_reply_response(r, 200, resp);
}

/* ------------------------------------------------------------------ */
/* GET .../files/watch: JSON lines until the client leaves              */

struct watch {
        struct fstream f;
        char *line;
        size_t line_len, line_pos;
};

static void watch_free(void *cls)
{
        struct watch *w = cls;
        fstream_release(&w->f);         /* the agent drops the watch with the connection */
        free(w->line);
        free(w);
}

static const char *event_name(uint32_t e)
{
        switch (e) {
        case PD_WE_CREATE: return "create";
        case PD_WE_WRITE: return "write";
        case PD_WE_REMOVE: return "remove";
        case PD_WE_RENAME: return "rename";
        case PD_WE_CHMOD: return "chmod";
        default: return "other";
        }
}

static ssize_t watch_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct watch *w = cls;
        for (;;) {
                if (w->line && w->line_pos < w->line_len) {
                        size_t n = w->line_len - w->line_pos < max ? w->line_len - w->line_pos : max;
                        memcpy(buf, w->line + w->line_pos, n);
                        w->line_pos += n;
                        return (ssize_t)n;
                }
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k = pd_client_next(&w->f.c, &h, &p, -1);
                if (k == -ECONNABORTED)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (k < 0)
                        return MHD_CONTENT_READER_END_OF_STREAM;       /* sandbox or server gone */
                if (h.type != PD_T_WATCH_EVENT || h.id != w->f.id)
                        continue;
                struct pd_error err = { 0 };
                struct pd_watch_ev ev;
                if (pd_watch_event_decode(p, h.len, &ev, &err) < 0) {
                        /* the agent is not to be trusted any more: end the stream */
                        pd_log("warn", "watch ended sandbox=%s error=\"%s\"", w->f.s->id, err.msg);
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                }
                json_t *j = json_pack("{s:s,s:s}", "name", ev.name, "event", event_name(ev.event));
                if (!j)
                        continue;       /* a name that is not UTF-8 */
                free(w->line);
                w->line = json_dumps(j, JSON_COMPACT);
                json_decref(j);
                w->line_pos = 0;
                w->line_len = w->line ? strlen(w->line) : 0;
                if (w->line)
                        w->line[w->line_len++] = '\n';
        }
}

static enum MHD_Result route_watch(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        const char *path, *qr = pd_req_query(r, "recursive");
        if (!req_path(r, &path, &ret))
                return ret;
        bool recursive = qr && (!strcmp(qr, "1") || !strcmp(qr, "true") || !*qr);
        struct fctx x;
        if (!fctx_open(r, &x, pd_req_query(r, "user"), &ret))
                return ret;
        /* the request id is the watch id that every WATCH_EVENT carries */
        pd_route_watch(&x.c, r->srv, r->conn, x.s);
        uint32_t id = 0;
        x.f.path = path;
        int k = pd_client_watch(&x.c, &x.f, recursive, &id, &x.err);
        audit_file(r, &x, "file.watch", json_pack("{s:s,s:b}", "path", path, "recursive", recursive), k);
        if (k < 0) {
                ret = file_error(r, k, &x.err);
                fctx_close(r, &x);
                return ret;
        }
        struct watch *w = calloc(1, sizeof *w);
        if (!w) {
                fctx_close(r, &x);
                return pd_reply_error(r, 500, "internal", "out of memory");
        }
        fstream_take(&w->f, r, &x, id);
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, watch_reader, w,
                                                                      watch_free);
        if (!resp) {
                watch_free(w);
                return pd_reply_error(r, 500, "internal", "cannot create a response");
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        return pd_reply_response(r, 200, resp);
}

const struct pd_route pd_routes_files[] = {
        { "PUT", "/api/v1/sandboxes/{id}/files", route_upload, PD_ROUTE_STREAM_BODY, 0 },
        { "GET", "/api/v1/sandboxes/{id}/files", route_download, 0, 0 },
        { "DELETE", "/api/v1/sandboxes/{id}/files", route_remove, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/files/stat", route_stat, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/files/list", route_list, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/files/mkdir", route_mkdir, 0, 0 },
        { "POST", "/api/v1/sandboxes/{id}/files/move", route_move, 0, 0 },
        { "GET", "/api/v1/sandboxes/{id}/files/watch", route_watch, 0, 0 },
        { NULL, NULL, NULL, 0, 0 },
};
