/* What every route that talks to a sandbox's agent needs (agent_io.h): a
 * connection with retries, waiting for a frame while watching the
 * sandbox, the client and the server, the sandbox's two users, and the
 * agent's file entries decoded. Used by api/ and e2b/ alike. */
#include "server/core/agent_io.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/msg.h"
#include "proto/proto.h"
#include "lib/spec.h"
#include "lib/util.h"

#define WAIT_SLICE_MS 500
#define CONNECT_RETRY_MS 15000

static bool sandbox_gone(const struct pd_srv_sandbox *s)
{
        return pd_srv_sandbox_state(s) == PD_SB_DELETED;
}

int pd_route_agent(struct pd_srv_sandbox *s, struct pd_conn *c, struct pd_error *err)
{
        /* The agent serves a bounded number of connections (AG_MAX_CONNS) and
         * closes the ones beyond it at once: the HELLO then fails with EPIPE
         * or ECONNRESET. Those are worth another try; anything else is not. */
        uint64_t deadline = pd_now_ms() + CONNECT_RETRY_MS;
        for (unsigned attempt = 0;; attempt++) {
                int r = pd_agentc_connect(s, c, err);
                if (r >= 0)
                        return r;
                bool busy = r == -EPIPE || r == -ECONNRESET || r == -EAGAIN;
                if (!busy || sandbox_gone(s) || pd_now_ms() >= deadline)
                        return r;
                unsigned ms = 5u << (attempt < 5 ? attempt : 5);       /* 5 .. 160 ms */
                struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)(ms + (unsigned)rand() % 10u) * 1000000L };
                nanosleep(&ts, NULL);
        }
}

int pd_route_wait(struct pd_server *srv, struct pd_conn *c, struct MHD_Connection *mc,
                  struct pd_srv_sandbox *s, struct pd_frame_hdr *h, const uint8_t **payload, int timeout_ms)
{
        uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : pd_now_ms() + (uint64_t)timeout_ms;
        /* Only hang-ups of the client count: a keep-alive client may
         * legitimately have sent its next request already (POLLIN). */
        int cfd = -1;
        if (mc) {
                const union MHD_ConnectionInfo *ci =
                        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
                if (ci)
                        cfd = ci->connect_fd;
        }
        int stopfd = srv ? pd_server_stop_fd(srv) : -1;
        for (;;) {
                int r = pd_conn_next(c, h, payload);
                if (r != 0)
                        return r;
                if (c->eof)
                        return -EPIPE;
                if ((r = pd_conn_flush(c)) < 0)
                        return r;
                if (s && sandbox_gone(s))
                        return -ESHUTDOWN;
                uint64_t now = pd_now_ms();
                if (now >= deadline)
                        return -ETIMEDOUT;
                int slice = deadline - now < WAIT_SLICE_MS ? (int)(deadline - now) : WAIT_SLICE_MS;
                struct pollfd p[3] = {
                        { .fd = c->fd, .events = POLLIN | (pd_conn_pending(c) ? POLLOUT : 0) },
                        { .fd = cfd, .events = POLLRDHUP },     /* fd -1: ignored by poll */
                        { .fd = stopfd, .events = POLLIN },
                };
                int n = poll(p, 3, slice);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        return -ECONNABORTED;
                if (n > 0 && p[2].revents)
                        return -ESHUTDOWN;      /* the server stops */
                if (n > 0 && p[0].revents && (r = pd_conn_fill(c)) < 0)
                        return r;
        }
}

bool pd_route_user_parse(const char *name, struct pd_route_user *u)
{
        if (!name || !strcmp(name, "user")) {
                *u = (struct pd_route_user){ PD_USER_UID, PD_USER_UID, "/home/user", "user",
                                             { PD_USER_UID, 27, 100 }, 3 };
                return true;
        }
        if (!strcmp(name, "root")) {
                *u = (struct pd_route_user){ 0, 0, "/root", "root", { 0 }, 1 };
                return true;
        }
        return false;
}

static json_t *str_json(const struct pd_attr *a)
{
        char *s = pd_attr_strdup(a);
        json_t *j = s ? json_string(s) : NULL;
        free(s);
        return j ? j : json_string("");
}

void pd_file_entry_decode(const uint8_t *p, size_t len, json_t *o, const char *link_key, struct pd_file_entry *e)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        *e = (struct pd_file_entry){ .ftype = PD_FT_OTHER };
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                switch (a.tag) {
                case PD_A_NAME: json_object_set_new(o, "name", str_json(&a)); break;
                case PD_A_PATH: json_object_set_new(o, "path", str_json(&a)); break;
                case PD_A_LINK: json_object_set_new(o, link_key, str_json(&a)); break;
                case PD_A_FTYPE: pd_attr_u32(&a, &e->ftype); break;
                case PD_A_SIZE: pd_attr_u64(&a, &e->size); break;
                case PD_A_MODE: pd_attr_u32(&a, &e->mode); break;
                case PD_A_UID: pd_attr_u32(&a, &e->uid); break;
                case PD_A_GID: pd_attr_u32(&a, &e->gid); break;
                case PD_A_MTIME_NS: pd_attr_u64(&a, &e->mtime_ns); break;
                }
        }
}

/* Wait for the REPLY or ERROR of request id (other frames skipped). */
int pd_agent_wait_reply(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_conn *c, uint32_t id,
                        int timeout_ms, struct pd_error *err)
{
        for (;;) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                int k = pd_route_wait(srv, c, NULL, s, &h, &p, timeout_ms);
                if (k < 0)
                        return pd_error_setx(err, -k, "agent connection: %s", strerror(-k));
                if (h.id != id || (h.type != PD_T_REPLY && h.type != PD_T_ERROR))
                        continue;
                if (h.type == PD_T_ERROR) {
                        char msg[256];
                        pd_conn_error_text(p, h.len, msg, sizeof msg);
                        return pd_error_setx(err, pd_conn_error_errno(h.aux, EIO), "%s", msg);
                }
                return 0;
        }
}
