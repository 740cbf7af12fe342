/* The lifecycle of the server's sandboxes (mgr_int.h): create (from a warm
 * pool when the class matches), delete, pause, resume, timeouts and a dead
 * agent, each ending in one transition of the table in lifecycle.h, which
 * persists, publishes and audits it. Also what the API layers read: a
 * sandbox's info and its stats, typed; api/ and e2b/ format them.
 *
 * Sandboxes outlive the server (DESIGN §2): they are created with
 * die_with_parent = false and recorded in SQLite, so a new server finds
 * them again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/policy.h"
#include "server/core/mgr_int.h"
#include "server/core/sb_hooks.h"
#include "server/core/pool.h"
#include "server/core/start_cmd.h"
#include "server/core/store.h"
#include "lib/util.h"

/* ---- the store ---- */

static json_t *spec_json(const struct entry *e, enum pd_sb_state state)
{
        const struct pd_spec *sp = &e->spec;
        return json_pack("{s:I, s:I, s:I, s:I, s:b, s:b, s:b, s:b, s:b}", "memory_bytes", (json_int_t)sp->memory_bytes,
                         "disk_bytes", (json_int_t)sp->disk_bytes, "pids", (json_int_t)sp->pids, "millicpus",
                         (json_int_t)sp->millicpus, "auto_pause", e->auto_pause, "paused_disk",
                         state == PD_SB_PAUSED_DISK, "auto_resume", e->auto_resume, "ports_public",
                         (int)__atomic_load_n(&e->s.ports_public, __ATOMIC_RELAXED), "auto_pause_files",
                         e->auto_pause_files);
}

/* The row of e in state (the state it is going to). s->lock held (or s
 * not yet visible). */
static int persist(struct pd_server *srv, struct entry *e, enum pd_sb_state state, struct pd_error *err)
{
        struct pd_store_row row = { 0 };
        snprintf(row.id, sizeof row.id, "%s", e->s.id);
        snprintf(row.key_id, sizeof row.key_id, "%s", e->s.key_id);
        snprintf(row.template_name, sizeof row.template_name, "%s", e->s.template_name);
        snprintf(row.isolation, sizeof row.isolation, "%s", e->isolation);
        snprintf(row.state, sizeof row.state, "%s", pd_sb_state_store_name(state));
        snprintf(row.boot_id, sizeof row.boot_id, "%s", M(srv)->boot_id);
        json_t *sj = spec_json(e, state);
        row.spec_json = json_dumps(sj, JSON_COMPACT);
        json_decref(sj);
        row.env_json = json_dumps(e->s.env, JSON_COMPACT);
        row.metadata_json = json_dumps(e->s.metadata, JSON_COMPACT);
        row.notes_json = json_dumps(e->notes, JSON_COMPACT);
        row.created_ms = e->s.created_ms;
        row.timeout_s = e->s.timeout_s;
        pthread_mutex_lock(&srv->lock);
        row.deadline_boot_ms = e->s.deadline_boot_ms;
        pthread_mutex_unlock(&srv->lock);
        row.paused_remaining_ms = e->paused_remaining_ms;
        int r = pd_store_sandbox_put(srv->store, &row, err);
        pd_store_row_clear(&row);
        return r;
}

/* ---- transitions (lifecycle.h): the store, the table and the audit log ---- */

struct life_ctx {
        struct pd_server *srv;
        struct entry *e;
        json_t *fields;         /* the audit line's own fields (stolen) */
};

static int fx_persist(void *c, enum pd_sb_state to, struct pd_error *err)
{
        struct life_ctx *x = c;
        return persist(x->srv, x->e, to, err);
}

static int fx_unpersist(void *c, struct pd_error *err)
{
        struct life_ctx *x = c;
        return pd_store_sandbox_delete(x->srv->store, x->e->s.id, err);
}

/* Published under srv->lock: the table's readers (get, snapshot, the
 * reaper, the watcher) see the state and the table change together. */
static void fx_set_state(void *c, enum pd_sb_state to)
{
        struct life_ctx *x = c;
        struct pd_server *srv = x->srv;
        pthread_mutex_lock(&srv->lock);
        __atomic_store_n(&x->e->s.state, to, __ATOMIC_RELEASE);
        if (to == PD_SB_DELETED)
                pd_mgr_table_remove(srv, &x->e->s);
        else
                pd_mgr_table_changed(srv);     /* an agent to watch (created, resumed from disk) or not */
        if (M(srv))
                pthread_cond_signal(&M(srv)->reaper_cond);
        pthread_mutex_unlock(&srv->lock);
}

static void fx_audit(void *c, const char *event)
{
        struct life_ctx *x = c;
        pd_audit(x->srv, x->e->s.id, x->e->s.key_id, event, x->fields ? x->fields : json_object());
        x->fields = NULL;
}

static void fx_persist_failed(void *c, const struct pd_error *err)
{
        struct life_ctx *x = c;
        pd_log("warn", "sandbox state not persisted, carrying on sandbox=%s error=\"%s\"", x->e->s.id, err->msg);
}

static const struct pd_sb_effects effects = {
        .persist = fx_persist,
        .unpersist = fx_unpersist,
        .set_state = fx_set_state,
        .audit = fx_audit,
        .persist_failed = fx_persist_failed,
};

int pd_mgr_transition(struct pd_server *srv, struct entry *e, enum pd_sb_event ev, json_t *fields,
                      struct pd_error *err)
{
        struct life_ctx x = { srv, e, fields };
        enum pd_sb_state st = e->s.state;
        enum pd_sb_state from = st;
        int r = pd_sb_apply(e->s.id, &st, ev, &effects, &x, err);
        json_decref(x.fields);
        /* out of service (paused, deleted, failed): what other parts keep
         * for it goes now, not when they next look (sb_hooks.h) */
        if (r == 0 && from == PD_SB_RUNNING && st != PD_SB_RUNNING)
                pd_sb_hooks_stopped(&e->s);
        return r;
}

void pd_mgr_set_deadline(struct pd_server *srv, struct entry *e, uint64_t deadline)
{
        pthread_mutex_lock(&srv->lock);
        e->s.deadline_boot_ms = deadline;
        pthread_cond_signal(&M(srv)->reaper_cond);
        pthread_mutex_unlock(&srv->lock);
}

/* ---- transitions the API asks for ---- */

/* A create that failed: its reserved slot goes, with the entry. */
static void abandon(struct pd_server *srv, struct entry *e)
{
        (void)pd_mgr_transition(srv, e, PD_EV_CREATE_FAILED, NULL, NULL);
        pd_mgr_entry_free(e);
}

int pd_manager_create(struct pd_server *srv, const struct pd_key *key, const struct pd_create_req *req,
                      struct pd_srv_sandbox **out, struct pd_error *err)
{
        struct mgr *m = M(srv);
        struct entry *e = pd_mgr_entry_new();
        if (!e)
                return pd_error_set(err, ENOMEM, "allocate sandbox");
        snprintf(e->s.key_id, sizeof e->s.key_id, "%s", key->id);
        /* Deleted sandboxes whose teardown is not done still hold mounts
         * (their writable layer's memory), cgroups and a network: they
         * count against the server's maximum until it is (teardown.c).
         * Read before srv->lock (teardown.c takes its own lock first). */
        uint64_t tearing = 0, torn = 0;
        pd_teardown_counts(srv, &tearing, &torn);
        /* Reserve a slot first, so concurrent creates cannot overshoot the limits. */
        pthread_mutex_lock(&srv->lock);
        int r = 0;
        if (m->stopping) {
                r = pd_error_setx(err, ESHUTDOWN, "the server is shutting down");
        } else if (srv->n_sandboxes + tearing >= srv->cfg.max_sandboxes) {
                r = tearing ? pd_error_setx(err, EAGAIN, "the server holds its maximum of %u sandboxes (%llu of "
                                                         "them deleted, still being torn down)",
                                            srv->cfg.max_sandboxes, (unsigned long long)tearing)
                            : pd_error_setx(err, EAGAIN, "the server holds its maximum of %u sandboxes",
                                            srv->cfg.max_sandboxes);
        } else {
                unsigned mine = 0;
                for (size_t i = 0; i < srv->n_sandboxes; i++)
                        if (srv->sandboxes[i]->state != PD_SB_DELETED && !strcmp(srv->sandboxes[i]->key_id, key->id))
                                mine++;
                if (mine >= srv->cfg.max_per_key)
                        r = pd_error_setx(err, EAGAIN, "this API key has its maximum of %u sandboxes",
                                          srv->cfg.max_per_key);
                else if (pd_mgr_table_add(srv, e) < 0)
                        r = pd_error_set(err, ENOMEM, "sandbox table");
        }
        pthread_mutex_unlock(&srv->lock);
        if (r < 0) {
                if (req->made)
                        pd_sandbox_destroy(req->made, NULL);
                pd_mgr_entry_free(e);
                return r;
        }

        struct pd_spec spec = req->spec;
        spec.template_name = req->template_name;
        spec.template_dir = NULL;
        spec.n_volumes = 0;
        bool pooled = false;
        /* network: the policy, parsed again (the route validated it); a
         * sandbox with a network is never a pooled one */
        struct pd_netpol netpol = { 0 };
        if (req->network && !req->made) {
                if ((r = pd_netpol_from_json(req->network, &netpol, err)) < 0) {
                        abandon(srv, e);
                        return r;
                }
                spec.net = netpol.mode == PD_NETPOL_OPEN ? PD_NET_OPEN
                         : netpol.mode == PD_NETPOL_POLICY ? PD_NET_POLICY : PD_NET_NONE;
                spec.netpol = spec.net != PD_NET_NONE ? &netpol : NULL;
                spec.net_uplink = srv->cfg.net_uplink;
                spec.net_resolver = srv->cfg.net_resolver;
        }
        /* a prepared class (req->pool_prep) is pooled with its network */
        struct pd_sandbox *sb = req->made || (spec.net != PD_NET_NONE && !req->pool_prep)
                                ? req->made
                                : pd_pool_take(M(srv)->pool, &spec, req->template_name, req->pool_prep,
                                               spec.net != PD_NET_NONE ? req->network : NULL);
        if (req->made) {
                /* built by the tier's fork: its spec is the source's */
                spec.isolation = sb->spec.isolation;
        } else if (sb) {
                pooled = true;
        } else {
                r = pd_sandbox_new(&srv->state, &spec, &sb, err);
                if (r == 0) {
                        sb->die_with_parent = false;  /* sandboxes outlive the server */
                        r = pd_sandbox_create(sb, err);
                        if (r < 0) {
                                pd_sandbox_free(sb);
                                sb = NULL;
                        }
                }
        }
        /* the template's start command, ready before the create answers
         * (start_cmd.c); a failure leaves no sandbox */
        if (r == 0 && sb && !req->made && (r = pd_mgr_start_cmd(srv, sb, req, err)) < 0) {
                pd_sandbox_destroy(sb, NULL);
                sb = NULL;
        }
        /* the router keeps the policy from here on (GET/PUT .../network) */
        spec.netpol = NULL;
        if (sb)
                sb->spec.netpol = NULL;
        pd_netpol_free(&netpol);
        if (r < 0) {
                abandon(srv, e);
                return r;
        }
        e->s.sb = sb;
        snprintf(e->s.id, sizeof e->s.id, "%s", sb->id);
        snprintf(e->s.template_name, sizeof e->s.template_name, "%s", req->template_name);
        snprintf(e->isolation, sizeof e->isolation, "%s", pd_isolation_name(spec.isolation));
        e->spec = spec;
        e->spec.template_name = NULL;
        if (req->disk_requested && sb->writable_bytes && sb->writable_bytes < spec.disk_bytes)
                json_array_append_new(e->notes,
                                      json_sprintf("disk_mb %llu lowered to %llu: the writable layer lives in the "
                                                   "sandbox's memory (memory_mb %llu) and is kept below it, so "
                                                   "a full disk is ENOSPC, not an OOM kill",
                                                   (unsigned long long)(spec.disk_bytes >> 20),
                                                   (unsigned long long)(sb->writable_bytes >> 20),
                                                   (unsigned long long)(spec.memory_bytes >> 20)));
        json_decref(e->s.env);
        json_decref(e->s.metadata);
        e->s.env = req->env ? json_deep_copy(req->env) : json_object();
        e->s.metadata = req->metadata ? json_deep_copy(req->metadata) : json_object();
        e->s.created_ms = pd_wall_ms();
        e->s.timeout_s = req->timeout_s;
        e->auto_pause = req->auto_pause;
        e->auto_pause_files = req->auto_pause_files;
        e->auto_resume = req->auto_resume;
        e->s.ports_public = req->ports_public;
        e->s.deadline_boot_ms = pd_boot_ms() + (uint64_t)req->timeout_s * 1000u;
        /* the caller's reference, taken while nobody else can see it */
        pthread_mutex_lock(&srv->lock);
        e->s.refs = 1;
        pthread_mutex_unlock(&srv->lock);
        r = pd_mgr_transition(srv, e, PD_EV_CREATED,
                       json_pack("{s:s, s:s, s:I, s:f, s:I, s:I, s:I, s:b}", "template", e->s.template_name,
                                 "isolation", e->isolation, "memory_mb", (json_int_t)(spec.memory_bytes >> 20),
                                 "cpus", spec.millicpus / 1000.0, "pids", (json_int_t)spec.pids, "disk_mb",
                                 (json_int_t)(spec.disk_bytes >> 20), "timeout", (json_int_t)req->timeout_s,
                                 "pooled", pooled),
                       err);
        if (r < 0) {
                pd_error_prefix(err, "sandbox %s", e->s.id);
                pd_sandbox_destroy(sb, NULL);
                e->s.sb = NULL;
                abandon(srv, e);
                return r;
        }
        pthread_mutex_lock(&srv->lock);
        m->creates_total++;
        pthread_mutex_unlock(&srv->lock);
        pd_log("info", "sandbox created sandbox=%s key=%s template=%s pooled=%s", e->s.id, e->s.key_id,
               e->s.template_name, pooled ? "yes" : "no");
        *out = &e->s;
        return 0;
}

int pd_mgr_delete(struct pd_server *srv, struct pd_srv_sandbox *s, enum pd_sb_event ev, bool only_expired,
                     struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        int r = pd_sb_next(s->id, s->state, ev, err);
        if (r < 0) {
                pthread_mutex_unlock(&s->lock);
                return r;
        }
        if (only_expired) {
                pthread_mutex_lock(&srv->lock);
                bool expired = s->deadline_boot_ms && s->deadline_boot_ms <= pd_boot_ms();
                pthread_mutex_unlock(&srv->lock);
                if (!expired) {
                        pthread_mutex_unlock(&s->lock);
                        return 0;
                }
        }
        struct pd_error e2 = { 0 };
        /* later: its processes are dead now, the rest (mounts, network,
         * cgroups, directory) goes after the answer (teardown.c) */
        bool later = false;
        if (s->sb) {
                /* Frozen tasks cannot die: thaw before the kill (a
                 * sandbox paused to disk has nothing running to thaw). */
                if (s->state == PD_SB_PAUSED)
                        (void)pd_sandbox_resume(s->sb, NULL);
                if (s->sb->ops->stop && M(srv)->teardown)
                        later = s->sb->ops->stop(s->sb, &e2) == 0;
                if (!later && s->sb->ops->destroy(s->sb, &e2) < 0)
                        pd_log("warn", "sandbox teardown incomplete, `paddock gc` will finish it sandbox=%s "
                                       "error=\"%s\"",
                               s->id, e2.msg);
        }
        /* deleted (set_state) before the audit line: a follower that wakes
         * on that line must see the sandbox gone and end its stream. */
        r = pd_mgr_transition(srv, e, ev, NULL, err);
        /* not deleted after all (the store refused), or no teardown thread:
         * the rest goes now, as before */
        if (later && (r < 0 || !pd_teardown_queue(srv, e)) && s->sb->ops->destroy(s->sb, &e2) < 0)
                pd_log("warn", "sandbox teardown incomplete, `paddock gc` will finish it sandbox=%s error=\"%s\"",
                       s->id, e2.msg);
        pthread_mutex_unlock(&s->lock);
        if (r == 0)
                pd_log("info", "sandbox deleted sandbox=%s reason=%s", s->id, pd_sb_event_name(ev));
        return r;
}

int pd_manager_delete(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err)
{
        return pd_mgr_delete(srv, s, PD_EV_DELETE, false, err);
}

int pd_manager_set_timeout(struct pd_server *srv, struct pd_srv_sandbox *s, uint32_t timeout_s,
                           struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        int r = pd_sb_next(s->id, s->state, PD_EV_SET_TIMEOUT, err);
        if (r >= 0) {
                s->timeout_s = timeout_s;
                if (pd_sb_is_paused(s->state))
                        e->paused_remaining_ms = (uint64_t)timeout_s * 1000u;
                else
                        pd_mgr_set_deadline(srv, e, pd_boot_ms() + (uint64_t)timeout_s * 1000u);
                r = pd_mgr_transition(srv, e, PD_EV_SET_TIMEOUT, json_pack("{s:I}", "timeout", (json_int_t)timeout_s),
                               err);
        }
        pthread_mutex_unlock(&s->lock);
        return r < 0 ? r : 0;
}

int pd_manager_pause(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err)
{
        return pd_manager_pause_mode(srv, s, PD_PAUSE_DEFAULT, err);
}

int pd_manager_pause_mode(struct pd_server *srv, struct pd_srv_sandbox *s, enum pd_pause_mode mode,
                          struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        bool disk = false;
        int r = pd_sb_next(s->id, s->state, PD_EV_PAUSE, err);
        if (r >= 0 && (r = pd_sandbox_pause_mode(s->sb, mode, &disk, err)) == 0) {
                uint64_t now = pd_boot_ms();
                pthread_mutex_lock(&srv->lock);
                uint64_t d = s->deadline_boot_ms;
                pthread_mutex_unlock(&srv->lock);
                e->paused_remaining_ms = d > now ? d - now : 1;
                pd_mgr_set_deadline(srv, e, 0);
                r = pd_mgr_transition(srv, e, disk ? PD_EV_PAUSE_DISK : PD_EV_PAUSE, NULL, err);
        }
        pthread_mutex_unlock(&s->lock);
        return r < 0 ? r : 0;
}

/* s->lock held: resume s as ev (PD_EV_RESUME or PD_EV_AUTO_RESUME). */
static int resume_locked(struct pd_server *srv, struct entry *e, enum pd_sb_event ev, struct pd_error *err)
{
        int r = pd_sb_next(e->s.id, e->s.state, ev, err);
        if (r >= 0 && (r = pd_sandbox_resume(e->s.sb, err)) == 0) {
                pd_mgr_set_deadline(srv, e, pd_boot_ms() + e->paused_remaining_ms);
                e->paused_remaining_ms = 0;
                /* (set_state tells the watcher: a resume from disk started
                 * a new agent process) */
                r = pd_mgr_transition(srv, e, ev, NULL, err);
        }
        return r < 0 ? r : 0;
}

int pd_manager_resume(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        int r = resume_locked(srv, E(s), PD_EV_RESUME, err);
        pthread_mutex_unlock(&s->lock);
        return r;
}

int pd_manager_resume_on_traffic(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        int r = 0;
        bool resumed = false;
        /* decided under the lock: requests that arrive together resume it
         * once, the others find it running */
        if (s->state == PD_SB_RUNNING)
                r = 0;
        else if (pd_sb_is_paused(s->state) && !e->auto_resume)
                r = pd_error_setx(err, EBUSY, "sandbox %s is paused and was not created with autoResume: "
                                              "resume it (connect) first", s->id);
        else if (!pd_sb_is_paused(s->state))
                r = pd_sb_can(s->id, s->state, PD_OP_PORTS, err);
        else
                resumed = (r = resume_locked(srv, e, PD_EV_AUTO_RESUME, err)) == 0;
        pthread_mutex_unlock(&s->lock);
        if (resumed)
                pd_log("info", "sandbox resumed by traffic sandbox=%s", s->id);
        return r;
}

int pd_manager_set_ports_public(struct pd_server *srv, struct pd_srv_sandbox *s, bool pub, struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        int r = pd_sb_next(s->id, s->state, PD_EV_SET_PORTS, err);
        if (r >= 0) {
                bool was = __atomic_load_n(&s->ports_public, __ATOMIC_RELAXED);
                __atomic_store_n(&s->ports_public, pub, __ATOMIC_RELAXED);
                r = pd_mgr_transition(srv, e, PD_EV_SET_PORTS, json_pack("{s:b}", "public", pub), err);
                if (r < 0)
                        __atomic_store_n(&s->ports_public, was, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&s->lock);
        return r < 0 ? r : 0;
}

/* ---- what the API layers read ---- */

void pd_manager_sandbox_info(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_sandbox_info *out)
{
        struct entry *e = E(s);
        memset(out, 0, sizeof *out);
        pthread_mutex_lock(&s->lock);
        snprintf(out->id, sizeof out->id, "%s", s->id);
        snprintf(out->template_name, sizeof out->template_name, "%s", s->template_name);
        snprintf(out->isolation, sizeof out->isolation, "%s", e->isolation);
        out->state = s->state;
        out->created_ms = s->created_ms;
        pthread_mutex_lock(&srv->lock);
        uint64_t d = s->deadline_boot_ms;
        pthread_mutex_unlock(&srv->lock);
        if (d) {
                /* the deadline on the wall clock: d plus the clocks'
                 * offset, taken in ns and rounded, so that asking twice
                 * gives the same ms (two ms readings could differ by one) */
                struct timespec w, b;
                clock_gettime(CLOCK_REALTIME, &w);
                clock_gettime(CLOCK_BOOTTIME, &b);
                int64_t off_ns = ((int64_t)w.tv_sec - (int64_t)b.tv_sec) * 1000000000 + (w.tv_nsec - b.tv_nsec);
                uint64_t now = (uint64_t)b.tv_sec * 1000u + (uint64_t)b.tv_nsec / 1000000u;
                out->expires_ms = (uint64_t)((int64_t)(d > now ? d : now) + (off_ns + 500000) / 1000000);
        }
        if (pd_sb_is_paused(s->state))
                out->timeout_remaining_ms = e->paused_remaining_ms;
        out->timeout_s = s->timeout_s;
        out->memory_bytes = e->spec.memory_bytes;
        /* the effective limit: what the tier could give (see the note) */
        out->disk_bytes = s->sb && s->sb->writable_bytes ? s->sb->writable_bytes : e->spec.disk_bytes;
        out->pids = e->spec.pids;
        out->millicpus = e->spec.millicpus;
        out->auto_pause = e->auto_pause;
        out->auto_resume = e->auto_resume;
        out->tier_pauses_to_disk = s->sb && (s->sb->ops->caps & PD_TIER_PAUSE_DISK);
        out->paused_files = s->sb && s->sb->paused_files && pd_sb_is_paused(s->state);
        if (s->sb) {
                struct pd_tier_info ti;
                pd_sandbox_describe(s->sb, &ti);
                snprintf(out->accel, sizeof out->accel, "%s", ti.accel);
        }
        out->env = json_incref(s->env);
        out->metadata = json_incref(s->metadata);
        out->notes = json_incref(e->notes);
        pthread_mutex_unlock(&s->lock);
}

void pd_sandbox_info_clear(struct pd_sandbox_info *i)
{
        json_decref(i->env);
        json_decref(i->metadata);
        json_decref(i->notes);
        i->env = i->metadata = i->notes = NULL;
}

int pd_manager_stats(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_sandbox_metrics *out,
                     struct pd_error *err)
{
        struct entry *e = E(s);
        memset(out, 0, sizeof *out);
        pthread_mutex_lock(&s->lock);
        int r;
        if (s->state == PD_SB_DELETED || !s->sb)
                r = pd_error_setx(err, ESRCH, "sandbox %s has no running processes to measure (%s)", s->id,
                                  pd_sb_state_name(s->state));
        else if ((r = pd_sb_can(s->id, s->state, PD_OP_STATS, err)) == 0)
                r = pd_sandbox_stats(s->sb, &out->st, err);
        out->disk_limit = s->sb && s->sb->writable_bytes ? s->sb->writable_bytes : e->spec.disk_bytes;
        out->memory_limit = e->spec.memory_bytes;
        out->pids_limit = e->spec.pids;
        pthread_mutex_unlock(&s->lock);
        return r;
}

void pd_manager_agent_died(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        /* the table refuses it when paused to disk (the tier ended its
         * process on purpose), failed already, or gone */
        if (!s->sb || pd_sb_next(s->id, s->state, PD_EV_AGENT_DIED, NULL) < 0 || pd_agent_alive(s->sb)) {
                pthread_mutex_unlock(&s->lock);
                return;
        }
        /* What is left of it (cgroups, uid range, runtime dir; the agent is
         * reaped) goes now; the record stays, as "failed", until deleted. */
        struct pd_error e2 = { 0 };
        if (s->sb->ops->destroy(s->sb, &e2) < 0)
                pd_log("warn", "failed sandbox not fully cleaned up, `paddock gc` will finish it sandbox=%s "
                               "error=\"%s\"", s->id, e2.msg);
        json_array_append_new(e->notes, json_string("the sandbox's agent died; its processes are gone"));
        (void)pd_mgr_transition(srv, e, PD_EV_AGENT_DIED, json_pack("{s:s}", "reason", "agent died"), NULL);
        pthread_mutex_unlock(&s->lock);
        pd_log("warn", "sandbox failed: its agent died sandbox=%s", s->id);
}

void pd_manager_create_params(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_create_req *out)
{
        struct entry *e = E(s);
        memset(out, 0, sizeof *out);
        out->spec = e->spec;
        snprintf(out->template_name, sizeof out->template_name, "%s", s->template_name);
        out->env = json_incref(s->env);
        out->metadata = json_incref(s->metadata);
        out->timeout_s = s->timeout_s;
        out->auto_pause = e->auto_pause;
        out->auto_pause_files = e->auto_pause_files;
        out->auto_resume = e->auto_resume;
        out->ports_public = __atomic_load_n(&s->ports_public, __ATOMIC_RELAXED);
}
