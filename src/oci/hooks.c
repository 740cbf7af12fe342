/* OCI hooks: each gets the container's state JSON on stdin. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "oci/oci.h"
#include "lib/util.h"

static int run_one(json_t *h, const char *which, const char *state, struct pd_error *err)
{
        const char *path = json_string_value(json_object_get(h, "path"));
        if (!path || path[0] != '/')
                return pd_error_setx(err, EINVAL, "hook %s: path must be absolute", which);
        json_t *args = json_object_get(h, "args"), *env = json_object_get(h, "env");
        size_t na = json_array_size(args), ne = json_array_size(env);
        char **argv = calloc(na + 2, sizeof *argv), **envp = calloc(ne + 1, sizeof *envp);
        if (!argv || !envp) {
                free(argv);
                free(envp);
                return -ENOMEM;
        }
        if (na == 0)
                argv[0] = (char *)path;
        for (size_t i = 0; i < na; i++)
                argv[i] = (char *)json_string_value(json_array_get(args, i));
        for (size_t i = 0; i < ne; i++)
                envp[i] = (char *)json_string_value(json_array_get(env, i));
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0) {
                free(argv);
                free(envp);
                return pd_error_set(err, errno, "hook %s: pipe", which);
        }
        pid_t pid = fork();
        if (pid == 0) {
                dup2(pfd[0], 0);
                execve(path, argv, envp);
                _exit(127);
        }
        free(argv);
        free(envp);
        close(pfd[0]);
        if (pid < 0) {
                close(pfd[1]);
                return pd_error_set(err, errno, "hook %s: fork", which);
        }
        signal(SIGPIPE, SIG_IGN);
        pd_write_all(pfd[1], state, strlen(state));
        close(pfd[1]);
        json_t *to = json_object_get(h, "timeout");
        int timeout_ms = json_is_integer(to) && json_integer_value(to) > 0 ? (int)json_integer_value(to) * 1000 : -1;
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd >= 0) {
                struct pollfd p = { .fd = pidfd, .events = POLLIN };
                int r;
                do
                        r = poll(&p, 1, timeout_ms);
                while (r < 0 && errno == EINTR);
                close(pidfd);
                if (r == 0) {
                        kill(pid, SIGKILL);
                        waitpid(pid, NULL, 0);
                        return pd_error_setx(err, ETIMEDOUT, "hook %s '%s' timed out after %lld s", which, path,
                                             (long long)json_integer_value(to));
                }
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return pd_error_setx(err, EIO, "hook %s '%s' failed (%s %d)", which, path,
                                     WIFEXITED(st) ? "exit status" : "signal",
                                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return 0;
}

int oci_hooks_run(json_t *hooks, const char *which, json_t *state, struct pd_error *err)
{
        json_t *list = json_object_get(hooks, which);
        if (json_array_size(list) == 0)
                return 0;
        char *s = json_dumps(state, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        size_t i;
        json_t *h;
        int r = 0;
        json_array_foreach(list, i, h) {
                if ((r = run_one(h, which, s, err)) < 0)
                        break;
        }
        free(s);
        return r;
}

int oci_hooks_run_create(json_t *hooks, const struct oci_state *st, struct pd_error *err)
{
        json_t *sj = oci_state_json(st, OCI_CREATED);
        int r = oci_hooks_run(hooks, "prestart", sj, err);
        json_decref(sj);
        if (r < 0)
                return r;
        sj = oci_state_json(st, OCI_CREATING);
        r = oci_hooks_run(hooks, "createRuntime", sj, err);
        json_decref(sj);
        return r;
}
