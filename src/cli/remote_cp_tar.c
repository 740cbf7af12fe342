/* paddock cp -r: a directory into or out of a sandbox as a tar stream.
 *
 * The sandbox side is `tar` run there through paddock exec (as the
 * sandbox's user, inside its own view of the filesystem); the local side
 * is the host's GNU tar on a pipe, or our own stdin/stdout for "-". The
 * pipe takes the place of our stdin or stdout while exec runs, so exec's
 * streaming, resumption and exit status are used as they are.
 *
 * Extracting here what a sandbox produced: GNU tar drops leading '/' and
 * members with "..", and defers symlinks that point outside until the end
 * (they cannot be written through); --no-same-owner keeps a root caller
 * from taking the sandbox's uids. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"

extern char **environ;

/* The host's tar with fd as its stdin (extract) or stdout (create). */
static pid_t local_tar(char *const *argv, int fd, int target_fd)
{
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd, target_fd);
        pid_t pid;
        int e = posix_spawnp(&pid, "tar", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (e) {
                pd_cli_error("cp: cannot run tar here: %s", strerror(e));
                return -1;
        }
        return pid;
}

/* The local tar's end; said only when quiet is false (after a failure in
 * the sandbox, the local side's complaint is noise). */
static int local_status(pid_t pid, const char *what, const char *path, bool quiet)
{
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return PD_RC_INTERNAL;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                return 0;
        if (!quiet)
                pd_cli_error("cp: %s '%s' failed (tar %s %d)", what, path, WIFEXITED(st) ? "exit status" : "signal",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return PD_RC_REFUSED;
}

/* Run argv in the sandbox with slot (0 stdin, 1 stdout) replaced by fd
 * for the duration; the command's exit status. */
static int exec_with(const struct pd_rc *rc, char **argv, int argc, int slot, int fd)
{
        int saved = -1;
        if (fd >= 0) {
                saved = fcntl(slot, F_DUPFD_CLOEXEC, 3);
                if (saved < 0 || dup2(fd, slot) < 0) {
                        pd_cli_error("cp: %s", strerror(errno));
                        return PD_RC_INTERNAL;
                }
                close(fd);
        }
        int k = pd_remote_exec(rc, argc, argv);
        if (saved >= 0) {
                dup2(saved, slot);      /* closes the pipe's end: the local tar sees EOF */
                close(saved);
        }
        return k;
}

/* The last component of p (trailing slashes ignored), in buf. */
static const char *base_name(const char *p, char *buf, size_t sz)
{
        snprintf(buf, sz, "%s", p);
        size_t n = strlen(buf);
        while (n > 1 && buf[n - 1] == '/')
                buf[--n] = '\0';
        char *s = strrchr(buf, '/');
        return s && s[1] ? s + 1 : buf;
}

int pd_remote_cp_tar_out(const struct pd_rc *rc, const char *id, const char *src, const char *dst)
{
        char *av[] = { "exec", "--no-stdin", (char *)id, "--", "tar", "-C", (char *)src, "-cf", "-", ".", NULL };
        int ac = (int)(sizeof av / sizeof av[0]) - 1;
        if (!strcmp(dst, "-")) {
                if (isatty(STDOUT_FILENO)) {
                        pd_cli_error("cp: not writing a tar stream to a terminal (redirect it, or give a directory)");
                        return PD_RC_USAGE;
                }
                return exec_with(rc, av, ac, STDOUT_FILENO, -1);
        }
        /* like cp -r: into an existing directory under the source's name */
        char target[4096], bn[4096];
        struct stat st;
        if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
                snprintf(target, sizeof target, "%s/%s", dst, base_name(src, bn, sizeof bn));
        else
                snprintf(target, sizeof target, "%s", dst);
        bool created = mkdir(target, 0777) == 0;
        if (!created && !(errno == EEXIST && stat(target, &st) == 0 && S_ISDIR(st.st_mode))) {
                pd_cli_error("cp: cannot create directory '%s': %s", target, strerror(errno));
                return PD_RC_REFUSED;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return PD_RC_INTERNAL;
        char *tv[] = { "tar", "-xf", "-", "-C", target, "--no-same-owner", NULL };
        pid_t pid = local_tar(tv, p[0], STDIN_FILENO);
        close(p[0]);
        if (pid < 0) {
                close(p[1]);
                return PD_RC_INTERNAL;
        }
        signal(SIGPIPE, SIG_IGN);
        int k = exec_with(rc, av, ac, STDOUT_FILENO, p[1]);
        int l = local_status(pid, "extracting into", target, k != 0);
        if ((k || l) && created)
                rmdir(target);  /* ours and still empty: leave nothing behind */
        return k ? k : l;
}

int pd_remote_cp_tar_in(const struct pd_rc *rc, const char *src, const char *id, const char *dst, bool dst_is_dir)
{
        char target[4096], bn[4096];
        if (strcmp(src, "-") && dst_is_dir)
                snprintf(target, sizeof target, "%s/%s", dst, base_name(src, bn, sizeof bn));
        else
                snprintf(target, sizeof target, "%s", dst);
        char *av[] = { "exec", (char *)id, "--", "sh", "-c", "mkdir -p -- \"$1\" && exec tar -xf - -C \"$1\"",
                       "paddock-cp", target, NULL };
        int ac = (int)(sizeof av / sizeof av[0]) - 1;
        if (!strcmp(src, "-")) {
                if (isatty(STDIN_FILENO)) {
                        pd_cli_error("cp: standard input is a terminal, not a tar stream");
                        return PD_RC_USAGE;
                }
                return exec_with(rc, av, ac, STDIN_FILENO, -1);
        }
        struct stat st;
        if (stat(src, &st) < 0) {
                pd_cli_error("cp: cannot stat '%s': %s", src, strerror(errno));
                return PD_RC_REFUSED;
        }
        if (!S_ISDIR(st.st_mode)) {
                pd_cli_error("cp: -r: '%s' is not a directory", src);
                return PD_RC_USAGE;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return PD_RC_INTERNAL;
        char *tv[] = { "tar", "-cf", "-", "-C", (char *)src, ".", NULL };
        pid_t pid = local_tar(tv, p[1], STDOUT_FILENO);
        close(p[1]);
        if (pid < 0) {
                close(p[0]);
                return PD_RC_INTERNAL;
        }
        int k = exec_with(rc, av, ac, STDIN_FILENO, p[0]);
        int l = local_status(pid, "reading", src, false);
        return k ? k : l;
}
