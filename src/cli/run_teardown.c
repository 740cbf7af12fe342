/* Teardown after the result (cli/run_teardown.h). The user waits for the
 * command's exit status, not for the cgroups, uid range and mounts to go:
 * ~10% of a run's wall time here (bench/README.md). The work is the same,
 * only off the user's path; a crash of the child leaves an ordinary record
 * for `paddock gc`, and `paddock gc --wait` is the event that says it is
 * done. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* Where the teardown child finds its work: static, so it lives in the
 * memory both processes share. */
static struct handoff {
        struct pd_sandbox *sb;
        struct pd_state *st;
        int lock_fd;
} handoff;

static int teardown_child(void *arg)
{
        struct handoff *h = arg;
        /* the lock is held as long as this copy of lock_fd is open: until
         * this process ends, however it ends */
        struct pd_error err = { 0 };
        char id[PD_ID_LEN + 1];
        snprintf(id, sizeof id, "%s", h->sb->id);
        detach_stdio();
        (void)setsid();
        pd_trace("teardown: started");
        if (pd_sandbox_destroy(h->sb, &err) < 0)
                log_error(h->st, id, err.msg);
        pd_trace("destroyed");
        return 0;
}

int pd_run_teardown_handoff(struct pd_sandbox *sb, struct pd_state *st, int status)
{
        int lk = pd_teardown_hold(st);
        if (lk < 0)
                return lk;
        fflush(NULL);   /* nothing buffered is written twice */
        handoff = (struct handoff){ .sb = sb, .st = st, .lock_fd = lk };
#ifdef __SANITIZE_ADDRESS__
        /* ASan keeps per-thread state that a second process on the same
         * memory would corrupt: a plain fork there */
        pid_t pid = fork();
        if (pid == 0)
                _exit(teardown_child(&handoff));
#else
        /* A fork would copy paddock's page tables and then fault on every
         * page either process writes: on this kind of host that cost more
         * CPU than the teardown itself (bench/README.md). The child shares
         * our memory instead, as posix_spawn's does; it is safe because we
         * touch nothing after the clone: we _exit at once, and the child
         * then has the memory (our stack included, where st lives) to
         * itself. Its fd table is its own copy. glibc's thread data is
         * ours too, and the kernel zeroes its tid field when we exit
         * (set_tid_address): nothing the teardown calls reads it (no
         * pthread calls, no raise). */
        const size_t stack_size = 1u << 20;
        void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED) {
                int r = -errno;
                close(lk);
                return r;
        }
        pid_t pid = clone(teardown_child, (char *)stack + stack_size, CLONE_VM | SIGCHLD, &handoff);
#endif
        if (pid < 0) {
                int r = -errno;
                close(lk);
                return r;
        }
        _exit(status);
}
