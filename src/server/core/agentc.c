/* Synchronous agent calls for route handlers: a fresh connection per
 * caller (the agent takes any number, one after another or at once), the
 * HELLO done, then request/reply by id. Frames that are not the awaited
 * reply (OUTPUT, EXIT... of other requests on this connection) are skipped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/core/server.h"
#include "lib/util.h"

int pd_agentc_connect(struct pd_srv_sandbox *s, struct pd_conn *out, struct pd_error *err)
{
        out->fd = -1;
        /* state is read without s->lock: a stale answer here only means the
         * connect or the first call fails, which callers handle anyway. */
        if (s->deleted || !s->sb)
                return pd_error_setx(err, ENOENT, "sandbox %s is gone", s->id);
        if (!strcmp(s->state, "paused"))
                return pd_error_setx(err, EBUSY, "sandbox %s is paused; resume it first", s->id);
        if (!strcmp(s->state, "failed"))
                return pd_error_setx(err, EBUSY, "sandbox %s has failed and cannot run anything", s->id);
        int fd = pd_sandbox_connect(s->sb, err);
        if (fd < 0)
                return fd;
        int r = pd_conn_init(out, fd);
        if (r < 0) {
                close(fd);
                out->fd = -1;
                return pd_error_set(err, -r, "agent connection");
        }
        char agent[128];
        r = pd_conn_hello(out, "paddock-serve " PD_VERSION, agent, sizeof agent, err);
        if (r < 0) {
                pd_conn_close(out);
                return pd_error_prefix(err, "sandbox %s", s->id);
        }
        return 0;
}

int pd_agentc_call(struct pd_conn *c, uint16_t type, const struct pd_msg *req, uint8_t **reply,
                   size_t *reply_len, int timeout_ms, struct pd_error *err)
{
        uint32_t id = pd_conn_new_id(c);
        int r = req ? pd_conn_queue_msg(c, type, id, req) : pd_conn_queue(c, type, 0, id, 0, NULL, 0);
        if (r < 0)
                return pd_error_set(err, -r, "queue %s request", pd_frame_type_name(type));
        uint64_t deadline = pd_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000);
        for (;;) {
                int64_t left = (int64_t)(deadline - pd_now_ms());
                if (left <= 0)
                        return pd_error_setx(err, ETIMEDOUT, "the agent did not answer %s in time",
                                             pd_frame_type_name(type));
                struct pd_frame_hdr h;
                const uint8_t *p;
                r = pd_conn_wait(c, &h, &p, (int)left);
                if (r == -ETIMEDOUT)
                        continue;
                if (r < 0)
                        return pd_error_set(err, -r, "agent connection (%s)", pd_frame_type_name(type));
                if (h.id != id || (h.type != PD_T_REPLY && h.type != PD_T_ERROR))
                        continue;
                if (h.type == PD_T_ERROR) {
                        char msg[256];
                        pd_conn_error_text(p, h.len, msg, sizeof msg);
                        return pd_error_setx(err, pd_conn_error_errno(h.aux, EIO), "%s", msg);
                }
                if (reply) {
                        *reply = malloc(h.len ? h.len : 1);
                        if (!*reply)
                                return pd_error_set(err, ENOMEM, "agent reply");
                        memcpy(*reply, p, h.len);
                }
                if (reply_len)
                        *reply_len = h.len;
                return 0;
        }
}
