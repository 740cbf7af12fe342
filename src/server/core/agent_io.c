/* What every route that talks to a sandbox's agent needs (agent_io.h): a
 * connection with retries, what else ends the client's waits (the
 * sandbox, the HTTP client, the server), the sandbox's two users, and the
 * names of the agent's file entries as JSON. The calls themselves are
 * proto/client.h's. Used by api/ and e2b/ alike. */
#include "server/core/agent_io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/msg.h"
#include "proto/proto.h"
#include "lib/spec.h"
#include "lib/util.h"

#define CONNECT_RETRY_MS 15000

static bool sandbox_gone(const struct pd_srv_sandbox *s)
{
        return pd_srv_sandbox_state(s) == PD_SB_DELETED;
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

bool pd_route_agent_untouched(const struct pd_client *c, int k)
{
        if (!pd_client_is_open(c))
                return true;
        return c->hello_pending && (k == -EPIPE || k == -ECONNRESET || k == -EAGAIN);
}

int pd_route_agent_spawn(struct pd_srv_sandbox *s, struct pd_client *c, const struct pd_spawn_opts *o,
                         uint32_t *pid, struct pd_error *err)
{
        int k = pd_agentc_connect_pipelined(s, c, err);
        if (k == 0 && ((k = pd_client_spawn(c, o, pid, err)) == 0 || !pd_route_agent_untouched(c, k)))
                return k;
        pd_client_close(c);
        *err = (struct pd_error){ 0 };
        if ((k = pd_route_agent(s, c, err)) < 0)
                return k;
        return pd_client_spawn(c, o, pid, err);
}

static bool sandbox_gone_cb(void *s)
{
        return sandbox_gone(s);
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
