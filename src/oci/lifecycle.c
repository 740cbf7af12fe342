/* start, state, kill, delete, pause, resume: thin verbs over the state dir. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/helper_proc.h"
#include "oci/oci.h"
#include "lib/util.h"
#include "oci/ocivm.h"

static const char *one_id(int argc, char **argv, const char *verb, struct pd_error *err)
{
        if (optind != argc - 1) {
                pd_error_setx(err, EINVAL, "%s: exactly one container id expected", verb);
                return NULL;
        }
        return argv[optind];
}

static int no_opts(int argc, char **argv)
{
        static const struct option opts[] = { { NULL, 0, NULL, 0 } };
        int c;
        while ((c = getopt_long_only(argc, argv, "", opts, NULL)) != -1)
                return -1;
        return 0;
}

int oci_start(const struct oci_global *g, const char *id, struct pd_error *err)
{
        struct oci_state st;
        int r = oci_state_load(g, id, &st, err);
        if (r < 0)
                return r;
        enum oci_status s = oci_state_status(&st);
        if (s != OCI_CREATED) {
                oci_state_free(&st);
                return pd_error_setx(err, EINVAL, "container '%s' is %s, not created: cannot start", id,
                                     oci_status_name(s));
        }
        char fifo[PATH_MAX];
        snprintf(fifo, sizeof fifo, "%s/exec.fifo", st.dir);
        /* A supervised init holds the fifo open for reading and waits for
         * a byte: a non-blocking open for writing succeeds only then. */
        int wfd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (wfd >= 0) {
                r = write(wfd, "1", 1) == 1 ? 0 : pd_error_set(err, errno, "write '%s'", fifo);
                close(wfd);
                goto started;
        }
        /* Non-blocking open never waits for the writer; the init's blocked
         * open for writing then completes and it writes one byte. If the init
         * dies instead, its pidfd turns readable. */
        int fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                oci_state_free(&st);
                return pd_error_set(err, errno, "open '%s'", fifo);
        }
        int pidfd = (int)syscall(SYS_pidfd_open, st.pid, 0);
        struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
        char b;
        bool got = false;
        r = -EIO;
        /* The init writes one byte, then holds the fifo open until its
         * exec: the end of file (or the init's exit after the byte) means
         * the workload runs, so an engine's next `kill` finds it running. */
        for (;;) {
                int n = poll(p, pidfd >= 0 ? 2 : 1, 30000);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = got ? 0 : pd_error_setx(err, ETIMEDOUT, "container '%s': init did not answer on exec.fifo", id);
                        break;
                }
                if (p[0].revents & (POLLIN | POLLHUP)) {
                        ssize_t k = read(fd, &b, 1);
                        if (k == 1)
                                got = true;
                        else if (k == 0) {
                                r = got ? 0 : pd_error_setx(err, EIO, "container '%s': init closed exec.fifo", id);
                                break;
                        }
                }
                if (pidfd >= 0 && (p[1].revents & POLLIN)) {
                        r = got ? 0 : pd_error_setx(err, ESRCH, "container '%s': init exited before start", id);
                        break;
                }
        }
        close(fd);
        if (pidfd >= 0)
                close(pidfd);
started:
        if (r == 0) {
                unlink(fifo);
                json_t *sj = oci_state_json(&st, OCI_RUNNING);
                struct pd_error herr = { 0 };
                if (st.config && oci_hooks_run(json_object_get(st.config, "hooks"), "poststart", sj, &herr) < 0)
                        oci_warn("%s", herr.msg);
                json_decref(sj);
        }
        oci_state_free(&st);
        return r;
}

int oci_cmd_start(const struct oci_global *g, int argc, char **argv)
{
        struct pd_error err = { 0 };
        const char *id = no_opts(argc, argv) < 0 ? NULL : one_id(argc, argv, "start", &err);
        if (!id || oci_start(g, id, &err) < 0) {
                oci_fail(&err);
                return 1;
        }
        return 0;
}

int oci_cmd_state(const struct oci_global *g, int argc, char **argv)
{
        struct pd_error err = { 0 };
        struct oci_state st;
        const char *id = no_opts(argc, argv) < 0 ? NULL : one_id(argc, argv, "state", &err);
        if (!id || oci_state_load(g, id, &st, &err) < 0) {
                oci_fail(&err);
                return 1;
        }
        json_t *o = oci_state_json(&st, oci_state_status(&st));
        char *s = json_dumps(o, JSON_INDENT(2));
        printf("%s\n", s);
        free(s);
        json_decref(o);
        oci_state_free(&st);
        return 0;
}

int oci_cmd_kill(const struct oci_global *g, int argc, char **argv)
{
        static const struct option opts[] = { { "all", no_argument, NULL, 'a' }, { NULL, 0, NULL, 0 } };
        struct pd_error err = { 0 };
        bool all = false;
        int c;
        while ((c = getopt_long_only(argc, argv, "a", opts, NULL)) != -1) {
                if (c != 'a') {
                        pd_error_setx(&err, EINVAL, "usage: kill [--all] ID [SIGNAL]");
                        oci_fail(&err);
                        return 1;
                }
                all = true;
        }
        if (optind >= argc || argc - optind > 2) {
                pd_error_setx(&err, EINVAL, "usage: kill [--all] ID [SIGNAL]");
                oci_fail(&err);
                return 1;
        }
        const char *id = argv[optind];
        int sig = argc - optind == 2 ? oci_signal_parse(argv[optind + 1]) : SIGTERM;
        if (sig < 0) {
                pd_error_setx(&err, EINVAL, "unknown signal '%s'", argv[optind + 1]);
                oci_fail(&err);
                return 1;
        }
        struct oci_state st;
        if (oci_state_load(g, id, &st, &err) < 0) {
                oci_fail(&err);
                return 1;
        }
        enum oci_status s = oci_state_status(&st);
        int rc = 0, vr = 1;
        if (s == OCI_STOPPED || s == OCI_CREATING) {
                pd_error_setx(&err, ESRCH, "container '%s' is not running (%s)", id, oci_status_name(s));
                oci_fail(&err);
                rc = 1;
        } else if (oci_vm_is(st.config) && (vr = oci_vm_kill(&st, sig, all, &err)) <= 0) {
                /* microvm: the guest process through its agent */
                if (vr < 0) {
                        oci_fail(&err);
                        rc = 1;
                }
        } else if (all) {
                pid_t *pids;
                size_t n;
                if (oci_cgroup_pids(st.cgroup, &pids, &n, &err) < 0) {
                        oci_fail(&err);
                        rc = 1;
                } else {
                        for (size_t i = 0; i < n; i++)
                                kill(pids[i], sig);
                        free(pids);
                }
        } else {
                /* Signal through a pidfd pinned to the recorded start time:
                 * never a reused pid. */
                int pidfd = (int)syscall(SYS_pidfd_open, st.pid, 0);
                if (pidfd < 0 || !oci_pid_alive(st.pid, st.pid_start) ||
                    syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0) {
                        pd_error_set(&err, errno ? errno : ESRCH, "kill container '%s'", id);
                        oci_fail(&err);
                        rc = 1;
                }
                if (pidfd >= 0)
                        close(pidfd);
        }
        oci_state_free(&st);
        return rc;
}

int oci_delete(const struct oci_global *g, const char *id, bool force, struct pd_error *err)
{
        struct oci_state st;
        int r = oci_state_load(g, id, &st, err);
        if (r < 0)
                return r;
        enum oci_status s = oci_state_status(&st);
        if ((s == OCI_RUNNING || s == OCI_PAUSED) && !force) {
                oci_state_free(&st);
                return pd_error_setx(err, EBUSY, "container '%s' is %s: stop it first or use --force", id,
                                     oci_status_name(s));
        }
        if (s != OCI_STOPPED && st.pid > 0 && oci_pid_alive(st.pid, st.pid_start)) {
                int pidfd = (int)syscall(SYS_pidfd_open, st.pid, 0);
                if (pidfd >= 0) {
                        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                        close(pidfd);
                }
        }
        if (st.cgroup[0] && (r = oci_cgroup_destroy(st.cgroup, err)) < 0) {
                oci_state_free(&st);
                return r;
        }
        if (st.pid > 0)
                oci_pid_wait_gone(st.pid, st.pid_start, 5000);
        /* supervised: the supervisor after the container's processes. */
        if (st.supervisor > 0)
                pd_helper_stop(st.supervisor, st.supervisor_start, SIGTERM, 1000, 2000);
        /* microvm: QEMU, its relay, uid range and runtime dir */
        if (oci_vm_is(st.config))
                oci_vm_cleanup(&st);
        if (st.config) {
                json_t *sj = oci_state_json(&st, OCI_STOPPED);
                struct pd_error herr = { 0 };
                if (oci_hooks_run(json_object_get(st.config, "hooks"), "poststop", sj, &herr) < 0)
                        oci_warn("%s", herr.msg);
                json_decref(sj);
        }
        r = pd_rm_rf(st.dir, err);
        oci_state_free(&st);
        return r;
}

int oci_cmd_delete(const struct oci_global *g, int argc, char **argv)
{
        static const struct option opts[] = { { "force", no_argument, NULL, 'f' }, { NULL, 0, NULL, 0 } };
        struct pd_error err = { 0 };
        bool force = false;
        int c;
        while ((c = getopt_long_only(argc, argv, "f", opts, NULL)) != -1) {
                if (c != 'f') {
                        pd_error_setx(&err, EINVAL, "usage: delete [--force] ID");
                        oci_fail(&err);
                        return 1;
                }
                force = true;
        }
        const char *id = one_id(argc, argv, "delete", &err);
        if (!id || oci_delete(g, id, force, &err) < 0) {
                /* runc: delete --force of a missing container is not an error. */
                if (force && err.code == ENOENT)
                        return 0;
                oci_fail(&err);
                return 1;
        }
        return 0;
}

int oci_cmd_pause(const struct oci_global *g, int argc, char **argv, bool pause)
{
        struct pd_error err = { 0 };
        struct oci_state st;
        const char *verb = pause ? "pause" : "resume";
        const char *id = no_opts(argc, argv) < 0 ? NULL : one_id(argc, argv, verb, &err);
        if (!id || oci_state_load(g, id, &st, &err) < 0) {
                oci_fail(&err);
                return 1;
        }
        enum oci_status s = oci_state_status(&st);
        int rc = 0;
        if (s != (pause ? OCI_RUNNING : OCI_PAUSED)) {
                pd_error_setx(&err, EINVAL, "container '%s' is %s: cannot %s", id, oci_status_name(s), verb);
                rc = 1;
        } else if (oci_vm_is(st.config) ? oci_vm_pause(&st, pause, &err) < 0
                                         : oci_cgroup_freeze(st.cgroup, pause, &err) < 0) {
                rc = 1;
        }
        if (rc)
                oci_fail(&err);
        oci_state_free(&st);
        return rc;
}
