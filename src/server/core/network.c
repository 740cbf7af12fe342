/* A server sandbox's network, through its tier (lib/tier.h net_info,
 * net_update): the server names no router, no netns, no tier. */
#include <errno.h>
#include <stdlib.h>

#include "net/policy.h"
#include "server/core/manager.h"

int pd_manager_net_info(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_net_info *out,
                        struct pd_error *err)
{
        /* no lock: s->sb is set once, before s is visible, and the tier
         * reads what its network layer keeps by the sandbox's id */
        *out = (struct pd_net_info){ 0 };
        if (!s->sb)
                return pd_error_setx(err, ENOENT, "sandbox %s has no network (mode none)", s->id);
        return pd_sandbox_net_info(s->sb, out, err);
}

int pd_manager_net_update(struct pd_server *srv, struct pd_srv_sandbox *s, const struct pd_key *key,
                          const struct pd_netpol *pol, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        int r = s->sb && s->state != PD_SB_DELETED ? pd_sandbox_net_update(s->sb, pol, err)
                                                   : pd_error_setx(err, ENOENT, "sandbox %s is gone", s->id);
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                return r;
        char *text = pd_netpol_to_json_str(pol);
        pd_audit(srv, s->id, key->id, "sandbox.network", text ? json_loads(text, 0, NULL) : json_object());
        free(text);
        return 0;
}
