/* paddock tiers: the chooser. For each tier on this host: available or not
 * and why, what encloses the code, (--measure) the wall time of
 * `paddock run --isolation T -- true` measured on the spot, kept in the
 * state dir for GET /api/v1/tiers (lib/tier.h), and the escape suite's last
 * results on this host (lib/tier_json.h). --json: what GET /api/v1/tiers
 * answers. */
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
#include "lib/spec.h"
#include "lib/state.h"
#include "lib/tier.h"
#include "lib/tier_json.h"
#include "lib/util.h"

/* 1 = available (why says how), 0 = not (why says why): the tier's own
 * check (tier.h), the same facts GET /api/v1/tiers gives. */
static int available(const struct pd_tier_ops *t, char *why, size_t size)
{
        if (!t->host_check) {
                snprintf(why, size, "always");
                return 1;
        }
        return t->host_check(why, size);
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

/* The escape suite's line: its date and counts and where its table is,
 * or why there is none. */
static void print_escape(int dfd, const char *tier)
{
        char why[512] = "the state dir cannot be opened";
        json_t *e = dfd >= 0 ? pd_tier_escape_get(dfd, tier, why, sizeof why) : NULL;
        if (!e) {
                printf("%-11s %-5s %-10s escape suite: %s\n", "", "", "", why);
                return;
        }
#define N_(k) (long long)json_integer_value(json_object_get(e, k))
        const char *res = json_string_value(json_object_get(e, "results"));
        printf("%-11s %-5s %-10s escape suite %s: %lld attacks, %lld blocked, %lld allowed, %lld not implemented, "
               "%lld errors%s%s\n", "", "", "", json_string_value(json_object_get(e, "date")), N_("attacks"),
               N_("blocked"), N_("allowed"), N_("not_implemented"), N_("errors"), res ? "; table: " : "",
               res ? res : "");
#undef N_
        json_decref(e);
}

/* --json: GET /api/v1/tiers's answer (only one tier's with --isolation). */
static void print_json(int dfd, int only)
{
        json_t *doc = pd_tiers_json(dfd);
        if (only >= 0) {
                json_t *arr = json_object_get(doc, "tiers"), *one = json_array();
                size_t i;
                json_t *t;
                json_array_foreach (arr, i, t)
                        if (!strcmp(json_string_value(json_object_get(t, "name")), pd_isolation_name((enum pd_isolation)only)))
                                json_array_append(one, t);
                json_object_set_new(doc, "tiers", one);
        }
        char *s = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        if (s)
                printf("%s\n", s);
        free(s);
        json_decref(doc);
}

int pd_cmd_tiers(int argc, char **argv)
{
        const char *state_dir = pd_state_dir_default();
        bool measure = false, as_json = false;
        int only = -1;
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, 's' },
                { "measure", no_argument, NULL, 'm' },
                { "json", no_argument, NULL, 'j' },
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
                case 'j': as_json = true; break;
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
                        printf("usage: paddock tiers [--measure] [--isolation TIER] [--json] [--state-dir DIR]\n"
                               "For each isolation tier: available on this host or not and why, what\n"
                               "encloses the code, with --measure the p50 of three runs of\n"
                               "`paddock run --isolation T -- true` (start, first command, teardown;\n"
                               "after one warm-up run, which may build a tier's template), and the\n"
                               "escape suite's last results on this host (<state>/" PD_TIERS_ESCAPE_FILE ").\n"
                               "--json: the same as GET /api/v1/tiers.\n");
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
        int dfd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (!as_json)
                printf("%-11s %-5s %-10s %s\n", "TIER", "OK", measure ? "RUN p50" : "", "ISOLATES / WHY");
        for (int i = 0; i < PD_ISO__MAX; i++) {
                enum pd_isolation iso = (enum pd_isolation)i;
                if (only >= 0 && i != only)
                        continue;
                char why[512], ms[32] = "";
                const struct pd_tier_ops *t = pd_tier_find(iso);
                int ok = available(t, why, sizeof why);
                if (ok && measure) {
                        double xs[3];
                        int good = one_run(self, state_dir, pd_isolation_name(iso)) >= 0;
                        for (int k = 0; k < 3 && good; k++)
                                good = (xs[k] = one_run(self, state_dir, pd_isolation_name(iso))) >= 0;
                        if (good) {
                                qsort(xs, 3, sizeof *xs, cmp_d);
                                snprintf(ms, sizeof ms, "%.0f ms", xs[1]);
                                /* for GET /api/v1/tiers, which measures nothing */
                                struct pd_error err = { 0 };
                                if (dfd < 0 || pd_tier_measured_save(dfd, iso, xs[1], &err) < 0)
                                        fprintf(stderr, "paddock tiers: figures not kept in '%s': %s\n", state_dir,
                                                dfd < 0 ? "cannot open it" : err.msg);
                        } else {
                                snprintf(ms, sizeof ms, "failed");
                        }
                }
                if (as_json)
                        continue;
                printf("%-11s %-5s %-10s %s\n", pd_isolation_name(iso), ok ? "yes" : "no", ms, t->isolates);
                printf("%-11s %-5s %-10s (%s)\n", "", "", "", why);
                print_escape(dfd, t->name);
        }
        if (as_json)
                print_json(dfd, only);
        if (dfd >= 0)
                close(dfd);
        return 0;
}
