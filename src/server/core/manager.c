/* The sandbox manager: the table of sandboxes the server serves, the TTL
 * reaper and re-adoption after a restart; the warm pools are in pool.c.
 *
 * Sandboxes outlive the server (DESIGN §2): they are created with
 * die_with_parent = false and recorded in SQLite, so a new server finds them
 * again. Deadlines are CLOCK_BOOTTIME milliseconds: monotonic (a wall-clock
 * jump changes nothing) and still meaningful after a server restart on the
 * same boot, which we check with the kernel's boot_id. */
#include "server/core/manager.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net/policy.h"
#include "server/core/pool.h"
#include "net/router.h"
#include "server/core/store.h"
#include "lib/util.h"
#include "vm/vm.h"

#define MAX_POOL_SIZE 64
#define REAPER_MAX_SLEEP_MS 60000u

/* The table's element: the public part first, our bookkeeping after. */
struct entry {
        struct pd_srv_sandbox s;
        struct pd_spec spec;            /* limits as created */
        char isolation[16];
        uint64_t paused_remaining_ms;   /* frozen TTL while paused */
        bool auto_pause;                /* pause at the deadline instead of deleting */
        bool paused_disk;               /* paused to disk (its memory released) */
        json_t *notes;                  /* array of strings */
        bool creating;                  /* reserved slot, not visible yet */
};

struct mgr {
        pthread_cond_t reaper_cond;     /* with srv->lock, CLOCK_MONOTONIC */
        pthread_t reaper;
        bool reaper_started;
        bool stopping;
        int stop_efd;
        int changed_efd;                /* written when the table changes (watcher.c) */
        pthread_t watcher;
        bool watcher_started;
        uint64_t creates_total;
        char boot_id[40];
        struct pd_pool *pool;
};

static struct mgr *M(struct pd_server *srv)
{
        return srv->manager_private;
}

static struct entry *E(struct pd_srv_sandbox *s)
{
        return (struct entry *)s;
}

uint64_t pd_boot_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int pd_server_stop_fd(struct pd_server *srv)
{
        return M(srv) ? M(srv)->stop_efd : -1;
}

static void read_boot_id(char out[40])
{
        char buf[64] = "";
        /* tests stand in for a host reboot with another boot id */
        const char *fake = getenv("PADDOCK_TEST_BOOT_ID");
        if (fake && *fake)
                snprintf(buf, sizeof buf, "%s", fake);
        else if (pd_read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", buf, sizeof buf) < 0)
                snprintf(buf, sizeof buf, "unknown");
        buf[strcspn(buf, "\n")] = '\0';
        snprintf(out, 40, "%s", buf);
}

/* ---- the table ---- */

static void entry_free(struct entry *e)
{
        if (e->s.sb)
                pd_sandbox_free(e->s.sb);
        json_decref(e->s.env);
        json_decref(e->s.metadata);
        json_decref(e->notes);
        pthread_mutex_destroy(&e->s.lock);
        free(e);
}

static struct entry *entry_new(void)
{
        struct entry *e = calloc(1, sizeof *e);
        if (!e)
                return NULL;
        pthread_mutex_init(&e->s.lock, NULL);
        e->notes = json_array();
        e->s.env = json_object();
        e->s.metadata = json_object();
        return e;
}

/* srv->lock held. */
/* Tell the agent watcher to rebuild its set of pidfds. */
static void table_changed(struct pd_server *srv)
{
        uint64_t one = 1;
        if (M(srv) && M(srv)->changed_efd >= 0 && write(M(srv)->changed_efd, &one, sizeof one) < 0 && errno != EAGAIN)
                pd_log("warn", "watcher eventfd: %s", strerror(errno));
}

int pd_manager_changed_fd(struct pd_server *srv)
{
        return M(srv)->changed_efd;
}

static int table_add(struct pd_server *srv, struct entry *e)
{
        if (srv->n_sandboxes == srv->cap_sandboxes) {
                size_t cap = srv->cap_sandboxes ? srv->cap_sandboxes * 2 : 64;
                void *v = realloc(srv->sandboxes, cap * sizeof *srv->sandboxes);
                if (!v)
                        return -ENOMEM;
                srv->sandboxes = v;
                srv->cap_sandboxes = cap;
        }
        srv->sandboxes[srv->n_sandboxes++] = &e->s;
        table_changed(srv);
        return 0;
}

/* srv->lock held. */
static void table_remove(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        for (size_t i = 0; i < srv->n_sandboxes; i++)
                if (srv->sandboxes[i] == s) {
                        srv->sandboxes[i] = srv->sandboxes[--srv->n_sandboxes];
                        table_changed(srv);
                        return;
                }
}

struct pd_srv_sandbox *pd_server_sandbox_get(struct pd_server *srv, const char *id, const struct pd_key *key)
{
        if (!id || pd_id_check(id) < 0)
                return NULL;
        struct pd_srv_sandbox *found = NULL;
        pthread_mutex_lock(&srv->lock);
        for (size_t i = 0; i < srv->n_sandboxes; i++) {
                struct pd_srv_sandbox *s = srv->sandboxes[i];
                if (s->deleted || E(s)->creating || strcmp(s->id, id))
                        continue;
                if (key && strcmp(s->key_id, key->id))
                        break;
                s->refs++;
                found = s;
                break;
        }
        pthread_mutex_unlock(&srv->lock);
        return found;
}

void pd_server_sandbox_put(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        if (!s)
                return;
        pthread_mutex_lock(&srv->lock);
        bool last = --s->refs == 0 && s->deleted;
        pthread_mutex_unlock(&srv->lock);
        if (last)
                entry_free(E(s));
}

int pd_manager_snapshot(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox ***out, size_t *n)
{
        pthread_mutex_lock(&srv->lock);
        struct pd_srv_sandbox **v = calloc(srv->n_sandboxes + 1, sizeof *v);
        size_t k = 0;
        if (v)
                for (size_t i = 0; i < srv->n_sandboxes; i++) {
                        struct pd_srv_sandbox *s = srv->sandboxes[i];
                        if (s->deleted || E(s)->creating || (key && strcmp(s->key_id, key->id)))
                                continue;
                        s->refs++;
                        v[k++] = s;
                }
        pthread_mutex_unlock(&srv->lock);
        if (!v)
                return -ENOMEM;
        /* ids are unique: a plain insertion sort keeps this dependency-free
         * and n is bounded by --max-sandboxes */
        for (size_t i = 1; i < k; i++) {
                struct pd_srv_sandbox *x = v[i];
                size_t j = i;
                while (j > 0 && strcmp(v[j - 1]->id, x->id) > 0) {
                        v[j] = v[j - 1];
                        j--;
                }
                v[j] = x;
        }
        *out = v;
        *n = k;
        return 0;
}

void pd_manager_snapshot_free(struct pd_server *srv, struct pd_srv_sandbox **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                pd_server_sandbox_put(srv, v[i]);
        free(v);
}

void pd_manager_counts(struct pd_server *srv, struct pd_manager_counts *out)
{
        memset(out, 0, sizeof *out);
        pthread_mutex_lock(&srv->lock);
        for (size_t i = 0; i < srv->n_sandboxes; i++) {
                struct pd_srv_sandbox *s = srv->sandboxes[i];
                if (s->deleted || E(s)->creating)
                        continue;
                if (!strcmp(s->state, "running"))
                        out->running++;
                else if (!strcmp(s->state, "paused"))
                        out->paused++;
                else
                        out->failed++;
        }
        out->creates_total = M(srv)->creates_total;
        pthread_mutex_unlock(&srv->lock);
}

json_t *pd_manager_pool_ready(struct pd_server *srv)
{
        return pd_pool_ready(M(srv)->pool);
}

/* ---- persistence ---- */

static json_t *spec_json(const struct entry *e)
{
        const struct pd_spec *sp = &e->spec;
        return json_pack("{s:I, s:I, s:I, s:I, s:b, s:b}", "memory_bytes", (json_int_t)sp->memory_bytes,
                         "disk_bytes", (json_int_t)sp->disk_bytes, "pids", (json_int_t)sp->pids, "millicpus",
                         (json_int_t)sp->millicpus, "auto_pause", e->auto_pause, "paused_disk", e->paused_disk);
}

/* s->lock held (or s not yet visible). */
static int persist(struct pd_server *srv, struct entry *e, struct pd_error *err)
{
        struct pd_store_row row = { 0 };
        snprintf(row.id, sizeof row.id, "%s", e->s.id);
        snprintf(row.key_id, sizeof row.key_id, "%s", e->s.key_id);
        snprintf(row.template_name, sizeof row.template_name, "%s", e->s.template_name);
        snprintf(row.isolation, sizeof row.isolation, "%s", e->isolation);
        snprintf(row.state, sizeof row.state, "%s", e->s.state);
        snprintf(row.boot_id, sizeof row.boot_id, "%s", M(srv)->boot_id);
        json_t *sj = spec_json(e);
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

static void persist_or_log(struct pd_server *srv, struct entry *e)
{
        struct pd_error err = { 0 };
        if (persist(srv, e, &err) < 0)
                pd_log("warn", "sandbox state not persisted, carrying on sandbox=%s error=\"%s\"", e->s.id, err.msg);
}

/* Deadlines change under srv->lock (the reaper reads them there). */
static void set_deadline(struct pd_server *srv, struct entry *e, uint64_t deadline)
{
        pthread_mutex_lock(&srv->lock);
        e->s.deadline_boot_ms = deadline;
        pthread_cond_signal(&M(srv)->reaper_cond);
        pthread_mutex_unlock(&srv->lock);
}

/* ---- lifecycle ---- */

static void audit_lifecycle(struct pd_server *srv, struct entry *e, const char *event, json_t *fields)
{
        pd_audit(srv, e->s.id, e->s.key_id, event, fields ? fields : json_object());
}

unsigned pd_manager_slots_free(struct pd_server *srv, const struct pd_key *key)
{
        pthread_mutex_lock(&srv->lock);
        unsigned mine = 0, all = (unsigned)srv->n_sandboxes;
        for (size_t i = 0; i < srv->n_sandboxes; i++)
                if (!srv->sandboxes[i]->deleted && !strcmp(srv->sandboxes[i]->key_id, key->id))
                        mine++;
        unsigned a = all < srv->cfg.max_sandboxes ? srv->cfg.max_sandboxes - all : 0;
        unsigned k = mine < srv->cfg.max_per_key ? srv->cfg.max_per_key - mine : 0;
        pthread_mutex_unlock(&srv->lock);
        return a < k ? a : k;
}

int pd_manager_create(struct pd_server *srv, const struct pd_key *key, const struct pd_create_req *req,
                      struct pd_srv_sandbox **out, struct pd_error *err)
{
        struct mgr *m = M(srv);
        struct entry *e = entry_new();
        if (!e)
                return pd_error_set(err, ENOMEM, "allocate sandbox");
        e->creating = true;
        snprintf(e->s.key_id, sizeof e->s.key_id, "%s", key->id);
        /* Reserve a slot first, so concurrent creates cannot overshoot the limits. */
        pthread_mutex_lock(&srv->lock);
        int r = 0;
        if (m->stopping) {
                r = pd_error_setx(err, ESHUTDOWN, "the server is shutting down");
        } else if (srv->n_sandboxes >= srv->cfg.max_sandboxes) {
                r = pd_error_setx(err, EAGAIN, "the server holds its maximum of %u sandboxes",
                                  srv->cfg.max_sandboxes);
        } else {
                unsigned mine = 0;
                for (size_t i = 0; i < srv->n_sandboxes; i++)
                        if (!srv->sandboxes[i]->deleted && !strcmp(srv->sandboxes[i]->key_id, key->id))
                                mine++;
                if (mine >= srv->cfg.max_per_key)
                        r = pd_error_setx(err, EAGAIN, "this API key has its maximum of %u sandboxes",
                                          srv->cfg.max_per_key);
                else if (table_add(srv, e) < 0)
                        r = pd_error_set(err, ENOMEM, "sandbox table");
        }
        pthread_mutex_unlock(&srv->lock);
        if (r < 0) {
                if (req->made)
                        pd_sandbox_destroy(req->made, NULL);
                entry_free(e);
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
                        pthread_mutex_lock(&srv->lock);
                        table_remove(srv, &e->s);
                        pthread_mutex_unlock(&srv->lock);
                        entry_free(e);
                        return r;
                }
                spec.net = netpol.mode == PD_NETPOL_OPEN ? PD_NET_OPEN
                         : netpol.mode == PD_NETPOL_POLICY ? PD_NET_POLICY : PD_NET_NONE;
                spec.netpol = spec.net != PD_NET_NONE ? &netpol : NULL;
                spec.net_uplink = srv->cfg.net_uplink;
                spec.net_resolver = srv->cfg.net_resolver;
        }
        struct pd_sandbox *sb = req->made || spec.net != PD_NET_NONE ? req->made
                                : pd_pool_take(M(srv)->pool, &spec, req->template_name);
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
        /* the router keeps the policy from here on (GET/PUT .../network) */
        spec.netpol = NULL;
        if (sb)
                sb->spec.netpol = NULL;
        pd_netpol_free(&netpol);
        if (r < 0) {
                pthread_mutex_lock(&srv->lock);
                table_remove(srv, &e->s);
                pthread_mutex_unlock(&srv->lock);
                entry_free(e);
                return r;
        }
        e->s.sb = sb;
        snprintf(e->s.id, sizeof e->s.id, "%s", sb->id);
        snprintf(e->s.template_name, sizeof e->s.template_name, "%s", req->template_name);
        snprintf(e->isolation, sizeof e->isolation, "%s", pd_isolation_name(spec.isolation));
        snprintf(e->s.state, sizeof e->s.state, "running");
        e->spec = spec;
        e->spec.template_name = NULL;
        json_decref(e->s.env);
        json_decref(e->s.metadata);
        e->s.env = req->env ? json_deep_copy(req->env) : json_object();
        e->s.metadata = req->metadata ? json_deep_copy(req->metadata) : json_object();
        e->s.created_ms = wall_ms();
        e->s.timeout_s = req->timeout_s;
        e->auto_pause = req->auto_pause;
        e->s.deadline_boot_ms = pd_boot_ms() + (uint64_t)req->timeout_s * 1000u;
        r = persist(srv, e, err);
        if (r < 0) {
                pd_error_prefix(err, "sandbox %s", e->s.id);
                pd_sandbox_destroy(sb, NULL);
                e->s.sb = NULL;
                pthread_mutex_lock(&srv->lock);
                table_remove(srv, &e->s);
                pthread_mutex_unlock(&srv->lock);
                entry_free(e);
                return r;
        }
        pthread_mutex_lock(&srv->lock);
        e->creating = false;
        e->s.refs = 1;  /* the caller's */
        m->creates_total++;
        pthread_cond_signal(&m->reaper_cond);
        table_changed(srv);     /* its agent now has a pidfd to watch */
        pthread_mutex_unlock(&srv->lock);
        audit_lifecycle(srv, e, "sandbox.create",
                        json_pack("{s:s, s:s, s:I, s:f, s:I, s:I, s:I, s:b}", "template", e->s.template_name,
                                  "isolation", e->isolation, "memory_mb", (json_int_t)(spec.memory_bytes >> 20),
                                  "cpus", spec.millicpus / 1000.0, "pids", (json_int_t)spec.pids, "disk_mb",
                                  (json_int_t)(spec.disk_bytes >> 20), "timeout", (json_int_t)req->timeout_s,
                                  "pooled", pooled));
        pd_log("info", "sandbox created sandbox=%s key=%s template=%s pooled=%s", e->s.id, e->s.key_id,
               e->s.template_name, pooled ? "yes" : "no");
        *out = &e->s;
        return 0;
}

/* Destroy and forget. only_expired: the reaper's call, which must not act
 * on a deadline that moved meanwhile. Caller holds a reference. */
static int do_delete(struct pd_server *srv, struct pd_srv_sandbox *s, const char *event, bool only_expired,
                     struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        if (s->deleted) {
                pthread_mutex_unlock(&s->lock);
                return pd_error_setx(err, ENOENT, "sandbox %s is gone", s->id);
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
        if (s->sb) {
                /* Frozen tasks cannot die: thaw before the kill (a
                 * sandbox paused to disk has nothing running to thaw). */
                if (!strcmp(s->state, "paused") && !e->paused_disk)
                        (void)pd_sandbox_resume(s->sb, NULL);
                if (s->sb->ops->destroy(s->sb, &e2) < 0)
                        pd_log("warn", "sandbox teardown incomplete, `paddock gc` will finish it sandbox=%s "
                                       "error=\"%s\"",
                               s->id, e2.msg);
        }
        /* deleted before the audit line: a follower that wakes on that line
         * must see the sandbox gone and end its stream. */
        pthread_mutex_lock(&srv->lock);
        s->deleted = true;
        snprintf(s->state, sizeof s->state, "deleted");
        table_remove(srv, s);
        pthread_cond_signal(&M(srv)->reaper_cond);
        pthread_mutex_unlock(&srv->lock);
        if (pd_store_sandbox_delete(srv->store, s->id, &e2) < 0)
                pd_log("warn", "sandbox record not removed sandbox=%s error=\"%s\"", s->id, e2.msg);
        pthread_mutex_unlock(&s->lock);
        audit_lifecycle(srv, e, event, NULL);
        pd_log("info", "sandbox deleted sandbox=%s reason=%s", s->id, event);
        return 0;
}

int pd_manager_delete(struct pd_server *srv, struct pd_srv_sandbox *s, const char *event, struct pd_error *err)
{
        return do_delete(srv, s, event, false, err);
}

int pd_manager_set_timeout(struct pd_server *srv, struct pd_srv_sandbox *s, uint32_t timeout_s,
                           struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        if (s->deleted) {
                pthread_mutex_unlock(&s->lock);
                return pd_error_setx(err, ENOENT, "sandbox %s is gone", s->id);
        }
        s->timeout_s = timeout_s;
        if (!strcmp(s->state, "paused"))
                e->paused_remaining_ms = (uint64_t)timeout_s * 1000u;
        else
                set_deadline(srv, e, pd_boot_ms() + (uint64_t)timeout_s * 1000u);
        persist_or_log(srv, e);
        pthread_mutex_unlock(&s->lock);
        audit_lifecycle(srv, e, "sandbox.set_timeout", json_pack("{s:I}", "timeout", (json_int_t)timeout_s));
        return 0;
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
        int r = 0;
        bool disk = false;
        if (s->deleted)
                r = pd_error_setx(err, ENOENT, "sandbox %s is gone", s->id);
        else if (strcmp(s->state, "running") || !s->sb)
                r = pd_error_setx(err, EBUSY, "sandbox %s is %s, not running", s->id, s->state);
        else if ((r = pd_sandbox_pause_mode(s->sb, mode, &disk, err)) == 0) {
                e->paused_disk = disk;
                uint64_t now = pd_boot_ms();
                pthread_mutex_lock(&srv->lock);
                uint64_t d = s->deadline_boot_ms;
                pthread_mutex_unlock(&srv->lock);
                e->paused_remaining_ms = d > now ? d - now : 1;
                set_deadline(srv, e, 0);
                snprintf(s->state, sizeof s->state, "paused");
                persist_or_log(srv, e);
        }
        pthread_mutex_unlock(&s->lock);
        if (r == 0)
                audit_lifecycle(srv, e, "sandbox.pause", NULL);
        return r;
}

int pd_manager_resume(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        int r = 0;
        if (s->deleted)
                r = pd_error_setx(err, ENOENT, "sandbox %s is gone", s->id);
        else if (strcmp(s->state, "paused") || !s->sb)
                r = pd_error_setx(err, EBUSY, "sandbox %s is %s, not paused", s->id, s->state);
        else if ((r = pd_sandbox_resume(s->sb, err)) == 0) {
                e->paused_disk = false;
                snprintf(s->state, sizeof s->state, "running");
                set_deadline(srv, e, pd_boot_ms() + e->paused_remaining_ms);
                /* a resume from disk started a new agent process: watch it */
                pthread_mutex_lock(&srv->lock);
                table_changed(srv);
                pthread_mutex_unlock(&srv->lock);
                e->paused_remaining_ms = 0;
                persist_or_log(srv, e);
        }
        pthread_mutex_unlock(&s->lock);
        if (r == 0)
                audit_lifecycle(srv, e, "sandbox.resume", NULL);
        return r;
}

/* The host's CPU cannot change while we run: read /proc/cpuinfo once, not
 * for every sandbox object (a benign race sets the same value twice). */
static bool have_kvm(void)
{
        static int kvm = -1;
        int k = __atomic_load_n(&kvm, __ATOMIC_RELAXED);
        if (k < 0) {
                k = pd_vm_have_kvm();
                __atomic_store_n(&kvm, k, __ATOMIC_RELAXED);
        }
        return k;
}

json_t *pd_manager_sandbox_json(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        char created[32], expires[32];
        pd_rfc3339_ms(s->created_ms, created);
        pthread_mutex_lock(&srv->lock);
        uint64_t d = s->deadline_boot_ms;
        pthread_mutex_unlock(&srv->lock);
        json_t *exp = json_null();
        if (d) {
                uint64_t now = pd_boot_ms();
                pd_rfc3339_ms(wall_ms() + (d > now ? d - now : 0), expires);
                exp = json_string(expires);
        }
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:f, s:I, s:I, s:O, s:O, s:O}", "id", s->id,
                              "template", s->template_name, "isolation", e->isolation, "state", s->state,
                              "created_at", created, "expires_at", exp, "timeout", (json_int_t)s->timeout_s,
                              "memory_mb", (json_int_t)(e->spec.memory_bytes >> 20), "cpus",
                              e->spec.millicpus / 1000.0, "pids", (json_int_t)e->spec.pids, "disk_mb",
                              (json_int_t)(e->spec.disk_bytes >> 20), "env", s->env, "metadata", s->metadata,
                              "notes", e->notes);
        if (o && !strcmp(s->state, "paused"))
                json_object_set_new(o, "timeout_remaining_ms", json_integer((json_int_t)e->paused_remaining_ms));
        if (o)
                json_object_set_new(o, "network", pd_manager_network_json(srv, s->id));
        if (o) {
                json_object_set_new(o, "auto_pause", json_boolean(e->auto_pause));
                /* What pausing does on this tier (the freezer keeps memory). */
                bool disk = s->sb && (s->sb->ops->caps & PD_TIER_PAUSE_DISK);
                json_object_set_new(o, "pause_mode", json_string(disk ? "disk" : "memory"));
                /* how this pause was done: "disk" = its memory was released */
                if (!strcmp(s->state, "paused"))
                        json_object_set_new(o, "paused_to", json_string(e->paused_disk ? "disk" : "memory"));
                /* a guest's CPU: emulated (tcg) or hardware virtualization (kvm) */
                if (e->spec.isolation == PD_ISO_MICROVM)
                        json_object_set_new(o, "accel", json_string(have_kvm() ? "kvm" : "tcg"));
        }
        pthread_mutex_unlock(&s->lock);
        return o;
}

int pd_manager_stats(struct pd_server *srv, struct pd_srv_sandbox *s, json_t **out, struct pd_error *err)
{
        struct entry *e = E(s);
        struct pd_sandbox_stats st;
        pthread_mutex_lock(&s->lock);
        int r;
        if (s->deleted || !s->sb)
                r = pd_error_setx(err, ESRCH, "sandbox %s has no running processes to measure (%s)", s->id,
                                  s->state);
        else if (!strcmp(s->state, "failed"))
                r = pd_error_setx(err, EBUSY, "sandbox %s has failed: nothing left to measure", s->id);
        else
                r = pd_sandbox_stats(s->sb, &st, err);
        uint64_t disk_limit = s->sb && s->sb->writable_bytes ? s->sb->writable_bytes : e->spec.disk_bytes;
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                return r;
        *out = json_pack("{s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "cpu_seconds", (double)st.cpu_ns / 1e9,
                         "memory_bytes", (json_int_t)st.memory_current, "memory_peak_bytes",
                         (json_int_t)st.memory_peak, "memory_limit_bytes", (json_int_t)e->spec.memory_bytes, "pids",
                         (json_int_t)st.pids_current, "pids_limit", (json_int_t)e->spec.pids, "disk_used_bytes",
                         (json_int_t)st.disk_used, "disk_limit_bytes", (json_int_t)disk_limit, "oom_kills",
                         (json_int_t)st.oom_kills);
        return *out ? 0 : pd_error_set(err, ENOMEM, "stats");
}

/* ---- the reaper ---- */

/* autoPause: at the deadline a running sandbox is paused, not deleted; its
 * resume gives it its whole configured timeout again. 0 if it was paused
 * (or is no longer expired); <0 to fall back to deletion. */
static int auto_pause(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_error *err)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        pthread_mutex_lock(&srv->lock);
        bool expired = s->deadline_boot_ms && s->deadline_boot_ms <= pd_boot_ms();
        pthread_mutex_unlock(&srv->lock);
        int r = 0;
        if (s->deleted || !expired) {
                pthread_mutex_unlock(&s->lock);
                return 0;
        }
        if (strcmp(s->state, "running") || !s->sb)
                r = pd_error_setx(err, EBUSY, "sandbox %s is %s", s->id, s->state);
        else if ((r = pd_sandbox_pause_mode(s->sb, PD_PAUSE_DEFAULT, &e->paused_disk, err)) == 0) {
                e->paused_remaining_ms = (uint64_t)s->timeout_s * 1000u;
                set_deadline(srv, e, 0);
                snprintf(s->state, sizeof s->state, "paused");
                persist_or_log(srv, e);
        }
        pthread_mutex_unlock(&s->lock);
        if (r == 0) {
                audit_lifecycle(srv, e, "sandbox.auto_pause", NULL);
                pd_log("info", "sandbox paused at its deadline (autoPause) sandbox=%s", s->id);
        }
        return r;
}

static void *reaper_main(void *arg)
{
        struct pd_server *srv = arg;
        struct mgr *m = M(srv);
        pthread_mutex_lock(&srv->lock);
        while (!m->stopping) {
                uint64_t now = pd_boot_ms(), earliest = UINT64_MAX;
                struct pd_srv_sandbox *expired = NULL;
                for (size_t i = 0; i < srv->n_sandboxes; i++) {
                        struct pd_srv_sandbox *s = srv->sandboxes[i];
                        if (s->deleted || E(s)->creating || !s->deadline_boot_ms)
                                continue;
                        if (s->deadline_boot_ms <= now) {
                                expired = s;
                                break;
                        }
                        if (s->deadline_boot_ms < earliest)
                                earliest = s->deadline_boot_ms;
                }
                if (expired) {
                        expired->refs++;
                        pthread_mutex_unlock(&srv->lock);
                        struct pd_error err = { 0 };
                        if (E(expired)->auto_pause && auto_pause(srv, expired, &err) == 0)
                                ;       /* paused, or its deadline moved meanwhile */
                        else if (do_delete(srv, expired, "sandbox.timeout", true, &err) < 0)
                                pd_log("warn", "timeout: %s", err.msg);
                        pd_server_sandbox_put(srv, expired);
                        pthread_mutex_lock(&srv->lock);
                        continue;
                }
                /* Sleep until the earliest deadline. The wait is on
                 * CLOCK_MONOTONIC, which stops during suspend while
                 * BOOTTIME runs on: cap it, and recompute on waking. */
                uint64_t wait_ms = earliest == UINT64_MAX ? REAPER_MAX_SLEEP_MS : earliest - now;
                if (wait_ms > REAPER_MAX_SLEEP_MS)
                        wait_ms = REAPER_MAX_SLEEP_MS;
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                uint64_t ns = (uint64_t)ts.tv_nsec + wait_ms * 1000000u;
                ts.tv_sec += (time_t)(ns / 1000000000u);
                ts.tv_nsec = (long)(ns % 1000000000u);
                pthread_cond_timedwait(&m->reaper_cond, &srv->lock, &ts);
        }
        pthread_mutex_unlock(&srv->lock);
        return NULL;
}

static void mark_failed(struct entry *e, const char *note);

void pd_manager_agent_died(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        struct entry *e = E(s);
        pthread_mutex_lock(&s->lock);
        /* paused to disk: the tier ended its process on purpose */
        if (s->deleted || !s->sb || !strcmp(s->state, "failed") || pd_agent_alive(s->sb) ||
            (!strcmp(s->state, "paused") && e->paused_disk)) {
                pthread_mutex_unlock(&s->lock);
                return;
        }
        /* What is left of it (cgroups, uid range, runtime dir; the agent is
         * reaped) goes now; the record stays, as "failed", until deleted. */
        struct pd_error e2 = { 0 };
        if (s->sb->ops->destroy(s->sb, &e2) < 0)
                pd_log("warn", "failed sandbox not fully cleaned up, `paddock gc` will finish it sandbox=%s "
                               "error=\"%s\"", s->id, e2.msg);
        mark_failed(e, "the sandbox's agent died; its processes are gone");
        persist_or_log(srv, e);
        pthread_mutex_unlock(&s->lock);
        audit_lifecycle(srv, e, "sandbox.failed", json_pack("{s:s}", "reason", "agent died"));
        pd_log("warn", "sandbox failed: its agent died sandbox=%s", s->id);
}

/* ---- adoption ---- */

struct rows {
        struct pd_store_row *v;
        size_t n, cap;
};

static void collect_row(const struct pd_store_row *row, void *ctx)
{
        struct rows *rs = ctx;
        if (rs->n == rs->cap) {
                size_t cap = rs->cap ? rs->cap * 2 : 16;
                void *v = realloc(rs->v, cap * sizeof *rs->v);
                if (!v)
                        return;
                rs->v = v;
                rs->cap = cap;
        }
        struct pd_store_row *c = &rs->v[rs->n++];
        *c = *row;
        c->spec_json = strdup(row->spec_json);
        c->env_json = strdup(row->env_json);
        c->metadata_json = strdup(row->metadata_json);
        c->notes_json = strdup(row->notes_json);
}

static json_t *load_json(const char *text, bool array)
{
        json_t *j = text ? json_loads(text, 0, NULL) : NULL;
        if (!j || (array ? !json_is_array(j) : !json_is_object(j))) {
                json_decref(j);
                j = array ? json_array() : json_object();
        }
        return j;
}

static struct entry *entry_from_row(const struct pd_store_row *row)
{
        struct entry *e = entry_new();
        if (!e)
                return NULL;
        snprintf(e->s.id, sizeof e->s.id, "%s", row->id);
        snprintf(e->s.key_id, sizeof e->s.key_id, "%s", row->key_id);
        snprintf(e->s.template_name, sizeof e->s.template_name, "%s", row->template_name);
        snprintf(e->isolation, sizeof e->isolation, "%s", row->isolation);
        snprintf(e->s.state, sizeof e->s.state, "%s", row->state);
        json_decref(e->s.env);
        json_decref(e->s.metadata);
        json_decref(e->notes);
        e->s.env = load_json(row->env_json, false);
        e->s.metadata = load_json(row->metadata_json, false);
        e->notes = load_json(row->notes_json, true);
        e->s.created_ms = row->created_ms;
        e->s.timeout_s = row->timeout_s;
        e->s.deadline_boot_ms = row->deadline_boot_ms;
        e->paused_remaining_ms = row->paused_remaining_ms;
        pd_spec_defaults(&e->spec);
        (void)pd_isolation_parse(row->isolation, &e->spec.isolation);
        json_t *sp = load_json(row->spec_json, false);
        json_int_t v;
        if ((v = json_integer_value(json_object_get(sp, "memory_bytes"))) > 0)
                e->spec.memory_bytes = (uint64_t)v;
        if ((v = json_integer_value(json_object_get(sp, "disk_bytes"))) > 0)
                e->spec.disk_bytes = (uint64_t)v;
        if ((v = json_integer_value(json_object_get(sp, "pids"))) > 0)
                e->spec.pids = (uint32_t)v;
        if ((v = json_integer_value(json_object_get(sp, "millicpus"))) > 0)
                e->spec.millicpus = (uint32_t)v;
        e->auto_pause = json_is_true(json_object_get(sp, "auto_pause"));
        e->paused_disk = json_is_true(json_object_get(sp, "paused_disk")) && !strcmp(row->state, "paused");
        json_decref(sp);
        return e;
}

/* Is the agent there and speaking our protocol? 0, or -errno with err. */
static int hello_check(struct pd_sandbox *sb, struct pd_error *err)
{
        int fd = pd_sandbox_connect(sb, err);
        if (fd < 0)
                return fd;
        struct pd_conn c;
        if (pd_conn_init(&c, fd) < 0) {
                close(fd);
                return pd_error_set(err, errno, "agent connection");
        }
        char agent[128];
        int r = pd_conn_hello(&c, "paddock-serve " PD_VERSION, agent, sizeof agent, err);
        pd_conn_close(&c);
        return r;
}

static void mark_failed(struct entry *e, const char *note)
{
        snprintf(e->s.state, sizeof e->s.state, "failed");
        json_array_append_new(e->notes, json_string(note));
}

static void adopt_one(struct pd_server *srv, const struct pd_store_row *row)
{
        struct entry *e = entry_from_row(row);
        if (!e)
                return;
        struct pd_error err = { 0 };
        char note[PD_ERROR_MSG_MAX + 64];
        if (strcmp(row->state, "failed")) {
                struct pd_sandbox *sb = NULL;
                bool rebooted = strcmp(row->boot_id, M(srv)->boot_id) != 0, revived = false;
                int r = rebooted ? -ESRCH : pd_sandbox_load(&srv->state, row->id, &sb, &err);
                if (r == 0 && (r = sb->ops->adopt(sb, &err)) == 0 && !sb->paused && !pd_agent_alive(sb))
                        /* a zombie nobody reaped still has its /proc entry */
                        r = pd_error_setx(&err, ESRCH, "the agent of sandbox %s exited", row->id);
                /* A reboot emptied the runtime dir (or a restart came before
                 * the first resume after one): only what a tier kept on the
                 * state dir's disk is left (a microvm paused to disk), and
                 * its adopt says so. */
                if (r < 0 && !sb && !strcmp(row->state, "paused") && e->paused_disk &&
                    pd_sandbox_revive(&srv->state, row->id, &e->spec, &sb, &err) == 0 &&
                    (r = sb->ops->adopt(sb, &err)) == 0 && sb->paused)
                        revived = true;
                else if (r < 0 && rebooted)
                        r = pd_error_setx(&err, ESRCH, "the machine rebooted since the sandbox was created");
                if (revived)
                        r = 0;
                if (r == 0) {
                        e->s.sb = sb;
                        /* adopt found it paused to disk (no process to find) */
                        if (sb->paused)
                                e->paused_disk = true;
                        sb->paused = !strcmp(row->state, "paused");
                        /* A paused sandbox's agent is frozen: no handshake. */
                        if (strcmp(row->state, "paused") && hello_check(sb, &err) < 0) {
                                snprintf(note, sizeof note, "agent unusable after server restart: %s", err.msg);
                                mark_failed(e, note);
                                pd_audit(srv, e->s.id, e->s.key_id, "sandbox.failed",
                                         json_pack("{s:s}", "reason", note));
                                pd_log("warn", "adopted sandbox unusable, marked failed sandbox=%s error=\"%s\"",
                                       e->s.id, err.msg);
                        } else {
                                pd_log("info", "sandbox adopted sandbox=%s state=%s", e->s.id, e->s.state);
                        }
                } else {
                        snprintf(note, sizeof note, "sandbox lost while the server was down: %s", err.msg);
                        mark_failed(e, note);
                        if (sb) {
                                struct pd_error e2;
                                if (pd_sandbox_destroy(sb, &e2) < 0)
                                        pd_log("warn", "cleanup of lost sandbox incomplete sandbox=%s error=\"%s\"",
                                               e->s.id, e2.msg);
                        } else {
                                char dir[PATH_MAX + 64];
                                snprintf(dir, sizeof dir, "%s/sandboxes/%s", srv->state.rundir, row->id);
                                pd_rm_rf(dir, NULL);
                        }
                        pd_audit(srv, e->s.id, e->s.key_id, "sandbox.failed", json_pack("{s:s}", "reason", note));
                        pd_log("warn", "sandbox lost while the server was down, marked failed sandbox=%s "
                                       "error=\"%s\"",
                               e->s.id, err.msg);
                }
                /* failed; or revived on this boot (its record names it) */
                if (!strcmp(e->s.state, "failed") || revived)
                        persist_or_log(srv, e);
        }
        pthread_mutex_lock(&srv->lock);
        if (table_add(srv, e) < 0) {
                pthread_mutex_unlock(&srv->lock);
                entry_free(e);
                return;
        }
        pthread_mutex_unlock(&srv->lock);
}

/* Sandbox directories the store does not know: a crash between creating a
 * sandbox and recording it, or a warm pool of the last server. */
static void destroy_strays(struct pd_server *srv)
{
        int dfd = openat(srv->state.rundirfd, "sandboxes", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return;
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                bool known = false;
                pthread_mutex_lock(&srv->lock);
                for (size_t i = 0; i < srv->n_sandboxes && !known; i++)
                        known = !strcmp(srv->sandboxes[i]->id, de->d_name);
                pthread_mutex_unlock(&srv->lock);
                if (known)
                        continue;
                struct pd_sandbox *sb = NULL;
                struct pd_error err = { 0 };
                if (pd_sandbox_load(&srv->state, de->d_name, &sb, &err) == 0) {
                        (void)sb->ops->adopt(sb, NULL);
                        if (pd_sandbox_destroy(sb, &err) < 0)
                                pd_log("warn", "stray sandbox not fully removed sandbox=%s error=\"%s\"", de->d_name,
                                       err.msg);
                } else {
                        char dir[PATH_MAX + 300];
                        snprintf(dir, sizeof dir, "%s/sandboxes/%s", srv->state.rundir, de->d_name);
                        pd_rm_rf(dir, NULL);
                }
                pd_log("info", "stray sandbox removed sandbox=%s", de->d_name);
        }
        closedir(d);
}

int pd_manager_start(struct pd_server *srv, struct pd_error *err)
{
        struct mgr *m = calloc(1, sizeof *m);
        if (!m)
                return pd_error_set(err, ENOMEM, "manager");
        srv->manager_private = m;
        m->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        m->changed_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (m->stop_efd < 0 || m->changed_efd < 0)
                return pd_error_set(err, errno, "eventfd");
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&m->reaper_cond, &ca);
        pthread_condattr_destroy(&ca);
        if (!(m->pool = pd_pool_new(srv)))
                return pd_error_set(err, ENOMEM, "manager");
        read_boot_id(m->boot_id);
        if (srv->cfg.pool_size > MAX_POOL_SIZE)
                srv->cfg.pool_size = MAX_POOL_SIZE;
        if (mkdirat(srv->state.dirfd, "audit", 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s/audit'", srv->state.dir);
        srv->audit_dirfd = openat(srv->state.dirfd, "audit", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (srv->audit_dirfd < 0)
                return pd_error_set(err, errno, "open '%s/audit'", srv->state.dir);

        struct rows rs = { 0 };
        int r = pd_store_sandbox_each(srv->store, collect_row, &rs, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < rs.n; i++) {
                adopt_one(srv, &rs.v[i]);
                pd_store_row_clear(&rs.v[i]);
        }
        free(rs.v);
        destroy_strays(srv);

        if ((r = pthread_create(&m->reaper, NULL, reaper_main, srv)) != 0)
                return pd_error_set(err, r, "start the reaper thread");
        m->reaper_started = true;
        if ((r = pd_pool_start(m->pool, err)) < 0)
                return r;
        if ((r = pthread_create(&m->watcher, NULL, pd_watcher_main, srv)) != 0)
                return pd_error_set(err, r, "start the agent watcher thread");
        m->watcher_started = true;
        return 0;
}

void pd_manager_begin_stop(struct pd_server *srv)
{
        struct mgr *m = M(srv);
        if (!m)
                return;
        pthread_mutex_lock(&srv->lock);
        m->stopping = true;
        pthread_cond_broadcast(&m->reaper_cond);
        pthread_mutex_unlock(&srv->lock);
        if (m->pool)    /* NULL if the start failed early */
                pd_pool_begin_stop(m->pool);
        uint64_t one = 1;
        if (write(m->stop_efd, &one, sizeof one) < 0)
                pd_log("warn", "stop eventfd: %s", strerror(errno));
}

void pd_manager_stop(struct pd_server *srv)
{
        struct mgr *m = M(srv);
        if (!m)
                return;
        pd_manager_begin_stop(srv);
        if (m->reaper_started)
                pthread_join(m->reaper, NULL);
        if (m->watcher_started)
                pthread_join(m->watcher, NULL);
        m->reaper_started = m->watcher_started = false;
        if (m->pool)
                pd_pool_stop(m->pool);
        if (!srv->cfg.destroy_on_exit)
                return;
        struct pd_srv_sandbox **v;
        size_t n;
        if (pd_manager_snapshot(srv, NULL, &v, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                struct pd_error err = { 0 };
                if (pd_manager_delete(srv, v[i], "sandbox.delete", &err) < 0)
                        pd_log("warn", "destroy on exit sandbox=%s error=\"%s\"", v[i]->id, err.msg);
        }
        pd_manager_snapshot_free(srv, v, n);
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
}
