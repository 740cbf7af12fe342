/* POST /sandboxes/{id}/exec: spawn with FOLLOW, feed stdin_data, collect
 * both streams (capped), wait for the exit, answer it all in one JSON. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/procs.h"
#include "lib/base64.h"
#include "lib/util.h"

#define EXEC_OUTPUT_CAP (1u << 20)


struct exec_buf {
        char *data;
        size_t len;
        uint64_t total;
};

static void exec_append(struct exec_buf *b, const uint8_t *p, size_t n)
{
        b->total += n;
        if (b->len >= EXEC_OUTPUT_CAP)
                return;
        size_t take = EXEC_OUTPUT_CAP - b->len < n ? EXEC_OUTPUT_CAP - b->len : n;
        if (!b->data && !(b->data = malloc(EXEC_OUTPUT_CAP)))
                return;
        memcpy(b->data + b->len, p, take);
        b->len += take;
}

enum MHD_Result pd_procs_route_exec(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        struct pd_srv_sandbox *s = pd_route_sandbox(r, &ret);
        if (!s) {
                json_decref(body);
                return ret;
        }
        struct pd_spawn_req sr;
        char msg[256];
        struct pd_error err = { 0 };
        struct pd_conn c = { .fd = -1 };
        struct exec_buf out = { 0 }, errb = { 0 };
        uint8_t *in = NULL;
        size_t inlen = 0;
        json_t *exitj = NULL;
        int k = pd_spawn_build(s, body, true, &sr, msg, sizeof msg);
        if (k < 0) {
                ret = pd_reply_error(r, 400, "bad_request", "%s", msg);
                goto out;
        }
        json_t *jin = json_object_get(body, "stdin_data");
        if (jin && !json_is_null(jin) &&
            (!json_is_string(jin) || pd_b64_decode_alloc(json_string_value(jin), json_string_length(jin), PD_B64_STRICT, &in, &inlen) < 0)) {
                ret = pd_reply_error(r, 400, "bad_request", "stdin_data must be base64");
                goto out;
        }
        if ((k = pd_route_agent(s, &c, &err)) < 0) {
                ret = pd_route_reply_agent_error(r, k, &err);
                goto out;
        }
        /* SPAWN with FOLLOW: the agent attaches this connection to every
         * output stream from offset 0 before the process can write, so no
         * ATTACH round trip and nothing evicted before we read it */
        pd_msg_put_u32(&sr.msg, PD_A_FOLLOW, 1);
        uint32_t spawn_id = pd_conn_new_id(&c), pid = 0;
        struct pd_frame_hdr h;
        const uint8_t *p;
        if ((k = pd_conn_queue_msg(&c, PD_T_SPAWN, spawn_id, &sr.msg)) < 0) {
                ret = pd_reply_errno(r, k, "queue SPAWN");
                goto out;
        }
        for (;;) {
                k = pd_route_wait(r->srv, &c, r->conn, s, &h, &p, PROCS_CALL_TIMEOUT_MS);
                if (k < 0) {
                        pd_error_set(&err, -k, "agent");
                        ret = pd_route_reply_agent_error(r, k, &err);
                        goto out;
                }
                if (h.id == spawn_id && (h.type == PD_T_REPLY || h.type == PD_T_ERROR))
                        break;
        }
        if (h.type == PD_T_ERROR) {
                char m[PD_ERROR_MSG_MAX];
                pd_conn_error_text(p, h.len, m, sizeof m);
                pd_error_setx(&err, pd_conn_error_errno(h.aux, EIO), "%s", m);
                ret = pd_spawn_reply_error(r, -err.code, &err, &sr);
                goto out;
        }
        struct pd_attr a;
        if (!pd_msg_find(p, h.len, PD_A_PID, &a) || !pd_attr_u32(&a, &pid)) {
                ret = pd_reply_error(r, 500, "internal", "agent answered SPAWN without a pid");
                goto out;
        }
        pd_spawn_audit(r, s, &sr, pid, "exec");
        if (sr.stdin_open) {
                for (size_t off = 0; off < inlen;) {
                        size_t n = inlen - off < PD_DATA_CHUNK ? inlen - off : PD_DATA_CHUNK;
                        pd_conn_queue(&c, PD_T_STDIN, 0, pid, 0, in + off, n);
                        off += n;
                }
                struct pd_msg m;
                pd_msg_init(&m);
                pd_msg_put_u32(&m, PD_A_PID, pid);
                pd_conn_queue_msg(&c, PD_T_STDIN_CLOSE, pd_conn_new_id(&c), &m);
                pd_msg_free(&m);
        }
        for (;;) {
                k = pd_route_wait(r->srv, &c, r->conn, s, &h, &p, -1);
                if (k < 0)
                        break;
                if (h.type == PD_T_OUTPUT && h.id == pid && h.len >= 8)
                        exec_append(h.aux == PD_STREAM_STDERR ? &errb : &out, p + 8, h.len - 8);
                else if (h.type == PD_T_EXIT && h.id == pid) {
                        exitj = pd_procs_exit_json(p, h.len);
                        break;
                }
        }
        if (!exitj) {
                if (k == -ECONNABORTED) {
                        /* nobody wants the answer any more: do not leave the command behind */
                        struct pd_msg m;
                        pd_msg_init(&m);
                        pd_msg_put_u32(&m, PD_A_PID, pid);
                        pd_msg_put_u32(&m, PD_A_SIGNO, SIGKILL);
                        pd_msg_put_u32(&m, PD_A_GROUP, 1);
                        pd_conn_queue_msg(&c, PD_T_SIGNAL, pd_conn_new_id(&c), &m);
                        pd_msg_free(&m);
                        pd_conn_flush_all(&c, 1000);
                        ret = MHD_NO;
                } else {
                        if (!err.code)
                                pd_error_set(&err, -k, "sandbox agent");
                        ret = pd_route_reply_agent_error(r, k, &err);
                }
                goto out;
        }
        pd_audit(r->srv, s->id, r->key.id, "process.exit",
                 json_pack("{s:i,s:O,s:O,s:O}", "pid", (int)pid, "exit_code", json_object_get(exitj, "exit_code"),
                           "signal", json_object_get(exitj, "signal"), "reason", json_object_get(exitj, "reason")));
        json_t *res = json_pack("{s:i,s:O,s:O,s:O,s:o,s:o}", "pid", (int)pid,
                                "exit_code", json_object_get(exitj, "exit_code"),
                                "signal", json_object_get(exitj, "signal"),
                                "reason", json_object_get(exitj, "reason"),
                                "stdout", pd_procs_text_json(out.data, out.len), "stderr", pd_procs_text_json(errb.data, errb.len));
        if (out.total > out.len) {
                json_object_set_new(res, "stdout_truncated", json_true());
                json_object_set_new(res, "stdout_bytes", json_integer((json_int_t)out.total));
        }
        if (errb.total > errb.len) {
                json_object_set_new(res, "stderr_truncated", json_true());
                json_object_set_new(res, "stderr_bytes", json_integer((json_int_t)errb.total));
        }
        ret = pd_reply_json(r, 200, res);
out:
        json_decref(exitj);
        free(out.data);
        free(errb.data);
        free(in);
        if (c.fd >= 0)
                pd_conn_close(&c);
        pd_spawn_req_free(&sr);
        json_decref(body);
        pd_server_sandbox_put(r->srv, s);
        return ret;
}
