/* Counters and histograms for GET /metrics (metrics.c): request latency
 * by route class, exec counts and durations by reason, warm pool hits and
 * misses. Lock-free (relaxed atomics): every request thread adds to them,
 * the scrape reads them. Process-wide, as there is one server a process. */
#pragma once
#include <stdint.h>
#include <stdio.h>

/* One finished request (called for every request, from the access log):
 * route is the route's pattern or matcher name (NULL: none matched). */
void pd_metrics_request(const char *route, unsigned status, uint64_t duration_ns);
/* One POST .../exec that ran to its end: reason "exit", "signal",
 * "timeout" or "oom" (anything else counts as "other"). */
void pd_metrics_exec(const char *reason, uint64_t duration_ns);
/* One command started in a sandbox, by the path it came through. Counted
 * at the start: /processes and E2B commands end when nobody may be
 * waiting, so their ends (reason, duration) are counted for exec only. */
enum pd_metrics_path { PD_METRICS_EXEC, PD_METRICS_PROCESS, PD_METRICS_E2B };
void pd_metrics_command(enum pd_metrics_path path);
/* A create that could have used the warm pool: hit (a warm sandbox was
 * taken) or miss. */
void pd_metrics_pool(int hit);
/* The class a route's pattern belongs to (a bounded set: docs/api.md). */
const char *pd_metrics_route_class(const char *route);
/* Write the counters and histograms, in the text exposition format. */
void pd_metrics_write(FILE *f);
