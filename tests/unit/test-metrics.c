/* The server's counters for /metrics (src/server/core/metrics.c): route
 * patterns map onto the fixed route classes (bounded series whatever a
 * client sends), histograms are cumulative with +Inf equal to the count,
 * exec reasons outside the known ones count as "other". TAP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/metrics.h"
#include "tap.h"

static unsigned long long sample(const char *text, const char *series)
{
        const char *p = strstr(text, series);
        if (!p)
                return ~0ull;
        p += strlen(series);
        return strtoull(p, NULL, 10);
}

int main(void)
{
        static const struct {
                const char *route, *cls;
        } cases[] = {
                { "/api/v1/sandboxes", "lifecycle" },
                { "/api/v1/sandboxes/{id}", "lifecycle" },
                { "/api/v1/sandboxes/{id}/pause", "lifecycle" },
                { "/api/v1/sandboxes/{id}/exec", "exec" },
                { "/api/v1/sandboxes/{id}/processes/{pid}/output", "processes" },
                { "/api/v1/sandboxes/{id}/files/list", "files" },
                { "/api/v1/sandboxes/{id}/ports", "ports" },
                { "ports", "ports" },
                { "/api/v1/sandboxes/{id}/snapshots", "snapshots" },
                { "/api/v1/sandboxes/{id}/fork", "snapshots" },
                { "/api/v1/snapshots/{name}", "snapshots" },
                { "/api/v1/sandboxes/{id}/network", "network" },
                { "/api/v1/templates/{name}/log", "templates" },
                { "/metrics", "observe" },
                { "/healthz", "observe" },
                { "/api/v1/health", "observe" },
                { "/api/v1/sandboxes/{id}/metrics", "observe" },
                { "/api/v1/sandboxes/{id}/audit", "observe" },
                { "/api/v1/console/session", "console" },
                { "/", "console" },
                { "/console/{path}", "console" },
                { "/sandboxes/{id}", "e2b" },
                { "/v2/sandboxes", "e2b" },
                { "e2b-envd", "e2b" },
                { NULL, "none" },
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
                ok(!strcmp(pd_metrics_route_class(cases[i].route), cases[i].cls), "%s -> %s (got %s)",
                   cases[i].route ? cases[i].route : "(no route)", cases[i].cls,
                   pd_metrics_route_class(cases[i].route));

        pd_metrics_request("/api/v1/sandboxes/{id}/exec", 200, 2000000);        /* 2 ms */
        pd_metrics_request("/api/v1/sandboxes/{id}/exec", 502, 20000000000ull); /* 20 s */
        pd_metrics_request("/some/unknown/../path", 404, 1000);
        pd_metrics_exec("exit", 3000000);
        pd_metrics_exec("made-up", 1);
        pd_metrics_pool(1);
        pd_metrics_pool(0);
        pd_metrics_pool(0);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        pd_metrics_write(f);
        fclose(f);
        const char *h = "paddock_http_request_duration_seconds_bucket{route=\"exec\",";
        char s[160];
        snprintf(s, sizeof s, "%sle=\"0.001\"} ", h);
        ok(sample(text, s) == 0, "exec: nothing under 1 ms");
        snprintf(s, sizeof s, "%sle=\"0.005\"} ", h);
        ok(sample(text, s) == 1, "exec: the 2 ms request under 5 ms");
        snprintf(s, sizeof s, "%sle=\"30\"} ", h);
        ok(sample(text, s) == 2, "exec: both under 30 s (cumulative)");
        snprintf(s, sizeof s, "%sle=\"+Inf\"} ", h);
        ok(sample(text, s) == 2, "exec: +Inf is the count");
        ok(sample(text, "paddock_http_request_duration_seconds_count{route=\"exec\"} ") == 2, "exec count 2");
        ok(sample(text, "paddock_http_errors_total{route=\"exec\"} ") == 1, "one 5xx on exec");
        ok(sample(text, "paddock_http_request_duration_seconds_count{route=\"e2b\"} ") == 1,
           "an unknown path outside /api/v1 counts as e2b (a fixed class, not its path)");
        ok(!strstr(text, "unknown"), "no path from a request reaches a label");
        ok(sample(text, "paddock_exec_total{reason=\"exit\"} ") == 1, "exec exit 1");
        ok(sample(text, "paddock_exec_total{reason=\"other\"} ") == 1, "an unknown reason is other");
        ok(sample(text, "paddock_pool_takes_total{result=\"hit\"} ") == 1, "pool hit 1");
        ok(sample(text, "paddock_pool_takes_total{result=\"miss\"} ") == 2, "pool miss 2");
        free(text);
        return tap_done();
}
