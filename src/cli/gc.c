#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "net/router.h"
#include "lib/sandbox.h"
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

/* Audit logs are not gc's to remove (their owners may still read them):
 * say what is kept and until when. */
static void report_audit_logs(struct pd_state *st)
{
        int fd = openat(st->dirfd, "audit", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        unsigned n = 0;
        unsigned long long bytes = 0;
        struct dirent *de;
        struct stat sb;
        while ((de = readdir(d)))
                if (strlen(de->d_name) > 6 && !strcmp(de->d_name + strlen(de->d_name) - 6, ".jsonl") &&
                    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) {
                        n++;
                        bytes += (unsigned long long)sb.st_size;
                }
        closedir(d);
        if (!n)         /* nothing kept (a state dir no server used): no line */
                return;
        /* on stderr: stdout stays the one line scripts read ("removed N
         * sandboxes") */
        fprintf(stderr,
                "kept %u audit log%s (%llu bytes) in %s/audit: paddock serve removes each one\n"
                "--audit-retention days (default 7) after its sandbox's last event\n",
                n, n == 1 ? "" : "s", bytes, st->dir);
}

int pd_cmd_gc(int argc, char **argv)
{
        const char *state_dir = pd_state_dir_default();
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 's': state_dir = optarg; break;
                case 'h':
                        printf("usage: paddock gc [--state-dir DIR]\n"
                               "Destroy every sandbox, cgroup and uid range owned by the state directory,\n"
                               "and its network router. The audit logs of the sandboxes stay (the server\n"
                               "removes them after --audit-retention days); gc says how many it kept.\n");
                        return 0;
                default: return PD_EXIT_PADDOCK;
                }
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
        int n = 0;
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
                pd_cli_error("gc: %s", err.msg);
                return PD_EXIT_PADDOCK;
        }
        printf("removed %d sandbox%s\n", n, n == 1 ? "" : "es");
        report_audit_logs(&st);
        if (kept_tpl > 0)
                fprintf(stderr, "kept %d outdated base template%s in %s/templates: still mounted\n", kept_tpl,
                        kept_tpl == 1 ? "" : "s", st.dir);
        pd_state_close(&st);
        return 0;
}
