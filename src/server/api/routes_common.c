/* The small helpers every agent-backed route shares (declared in server.h):
 * the sandbox of a request, an agent connection with retries, what else
 * ends its waits (the sandbox, the HTTP client, the server), mapping agent
 * errors to HTTP, and the two sandbox users.
 *
 * Used by routes_procs.c, procs_*.c, routes_files.c and the e2b_*.c files. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/core/server.h"
#include "lib/spec.h"
#include "lib/util.h"

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

static bool sandbox_gone_cb(void *s)
{
        return sandbox_gone(s);
}

int pd_route_agent(struct pd_srv_sandbox *s, struct pd_client *c, struct pd_error *err)
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

void pd_route_watch(struct pd_client *c, struct pd_server *srv, struct MHD_Connection *mc,
                    struct pd_srv_sandbox *s)
{
        c->watch = (struct pd_client_watch){ .hup_fd = -1, .stop_fd = srv ? pd_server_stop_fd(srv) : -1 };
        if (mc) {
                const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
                if (ci)
                        c->watch.hup_fd = ci->connect_fd;
        }
        if (s) {
                c->watch.gone = sandbox_gone_cb;
                c->watch.gone_ctx = s;
        }
}

static json_t *str_json(const char *s)
{
        json_t *j = s ? json_string(s) : NULL;
        return j ? j : json_string("");
}

void pd_route_entry_names(const struct pd_entry *e, json_t *o, const char *link_key)
{
        json_object_set_new(o, "name", str_json(e->name));
        json_object_set_new(o, "path", str_json(e->path));
        if (e->link)
                json_object_set_new(o, link_key, str_json(e->link));
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
