/* GET /sandboxes/{id}/processes/{pid}/output: the raw bytes of one
 * stream, or JSON-line frames of all of them (format=frames), from a byte
 * offset (resumption after a dropped connection), optionally following.
 *
 * The response is built on MHD_create_response_from_callback: its reader
 * blocks on the request's own agent connection, in slices, so that a
 * deleted sandbox or a vanished client ends the stream; the free callback
 * closes the connection and drops the sandbox reference taken for the whole
 * request. */
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/procs.h"
#include "lib/util.h"

#define PROCS_STREAM_BLOCK (128u << 10)
#define STASH_MAX (16u << 20)          /* 8x the agent's per-connection output buffer */

static bool query_flag(struct pd_req *r, const char *name)
{
        const char *v = pd_req_query(r, name);
        return v && (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !*v);
}

static const char *stream_name(uint32_t stream)
{
        return stream == PD_STREAM_STDOUT ? "stdout" : stream == PD_STREAM_STDERR ? "stderr" : "pty";
}

struct out_stream {
        struct pd_server *srv;
        struct pd_srv_sandbox *s;
        struct pd_client c;
        uint32_t pid;
        bool follow, frames, done, exit_seen, want_exit;
        unsigned n;                     /* streams: 1 or 2 */
        uint32_t stream[2];
        uint64_t next[2], target[2];    /* target: non-follow end */
        /* raw: bytes of the current OUTPUT frame not yet handed over; they
         * live in c's receive buffer until the next pd_client_next */
        const uint8_t *pend;
        size_t pend_len;
        /* frames: the current JSON line */
        char *line;
        size_t line_len, line_pos;
        /* frames that arrived while we waited for an ATTACH's REPLY (output
         * of an earlier ATTACH), replayed first; cur: the one being served */
        struct stashed *stash, **stash_tail, *cur;
        size_t stashed_bytes;
};

struct stashed {
        struct stashed *next;
        struct pd_frame_hdr h;
        uint8_t p[];
};

static void stash_free(struct stashed *x)
{
        while (x) {
                struct stashed *n = x->next;
                free(x);
                x = n;
        }
}

static int stream_slot(const struct out_stream *o, uint32_t stream)
{
        for (unsigned i = 0; i < o->n; i++)
                if (o->stream[i] == stream)
                        return (int)i;
        return -1;
}

static bool out_finished(const struct out_stream *o)
{
        if (o->done)
                return true;
        if (o->follow)
                return false;
        for (unsigned i = 0; i < o->n; i++)
                if (o->next[i] < o->target[i])
                        return false;
        return !o->want_exit || o->exit_seen;
}

static void out_set_line(struct out_stream *o, json_t *j)
{
        free(o->line);
        o->line = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        o->line_pos = 0;
        o->line_len = o->line ? strlen(o->line) : 0;
        if (o->line)
                o->line[o->line_len++] = '\n';  /* replaces the NUL */
}

/* One agent frame into the stream's state. */
static void out_frame(struct out_stream *o, const struct pd_frame_hdr *h, const uint8_t *p)
{
        switch (h->type) {
        case PD_T_OUTPUT: {
                int i = stream_slot(o, h->aux);
                uint64_t off;
                const uint8_t *data;
                size_t n;
                if (h->id != o->pid || i < 0 || !pd_output_decode(h, p, &off, &data, &n))
                        return;
                if (off < o->next[i]) {         /* never hand out a byte twice */
                        uint64_t skip = o->next[i] - off;
                        if (skip >= n)
                                return;
                        data += skip;
                        n -= (size_t)skip;
                        off = o->next[i];
                }
                if (!o->follow) {
                        if (off >= o->target[i])
                                return;
                        if (off + n > o->target[i])
                                n = (size_t)(o->target[i] - off);
                }
                o->next[i] = off + n;
                if (!o->frames) {
                        o->pend = data;
                        o->pend_len = n;
                        return;
                }
                size_t b64len = 4 * ((n + 2) / 3);
                char *b64 = malloc(b64len + 1);
                if (!b64) {
                        o->done = true;
                        return;
                }
                EVP_EncodeBlock((unsigned char *)b64, data, (int)n);
                out_set_line(o, json_pack("{s:s,s:I,s:s%}", "stream", stream_name(h->aux), "offset",
                                          (json_int_t)off, "data_b64", b64, b64len));
                free(b64);
                return;
        }
        case PD_T_GAP: {
                int i = stream_slot(o, h->aux);
                uint64_t from, to;
                if (h->id != o->pid || i < 0 || !pd_gap_decode(h, p, &from, &to))
                        return;
                if (to > o->next[i])
                        o->next[i] = to;
                if (o->frames)
                        out_set_line(o, json_pack("{s:{s:s,s:I,s:I}}", "gap", "stream", stream_name(h->aux),
                                                  "from", (json_int_t)from, "to", (json_int_t)to));
                return;
        }
        case PD_T_EXIT:
                if (h->id != o->pid)
                        return;
                o->exit_seen = true;
                if (o->follow)
                        o->done = true;
                if (o->frames) {
                        struct pd_exit x;
                        pd_exit_decode(p, h->len, &x);
                        json_t *xj = pd_procs_exit_json(&x);
                        pd_procs_oom_mark(o->srv, o->s, xj);
                        out_set_line(o, json_pack("{s:o}", "exit", xj));
                }
                return;
        case PD_T_ERROR:
                o->done = true;         /* an attachment failed late: nothing more will come */
                return;
        default:
                return;
        }
}

/* Fills buf with what is ready: it waits only while buf is still empty,
 * then takes further frames only if they are here already, so one chunk
 * (one send) carries several agent frames on a fast stream. */
static ssize_t out_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct out_stream *o = cls;
        size_t got = 0;
        for (;;) {
                if (o->pend_len) {
                        size_t n = o->pend_len < max - got ? o->pend_len : max - got;
                        memcpy(buf + got, o->pend, n);
                        o->pend += n;
                        o->pend_len -= n;
                        got += n;
                }
                if (o->line && o->line_pos < o->line_len && got < max) {
                        size_t n = o->line_len - o->line_pos < max - got ? o->line_len - o->line_pos : max - got;
                        memcpy(buf + got, o->line + o->line_pos, n);
                        o->line_pos += n;
                        got += n;
                }
                if (got == max || o->pend_len || (o->line && o->line_pos < o->line_len))
                        return (ssize_t)got;
                if (out_finished(o))
                        return got ? (ssize_t)got : MHD_CONTENT_READER_END_OF_STREAM;
                free(o->cur);
                o->cur = NULL;
                if (o->stash) {
                        o->cur = o->stash;
                        if (!(o->stash = o->cur->next))
                                o->stash_tail = &o->stash;
                        out_frame(o, &o->cur->h, o->cur->p);
                        continue;
                }
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k;
                if (got) {
                        if ((k = pd_client_next_nowait(&o->c, &h, &p)) <= 0)
                                return (ssize_t)got;    /* the rest (or the end) next time */
                } else {
                        k = pd_client_next(&o->c, &h, &p, -1);
                        if (k == -ECONNABORTED)
                                return MHD_CONTENT_READER_END_WITH_ERROR;
                        if (k < 0)
                                return MHD_CONTENT_READER_END_OF_STREAM;       /* sandbox gone: end cleanly */
                }
                out_frame(o, &h, p);
        }
}

static void out_free(void *cls)
{
        struct out_stream *o = cls;
        pd_client_close(&o->c);
        free(o->line);
        free(o->cur);
        stash_free(o->stash);
        if (o->s)
                pd_server_sandbox_put(o->srv, o->s);
        free(o);
}

/* A frame that arrived while an ATTACH's REPLY was awaited: output of an
 * earlier ATTACH may overtake that REPLY, kept to be served first; at most
 * what the agent buffers for one connection, not whatever a hostile agent
 * sends instead of answering. */
static int out_stash(void *ctx, const struct pd_frame_hdr *h, const uint8_t *p, struct pd_error *err)
{
        struct out_stream *o = ctx;
        if (h->type != PD_T_OUTPUT && h->type != PD_T_GAP && h->type != PD_T_EXIT)
                return 0;
        if (h->len > STASH_MAX - o->stashed_bytes)
                return pd_error_setx(err, EPROTO, "the agent sent over %u bytes of output "
                                     "instead of answering ATTACH", STASH_MAX);
        o->stashed_bytes += h->len;
        struct stashed *x = malloc(sizeof *x + h->len);
        if (!x)
                return pd_error_set(err, ENOMEM, "stash a frame");
        x->next = NULL;
        x->h = *h;
        memcpy(x->p, p, h->len);
        *o->stash_tail = x;
        o->stash_tail = &x->next;
        return 0;
}

enum MHD_Result pd_procs_route_output(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        const char *qs = pd_req_query(r, "stream"), *qfrom = pd_req_query(r, "from");
        const char *qfmt = pd_req_query(r, "format");
        bool frames = qfmt && !strcmp(qfmt, "frames");
        if (qfmt && !frames && strcmp(qfmt, "raw"))
                return pd_reply_error(r, 400, "bad_request", "format must be raw or frames");
        uint64_t from = 0;
        if (qfrom && !pd_procs_parse_u64(qfrom, &from))
                return pd_reply_error(r, 400, "bad_request", "from must be a byte offset");
        uint32_t want_stream = 0;
        if (qs && !frames) {
                if (!strcmp(qs, "stdout"))
                        want_stream = PD_STREAM_STDOUT;
                else if (!strcmp(qs, "stderr"))
                        want_stream = PD_STREAM_STDERR;
                else if (!strcmp(qs, "pty"))
                        want_stream = PD_STREAM_PTY;
                else
                        return pd_reply_error(r, 400, "bad_request", "stream must be stdout, stderr or pty");
        }
        struct pd_pid_ctx x;
        if (!pd_pid_ctx_open(r, &x, &ret))
                return ret;
        struct out_stream *o = calloc(1, sizeof *o);
        if (!o) {
                pd_pid_ctx_close(r, &x);
                return pd_reply_error(r, 500, "internal", "out of memory");
        }
        o->srv = r->srv;
        o->s = PD_TAKE_PTR(x.s);
        o->c = x.c;
        pd_client_init(&x.c);
        pd_route_watch(&o->c, r->srv, r->conn, o->s);
        o->stash_tail = &o->stash;
        o->pid = x.pid;
        o->frames = frames;
        o->follow = query_flag(r, "follow");

        /* LIST first: is there such a process, has it a pty, and where does
         * its output end now (a non-follow read stops there) */
        struct pd_proc_info pi;
        struct pd_error err = { 0 };
        int k = pd_procs_list(&o->c, o->pid, &pi, NULL, &err);
        if (k < 0) {
                ret = pd_route_reply_agent_error(r, k, &err);
                goto fail;
        }
        json_decref(pi.obj);
        if (!pi.found) {
                ret = pd_procs_reply_no_process(r, o->pid);
                goto fail;
        }
        if (frames) {
                if (pi.pty) {
                        o->stream[o->n++] = PD_STREAM_PTY;
                } else {
                        o->stream[o->n++] = PD_STREAM_STDOUT;
                        o->stream[o->n++] = PD_STREAM_STDERR;
                }
        } else {
                if (!want_stream)
                        want_stream = pi.pty ? PD_STREAM_PTY : PD_STREAM_STDOUT;
                if (pi.pty != (want_stream == PD_STREAM_PTY)) {
                        ret = pd_reply_error(r, 400, "bad_request", "process %" PRIu32 " %s", o->pid,
                                             pi.pty ? "runs on a pty: its only stream is pty"
                                                    : "has no pty: use stdout or stderr");
                        goto fail;
                }
                o->stream[o->n++] = want_stream;
        }
        o->want_exit = pi.exited;
        uint32_t ids[2];
        uint64_t first[2] = { 0, 0 };
        for (unsigned i = 0; i < o->n; i++) {
                uint64_t f = from;
                if (frames) {
                        const char *q = pd_req_query(r, o->stream[i] == PD_STREAM_STDERR ? "from_stderr" : "from_stdout");
                        if (q && !pd_procs_parse_u64(q, &f)) {
                                ret = pd_reply_error(r, 400, "bad_request", "from_%s must be a byte offset",
                                                     stream_name(o->stream[i]));
                                goto fail;
                        }
                        if (!q)
                                f = 0;
                }
                int slot = o->stream[i] == PD_STREAM_STDERR ? 1 : 0;
                o->target[i] = pi.end[slot];
                o->next[i] = f;
                if ((k = pd_client_attach_queue(&o->c, o->pid, o->stream[i], f, o->follow, &ids[i])) < 0) {
                        ret = pd_reply_errno(r, k, "queue ATTACH");
                        goto fail;
                }
        }
        o->c.on_frame = out_stash;
        o->c.frame_ctx = o;
        for (unsigned i = 0; i < o->n; i++) {
                if ((k = pd_client_attach_wait(&o->c, ids[i], &first[i], &err)) < 0) {
                        ret = k == -ESRCH ? pd_procs_reply_no_process(r, o->pid) : pd_route_reply_agent_error(r, k, &err);
                        goto fail;
                }
                o->next[i] = first[i];  /* later than asked: evicted (gap) or past the end */
        }
        o->c.on_frame = NULL;
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, PROCS_STREAM_BLOCK,
                                                                      out_reader, o, out_free);
        if (!resp) {
                ret = pd_reply_error(r, 500, "internal", "cannot create a response");
                goto fail;
        }
        char hv[64];
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                frames ? "application/x-ndjson" : "application/octet-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (!frames) {
                snprintf(hv, sizeof hv, "%" PRIu64, first[0]);
                MHD_add_response_header(resp, "X-Paddock-Offset", hv);
                if (first[0] > from) {
                        snprintf(hv, sizeof hv, "%" PRIu64 "-%" PRIu64, from, first[0]);
                        MHD_add_response_header(resp, "X-Paddock-Gap", hv);
                }
        }
        /* the response owns o from here: out_free runs when it is destroyed */
        return pd_reply_response(r, 200, resp);
fail:
        out_free(o);
        return ret;
}
