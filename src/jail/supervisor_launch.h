/* The supervised tier's supervisor (DESIGN §1): a process outside the
 * sandbox holding the seccomp user-notification listener of the sandbox's
 * filter. It brokers opens and connects (performing them itself under the
 * caller's credentials, inside a Landlock domain no wider than the
 * sandbox's, then injecting the fd), audits execs, and writes every decision
 * to the sandbox's audit log. It outlives whoever created the sandbox; if
 * it dies, the notified calls fail (the sandbox fails closed). */
#pragma once
#include <sys/types.h>

#include "lib/error.h"

struct pd_sandbox;
struct pd_mount_plan;
struct pd_seccomp_opts;

/* Before the sandbox's clone: copy the spec's policy file into the
 * sandbox's runtime dir (the supervisor reads that copy), and from it add
 * the path rules to plan (the child makes the mounts that can enforce them,
 * src/jail/policy_mounts.c) and choose what the seccomp filter hands to the
 * supervisor beyond opens, connects and execs: sends (when there are
 * connect rules) and, in so->notify_paths, whether a rule is ro or deny:
 * then the calls that change paths go to the supervisor too, unless the
 * child's mounts enforce every such rule (the child picks between the two
 * filters). No policy: nothing changes. */
int pd_supervisor_plan(struct pd_sandbox *sb, struct pd_mount_plan *plan, struct pd_seccomp_opts *so,
                       struct pd_error *err);
/* Start the supervisor for sb with the listener fd the sandbox's first
 * process installed and the memfd listing the files deny mounts cover (-1:
 * none); ownership of both fds passes to this call. Sets
 * sb->supervisor_pid and sb->supervisor_start. */
int pd_supervisor_start(struct pd_sandbox *sb, int listener_fd, int inodes_fd, struct pd_error *err);
/* Stop it (after the sandbox's processes are gone). Idempotent. */
void pd_supervisor_stop(struct pd_sandbox *sb);
