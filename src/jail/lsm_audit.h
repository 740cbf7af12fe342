/* Landlock audit for the `process` tier (docs/security.md "`process` tier").
 *
 * Landlock (ABI 7, Linux 6.15) reports denials to the kernel's audit
 * subsystem when audit is enabled. The sandbox's domain is enforced with
 * LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, so denials of the agent and of
 * every program run inside (after exec) are logged, not only those before
 * the first exec (the kernel's default). A host-side reader,
 * paddock-lsm-audit (lsm_audit_main.c), started by the sandbox's creator,
 * turns the sandbox's records into "landlock.deny" lines of its audit log,
 * <state>/audit/<id>.jsonl. It is a separate process (the creator may be
 * the multi-threaded server), never code inside the sandbox. */
#pragma once
#include <stdint.h>
#include <sys/types.h>

struct pd_sandbox;

struct pd_lsm_audit {
        pid_t pid;              /* the reader; 0 = none */
        uint64_t start;         /* its /proc starttime, against pid reuse */
        char status[400];       /* "yes" or "no (why)", for the tier's record */
};

/* landlock_restrict_self() flags for a domain of this ABI: log denials
 * after exec too (ABI >= 7), nothing otherwise. */
unsigned pd_lsm_audit_restrict_flags(int abi);

/* Enforce the ruleset on the calling thread with flags. No malloc: for the
 * post-fork child. no_new_privs must be set first. 0 or -errno. */
int pd_lsm_audit_restrict(int ruleset_fd, unsigned flags);

/* Start the reader for sb, whose agent (the process that enforces the
 * domain) is agent_pid running as uid ((uid_t)-1: not unique to the
 * sandbox). Call before the agent enforces its domain: returns once the
 * reader listens. Never fails the sandbox: when records cannot be read
 * (audit disabled, no CAP_AUDIT_READ, no reader binary) out->pid is 0 and
 * out->status says why. */
void pd_lsm_audit_start(struct pd_sandbox *sb, pid_t agent_pid, uid_t uid, struct pd_lsm_audit *out);

/* Stop the reader (after the sandbox's processes are gone): it drains what
 * the kernel still has queued, then exits; SIGKILL after a timeout. pid and
 * start as recorded; a pid whose start time differs is never signalled.
 * Idempotent. */
void pd_lsm_audit_stop(pid_t pid, uint64_t start);
