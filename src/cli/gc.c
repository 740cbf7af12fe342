#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "net/router.h"
#include "lib/sandbox.h"
#include "lib/teardown.h"
#include "lib/template.h"
#include "lib/util.h"

/* Once the router is gone, what it kept in the runtime dir (netd's log,
 * audit and policy files, slot records) and the runtime dir itself: the
 * server has copied the audit lines it needs into its own log. Not while a
 * router pin is still there (a teardown that could not finish). */
static void remove_runtime_leftovers(struct pd_state *st)
{
        struct stat sb;
        if (fstatat(st->rundirfd, "net/router", &sb, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
                return;
        char net[PATH_MAX + 8];
        snprintf(net, sizeof net, "%s/net", st->rundir);
        (void)pd_rm_rf(net, NULL);
        (void)unlinkat(st->rundirfd, "sandboxes", AT_REMOVEDIR);
        (void)rmdir(st->rundir);
        (void)rmdir("/dev/shm/paddock");
}

/* A `paddock serve` of this state dir holds serve.lock (serve.c) for its
 * whole life, and every sandbox, the router and the runtime dir are its:
 * gc refuses while one runs rather than take them away under it (its
 * DELETE, or stopping it first, is the way). Held shared until gc ends, so
 * no server starts on the state dir half-way through. Returns the lock's
 * fd (or -1 when there is none to hold), or -2 with the message said. */
static int hold_off_server(struct pd_state *st)
{
        int fd = openat(st->dirfd, "serve.lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -1;
        if (flock(fd, LOCK_SH | LOCK_NB) == 0)
                return fd;
        char buf[24] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        close(fd);
        pd_cli_error("gc: paddock serve (pid %s) is running on state directory %s: its sandboxes and runtime "
                     "dir are left alone; stop it first", buf[0] ? buf : "unknown", st->dir);
        return -2;
}

/* Regular files in <state>/<sub> whose names end in suffix: how many and
 * their bytes (0 when the directory is not there). */
static unsigned count_files(struct pd_state *st, const char *sub, const char *suffix, unsigned long long *bytes)
{
        *bytes = 0;
        DIR *d = pd_opendirat(st->dirfd, sub);
        if (!d)
                return 0;
        unsigned n = 0;
        size_t sl = strlen(suffix);
        struct dirent *de;
        struct stat sb;
        while ((de = readdir(d)))
                if (strlen(de->d_name) > sl && !strcmp(de->d_name + strlen(de->d_name) - sl, suffix) &&
                    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) {
                        n++;
                        *bytes += (unsigned long long)sb.st_size;
                }
        closedir(d);
        return n;
}

/* The console logs of failed microvm starts (src/tiers/microvm_console.c):
 * the microvm tier's gc removes those past their retention. */
#define CONSOLE_DIR "vm/failed"
#define CONSOLE_SUFFIX ".console.log"

int pd_cmd_gc(int argc, char **argv)
{
        const char *state_dir = pd_state_dir_default();
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "wait", no_argument, NULL, 'w' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        int c;
        bool json = false, wait_only = false;
        optind = 1;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 's': state_dir = optarg; break;
                case 'j': json = true; break;
                case 'w': wait_only = true; break;
                case 'h':
                        printf("usage: paddock gc [--state-dir DIR] [--json | --wait]\n"
                               "Destroy every sandbox, cgroup and uid range owned by the state directory,\n"
                               "and its network router. The audit logs of the sandboxes stay (the server\n"
                               "removes them after --audit-retention days), and the console logs of failed\n"
                               "microvm starts for 7 days; gc says how many it kept and removed (stderr,\n"
                               "or all of it as one JSON object on stdout with --json).\n"
                               "While a paddock serve runs on the state directory, gc refuses (exit 125,\n"
                               "naming the server's pid) and changes nothing: the sandboxes are the server's.\n"
                               "--wait: destroy nothing; return once every teardown that `paddock run` left\n"
                               "running after reporting its command's exit has finished.\n");
                        return 0;
                default: return PD_EXIT_PADDOCK;
                }
        }
        if (json && wait_only) {
                pd_cli_error("gc: --wait destroys nothing and prints nothing: not with --json");
                return PD_EXIT_PADDOCK;
        }
        if (optind < argc) {
                pd_cli_error("gc: unexpected argument '%s'", argv[optind]);
                return PD_EXIT_PADDOCK;
        }
        struct pd_state st;
        struct pd_error err = { 0 };
        if (pd_state_open(state_dir, &st, &err) < 0) {
                pd_cli_error("%s", err.msg);
                return PD_EXIT_PADDOCK;
        }
        if (wait_only) {
                /* the completion event of `paddock run`'s teardowns
                 * (lib/teardown.h): scripts and tests check for leftovers
                 * after it, never after a sleep */
                int w = pd_teardown_wait(&st);
                pd_state_close(&st);
                if (w < 0) {
                        pd_cli_error("gc --wait: %s: %s", PD_TEARDOWN_LOCK, strerror(-w));
                        return PD_EXIT_PADDOCK;
                }
                return 0;
        }
        int held = hold_off_server(&st);
        if (held == -2) {
                pd_state_close(&st);
                return PD_EXIT_PADDOCK;
        }
        int n = 0;
        unsigned long long cbytes, abytes;
        unsigned consoles0 = count_files(&st, CONSOLE_DIR, CONSOLE_SUFFIX, &cbytes);
        int r = pd_gc(&st, &n, &err);
        /* no sandbox is left: the network router (netns, netd) goes too */
        if (r >= 0)
                r = pd_router_gc(&st, NULL, NULL, &err);
        if (r >= 0)
                remove_runtime_leftovers(&st);
        /* outdated base templates moved aside while sandboxes used them */
        int kept_tpl = r >= 0 ? pd_template_sweep_retired(&st) : 0;
        if (r < 0) {
                pd_state_close(&st);
                if (held >= 0)
                        close(held);
                pd_cli_error("gc: %s", err.msg);
                return PD_EXIT_PADDOCK;
        }
        unsigned consoles = count_files(&st, CONSOLE_DIR, CONSOLE_SUFFIX, &cbytes);
        unsigned consoles_removed = consoles0 > consoles ? consoles0 - consoles : 0;
        unsigned audits = count_files(&st, "audit", ".jsonl", &abytes);
        if (json) {
                printf("{\"removed_sandboxes\": %d, \"audit_logs_kept\": %u, \"audit_log_bytes\": %llu, "
                       "\"console_logs_kept\": %u, \"console_log_bytes\": %llu, \"console_logs_removed\": %u, "
                       "\"outdated_base_templates_kept\": %d}\n",
                       n, audits, abytes, consoles, cbytes, consoles_removed, kept_tpl);
                pd_state_close(&st);
                if (held >= 0)
                        close(held);
                return 0;
        }
        printf("removed %d sandbox%s\n", n, n == 1 ? "" : "es");
        /* the rest on stderr: stdout stays the one line scripts read. Audit
         * logs are not gc's to remove (their owners may still read them). */
        if (audits)
                fprintf(stderr,
                        "kept %u audit log%s (%llu bytes) in %s/audit: paddock serve removes each one\n"
                        "--audit-retention days (default 7) after its sandbox's last event\n",
                        audits, audits == 1 ? "" : "s", abytes, st.dir);
        if (consoles || consoles_removed)
                fprintf(stderr, "kept %u console log%s of failed microvm starts (%llu bytes) in %s/" CONSOLE_DIR
                                ", removed %u (older than 7 days, or beyond the newest 32)\n",
                        consoles, consoles == 1 ? "" : "s", cbytes, st.dir, consoles_removed);
        if (kept_tpl > 0)
                fprintf(stderr, "kept %d outdated base template%s in %s/templates: still mounted\n", kept_tpl,
                        kept_tpl == 1 ? "" : "s", st.dir);
        pd_state_close(&st);
        if (held >= 0)
                close(held);
        return 0;
}
