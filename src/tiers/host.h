/* Host-side steps every tier of this host shares: the agent's socket,
 * waiting for the agent's exec, connecting, freezing, killing the agent,
 * releasing the cgroup / uid range / runtime dir, stats, adoption, and the
 * jail state they keep in sb->tier_data. */
#pragma once
#include <stdbool.h>

#include "jail/cgroup.h"
#include "jail/userns.h"
#include "lib/sandbox.h"

/* What a tier keeps of its jail, in sb->tier_data (the ops' data_size is
 * sizeof(struct pd_host_data)): lib/sandbox.h knows none of it. */
struct pd_host_data {
        struct pd_uidrange uids;
        bool have_uids;
        struct pd_cgroup cg;
        bool have_cgroup;
        void *priv;             /* the tier's own, freed by its destroy (process: struct proc_data) */
        bool files_paused;      /* container: paused keeping the filesystem only (container.c) */
        char files_snapshot[65];        /* ... in this unlisted snapshot, which resume starts on */
        char *files_netpol;             /* ... and the network policy in force then (JSON, malloc'd) */
};

static inline struct pd_host_data *pd_host(const struct pd_sandbox *sb)
{
        return sb->tier_data;
}

/* ops->save, ->load, ->close: the uid slot in the record; the cgroup
 * reopened on load (by the sandbox's name) and closed with the object. */
void pd_host_save(const struct pd_sandbox *sb, struct pd_record *rec);
void pd_host_load(struct pd_sandbox *sb, const struct pd_record *rec);
void pd_host_close(struct pd_sandbox *sb);
/* ops->gc: every cgroup and uid range of this state dir's instance. */
int pd_host_gc(struct pd_state *st, struct pd_error *err);
/* ops->net_info, ->net_update for the tiers whose sandboxes hang off the
 * instance's router (src/net): the policy it keeps, its drop counters, a
 * live policy change (host_net.c). */
int pd_host_net_info(struct pd_sandbox *sb, struct pd_net_info *out, struct pd_error *err);
int pd_host_net_update(struct pd_sandbox *sb, const struct pd_netpol *pol, struct pd_error *err);

/* Bind + listen on sb->socket_path; returns the fd (CLOEXEC). */
int pd_host_listen_socket(struct pd_sandbox *sb, struct pd_error *err);
/* Wait for the setup child's exec (its CLOEXEC end of sync_fd closes) or
 * its error record. A supervised child first sends the numbers of its
 * seccomp listener and of its memfd of denied files' identities ('L' + two
 * ints); the fds, taken with pidfd_getfd, go to pd_supervisor_start. */
int pd_host_wait_exec(struct pd_sandbox *sb, int sync_fd, struct pd_error *err);
int pd_host_connect(struct pd_sandbox *sb, struct pd_error *err);
int pd_host_freeze(struct pd_sandbox *sb, bool frozen, struct pd_error *err);
/* SIGKILL the agent and wait for it (not our child: wait on the pidfd). */
void pd_host_kill_agent(struct pd_sandbox *sb);
/* Remove the cgroups, free the uid range, remove the runtime dir; returns
 * the first error, continuing past it. */
int pd_host_release(struct pd_sandbox *sb, struct pd_error *err);
int pd_host_stats(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err);
/* Re-attach to a live agent by pid + start time (pidfd, checked twice). */
int pd_host_adopt(struct pd_sandbox *sb, struct pd_error *err);
