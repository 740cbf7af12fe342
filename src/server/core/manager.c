/* The sandbox manager of paddock serve: starts and stops its threads (the
 * reaper, the agent watcher, the pool filler) and the warm pools, after
 * adopting the sandboxes of an earlier server. The table, the lifecycle,
 * the reaper and adoption are in their own files (mgr_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/core/mgr_int.h"
#include "server/core/pool.h"
#include "lib/util.h"

uint64_t pd_boot_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
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
        if (srv->cfg.pool_size > PD_MGR_MAX_POOL_SIZE)
                srv->cfg.pool_size = PD_MGR_MAX_POOL_SIZE;
        if (mkdirat(srv->state.dirfd, "audit", 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s/audit'", srv->state.dir);
        srv->audit_dirfd = openat(srv->state.dirfd, "audit", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (srv->audit_dirfd < 0)
                return pd_error_set(err, errno, "open '%s/audit'", srv->state.dir);

        int r = pd_mgr_adopt_all(srv, err);
        if (r < 0)
                return r;
        /* after adoption: every live sandbox's log is known to be live */
        pd_audit_prune(srv);
        m->next_audit_prune_ms = pd_boot_ms() + AUDIT_PRUNE_EVERY_MS;

        if ((r = pthread_create(&m->reaper, NULL, pd_mgr_reaper_main, srv)) != 0)
                return pd_error_set(err, r, "start the reaper thread");
        m->reaper_started = true;
        if ((r = pd_teardown_start(srv, err)) < 0)
                return r;
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
        struct pd_srv_sandbox **v;
        size_t n;
        if (srv->cfg.destroy_on_exit && pd_manager_snapshot(srv, NULL, &v, &n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        struct pd_error err = { 0 };
                        if (pd_manager_delete(srv, v[i], &err) < 0)
                                pd_log("warn", "destroy on exit sandbox=%s error=\"%s\"", v[i]->id, err.msg);
                }
                pd_manager_snapshot_free(srv, v, n);
        }
        /* last: the deletes above, and those answered before, are
         * finished before the server exits */
        pd_teardown_stop(srv);
}
