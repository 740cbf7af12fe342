/* Warm pools: sandboxes created ahead of demand, one pool per class
 * (template and limits), so that a create whose class matches only has to
 * take one. A filler thread keeps every class topped up to cfg.pool_size;
 * pooled sandboxes belong to no key and are in no record, so a server that
 * stops destroys them (and the next one removes any left as strays). */
#include "server/core/pool.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/client.h"
#include "lib/template.h"
#include "lib/util.h"

#define POOL_RETRY_MS 5000u

struct pool_class {
        struct pd_spec spec;
        char template_name[65];
        struct pd_sandbox **ready;
        unsigned n_ready, creating;
        uint64_t retry_at_ms;           /* after a failed fill, CLOCK_MONOTONIC */
};

struct pd_pool {
        struct pd_server *srv;
        pthread_mutex_t lock;
        pthread_cond_t cond;            /* CLOCK_MONOTONIC */
        pthread_t filler;
        bool filler_started;
        bool stopping;
        struct pool_class classes[PD_POOL_CLASSES_MAX];
        unsigned n_classes;
};

static bool same_class(const struct pd_spec *a, const char *atpl, const struct pd_spec *b, const char *btpl)
{
        return !strcmp(atpl, btpl) && a->isolation == b->isolation && a->memory_bytes == b->memory_bytes &&
               a->disk_bytes == b->disk_bytes && a->pids == b->pids && a->millicpus == b->millicpus;
}

/* pool_lock held. */
static struct pool_class *class_find(struct pd_pool *m, const struct pd_spec *spec, const char *tpl)
{
        for (unsigned i = 0; i < m->n_classes; i++)
                if (same_class(&m->classes[i].spec, m->classes[i].template_name, spec, tpl))
                        return &m->classes[i];
        return NULL;
}

/* pool_lock held. A new class is only added while there is room: the pools
 * must not grow with every odd limit a client asks for. */
static struct pool_class *class_add(struct pd_pool *m, const struct pd_spec *spec, const char *tpl)
{
        struct pd_server *srv = m->srv;
        if (srv->cfg.pool_size == 0 || m->n_classes >= PD_POOL_CLASSES_MAX)
                return NULL;
        struct pool_class *c = &m->classes[m->n_classes];
        memset(c, 0, sizeof *c);
        c->ready = calloc(srv->cfg.pool_size, sizeof *c->ready);
        if (!c->ready)
                return NULL;
        c->spec = *spec;
        snprintf(c->template_name, sizeof c->template_name, "%s", tpl);
        c->spec.template_name = c->template_name;
        m->n_classes++;
        pthread_cond_signal(&m->cond);
        return c;
}

bool pd_agent_alive(struct pd_sandbox *sb)
{
        if (sb->agent_pidfd < 0)
                return false;
        struct pollfd p = { .fd = sb->agent_pidfd, .events = POLLIN };
        return poll(&p, 1, 0) == 0;     /* a pidfd polls readable once the process exited */
}

struct pd_sandbox *pd_pool_take(struct pd_pool *m, const struct pd_spec *spec, const char *tpl)
{
        /* Snapshots are a key's own and deletable: a warm copy would keep
         * one in use (and undeletable) with no sandbox of the key's on it. */
        if (strcmp(tpl, "base") && pd_snapshot_is(&m->srv->state, tpl))
                return NULL;
        for (;;) {
                struct pd_sandbox *sb = NULL;
                pthread_mutex_lock(&m->lock);
                struct pool_class *c = class_find(m, spec, tpl);
                if (!c)
                        class_add(m, spec, tpl);
                else if (c->n_ready > 0)
                        sb = c->ready[--c->n_ready];
                pthread_cond_signal(&m->cond);     /* refill */
                pthread_mutex_unlock(&m->lock);
                if (!sb || pd_agent_alive(sb))
                        return sb;
                pd_log("warn", "pooled sandbox died while waiting, discarding sandbox=%s", sb->id);
                pd_sandbox_destroy(sb, NULL);
        }
}

/* A fresh microvm clone runs its first command several times slower than
 * the next ones (under TCG every QEMU translates the guest's code anew, and
 * the clone's first touches of its memory are copy-on-write faults): run one
 * login shell, which runs an external command (its fork and exec, echo's
 * own code), before it is handed out. Its process is tagged PD_POOL_WARMUP
 * and hidden from process lists. */
static int pool_warm(struct pd_sandbox *sb, struct pd_error *err)
{
        int fd = pd_sandbox_connect(sb, err);
        if (fd < 0)
                return fd;
        struct pd_client c;
        static const char *const argv[] = { "/bin/bash", "-l", "-c", "/usr/bin/echo >/dev/null; true" };
        const struct pd_spawn_opts o = { .argv = argv, .argc = PD_ARRAY_SIZE(argv), .cwd = "/", .tag = PD_POOL_WARMUP };
        const struct pd_run_io io = { .timeout_ms = 60000 };     /* output dropped */
        uint32_t pid;
        struct pd_exit x;
        int r = pd_client_connect(&c, fd, "paddock-serve " PD_VERSION, err);
        if (r == 0)
                r = pd_client_run(&c, &o, &io, &pid, &x, err);
        pd_client_close(&c);
        return r < 0 ? pd_error_prefix(err, "warm-up command") : 0;
}

static void *filler_main(void *arg)
{
        struct pd_pool *m = arg;
        struct pd_server *srv = m->srv;
        pthread_mutex_lock(&m->lock);
        while (!m->stopping) {
                struct pool_class *todo = NULL;
                uint64_t now = pd_now_ms(), wake = 0;
                for (unsigned i = 0; i < m->n_classes && !todo; i++) {
                        struct pool_class *c = &m->classes[i];
                        if (c->n_ready + c->creating >= srv->cfg.pool_size)
                                continue;
                        if (c->retry_at_ms > now) {
                                if (!wake || c->retry_at_ms < wake)
                                        wake = c->retry_at_ms;
                                continue;
                        }
                        todo = c;
                }
                if (!todo) {
                        if (wake) {
                                struct timespec ts;
                                clock_gettime(CLOCK_MONOTONIC, &ts);
                                uint64_t ns = (uint64_t)ts.tv_nsec + (wake - now) * 1000000u;
                                ts.tv_sec += (time_t)(ns / 1000000000u);
                                ts.tv_nsec = (long)(ns % 1000000000u);
                                pthread_cond_timedwait(&m->cond, &m->lock, &ts);
                        } else {
                                pthread_cond_wait(&m->cond, &m->lock);
                        }
                        continue;
                }
                todo->creating++;
                struct pd_spec spec = todo->spec;
                pthread_mutex_unlock(&m->lock);

                struct pd_error err = { 0 };
                struct pd_sandbox *sb = NULL;
                int r = pd_sandbox_new(&srv->state, &spec, &sb, &err);
                if (r == 0) {
                        sb->die_with_parent = false;
                        r = pd_sandbox_create(sb, &err);
                        if (r < 0) {
                                pd_sandbox_free(sb);
                                sb = NULL;
                        }
                }
                if (r == 0 && (pd_tier_caps(spec.isolation) & PD_TIER_POOL_WARMUP) && pool_warm(sb, &err) < 0)
                        pd_log("warn", "warm pool: warm-up command failed, the sandbox is pooled cold sandbox=%s "
                                       "error=\"%s\"", sb->id, err.msg);
                pthread_mutex_lock(&m->lock);
                todo->creating--;
                if (r < 0) {
                        pd_log("warn", "warm pool: could not create a sandbox, retrying in %us template=%s error=\"%s\"",
                               POOL_RETRY_MS / 1000, todo->template_name, err.msg);
                        todo->retry_at_ms = pd_now_ms() + POOL_RETRY_MS;
                } else if (m->stopping || todo->n_ready >= srv->cfg.pool_size) {
                        pthread_mutex_unlock(&m->lock);
                        pd_sandbox_destroy(sb, NULL);
                        pthread_mutex_lock(&m->lock);
                } else {
                        todo->ready[todo->n_ready++] = sb;
                        todo->retry_at_ms = 0;
                }
        }
        pthread_mutex_unlock(&m->lock);
        return NULL;
}

struct pd_pool *pd_pool_new(struct pd_server *srv)
{
        struct pd_pool *m = calloc(1, sizeof *m);
        if (!m)
                return NULL;
        m->srv = srv;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&m->cond, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&m->lock, NULL);
        return m;
}

int pd_pool_start(struct pd_pool *m, struct pd_error *err)
{
        if (m->srv->cfg.pool_size > 0) {
                struct pd_spec def;
                pd_spec_defaults(&def);
                pthread_mutex_lock(&m->lock);
                class_add(m, &def, "base");
                pthread_mutex_unlock(&m->lock);
        }
        int r = pthread_create(&m->filler, NULL, filler_main, m);
        if (r != 0)
                return pd_error_set(err, r, "start the pool thread");
        m->filler_started = true;
        return 0;
}

void pd_pool_begin_stop(struct pd_pool *m)
{
        pthread_mutex_lock(&m->lock);
        m->stopping = true;
        pthread_cond_broadcast(&m->cond);
        pthread_mutex_unlock(&m->lock);
}

void pd_pool_stop(struct pd_pool *m)
{
        pd_pool_begin_stop(m);
        if (m->filler_started)
                pthread_join(m->filler, NULL);
        m->filler_started = false;
        /* Pooled sandboxes belong to no one and are in no record. */
        for (unsigned i = 0; i < m->n_classes; i++) {
                struct pool_class *c = &m->classes[i];
                while (c->n_ready > 0)
                        pd_sandbox_destroy(c->ready[--c->n_ready], NULL);
        }
}

size_t pd_pool_ready(struct pd_pool *m, struct pd_pool_count *out, size_t max)
{
        size_t n = 0;
        pthread_mutex_lock(&m->lock);
        for (unsigned i = 0; i < m->n_classes && n < max; i++, n++) {
                snprintf(out[n].template_name, sizeof out[n].template_name, "%s", m->classes[i].template_name);
                snprintf(out[n].isolation, sizeof out[n].isolation, "%s",
                         pd_isolation_name(m->classes[i].spec.isolation));
                out[n].ready = m->classes[i].n_ready;
        }
        pthread_mutex_unlock(&m->lock);
        return n;
}
