/* Starting and stopping the process tier's Landlock audit reader
 * (lsm_audit.h; the reader itself is lsm_audit_main.c).
 *
 * Like the supervised tier's supervisor, the reader is its own executable,
 * fork+exec'd here: the creator may be the multi-threaded server, where a
 * forked child may only make async-signal-safe calls until it execs. It
 * gets its own session and no parent-death signal; it exits by itself once
 * the sandbox's agent is gone, and teardown (or gc, from the pid and start
 * time in the tier's record) stops it. */
#include "jail/lsm_audit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "jail/helper_proc.h"
#include "lib/sandbox.h"
#include "lib/util.h"

#ifndef LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
#define LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)      /* ABI 7 */
#endif

#define READY_TIMEOUT_MS 5000
#define STOP_TIMEOUT_MS 2000

unsigned pd_lsm_audit_restrict_flags(int abi)
{
        return abi >= 7 ? LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON : 0;
}

int pd_lsm_audit_restrict(int ruleset_fd, unsigned flags)
{
        if (syscall(SYS_landlock_restrict_self, ruleset_fd, flags) < 0)
                return -errno;
        return 0;
}

void pd_lsm_audit_start(struct pd_sandbox *sb, pid_t agent_pid, uid_t uid, struct pd_lsm_audit *out)
{
        memset(out, 0, sizeof *out);
        struct pd_error err = { 0 };
        char path[PATH_MAX], audit[PATH_MAX + 64];
        if (pd_helper_path("paddock-lsm-audit", "PADDOCK_LSM_AUDIT", path, sizeof path, &err) < 0) {
                snprintf(out->status, sizeof out->status, "no (%s)", err.msg);
                return;
        }
        /* The same file the server's audit.c and the supervisor append to. */
        if (mkdirat(sb->state->dirfd, "audit", 0700) < 0 && errno != EEXIST) {
                snprintf(out->status, sizeof out->status, "no (create '%s/audit': %s)", sb->state->dir,
                         strerror(errno));
                return;
        }
        snprintf(audit, sizeof audit, "%s/audit/%s.jsonl", sb->state->dir, sb->id);

        char pid_s[16], uid_s[16];
        snprintf(pid_s, sizeof pid_s, "%d", (int)agent_pid);
        snprintf(uid_s, sizeof uid_s, "%u", (unsigned)uid);
        char *argv[] = { "paddock-lsm-audit", "--ready-fd", "3", "--sandbox", sb->id, "--pid", pid_s,
                         "--audit", audit, uid == (uid_t)-1 ? NULL : "--uid", uid_s, NULL };
        /* fds: 0 /dev/null, 1 and 2 the log, 3 the ready pipe */
        _pd_cleanup_close_ int ready_r = -1;
        const char *step = NULL;
        pid_t pid = pd_helper_spawn(path, argv, sb->dirfd, "lsm-audit.log", NULL, 0, &ready_r, &step);
        if (pid < 0) {
                snprintf(out->status, sizeof out->status, "no (%s: %s)",
                         strcmp(step, "fork") ? "reader's stdio" : "fork the reader", strerror(-pid));
                return;
        }

        char msg[512];
        ssize_t n;
        int pr = pd_helper_wait_ready(ready_r, READY_TIMEOUT_MS, msg, sizeof msg, &n);
        if (!strncmp(msg, "on", 2)) {
                out->pid = pid;
                out->start = pd_proc_starttime(pid);
                snprintf(out->status, sizeof out->status, "yes%s%s%s", msg[2] == ':' ? " (" : "",
                         msg[2] == ':' ? msg + 3 : "", msg[2] == ':' ? ")" : "");
                return;
        }
        if (!strncmp(msg, "off:", 4))
                snprintf(out->status, sizeof out->status, "no (%s)", msg + 4);
        else
                snprintf(out->status, sizeof out->status, "no (the reader '%s' did not start%s)", path,
                         pr == 0 ? ": timeout" : "; see lsm-audit.log");
        pd_helper_kill(pid);
}

void pd_lsm_audit_stop(pid_t pid, uint64_t start)
{
        /* SIGTERM: the reader writes what the kernel still has queued for
         * the sandbox, then exits. */
        pd_helper_stop(pid, start, SIGTERM, STOP_TIMEOUT_MS, STOP_TIMEOUT_MS);
}
