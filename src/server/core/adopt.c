/* Re-adoption: a new server takes over the sandboxes its store records
 * (DESIGN §2: they outlive the server). Each starts in the state its
 * record names; what the kernel shows wins (an agent gone or unusable:
 * failed; a guest paused to disk found again after a reboot: revived), by
 * transitions of lifecycle.h. Sandbox directories no record names (a crash
 * between creating and recording, the last server's warm pool) go. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/core/mgr_int.h"
#include "server/core/pool.h"
#include "server/core/store.h"
#include "lib/util.h"

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
        struct entry *e = pd_mgr_entry_new();
        if (!e)
                return NULL;
        snprintf(e->s.id, sizeof e->s.id, "%s", row->id);
        snprintf(e->s.key_id, sizeof e->s.key_id, "%s", row->key_id);
        snprintf(e->s.template_name, sizeof e->s.template_name, "%s", row->template_name);
        snprintf(e->isolation, sizeof e->isolation, "%s", row->isolation);
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
        e->auto_pause_files = json_is_true(json_object_get(sp, "auto_pause_files"));
        e->auto_resume = json_is_true(json_object_get(sp, "auto_resume"));
        e->s.ports_public = json_is_true(json_object_get(sp, "ports_public"));
        /* the state its record names; adoption then checks it */
        e->s.state = pd_sb_state_from_store(row->state, json_is_true(json_object_get(sp, "paused_disk")));
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

/* Adoption found the sandbox gone or unusable: failed, with a note. */
static void mark_lost(struct pd_server *srv, struct entry *e, const char *note)
{
        json_array_append_new(e->notes, json_string(note));
        (void)pd_mgr_transition(srv, e, PD_EV_LOST, json_pack("{s:s}", "reason", note), NULL);
}

static void adopt_one(struct pd_server *srv, const struct pd_store_row *row)
{
        struct entry *e = entry_from_row(row);
        if (!e)
                return;
        struct pd_error err = { 0 };
        char note[PD_ERROR_MSG_MAX + 64];
        if (e->s.state != PD_SB_FAILED) {
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
                if (r < 0 && !sb && e->s.state == PD_SB_PAUSED_DISK &&
                    pd_sandbox_revive(&srv->state, row->id, &e->spec, &sb, &err) == 0 &&
                    (r = sb->ops->adopt(sb, &err)) == 0 && sb->paused)
                        revived = true;
                else if (r < 0 && rebooted)
                        r = pd_error_setx(&err, ESRCH, "the machine rebooted since the sandbox was created");
                if (revived)
                        r = 0;
                if (r == 0) {
                        e->s.sb = sb;
                        /* paused keeping its files only: resume boots it
                         * afresh, with the limits its record here has and
                         * the router this server gives sandboxes */
                        if (sb->paused_files) {
                                sb->spec.disk_bytes = e->spec.disk_bytes;
                                sb->spec.net_uplink = srv->cfg.net_uplink;
                                sb->spec.net_resolver = srv->cfg.net_resolver;
                        }
                        /* adopt found it paused to disk (no process to find):
                         * the kernel's facts win over the record's */
                        if (sb->paused && e->s.state == PD_SB_PAUSED)
                                e->s.state = PD_SB_PAUSED_DISK;
                        sb->paused = pd_sb_is_paused(e->s.state);
                        /* A paused sandbox's agent is frozen: no handshake. */
                        if (!sb->paused && hello_check(sb, &err) < 0) {
                                snprintf(note, sizeof note, "agent unusable after server restart: %s", err.msg);
                                mark_lost(srv, e, note);
                                pd_log("warn", "adopted sandbox unusable, marked failed sandbox=%s error=\"%s\"",
                                       e->s.id, err.msg);
                        } else {
                                /* on this boot now: its record says so */
                                if (revived)
                                        (void)pd_mgr_transition(srv, e, PD_EV_REVIVED, NULL, NULL);
                                pd_log("info", "sandbox adopted sandbox=%s state=%s", e->s.id,
                                       pd_sb_state_name(e->s.state));
                        }
                } else {
                        snprintf(note, sizeof note, "sandbox lost while the server was down: %s", err.msg);
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
                        mark_lost(srv, e, note);
                        pd_log("warn", "sandbox lost while the server was down, marked failed sandbox=%s "
                                       "error=\"%s\"",
                               e->s.id, err.msg);
                }
        }
        pthread_mutex_lock(&srv->lock);
        if (pd_mgr_table_add(srv, e) < 0) {
                pthread_mutex_unlock(&srv->lock);
                pd_mgr_entry_free(e);
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

int pd_mgr_adopt_all(struct pd_server *srv, struct pd_error *err)
{
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
        return 0;
}
