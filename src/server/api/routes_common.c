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

#include "server/api/api.h"
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
