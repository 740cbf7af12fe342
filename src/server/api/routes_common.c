/* The small helpers every agent-backed route shares (declared in server.h):
 * the sandbox of a request, an agent connection with retries, waiting for a
 * frame while watching the sandbox, the client and the server, mapping
 * agent errors to HTTP, and the two sandbox users.
 *
 * Used by routes_procs.c, procs_*.c, routes_files.c and the e2b_*.c files. */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/core/server.h"
#include "lib/spec.h"
#include "lib/util.h"

#define WAIT_SLICE_MS 500
#define CONNECT_RETRY_MS 15000

struct pd_srv_sandbox *pd_route_sandbox(struct pd_req *r, enum MHD_Result *ret)
{
        /* A paused or failed sandbox is refused by pd_agentc_connect (EBUSY,
         * answered 409): no need to take s->lock, which a lifecycle change
         * may hold for a while. */
        const char *id = r->n_params > 0 ? r->params[0] : NULL;
        struct pd_srv_sandbox *s = id ? pd_server_sandbox_get(r->srv, id, &r->key) : NULL;
        if (!s)
                *ret = pd_reply_error(r, 404, "not_found", "no sandbox '%s'", id ? id : "");
        return s;
}

static bool sandbox_gone(const struct pd_srv_sandbox *s)
{
        return __atomic_load_n(&s->deleted, __ATOMIC_RELAXED);
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

enum MHD_Result pd_route_reply_agent_error(struct pd_req *r, int neg_errno, const struct pd_error *err)
{
        const char *msg = err && err->code ? err->msg : "agent request failed";
        switch (-neg_errno) {
        case ESRCH:
        case ENOENT:
                return pd_reply_error(r, 404, "not_found", "%s", msg);
        case EINVAL:
        case ENAMETOOLONG:
        case EISDIR:
        case ENOTDIR:
        case ENOTTY:
        case ELOOP:
        case EXDEV:
                return pd_reply_error(r, 400, "bad_request", "%s", msg);
        case EEXIST:
        case ENOTEMPTY:
        case EBUSY:
        case EALREADY:
                return pd_reply_error(r, 409, "conflict", "%s", msg);
        case ENOSPC:
        case EDQUOT:
        case EFBIG:
                return pd_reply_error(r, 507, "no_space", "%s", msg);
        case EPIPE:
        case ECONNRESET:
        case ECONNREFUSED:
        case ESHUTDOWN:
                return pd_reply_error(r, 503, "unavailable", "sandbox agent unreachable: %s", msg);
        case EPROTO:
                /* the agent answered something malformed (agent_check.h) */
                return pd_reply_error(r, 502, "bad_agent_reply", "%s", msg);
        default:
                return pd_reply_errno(r, neg_errno, msg);
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

void pd_deferred_fail(struct pd_deferred_error *d, unsigned status, const char *code, const char *fmt, ...)
{
        if (d->status)
                return;
        d->status = status;
        snprintf(d->code, sizeof d->code, "%s", code);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
}
