/* An agent connection for route handlers: a fresh one per caller (the
 * agent takes any number, one after another or at once), with the HELLO
 * done; the calls themselves are the client's (proto/client.h). */
#include <errno.h>
#include <string.h>

#include "server/core/server.h"

static int agentc_open(struct pd_srv_sandbox *s, struct pd_client *out, bool pipelined, struct pd_error *err)
{
        pd_client_init(out);
        /* state is read without s->lock: a stale answer here only means the
         * connect or the first call fails, which callers handle anyway. */
        int r = pd_sb_can(s->id, pd_srv_sandbox_state(s), PD_OP_AGENT, err);
        if (r < 0)
                return r;
        int fd = pd_sandbox_connect(s->sb, err);
        if (fd < 0)
                return fd;
        r = pipelined ? pd_client_connect_pipelined(out, fd, "paddock-serve " PD_VERSION, err)
                      : pd_client_connect(out, fd, "paddock-serve " PD_VERSION, err);
        if (r < 0)
                return pd_error_prefix(err, "sandbox %s", s->id);
        return 0;
}

int pd_agentc_connect(struct pd_srv_sandbox *s, struct pd_client *out, struct pd_error *err)
{
        return agentc_open(s, out, false, err);
}

int pd_agentc_connect_pipelined(struct pd_srv_sandbox *s, struct pd_client *out, struct pd_error *err)
{
        return agentc_open(s, out, true, err);
}
