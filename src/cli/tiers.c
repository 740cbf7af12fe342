/* paddock tiers: the chooser. For each tier on this host: available or not
 * and why, what encloses the code, and (--measure) the wall time of
 * `paddock run --isolation T -- true` measured on the spot. */
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "jail/landlock.h"
#include "lib/spec.h"
#include "lib/state.h"
#include "lib/util.h"
#include "tiers/gvisor.h"
#include "vm/vm.h"

/* What encloses the code (docs/security.md has the promises and tests). */
static const char *what(enum pd_isolation iso)
{
        switch (iso) {
        case PD_ISO_PROCESS: return "host kernel; Landlock + seccomp + own uid, host namespaces";
        case PD_ISO_CONTAINER: return "host kernel; namespaces, seccomp allowlist, cgroups, own uid range";
        case PD_ISO_SUPERVISED: return "container + a supervisor brokering and auditing opens/connects/execs";
        case PD_ISO_GVISOR: return "user-space kernel (gVisor Sentry, ptrace platform); host sees the Sentry";
        case PD_ISO_MICROVM: return "own guest kernel in QEMU (jailed); KVM or TCG";
        default: return "";
        }
}

/* 1 = available (why says how), 0 = not (why says why). */
static int available(enum pd_isolation iso, char *why, size_t size)
{
        struct pd_error err = { 0 };
        char buf[PATH_MAX], rel[128];
        int abi;
        switch (iso) {
        case PD_ISO_PROCESS:
                abi = pd_landlock_abi();
                if (abi <= 0) {
                        snprintf(why, size, "no Landlock in this kernel");
                        return 0;
                }
                snprintf(why, size, "Landlock ABI %d", abi);
                return 1;
        case PD_ISO_CONTAINER:
        case PD_ISO_SUPERVISED:
                if (access("/proc/self/ns/user", F_OK) < 0) {
                        snprintf(why, size, "no user namespaces");
                        return 0;
                }
                snprintf(why, size, "user namespaces");
                return 1;
        case PD_ISO_GVISOR:
                if (pd_gvisor_runsc(buf, sizeof buf, &err) < 0) {
                        snprintf(why, size, "%s", err.msg);
                        return 0;
                }
                snprintf(why, size, "%s, --platform=ptrace", buf);
                return 1;
        case PD_ISO_MICROVM:
                if (access("/usr/bin/qemu-system-x86_64", X_OK) < 0) {
                        snprintf(why, size, "no QEMU (Debian package qemu-system-x86)");
                        return 0;
                }
                if (pd_vm_guest_kernel(buf, sizeof buf, rel, sizeof rel, &err) < 0) {
                        snprintf(why, size, "%s", err.msg);
                        return 0;
                }
                snprintf(why, size, "QEMU %s, guest kernel %s", pd_vm_have_kvm() ? "KVM" : "TCG", rel);
                return 1;
        default:
                snprintf(why, size, "unknown");
                return 0;
        }
}

/* Milliseconds of one `paddock run --isolation T -- true` (-1: it failed). */
static double one_run(const char *self, const char *state_dir, const char *tier)
{
        struct timespec t0, t1;
        fflush(stdout);         /* the child must not print our buffer again */
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (nul < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0)
                        _exit(125);
                char *const argv[] = { (char *)self, "run", "--state-dir", (char *)state_dir, "--isolation",
                                       (char *)tier, "--", "true", NULL };
                execv(self, argv);
                _exit(127);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0)
                ;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return -1;
        return (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

int pd_cmd_tiers(int argc, char **argv)
{
        const char *state_dir = pd_state_dir_default();
        bool measure = false;
        int only = -1;
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, 's' },
                { "measure", no_argument, NULL, 'm' },
                { "isolation", required_argument, NULL, 'i' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 's': state_dir = optarg; break;
                case 'm': measure = true; break;
                case 'i': {
                        enum pd_isolation iso;
                        if (pd_isolation_parse(optarg, &iso) < 0) {
                                pd_cli_error("unknown isolation '%s' (%s)", optarg, pd_isolation_names());
                                return PD_EXIT_PADDOCK;
                        }
                        only = (int)iso;
                        break;
                }
                case 'h':
                        printf("usage: paddock tiers [--measure] [--isolation TIER] [--state-dir DIR]\n"
                               "For each isolation tier: available on this host or not and why, what\n"
                               "encloses the code, and with --measure the p50 of three runs of\n"
                               "`paddock run --isolation T -- true` (start, first command, teardown;\n"
                               "after one warm-up run, which may build a tier's template).\n");
                        return 0;
                default: return PD_EXIT_PADDOCK;
                }
        }
        if (optind < argc) {
                pd_cli_error("tiers: unexpected argument '%s'", argv[optind]);
                return PD_EXIT_PADDOCK;
        }
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) {
                pd_cli_error("tiers: cannot find my own binary");
                return PD_EXIT_PADDOCK;
        }
        self[n] = '\0';
        printf("%-11s %-5s %-10s %s\n", "TIER", "OK", measure ? "RUN p50" : "", "ISOLATES / WHY");
        for (int i = 0; i < PD_ISO__MAX; i++) {
                enum pd_isolation iso = (enum pd_isolation)i;
                if (only >= 0 && i != only)
                        continue;
                char why[512], ms[32] = "";
                int ok = available(iso, why, sizeof why);
                if (ok && measure) {
                        double xs[3];
                        int good = one_run(self, state_dir, pd_isolation_name(iso)) >= 0;
                        for (int k = 0; k < 3 && good; k++)
                                good = (xs[k] = one_run(self, state_dir, pd_isolation_name(iso))) >= 0;
                        if (good) {
                                qsort(xs, 3, sizeof *xs, cmp_d);
                                snprintf(ms, sizeof ms, "%.0f ms", xs[1]);
                        } else {
                                snprintf(ms, sizeof ms, "failed");
                        }
                }
                printf("%-11s %-5s %-10s %s\n", pd_isolation_name(iso), ok ? "yes" : "no", ms, what(iso));
                printf("%-11s %-5s %-10s (%s)\n", "", "", "", why);
        }
        return 0;
}
