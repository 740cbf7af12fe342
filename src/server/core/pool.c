/* Warm pools: sandboxes created ahead of demand, one pool per class
 * (template and limits), so that a create whose class matches only has to
 * take one. A filler thread keeps every class topped up to cfg.pool_size;
 * pooled sandboxes belong to no key and are in no record, so a server that
 * stops destroys them (and the next one removes any left as strays). */
#include "server/core/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/policy.h"
#include "proto/client.h"
#include "server/core/metrics.h"
#include "lib/template.h"
#include "lib/util.h"

#define POOL_RETRY_MS 5000u
/* A class that still has a sandbox ready is refilled once the API has been
 * quiet this long, or at the latest this long after it fell short: a
 * refill (a whole sandbox start) would otherwise run beside the command the
 * client runs right after its create, on the same cores. An empty class is
 * refilled at once. */
#define POOL_QUIET_MS 20u
#define POOL_DEFER_MAX_MS 500u

struct pool_class {
        struct pd_spec spec;
        char template_name[65];
        const struct pd_pool_prep *prep;        /* NULL: none */
        char *net;                      /* the network policy as canonical JSON; NULL: none */
        struct pd_sandbox **ready;
        unsigned n_ready, creating;
        uint64_t retry_at_ms;           /* after a failed fill, CLOCK_MONOTONIC */
        uint64_t short_since_ms;        /* below pool_size since (0: full) */
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

static bool same_class(const struct pool_class *c, const struct pd_spec *b, const char *btpl,
                       const struct pd_pool_prep *prep, const char *net)
{
        const struct pd_spec *a = &c->spec;
        return !strcmp(c->template_name, btpl) && a->isolation == b->isolation && a->memory_bytes == b->memory_bytes &&
               a->disk_bytes == b->disk_bytes && a->pids == b->pids && a->millicpus == b->millicpus &&
               c->prep == prep && (c->net && net ? !strcmp(c->net, net) : c->net == net);
}

/* pool_lock held. */
static struct pool_class *class_find(struct pd_pool *m, const struct pd_spec *spec, const char *tpl,
                                     const struct pd_pool_prep *prep, const char *net)
{
        for (unsigned i = 0; i < m->n_classes; i++)
                if (same_class(&m->classes[i], spec, tpl, prep, net))
                        return &m->classes[i];
        return NULL;
}

/* pool_lock held. A new class is only added while there is room: the pools
 * must not grow with every odd limit a client asks for. */
static struct pool_class *class_add(struct pd_pool *m, const struct pd_spec *spec, const char *tpl,
                                    const struct pd_pool_prep *prep, const char *net)
{
        struct pd_server *srv = m->srv;
        if (srv->cfg.pool_size == 0 || m->n_classes >= PD_POOL_CLASSES_MAX)
                return NULL;
        struct pool_class *c = &m->classes[m->n_classes];
        memset(c, 0, sizeof *c);
        c->ready = calloc(srv->cfg.pool_size, sizeof *c->ready);
        c->net = net ? strdup(net) : NULL;
        if (!c->ready || (net && !c->net)) {
                free(c->ready);
                free(c->net);
                return NULL;
        }
        c->prep = prep;
        c->spec = *spec;
        c->spec.net = PD_NET_NONE;      /* the filler builds it from c->net */
        c->spec.netpol = NULL;
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

struct pd_sandbox *pd_pool_take(struct pd_pool *m, const struct pd_spec *spec, const char *tpl,
                                const struct pd_pool_prep *prep, const json_t *net)
{
        /* Snapshots are a key's own and deletable: a warm copy would keep
         * one in use (and undeletable) with no sandbox of the key's on it. */
        if (strcmp(tpl, "base") && pd_snapshot_is(&m->srv->state, tpl))
                return NULL;
        if (net && !prep)
                return NULL;
        /* the policy as a class key: canonical JSON */
        _pd_cleanup_free_ char *net_s = net ? json_dumps(net, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
        if (net && !net_s)
                return NULL;
        for (;;) {
                struct pd_sandbox *sb = NULL;
                pthread_mutex_lock(&m->lock);
                struct pool_class *c = class_find(m, spec, tpl, prep, net_s);
                if (!c)
                        class_add(m, spec, tpl, prep, net_s);
                else if (c->n_ready > 0)
                        sb = c->ready[--c->n_ready];
                pthread_cond_signal(&m->cond);     /* refill */
                pthread_mutex_unlock(&m->lock);
                if (!sb || pd_agent_alive(sb)) {
                        pd_metrics_pool(sb != NULL);
                        return sb;
                }
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

/* A class's network (net: its policy JSON, NULL = none) into spec, as
 * pd_manager_create does for a create that asks for one. */
static int todo_net_spec(struct pd_server *srv, const char *net, struct pd_spec *spec, struct pd_netpol *pol,
                         struct pd_error *err)
{
        if (!net)
                return 0;
        int r = pd_netpol_from_json_str(net, strlen(net), pol, err);
        if (r < 0)
                return r;
        spec->net = pol->mode == PD_NETPOL_OPEN ? PD_NET_OPEN : pol->mode == PD_NETPOL_POLICY ? PD_NET_POLICY
                                                                                              : PD_NET_NONE;
        spec->netpol = spec->net != PD_NET_NONE ? pol : NULL;
        spec->net_uplink = srv->cfg.net_uplink;
        spec->net_resolver = srv->cfg.net_resolver;
        return 0;
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
                        if (c->n_ready + c->creating >= srv->cfg.pool_size) {
                                c->short_since_ms = 0;
                                continue;
                        }
                        if (c->retry_at_ms > now) {
                                if (!wake || c->retry_at_ms < wake)
                                        wake = c->retry_at_ms;
                                continue;
                        }
                        if (!c->short_since_ms)
                                c->short_since_ms = now;
                        if (c->n_ready > 0) {
                                /* quiet: no request in flight (a command's
                                 * stream is one long request) for 20 ms */
                                uint64_t quiet = __atomic_load_n(&srv->requests_in_flight, __ATOMIC_RELAXED)
                                                 ? now + POOL_QUIET_MS
                                                 : __atomic_load_n(&srv->last_request_ms, __ATOMIC_RELAXED) + POOL_QUIET_MS;
                                uint64_t latest = c->short_since_ms + POOL_DEFER_MAX_MS;
                                uint64_t at = quiet < latest ? quiet : latest;
                                if (at > now) {
                                        if (!wake || at < wake)
                                                wake = at;
                                        continue;
                                }
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
                const struct pd_pool_prep *prep = todo->prep;
                const char *net = todo->net;    /* the class's: freed only after the filler is joined */
                pthread_mutex_unlock(&m->lock);

                struct pd_error err = { 0 };
                struct pd_sandbox *sb = NULL;
                struct pd_netpol netpol = { 0 };
                int r = todo_net_spec(srv, net, &spec, &netpol, &err);
                if (r == 0)
                        r = pd_sandbox_new(&srv->state, &spec, &sb, &err);
                if (r == 0) {
                        sb->die_with_parent = false;
                        r = pd_sandbox_create(sb, &err);
                        if (r < 0) {
                                pd_sandbox_free(sb);
                                sb = NULL;
                        } else {
                                sb->spec.netpol = NULL;         /* the router keeps it */
                        }
                }
                pd_netpol_free(&netpol);
                if (r == 0 && (pd_tier_caps(spec.isolation) & PD_TIER_POOL_WARMUP) && pool_warm(sb, &err) < 0)
                        pd_log("warn", "warm pool: warm-up command failed, the sandbox is pooled cold sandbox=%s "
                                       "error=\"%s\"", sb->id, err.msg);
                if (r == 0 && prep && (r = prep->run(srv, sb, &m->stopping, &err)) < 0) {
                        pd_error_prefix(&err, "%s", prep->name);
                        pd_sandbox_destroy(sb, NULL);
                        sb = NULL;
                }
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
                class_add(m, &def, "base", NULL, NULL);
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
        __atomic_store_n(&m->stopping, true, __ATOMIC_RELAXED);  /* also read by a running prep */
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
                free(c->net);
                c->net = NULL;
        }
}

/* What a warm sandbox costs while it waits: its workload's memory as its
 * tier measures it (microvm: its QEMU's resident memory) and, on the
 * tiers whose agent is a host process outside the workload's cgroup, that
 * agent's resident memory (an idle fresh sandbox's cgroup is charged next
 * to nothing: its agent is most of what it holds). Reads of /proc and
 * cgroup files only. */
static uint64_t waiting_cost(struct pd_sandbox *sb)
{
        struct pd_sandbox_stats st;
        struct pd_error err = { 0 };
        uint64_t cost = pd_sandbox_stats(sb, &st, &err) == 0 ? st.memory_current : 0;
        if (strcmp(sb->ops->name, "microvm") && sb->agent_pid > 0) {
                char p[64], buf[256];
                unsigned long long size = 0, rss = 0;
                snprintf(p, sizeof p, "/proc/%d/statm", (int)sb->agent_pid);
                if (pd_read_file_at(AT_FDCWD, p, buf, sizeof buf) > 0 && sscanf(buf, "%llu %llu", &size, &rss) == 2)
                        cost += rss * (uint64_t)sysconf(_SC_PAGESIZE);
        }
        return cost;
}

size_t pd_pool_ready(struct pd_pool *m, struct pd_pool_count *out, size_t max)
{
        size_t n = 0;
        pthread_mutex_lock(&m->lock);
        for (unsigned i = 0; i < m->n_classes && n < max; i++, n++) {
                /* a prepared class is a template of its own to the reader,
                 * and one with a network another ("base+code-interpreter",
                 * "base+code-interpreter+network") */
                const struct pool_class *c = &m->classes[i];
                snprintf(out[n].template_name, sizeof out[n].template_name, "%s%s%s%s", c->template_name,
                         c->prep ? "+" : "", c->prep ? c->prep->name : "", c->net ? "+network" : "");
                snprintf(out[n].isolation, sizeof out[n].isolation, "%s",
                         pd_isolation_name(m->classes[i].spec.isolation));
                out[n].ready = m->classes[i].n_ready;
                out[n].memory_bytes = 0;
                for (unsigned k = 0; k < m->classes[i].n_ready; k++)
                        out[n].memory_bytes += waiting_cost(m->classes[i].ready[k]);
        }
        pthread_mutex_unlock(&m->lock);
        return n;
}
