/* Host-side steps every namespace-or-not tier shares: the agent's socket,
 * waiting for the agent's exec, connecting, freezing, killing the agent,
 * releasing the cgroup / uid range / runtime dir, stats, adoption. */
#pragma once
#include <stdbool.h>

#include "lib/sandbox.h"

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
