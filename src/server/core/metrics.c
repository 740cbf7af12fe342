/* metrics.h. The route classes are few and fixed so that the request
 * series stay bounded whatever paths clients send (the pattern, never
 * the path, decides the class). */
#include "server/core/metrics.h"

#include <string.h>

#include "lib/util.h"

static const char *const classes[] = {
        "lifecycle", "exec", "processes", "files", "ports", "snapshots", "network",
        "templates", "observe", "console", "e2b", "none",
};
#define N_CLASSES PD_ARRAY_SIZE(classes)

/* seconds; +Inf is the count */
static const double bounds[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define N_BOUNDS PD_ARRAY_SIZE(bounds)

struct hist {
        uint64_t le[N_BOUNDS];
        uint64_t count, sum_ns;
};

static struct hist req_hist[N_CLASSES];
static uint64_t req_5xx[N_CLASSES];

static const char *const reasons[] = { "exit", "signal", "timeout", "oom", "other" };
#define N_REASONS PD_ARRAY_SIZE(reasons)
static struct hist exec_hist;
static uint64_t exec_by_reason[N_REASONS];

static const char *const paths[] = { "exec", "process", "e2b" };   /* enum pd_metrics_path */
static uint64_t commands[PD_ARRAY_SIZE(paths)];

static uint64_t pool_hits, pool_misses;

static void hist_add(struct hist *h, uint64_t ns)
{
        double s = (double)ns / 1e9;
        for (size_t i = 0; i < N_BOUNDS; i++)
                if (s <= bounds[i])
                        __atomic_add_fetch(&h->le[i], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&h->count, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&h->sum_ns, ns, __ATOMIC_RELAXED);
}

static int has(const char *s, const char *part)
{
        return strstr(s, part) != NULL;
}

const char *pd_metrics_route_class(const char *route)
{
        if (!route)
                return "none";
        if (!strcmp(route, "ports"))                    /* the port matcher (host form) */
                return "ports";
        if (!strncmp(route, "e2b", 3))                  /* matchers: e2b-envd */
                return "e2b";
        if (!strcmp(route, "/metrics") || !strcmp(route, "/healthz") || !strcmp(route, "/api/v1/health") ||
            has(route, "/audit") || (has(route, "/metrics") && !strncmp(route, "/api/v1/", 8)))
                return "observe";
        if (strncmp(route, "/api/v1/", 8))
                return !strcmp(route, "/") || !strncmp(route, "/console", 8) ? "console" : "e2b";
        if (has(route, "/console"))
                return "console";
        if (has(route, "/exec"))
                return "exec";
        if (has(route, "/processes"))
                return "processes";
        if (has(route, "/files"))
                return "files";
        if (has(route, "/ports"))
                return "ports";
        if (has(route, "/snapshots") || has(route, "/fork"))
                return "snapshots";
        if (has(route, "/network"))
                return "network";
        if (has(route, "/templates"))
                return "templates";
        return "lifecycle";
}

static size_t class_index(const char *name)
{
        for (size_t i = 0; i < N_CLASSES; i++)
                if (!strcmp(classes[i], name))
                        return i;
        return N_CLASSES - 1;
}

void pd_metrics_request(const char *route, unsigned status, uint64_t duration_ns)
{
        size_t i = class_index(pd_metrics_route_class(route));
        hist_add(&req_hist[i], duration_ns);
        if (status >= 500 && status <= 599)
                __atomic_add_fetch(&req_5xx[i], 1, __ATOMIC_RELAXED);
}

void pd_metrics_exec(const char *reason, uint64_t duration_ns)
{
        size_t i = N_REASONS - 1;
        for (size_t k = 0; reason && k < N_REASONS - 1; k++)
                if (!strcmp(reason, reasons[k]))
                        i = k;
        __atomic_add_fetch(&exec_by_reason[i], 1, __ATOMIC_RELAXED);
        hist_add(&exec_hist, duration_ns);
}

void pd_metrics_command(enum pd_metrics_path path)
{
        if ((size_t)path < PD_ARRAY_SIZE(paths))
                __atomic_add_fetch(&commands[path], 1, __ATOMIC_RELAXED);
}

void pd_metrics_pool(int hit)
{
        __atomic_add_fetch(hit ? &pool_hits : &pool_misses, 1, __ATOMIC_RELAXED);
}

static void hist_write(FILE *f, const char *name, const char *label, const struct hist *h)
{
        const char *sep = label[0] ? "," : "";
        for (size_t i = 0; i < N_BOUNDS; i++)
                fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, label, sep, bounds[i],
                        (unsigned long long)__atomic_load_n(&h->le[i], __ATOMIC_RELAXED));
        uint64_t n = __atomic_load_n(&h->count, __ATOMIC_RELAXED);
        fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, label, sep, (unsigned long long)n);
        fprintf(f, "%s_sum%s%s%s %.6f\n", name, label[0] ? "{" : "", label, label[0] ? "}" : "",
                (double)__atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED) / 1e9);
        fprintf(f, "%s_count%s%s%s %llu\n", name, label[0] ? "{" : "", label, label[0] ? "}" : "",
                (unsigned long long)n);
}

void pd_metrics_write(FILE *f)
{
        char label[64];
        fprintf(f, "# HELP paddock_http_request_duration_seconds Time to answer a request, by route class.\n"
                   "# TYPE paddock_http_request_duration_seconds histogram\n");
        for (size_t i = 0; i < N_CLASSES; i++) {
                snprintf(label, sizeof label, "route=\"%s\"", classes[i]);
                hist_write(f, "paddock_http_request_duration_seconds", label, &req_hist[i]);
        }
        fprintf(f, "# HELP paddock_http_errors_total 5xx answers, by route class (each is logged with its cause).\n"
                   "# TYPE paddock_http_errors_total counter\n");
        for (size_t i = 0; i < N_CLASSES; i++)
                fprintf(f, "paddock_http_errors_total{route=\"%s\"} %llu\n", classes[i],
                        (unsigned long long)__atomic_load_n(&req_5xx[i], __ATOMIC_RELAXED));
        fprintf(f, "# HELP paddock_exec_total Commands run to their end through POST .../exec, by how they ended.\n"
                   "# TYPE paddock_exec_total counter\n");
        for (size_t i = 0; i < N_REASONS; i++)
                fprintf(f, "paddock_exec_total{reason=\"%s\"} %llu\n", reasons[i],
                        (unsigned long long)__atomic_load_n(&exec_by_reason[i], __ATOMIC_RELAXED));
        fprintf(f, "# HELP paddock_exec_duration_seconds How long commands run through POST .../exec took.\n"
                   "# TYPE paddock_exec_duration_seconds histogram\n");
        hist_write(f, "paddock_exec_duration_seconds", "", &exec_hist);
        fprintf(f, "# HELP paddock_commands_started_total Commands started in sandboxes, by the path they came "
                   "through (exec: POST .../exec; process: POST .../processes; e2b: envd's Process.Start).\n"
                   "# TYPE paddock_commands_started_total counter\n");
        for (size_t i = 0; i < PD_ARRAY_SIZE(paths); i++)
                fprintf(f, "paddock_commands_started_total{path=\"%s\"} %llu\n", paths[i],
                        (unsigned long long)__atomic_load_n(&commands[i], __ATOMIC_RELAXED));
        fprintf(f, "# HELP paddock_pool_takes_total Creates that asked the warm pool, by result (hit: a warm "
                   "sandbox was handed out).\n# TYPE paddock_pool_takes_total counter\n");
        fprintf(f, "paddock_pool_takes_total{result=\"hit\"} %llu\npaddock_pool_takes_total{result=\"miss\"} %llu\n",
                (unsigned long long)__atomic_load_n(&pool_hits, __ATOMIC_RELAXED),
                (unsigned long long)__atomic_load_n(&pool_misses, __ATOMIC_RELAXED));
}
