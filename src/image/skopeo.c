/* Running a helper tool (skopeo) with its output as lines: each line goes
 * to the progress callback, the last few are kept for the error message. */
#include "skopeo.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

extern char **environ;

static void keep_line(struct pd_tool_out *t, const char *line)
{
        size_t n = strlen(line);
        if (!n)
                return;
        /* the last lines, newest last, within tail */
        while (t->len + n + 2 > sizeof t->tail && t->len) {
                char *nl = memchr(t->tail, '\n', t->len);
                size_t cut = nl ? (size_t)(nl - t->tail) + 1 : t->len;
                memmove(t->tail, t->tail + cut, t->len - cut);
                t->len -= cut;
        }
        if (n + 2 > sizeof t->tail)
                n = sizeof t->tail - 2;
        memcpy(t->tail + t->len, line, n);
        t->len += n;
        t->tail[t->len++] = '\n';
        t->tail[t->len] = '\0';
}

int pd_tool_run(char *const argv[], const struct pd_image_opts *o, struct pd_tool_out *out, struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        posix_spawn_file_actions_adddup2(&fa, p[1], 2);
        pid_t pid;
        int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (e != 0) {
                close(p[0]);
                if (e == ENOENT)
                        return pd_error_setx(err, ENOENT, "'%s' is not installed (Debian package %s; "
                                             "scripts/setup.sh installs it)", argv[0], argv[0]);
                return pd_error_set(err, e, "run %s", argv[0]);
        }
        char buf[4096], line[1024];
        size_t ll = 0;
        ssize_t n;
        while ((n = read(p[0], buf, sizeof buf)) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                for (ssize_t i = 0; i < n; i++) {
                        if (buf[i] == '\n' || buf[i] == '\r' || ll + 1 == sizeof line) {
                                line[ll] = '\0';
                                if (ll) {
                                        keep_line(out, line);
                                        pd_image_emit(o, PD_IMAGE_EV_LINE, line, NULL, 0, 0);
                                }
                                ll = 0;
                                if (buf[i] == '\n' || buf[i] == '\r')
                                        continue;
                        }
                        line[ll++] = buf[i];
                }
        }
        if (ll) {
                line[ll] = '\0';
                keep_line(out, line);
                pd_image_emit(o, PD_IMAGE_EV_LINE, line, NULL, 0, 0);
        }
        close(p[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        out->status = st;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                return 0;
        /* the tool's own words: its last line names the problem */
        char *last = out->tail;
        for (char *nl; (nl = strchr(last, '\n')) && nl[1];)
                last = nl + 1;
        size_t ln = strlen(last);
        while (ln && last[ln - 1] == '\n')
                last[--ln] = '\0';
        return pd_error_setx(err, EIO, "%s failed: %s", argv[0], *last ? last : "(no message)");
}
