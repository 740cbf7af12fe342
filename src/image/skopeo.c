/* Running a helper tool (skopeo) with its output as lines: each line goes
 * to the progress callback, the last few are kept for the error message. */
#include "image/skopeo.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/util.h"

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

/* skopeo writes each blob to <layout>/oci-put-blob* before it renames it
 * into the cache: their sizes are the download's progress. */
static void downloads(const char *dir, const struct pd_image_opts *o)
{
        DIR *d = opendir(dir);
        if (!d)
                return;
        char text[256] = "";
        size_t tl = 0;
        uint64_t sum = 0;
        unsigned k = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                struct stat st;
                if (strncmp(de->d_name, "oci-put-blob", 12) || fstatat(dirfd(d), de->d_name, &st, 0) < 0)
                        continue;
                sum += (uint64_t)st.st_size;
                if (tl + 32 < sizeof text)
                        tl += (size_t)snprintf(text + tl, sizeof text - tl, "%s%.1f MiB", k ? ", " : "",
                                               (double)st.st_size / (1 << 20));
                k++;
        }
        closedir(d);
        if (k)
                pd_image_emit(o, PD_IMAGE_EV_DOWNLOAD, text, NULL, sum, 0);
}

int pd_tool_run(char *const argv[], const char *watch_dir, const struct pd_image_opts *o, struct pd_tool_out *out,
                struct pd_error *err)
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
        uint64_t last_tick = 0;
        for (;;) {
                /* the output, and now and then the blobs under way */
                struct pollfd pf = { .fd = p[0], .events = POLLIN };
                int pr = poll(&pf, 1, watch_dir ? 250 : -1);
                if (watch_dir && pd_now_ns() - last_tick >= 250000000ull) {
                        last_tick = pd_now_ns();
                        downloads(watch_dir, o);
                }
                if (pr == 0 || (pr < 0 && errno == EINTR))
                        continue;
                n = read(p[0], buf, sizeof buf);
                if (n == 0)
                        break;
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
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
