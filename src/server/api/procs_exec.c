/* POST /sandboxes/{id}/exec: run to the end (pd_client_run: spawn with
 * follow, stdin_data fed), both streams collected (capped), the exit and
 * the output answered in one JSON. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/procs.h"
#include "lib/base64.h"
#include "lib/util.h"
#include "server/core/metrics.h"

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

struct exec_out {
        struct pd_req *r;
        struct pd_srv_sandbox *s;
        const struct pd_spawn_req *sr;
        struct exec_buf out, err;
};

static void exec_spawned(void *ctx, uint32_t pid)
{
        struct exec_out *x = ctx;
        pd_spawn_audit(x->r, x->s, x->sr, pid, "exec");
        pd_metrics_command(PD_METRICS_EXEC);
}

static void exec_output(void *ctx, uint32_t stream, uint64_t offset, const uint8_t *data, size_t n)
{
        struct exec_out *x = ctx;
        exec_append(stream == PD_STREAM_STDERR ? &x->err : &x->out, data, n);
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
        struct pd_client c;
        pd_client_init(&c);
        struct exec_out x = { .r = r, .s = s, .sr = &sr };
        uint8_t *in = NULL;
        size_t inlen = 0;
        json_t *exitj = NULL;
        int k = pd_spawn_build(r->srv, s, body, true, &sr, msg, sizeof msg);
        if (k < 0) {
                ret = k == -ENOMEM ? pd_reply_error(r, 500, "internal", "%s", msg)
                                   : pd_reply_error(r, 400, "bad_request", "%s", msg);
                goto out;
        }
        json_t *jin = json_object_get(body, "stdin_data");
        if (jin && !json_is_null(jin) &&
            (!json_is_string(jin) || pd_b64_decode_alloc(json_string_value(jin), json_string_length(jin), PD_B64_STRICT, &in, &inlen) < 0)) {
                ret = pd_reply_error(r, 400, "bad_request", "stdin_data must be base64");
                goto out;
        }
        const struct pd_run_io io = { .on_spawned = exec_spawned, .on_output = exec_output, .ctx = &x,
                                      .stdin_data = in, .stdin_len = inlen, .timeout_ms = -1 };
        uint32_t pid = 0;
        struct pd_exit ex;
        uint64_t t0 = pd_now_ns();
        /* HELLO and SPAWN in one go (a round trip less); if the agent
         * answered nothing at all (it turns connections away past its
         * limit, or the connect failed), nothing ran: the connect that
         * retries takes over */
        k = pd_agentc_connect_pipelined(s, &c, &err);
        if (k == 0) {
                /* the answer is for this client: its hang-up ends the wait */
                pd_route_watch(&c, r->srv, r->conn, s);
                k = pd_client_run(&c, &sr.opts, &io, &pid, &ex, &err);
        }
        if (k < 0 && !pid && pd_route_agent_untouched(&c, k)) {
                pd_client_close(&c);
                err = (struct pd_error){ 0 };
                if ((k = pd_route_agent(s, &c, &err)) < 0) {
                        ret = pd_route_reply_agent_error(r, k, &err);
                        goto out;
                }
                pd_route_watch(&c, r->srv, r->conn, s);
                k = pd_client_run(&c, &sr.opts, &io, &pid, &ex, &err);
        }
        if (k < 0 && !pid) {
                ret = pd_spawn_reply_error(r, k, &err, &sr);
                goto out;
        }
        if (k < 0) {
                if (k == -ECONNABORTED) {
                        /* nobody wants the answer any more: do not leave the command behind */
                        pd_client_signal_nowait(&c, pid, SIGKILL, true);
                        pd_client_flush(&c, 1000);
                        ret = MHD_NO;
                } else {
                        ret = pd_route_reply_agent_error(r, k, &err);
                }
                goto out;
        }
        exitj = pd_procs_exit_json(&ex);
        pd_procs_oom_mark(r->srv, s, exitj);
        pd_metrics_exec(json_string_value(json_object_get(exitj, "reason")), pd_now_ns() - t0);
        pd_audit(r->srv, s->id, r->key.id, "process.exit",
                 json_pack("{s:i,s:O,s:O,s:O}", "pid", (int)pid, "exit_code", json_object_get(exitj, "exit_code"),
                           "signal", json_object_get(exitj, "signal"), "reason", json_object_get(exitj, "reason")));
        json_t *res = json_pack("{s:i,s:O,s:O,s:O,s:o,s:o}", "pid", (int)pid,
                                "exit_code", json_object_get(exitj, "exit_code"),
                                "signal", json_object_get(exitj, "signal"),
                                "reason", json_object_get(exitj, "reason"),
                                "stdout", pd_procs_text_json(x.out.data, x.out.len),
                                "stderr", pd_procs_text_json(x.err.data, x.err.len));
        if (json_object_get(exitj, "memory_limit_mb"))
                json_object_set(res, "memory_limit_mb", json_object_get(exitj, "memory_limit_mb"));
        if (x.out.total > x.out.len) {
                json_object_set_new(res, "stdout_truncated", json_true());
                json_object_set_new(res, "stdout_bytes", json_integer((json_int_t)x.out.total));
        }
        if (x.err.total > x.err.len) {
                json_object_set_new(res, "stderr_truncated", json_true());
                json_object_set_new(res, "stderr_bytes", json_integer((json_int_t)x.err.total));
        }
        ret = pd_reply_json(r, 200, res);
out:
        json_decref(exitj);
        free(x.out.data);
        free(x.err.data);
        free(in);
        pd_client_close(&c);
        pd_spawn_req_free(&sr);
        json_decref(body);
        pd_server_sandbox_put(r->srv, s);
        return ret;
}
