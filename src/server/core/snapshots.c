/* Snapshots and forks through the server (manager.h): the tier does the
 * copying (pd_sandbox_snapshot); here the sandbox's lock, the record in
 * SQLite, the audit line, and fork: the tier's own fork op where it has
 * one (microvm: memory and disk), else N creates on an unlisted snapshot. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/manager.h"
#include "server/core/pool.h"
#include "net/router.h"
#include "server/core/store.h"
#include "lib/template.h"

/* s->lock held: a sandbox whose filesystem can be copied. */
static int check_state(struct pd_srv_sandbox *s, struct pd_error *err)
{
        if (s->deleted)
                return pd_error_setx(err, ENOENT, "sandbox %s is gone", s->id);
        if (!s->sb || (strcmp(s->state, "running") && strcmp(s->state, "paused")))
                return pd_error_setx(err, EBUSY, "sandbox %s is %s: only a running or paused sandbox can be "
                                     "snapshotted or forked", s->id, s->state);
        /* paused to disk: its state is a file, nothing runs to copy */
        if (s->sb->paused && !pd_agent_alive(s->sb))
                return pd_error_setx(err, EBUSY, "sandbox %s is paused to disk: resume it first", s->id);
        return 0;
}

int pd_manager_take_snapshot(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox *s,
                             const char *name, json_t **out, struct pd_error *err)
{
        int r = pd_snapshot_name_check(name, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&s->lock);
        if ((r = check_state(s, err)) == 0)
                r = pd_sandbox_snapshot(s->sb, name, err);
        char tpl[65], iso[16];
        snprintf(tpl, sizeof tpl, "%s", s->sb && s->sb->template_buf[0] ? s->sb->template_buf : s->template_name);
        snprintf(iso, sizeof iso, "%s", s->sb ? s->sb->ops->name : "");
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                return r;
        if ((r = pd_store_snapshot_add(srv->store, name, key->id, s->id, tpl, iso, err)) < 0) {
                (void)pd_snapshot_delete(&srv->state, name, NULL);
                return r;
        }
        pd_audit(srv, s->id, s->key_id, "sandbox.snapshot", json_pack("{s:s}", "name", name));
        pd_log("info", "snapshot taken sandbox=%s snapshot=%s", s->id, name);
        *out = json_pack("{s:s, s:s, s:s, s:s}", "name", name, "source", s->id, "template", tpl, "isolation", iso);
        return *out ? 0 : pd_error_set(err, ENOMEM, "snapshot reply");
}

int pd_manager_fork(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox *s, unsigned n,
                    json_t *out, struct pd_error *err)
{
        if (n == 0 || n > PD_FORK_MAX)
                return pd_error_setx(err, EINVAL, "'count' must be 1..%d", PD_FORK_MAX);
        char name[65] = "";
        struct pd_create_req req;
        struct pd_sandbox *dst[PD_FORK_MAX] = { 0 };
        /* a tier's fork builds every copy before they join the table:
         * refuse up front what the limits would refuse afterwards */
        unsigned room = pd_manager_slots_free(srv, key);
        if (n > room)
                return pd_error_setx(err, EAGAIN, "fork: %u copies asked, room for %u more sandboxes", n, room);
        pthread_mutex_lock(&s->lock);
        int r = check_state(s, err);
        bool tier_fork = r == 0 && s->sb->ops->fork;
        if (r == 0) {
                if (tier_fork)
                        /* the tier copies the running state itself (microvm:
                         * memory and disk); the copies join the table below */
                        r = pd_sandbox_fork(s->sb, dst, n, err);
                else if (!s->sb->ops->snapshot)
                        r = pd_error_setx(err, ENOTSUP, "the %s tier cannot fork", s->sb->ops->name);
                else {
                        pd_snapshot_fork_name(s->id, name);
                        r = s->sb->ops->snapshot(s->sb, name, err);
                }
        }
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                return pd_error_prefix(err, "fork");
        pd_manager_create_params(srv, s, &req);
        if (!tier_fork)
                snprintf(req.template_name, sizeof req.template_name, "%s", name);
        /* the copies run with the source's network policy as it is now (a
         * live change included), each with its own address; the router
         * keeps the policy, not the spec */
        if (r == 0 && !tier_fork && req.spec.net != PD_NET_NONE) {
                char *text = NULL;
                if (pd_router_policy_json(&srv->state, s->id, &text) < 0 ||
                    !(req.network = json_loads(text, 0, NULL)))
                        r = pd_error_setx(err, EIO, "the network policy of %s is not readable", s->id);
                free(text);
        }
        struct pd_srv_sandbox *made[PD_FORK_MAX];
        unsigned k = 0;
        for (; r == 0 && k < n; k++) {
                req.made = dst[k];
                dst[k] = NULL;  /* the manager's now, also on failure */
                if ((r = pd_manager_create(srv, key, &req, &made[k], err)) < 0)
                        break;
        }
        for (unsigned i = k; i < n; i++)
                if (dst[i])
                        pd_sandbox_destroy(dst[i], NULL);
        json_decref(req.env);
        json_decref(req.metadata);
        json_decref(req.network);
        if (r < 0) {
                /* all or none: the copies made so far go */
                for (unsigned i = 0; i < k; i++) {
                        (void)pd_manager_delete(srv, made[i], "sandbox.delete", NULL);
                        pd_server_sandbox_put(srv, made[i]);
                }
        } else {
                for (unsigned i = 0; i < k; i++) {
                        json_array_append_new(out, pd_manager_sandbox_json(srv, made[i]));
                        pd_server_sandbox_put(srv, made[i]);
                }
        }
        /* Gone now if no copy was made; else with the last copy. */
        if (!tier_fork)
                pd_snapshot_release(&srv->state, name, NULL);
        if (r < 0)
                return pd_error_prefix(err, "fork");
        pd_audit(srv, s->id, s->key_id, "sandbox.fork",
                 json_pack("{s:I, s:s}", "count", (json_int_t)n, "how", tier_fork ? "tier" : "snapshot"));
        return 0;
}
