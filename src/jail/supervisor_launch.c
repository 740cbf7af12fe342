/* Starting and stopping the supervised tier's supervisor (supervisor.h,
 * src/supervisor/ for the process itself, docs/security.md).
 *
 * The supervisor is its own executable, fork+exec'd here: the creator may
 * be the multi-threaded server, where a forked child may only make
 * async-signal-safe calls until it execs. It gets no parent-death signal
 * and its own session, so it outlives its creator like the agent does; it
 * exits by itself when the sandbox's last process is gone (the listener
 * hangs up). */
#include "jail/supervisor_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/policy.h"
#include "lib/agentpath.h"
#include "jail/helper_proc.h"
#include "jail/mount.h"
#include "jail/seccomp-policy.h"
#include "lib/sandbox.h"
#include "lib/util.h"

#define READY_TIMEOUT_MS 10000
#define POLICY_MAX (1 << 20)
#define STOP_GRACE_MS 1000

/* The policy file named by the spec (`paddock run --policy FILE`) is copied
 * into the sandbox's runtime dir, so the supervisor never reads a file its
 * creator's caller could still change. */
static int copy_policy(struct pd_sandbox *sb, char *out, size_t size, struct pd_error *err)
{
        const char *src = sb->spec.policy_file;
        out[0] = '\0';
        if (!src || !*src)
                return 0;
        _pd_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return pd_error_set(err, errno, "supervised policy '%s'", src);
        _pd_cleanup_free_ char *buf = malloc(POLICY_MAX);
        if (!buf)
                return pd_error_set(err, ENOMEM, "read supervised policy");
        ssize_t n = pd_read_all(in, buf, POLICY_MAX);
        if (n < 0)
                return pd_error_set(err, (int)-n, "read supervised policy '%s'", src);
        if (n == POLICY_MAX)
                return pd_error_setx(err, EFBIG, "supervised policy '%s' is larger than %d bytes", src, POLICY_MAX);
        _pd_cleanup_close_ int o = openat(sb->dirfd, "policy.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (o < 0)
                return pd_error_set(err, errno, "write '%s/policy.json'", sb->dir);
        int r = pd_write_all(o, buf, (size_t)n);
        if (r < 0)
                return pd_error_set(err, -r, "write '%s/policy.json'", sb->dir);
        snprintf(out, size, "%s/policy.json", sb->dir);
        return 0;
}

/* One path rule as a mount candidate (mount.h): a literal path, "P/" "**"
 * with a literal P, or else a glob known only by its literal prefix. */
static void plan_rule(const char *glob, enum sv_access acc, struct pd_mount_rule *m)
{
        size_t n = strlen(glob), lit = strcspn(glob, "*?[\\");
        memset(m, 0, sizeof *m);
        m->access = acc == SV_ACC_RO ? PD_RULE_RO : acc == SV_ACC_DENY ? PD_RULE_DENY
                  : acc == SV_ACC_NOEXEC ? PD_RULE_NOEXEC : PD_RULE_RW;
        if (lit == n && n < sizeof m->path && (n == 1 || glob[n - 1] != '/')) {
                memcpy(m->path, glob, n + 1);
                return;
        }
        if (lit == n - 2 && n >= 3 && glob[n - 3] == '/' && n - 3 < sizeof m->path) {
                memcpy(m->path, glob, n - 3);
                m->path[n - 3] = '\0';
                if (!m->path[0])
                        strcpy(m->path, "/");
                m->recursive = true;
                m->create = !strcmp(m->path, SV_OWN_DIR);
                return;
        }
        m->glob = true;
        size_t cut = lit < n ? lit : n;
        while (cut > 0 && glob[cut] != '/')
                cut--;
        if (cut == 0 || cut >= sizeof m->path) {
                strcpy(m->path, "/");
        } else {
                memcpy(m->path, glob, cut);
                m->path[cut] = '\0';
        }
}

int pd_supervisor_plan(struct pd_sandbox *sb, struct pd_mount_plan *plan, struct pd_seccomp_opts *so,
                       struct pd_error *err)
{
        char path[PATH_MAX + 16], msg[512] = "";
        int r = copy_policy(sb, path, sizeof path, err);
        if (r < 0 || !path[0])
                return r;
        struct sv_policy *p = sv_policy_load(path, msg, sizeof msg);
        if (!p)
                return pd_error_setx(err, EINVAL, "supervised tier: %s", msg);
        unsigned n = sv_policy_n_paths(p);
        for (unsigned i = 0; i < n; i++) {
                enum sv_access acc = sv_policy_access(p, i);
                if (acc == SV_ACC_RO || acc == SV_ACC_DENY)
                        so->notify_paths = true;
                if (i < PD_MAX_POLICY_RULES)
                        plan_rule(sv_policy_glob(p, i), acc, &plan->rules[plan->n_rules++]);
                else
                        plan->rules_truncated = true;
        }
        so->notify_sends = sv_policy_n_connect(p) > 0;
        sv_policy_free(p);
        return 0;
}

int pd_supervisor_start(struct pd_sandbox *sb, uint32_t uid_base, int listener_fd, int inodes_fd,
                        struct pd_error *err)
{
        int fds[2] = { listener_fd, inodes_fd };
        _pd_cleanup_close_ int lfd = listener_fd;
        _pd_cleanup_close_ int ifd = inodes_fd;
        char path[PATH_MAX], policy[PATH_MAX + 16], audit[PATH_MAX + 64];
        int r = pd_helper_path("paddock-supervisor", "PADDOCK_SUPERVISOR", path, sizeof path, err);
        if (r < 0)
                return pd_error_prefix(err, "supervised tier");
        /* copied by pd_supervisor_plan */
        policy[0] = '\0';
        if (sb->spec.policy_file && *sb->spec.policy_file)
                snprintf(policy, sizeof policy, "%s/policy.json", sb->dir);
        /* The same file the server's audit.c appends to. */
        if (mkdirat(sb->state->dirfd, "audit", 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s/audit'", sb->state->dir);
        snprintf(audit, sizeof audit, "%s/audit/%s.jsonl", sb->state->dir, sb->id);

        char pid_s[16], base_s[16];
        snprintf(pid_s, sizeof pid_s, "%d", (int)sb->agent_pid);
        snprintf(base_s, sizeof base_s, "%u", uid_base);
        char *argv[] = { "paddock-supervisor", "--listener-fd", "3", "--ready-fd", ifd >= 0 ? "5" : "4",
                         "--pid", pid_s, "--uid-base", base_s, "--sandbox", sb->id, "--audit", audit,
                         "--deny-inodes-fd", ifd >= 0 ? "4" : "-1",
                         /* every process the listener sees descends from
                          * the agent: none joins from outside (setns) */
                         "--root-fixed",
                         policy[0] ? "--policy" : NULL, policy, NULL };
        /* fds: 0 /dev/null, 1 and 2 the log, 3 the listener, 4 the denied
         * files' identities (a memfd from the sandbox's setup, if any), then
         * the ready pipe */
        _pd_cleanup_close_ int ready_r = -1;
        const char *step = NULL;
        pid_t pid = pd_helper_spawn(path, argv, sb->dirfd, "supervisor.log", fds, ifd >= 0 ? 2 : 1, &ready_r,
                                    &step);
        if (pid < 0)
                return pd_error_set(err, -pid, "%s", !strcmp(step, "stdio") ? "supervisor's stdio"
                                                   : !strcmp(step, "pipe")  ? "pipe"
                                                                            : "fork the supervisor");
        close(lfd);
        lfd = -1;
        if (ifd >= 0)
                close(ifd);
        ifd = -1;

        char msg[512];
        ssize_t n;
        int pr = pd_helper_wait_ready(ready_r, READY_TIMEOUT_MS, msg, sizeof msg, &n);
        if (n == 1 && msg[0] == 'R') {
                sb->supervisor_pid = pid;
                sb->supervisor_start = pd_proc_starttime(pid);
                /* Recorded before anything else can fail: gc must find it. */
                return pd_sandbox_save(sb, err);
        }
        pd_helper_kill(pid);
        if (n > 0)
                return pd_error_setx(err, EIO, "supervised tier: supervisor: %s", msg);
        return pd_error_setx(err, pr == 0 ? ETIMEDOUT : EIO, "supervised tier: supervisor '%s' did not start%s",
                             path, pr == 0 ? " (timeout)" : "; see supervisor.log");
}

void pd_supervisor_stop(struct pd_sandbox *sb)
{
        pid_t pid = sb->supervisor_pid;
        if (pid <= 0)
                return;
        sb->supervisor_pid = 0;
        /* The sandbox is gone (destroy kills the agent first): the
         * supervisor sees its listener hang up, writes its buffered audit
         * lines, waits for its broker to write its own, and exits. Give it
         * a moment for that before killing it; when it is not our child
         * (adopted by a new server), wait for its exit. */
        pd_helper_stop(pid, sb->supervisor_start, 0, STOP_GRACE_MS, 5000);
}
