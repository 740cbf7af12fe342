/* The sandbox table of paddock serve (mgr_int.h): entries, lookups that
 * take a reference, listings, counts and the per-key limits. Everything
 * here is under srv->lock; an entry is freed by the last reference to a
 * deleted sandbox. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/core/mgr_int.h"
#include "server/core/pool.h"
#include "lib/util.h"

void pd_mgr_entry_free(struct entry *e)
{
        if (e->s.sb)
                pd_sandbox_free(e->s.sb);
        json_decref(e->s.env);
        json_decref(e->s.metadata);
        json_decref(e->notes);
        pthread_mutex_destroy(&e->s.lock);
        free(e);
}

struct entry *pd_mgr_entry_new(void)
{
        struct entry *e = calloc(1, sizeof *e);
        if (!e)
                return NULL;
        pthread_mutex_init(&e->s.lock, NULL);
        e->s.state = PD_SB_CREATING;
        e->notes = json_array();
        e->s.env = json_object();
        e->s.metadata = json_object();
        return e;
}

/* srv->lock held. */
/* Tell the agent watcher to rebuild its set of pidfds. */
void pd_mgr_table_changed(struct pd_server *srv)
{
        uint64_t one = 1;
        if (M(srv) && M(srv)->changed_efd >= 0 && write(M(srv)->changed_efd, &one, sizeof one) < 0 && errno != EAGAIN)
                pd_log("warn", "watcher eventfd: %s", strerror(errno));
}

int pd_manager_changed_fd(struct pd_server *srv)
{
        return M(srv)->changed_efd;
}

int pd_mgr_table_add(struct pd_server *srv, struct entry *e)
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
        pd_mgr_table_changed(srv);
        return 0;
}

/* srv->lock held. */
void pd_mgr_table_remove(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        for (size_t i = 0; i < srv->n_sandboxes; i++)
                if (srv->sandboxes[i] == s) {
                        srv->sandboxes[i] = srv->sandboxes[--srv->n_sandboxes];
                        pd_mgr_table_changed(srv);
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
                if (!pd_mgr_visible(s) || strcmp(s->id, id))
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
        bool last = --s->refs == 0 && s->state == PD_SB_DELETED;
        pthread_mutex_unlock(&srv->lock);
        if (last)
                pd_mgr_entry_free(E(s));
}

int pd_manager_snapshot(struct pd_server *srv, const struct pd_key *key, struct pd_srv_sandbox ***out, size_t *n)
{
        pthread_mutex_lock(&srv->lock);
        struct pd_srv_sandbox **v = calloc(srv->n_sandboxes + 1, sizeof *v);
        size_t k = 0;
        if (v)
                for (size_t i = 0; i < srv->n_sandboxes; i++) {
                        struct pd_srv_sandbox *s = srv->sandboxes[i];
                        if (!pd_mgr_visible(s) || (key && strcmp(s->key_id, key->id)))
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
                if (!pd_mgr_visible(s))
                        continue;
                if (s->state == PD_SB_RUNNING)
                        out->running++;
                else if (pd_sb_is_paused(s->state))
                        out->paused++;
                else
                        out->failed++;
        }
        out->creates_total = M(srv)->creates_total;
        pthread_mutex_unlock(&srv->lock);
        pd_teardown_counts(srv, &out->teardowns_pending, &out->teardowns_total);
}

size_t pd_manager_pool_ready(struct pd_server *srv, struct pd_pool_count *out, size_t max)
{
        return pd_pool_ready(M(srv)->pool, out, max);
}

unsigned pd_manager_slots_free(struct pd_server *srv, const struct pd_key *key)
{
        pthread_mutex_lock(&srv->lock);
        unsigned mine = 0, all = (unsigned)srv->n_sandboxes;
        for (size_t i = 0; i < srv->n_sandboxes; i++)
                if (srv->sandboxes[i]->state != PD_SB_DELETED && !strcmp(srv->sandboxes[i]->key_id, key->id))
                        mine++;
        unsigned a = all < srv->cfg.max_sandboxes ? srv->cfg.max_sandboxes - all : 0;
        unsigned k = mine < srv->cfg.max_per_key ? srv->cfg.max_per_key - mine : 0;
        pthread_mutex_unlock(&srv->lock);
        return a < k ? a : k;
}
