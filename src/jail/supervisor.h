/* The supervised tier's supervisor (DESIGN §1): a process outside the
 * sandbox holding the seccomp user-notification listener of the sandbox's
 * filter. It brokers opens and connects (performing them itself under the
 * caller's credentials, inside a Landlock domain no wider than the
 * sandbox's, then injecting the fd), audits execs, and writes every decision
 * to the sandbox's audit log. It outlives whoever created the sandbox; if
 * it dies, the notified calls fail (the sandbox fails closed). */
#pragma once
#include <sys/types.h>

#include "error.h"

struct pd_sandbox;

/* Start the supervisor for sb with the listener fd the sandbox's first
 * process installed (ownership of listener_fd passes to this call). Sets
 * sb->supervisor_pid and sb->supervisor_start. */
int pd_supervisor_start(struct pd_sandbox *sb, int listener_fd, struct pd_error *err);
/* Stop it (after the sandbox's processes are gone). Idempotent. */
void pd_supervisor_stop(struct pd_sandbox *sb);
