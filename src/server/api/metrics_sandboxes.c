/* The per-sandbox and warm-pool part of GET /metrics (api.h). Series are
 * labelled by sandbox id and template: at most --max-sandboxes (1000)
 * sandboxes are live, so each family has at most that many series, and
 * a deleted sandbox's series go with it (docs/api.md, "Metrics"). Failed
 * sandboxes, which have nothing to measure, have none. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/api.h"
#include "server/core/manager.h"
#include "lib/tier.h"
#include "lib/util.h"

struct one {
        char id[PD_ID_LEN + 1], tpl[65];
        struct pd_sandbox_metrics m;
        bool net;
        uint64_t drop_pkts, drop_bytes;
};

static void family(FILE *f, const char *name, const char *type, const char *help)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void pd_api_prom_sandboxes(struct pd_server *srv, FILE *f)
{
        struct pd_srv_sandbox **v = NULL;
        size_t n = 0;
        struct one *all = NULL;
        size_t got = 0;
        if (pd_manager_snapshot(srv, NULL, &v, &n) == 0 && n)
                all = calloc(n, sizeof *all);
        for (size_t i = 0; all && i < n; i++) {
                struct one *o = &all[got];
                struct pd_error err = { 0 };
                if (pd_manager_stats(srv, v[i], &o->m, &err) < 0)
                        continue;
                snprintf(o->id, sizeof o->id, "%s", v[i]->id);
                snprintf(o->tpl, sizeof o->tpl, "%s", v[i]->template_name);
                struct pd_net_info ni = { 0 };
                struct pd_error nerr = { 0 };
                if (pd_manager_net_info(srv, v[i], &ni, &nerr) == 0 && ni.have_drops) {
                        o->net = true;
                        o->drop_pkts = ni.dropped_packets;
                        o->drop_bytes = ni.dropped_bytes;
                }
                free(ni.policy_json);
                got++;
        }
        pd_manager_snapshot_free(srv, v, n);

#define EACH(expr, fmt)                                                                                        \
        for (size_t i = 0; i < got; i++)                                                                       \
                fprintf(f, "%s{sandbox=\"%s\",template=\"%s\"} " fmt "\n", name, all[i].id, all[i].tpl, expr)
        const char *name;
        family(f, name = "paddock_sandbox_cpu_seconds_total", "counter", "CPU time used by the sandbox.");
        EACH((double)all[i].m.st.cpu_ns / 1e9, "%.6f");
        family(f, name = "paddock_sandbox_memory_bytes", "gauge", "Memory the sandbox uses now.");
        EACH(all[i].m.st.memory_current, "%" PRIu64);
        family(f, name = "paddock_sandbox_memory_limit_bytes", "gauge", "The sandbox's memory limit.");
        EACH(all[i].m.memory_limit, "%" PRIu64);
        family(f, name = "paddock_sandbox_pids", "gauge", "Processes (tasks) in the sandbox now.");
        EACH(all[i].m.st.pids_current, "%" PRIu64);
        family(f, name = "paddock_sandbox_disk_used_bytes", "gauge",
               "Bytes in the sandbox's writable layer (0: not measured on its tier).");
        EACH(all[i].m.st.disk_used, "%" PRIu64);
        family(f, name = "paddock_sandbox_disk_limit_bytes", "gauge", "The writable layer's effective size.");
        EACH(all[i].m.disk_limit, "%" PRIu64);
        family(f, name = "paddock_sandbox_oom_kills_total", "counter", "Out-of-memory kills in the sandbox.");
        EACH(all[i].m.st.oom_kills, "%" PRIu64);
#undef EACH
        family(f, "paddock_sandbox_network_dropped_packets_total", "counter",
               "Packets the kernel dropped for the sandbox's egress policy (sandboxes with a network).");
        for (size_t i = 0; i < got; i++)
                if (all[i].net)
                        fprintf(f, "paddock_sandbox_network_dropped_packets_total{sandbox=\"%s\",template=\"%s\"} %" PRIu64
                                   "\n", all[i].id, all[i].tpl, all[i].drop_pkts);
        family(f, "paddock_sandbox_network_dropped_bytes_total", "counter",
               "Bytes the kernel dropped for the sandbox's egress policy (sandboxes with a network).");
        for (size_t i = 0; i < got; i++)
                if (all[i].net)
                        fprintf(f, "paddock_sandbox_network_dropped_bytes_total{sandbox=\"%s\",template=\"%s\"} %" PRIu64
                                   "\n", all[i].id, all[i].tpl, all[i].drop_bytes);
        free(all);

        struct pd_pool_count pools[PD_POOL_CLASSES_MAX];
        size_t np = pd_manager_pool_ready(srv, pools, PD_ARRAY_SIZE(pools));
        family(f, "paddock_pool_memory_bytes", "gauge",
               "Memory the warm pool's ready sandboxes use while they wait, by template and isolation.");
        for (size_t i = 0; i < np; i++) {
                bool seen = false;      /* classes of one template and tier differ in limits only: summed */
                for (size_t j = 0; j < i && !seen; j++)
                        seen = !strcmp(pools[j].template_name, pools[i].template_name) &&
                               !strcmp(pools[j].isolation, pools[i].isolation);
                if (seen)
                        continue;
                uint64_t sum = 0;
                for (size_t j = i; j < np; j++)
                        if (!strcmp(pools[j].template_name, pools[i].template_name) &&
                            !strcmp(pools[j].isolation, pools[i].isolation))
                                sum += pools[j].memory_bytes;
                fprintf(f, "paddock_pool_memory_bytes{template=\"%s\",isolation=\"%s\"} %" PRIu64 "\n",
                        pools[i].template_name, pools[i].isolation, sum);
        }
}
