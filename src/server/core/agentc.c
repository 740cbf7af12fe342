/* An agent connection for route handlers: a fresh one per caller (the
 * agent takes any number, one after another or at once), with the HELLO
 * done; the calls themselves are the client's (proto/client.h). */
#include <errno.h>
#include <string.h>

#include "server/core/server.h"

int pd_agentc_connect(struct pd_srv_sandbox *s, struct pd_client *out, struct pd_error *err)
{
        pd_client_init(out);
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
        int r = pd_client_connect(out, fd, "paddock-serve " PD_VERSION, err);
        if (r < 0)
                return pd_error_prefix(err, "sandbox %s", s->id);
        return 0;
}
