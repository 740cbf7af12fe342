/* Teardown after the result (cli/run_teardown.h). The user waits for the
 * command's exit status, not for the cgroups, uid range and mounts to go:
 * ~10% of a run's wall time here (bench/README.md). The work is the same,
 * only off the user's path; a crash of the child leaves an ordinary record
 * for `paddock gc`, and `paddock gc --wait` is the event that says it is
 * done. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run_teardown.h"
#include "lib/teardown.h"
#include "lib/trace.h"

int pd_run_teardown_check_env(void)
{
        const char *e = getenv("PADDOCK_TEARDOWN");
        if (!e || !*e || !strcmp(e, "sync") || !strcmp(e, "async"))
                return 0;
        pd_cli_error("PADDOCK_TEARDOWN='%s': expected sync or async", e);
        return -EINVAL;
}

static void log_error(struct pd_state *st, const char *id, const char *msg)
{
        int fd = openat(st->dirfd, "teardown.log", O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        dprintf(fd, "sandbox %s: teardown: %s\n", id, msg);
        close(fd);
}

/* stdin and stdout always, stderr unless PADDOCK_TRACE is on (its
 * destroy lines are the bench's): a caller reading our output to EOF must
 * not wait for the teardown. */
static void detach_stdio(void)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return;
        const char *t = getenv("PADDOCK_TRACE");
        int last = t && *t && *t != '0' ? 1 : 2;
        for (int i = 0; i <= last; i++)
                (void)dup2(fd, i);
        if (fd > 2)
                close(fd);
}

bool pd_run_teardown_in_background(const struct pd_sandbox *sb)
{
        const char *e = getenv("PADDOCK_TEARDOWN");
        return sb->spec.isolation == PD_ISO_CONTAINER && !(e && !strcmp(e, "sync"));
}

int pd_run_teardown_fork(struct pd_sandbox *sb, struct pd_state *st)
{
        int lk = pd_teardown_hold(st);
        if (lk < 0)
                return lk;
        fflush(NULL);   /* nothing buffered is written twice */
        pid_t pid = fork();
        if (pid == 0) {
                /* the lock is held as long as this copy of lk is open:
                 * until this process ends, however it ends */
                struct pd_error err = { 0 };
                char id[PD_ID_LEN + 1];
                snprintf(id, sizeof id, "%s", sb->id);
                detach_stdio();
                (void)setsid();
                pd_trace("teardown: forked");
                if (pd_sandbox_destroy(sb, &err) < 0)
                        log_error(st, id, err.msg);
                pd_trace("destroyed");
                _exit(0);
        }
        int r = pid < 0 ? -errno : 0;
        close(lk);
        if (r == 0)
                pd_sandbox_free(sb);    /* our copies of its fds only */
        return r;
}
