/* Teardown after the answer (mgr_int.h). A delete answers once the
 * sandbox's processes are dead (its tier's stop) and it is out of the
 * table and the store; what is left of it (mounts, network namespace and
 * rules, cgroups, uid range, its runtime directory) is removed here, on
 * one thread, in the order the deletes came. The caller waits for the
 * result, not for the cleanup (issue 19).
 *
 * A crash cannot leak it: until the tier's destroy is done, the sandbox's
 * runtime directory and its record are still there while the store has
 * no row for it, so the next server's adoption finds it as a stray and
 * finishes it (adopt.c) before it serves; `paddock gc` does the same.
 *
 * Observable: the count of teardowns not finished yet is in
 * pd_manager_counts (GET /api/v1/health "teardowns_pending", GET /metrics
 * paddock_teardowns_pending): tests that look for leftovers wait for 0.
 * The server's stop finishes every queued teardown before it returns. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/core/mgr_int.h"

struct pd_teardown {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_cond_t idle;    /* broadcast when nothing is queued or running */
        pthread_t thread;
        bool started, stopping;
        /* PADDOCK_TEST_TEARDOWN_HOLD=1: queued teardowns wait for the
         * server's stop (tests kill the server in the middle of one) */
        bool hold;
        /* PADDOCK_TEST_TEARDOWN_DELAY_MS=N: each teardown starts N ms late
         * (tests widen the window between a delete's answer and its
         * teardown without holding it) */
        unsigned delay_ms;
        struct entry **q;
        size_t n, cap;
        size_t busy;            /* taken off the queue, not finished */
        uint64_t done;
};

static void finish(struct pd_server *srv, struct entry *e)
{
        struct pd_srv_sandbox *s = &e->s;
        struct pd_error err = { 0 };
        pthread_mutex_lock(&s->lock);
        if (s->sb && s->sb->ops->destroy(s->sb, &err) < 0)
                pd_log("warn", "sandbox teardown incomplete, `paddock gc` will finish it sandbox=%s error=\"%s\"", s->id,
                       err.msg);
        pthread_mutex_unlock(&s->lock);
        pd_log("info", "sandbox torn down sandbox=%s", s->id);
        pd_server_sandbox_put(srv, s);
}

static void *worker(void *arg)
{
        struct pd_server *srv = arg;
        struct pd_teardown *t = M(srv)->teardown;
        pthread_mutex_lock(&t->lock);
        for (;;) {
                while (!t->stopping && (!t->n || t->hold))
                        pthread_cond_wait(&t->cond, &t->lock);
                if (!t->n)
                        break;          /* stopping, queue drained */
                struct entry *e = t->q[0];
                memmove(t->q, t->q + 1, --t->n * sizeof *t->q);
                t->busy++;
                pthread_mutex_unlock(&t->lock);
                if (t->delay_ms) {
                        struct timespec d = { t->delay_ms / 1000, (long)(t->delay_ms % 1000) * 1000000L };
                        nanosleep(&d, NULL);
                }
                finish(srv, e);
                pthread_mutex_lock(&t->lock);
                t->busy--;
                t->done++;
                if (!t->n && !t->busy)
                        pthread_cond_broadcast(&t->idle);
        }
        pthread_mutex_unlock(&t->lock);
        return NULL;
}

int pd_teardown_start(struct pd_server *srv, struct pd_error *err)
{
        struct pd_teardown *t = calloc(1, sizeof *t);
        if (!t)
                return pd_error_set(err, ENOMEM, "teardown queue");
        pthread_mutex_init(&t->lock, NULL);
        pthread_cond_init(&t->cond, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->idle, &ca);
        pthread_condattr_destroy(&ca);
        const char *hold = getenv("PADDOCK_TEST_TEARDOWN_HOLD");
        t->hold = hold && !strcmp(hold, "1");
        const char *delay = getenv("PADDOCK_TEST_TEARDOWN_DELAY_MS");
        t->delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) % 60000 : 0;
        M(srv)->teardown = t;
        int r = pthread_create(&t->thread, NULL, worker, srv);
        if (r != 0)
                return pd_error_set(err, r, "start the teardown thread");
        t->started = true;
        return 0;
}

bool pd_teardown_queue(struct pd_server *srv, struct entry *e)
{
        struct pd_teardown *t = M(srv) ? M(srv)->teardown : NULL;
        if (!t)
                return false;
        pthread_mutex_lock(&t->lock);
        bool ok = t->started && !t->stopping;
        if (ok && t->n == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 16;
                void *v = realloc(t->q, cap * sizeof *t->q);
                if (v) {
                        t->q = v;
                        t->cap = cap;
                } else {
                        ok = false;
                }
        }
        if (ok) {
                /* the queue's reference: the entry (and its sb) lives until
                 * its teardown is done */
                pthread_mutex_lock(&srv->lock);
                e->s.refs++;
                pthread_mutex_unlock(&srv->lock);
                t->q[t->n++] = e;
                pthread_cond_signal(&t->cond);
        }
        pthread_mutex_unlock(&t->lock);
        return ok;
}

void pd_teardown_counts(struct pd_server *srv, uint64_t *pending, uint64_t *done)
{
        struct pd_teardown *t = M(srv) ? M(srv)->teardown : NULL;
        *pending = *done = 0;
        if (!t)
                return;
        pthread_mutex_lock(&t->lock);
        *pending = t->n + t->busy;
        *done = t->done;
        pthread_mutex_unlock(&t->lock);
}

bool pd_teardown_drain(struct pd_server *srv, int timeout_ms)
{
        struct pd_teardown *t = M(srv) ? M(srv)->teardown : NULL;
        if (!t)
                return false;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&t->lock);
        bool waited = t->n + t->busy > 0;
        while (t->started && (t->n || t->busy))
                if (pthread_cond_timedwait(&t->idle, &t->lock, &until) == ETIMEDOUT)
                        break;
        bool drained = waited && !t->n && !t->busy;
        pthread_mutex_unlock(&t->lock);
        return drained;
}

void pd_teardown_stop(struct pd_server *srv)
{
        struct pd_teardown *t = M(srv) ? M(srv)->teardown : NULL;
        if (!t)
                return;
        pthread_mutex_lock(&t->lock);
        t->stopping = true;
        t->hold = false;        /* the stop finishes what is queued */
        pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(&t->lock);
        if (t->started)
                pthread_join(t->thread, NULL);
        t->started = false;
        /* never started: nothing was queued (pd_teardown_queue refused) */
        free(t->q);
        t->q = NULL;
        t->n = t->cap = 0;
}
