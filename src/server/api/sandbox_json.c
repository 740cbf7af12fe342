/* The native API's objects (docs/openapi.yaml: Sandbox, SandboxMetrics,
 * the network policy), formatted from what the manager answers. The state
 * words are the API's: running, paused (in memory or to disk: paused_to
 * says which) and failed. */
#include <stdlib.h>

#include "server/api/api.h"
#include "server/core/store.h"

/* The native view of a state (lifecycle.h); the E2B view is e2b_api.c's. */
static const char *native_state(enum pd_sb_state s)
{
        switch (s) {
        case PD_SB_PAUSED:
        case PD_SB_PAUSED_DISK: return "paused";
        case PD_SB_FAILED: return "failed";
        case PD_SB_DELETED: return "deleted";
        default: return "running";
        }
}

json_t *pd_api_network_json(struct pd_server *srv, struct pd_srv_sandbox *s, bool drops)
{
        struct pd_net_info ni;
        json_t *o = NULL;
        if (pd_manager_net_info(srv, s, &ni, NULL) == 0)
                o = json_loads(ni.policy_json, 0, NULL);
        if (o && drops && ni.have_drops) {
                json_object_set_new(o, "dropped_packets", json_integer((json_int_t)ni.dropped_packets));
                json_object_set_new(o, "dropped_bytes", json_integer((json_int_t)ni.dropped_bytes));
        }
        /* what egress can do for it, and in one line why it reaches
         * nothing when it does not (docs/network.md, "The default uplink") */
        if (o && ni.have_egress)
                json_object_set_new(o, "egress",
                                    json_pack("{s:s, s:s, s:b, s:s?}", "uplink", ni.egress_uplink, "resolvers",
                                              ni.egress_resolvers, "ok", !ni.egress_problem[0], "problem",
                                              ni.egress_problem[0] ? ni.egress_problem : NULL));
        pd_net_info_clear(&ni);
        return o ? o : json_pack("{s:s}", "mode", "none");
}

json_t *pd_api_sandbox_json(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        struct pd_sandbox_info i;
        pd_manager_sandbox_info(srv, s, &i);
        char created[32], expires[32];
        pd_rfc3339_ms(i.created_ms, created);
        json_t *exp = json_null();
        if (i.expires_ms) {
                pd_rfc3339_ms(i.expires_ms, expires);
                exp = json_string(expires);
        }
        bool paused = pd_sb_is_paused(i.state);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:f, s:I, s:I, s:O, s:O, s:O}", "id", i.id,
                              "template", i.template_name, "isolation", i.isolation, "state", native_state(i.state),
                              "created_at", created, "expires_at", exp, "timeout", (json_int_t)i.timeout_s,
                              "memory_mb", (json_int_t)(i.memory_bytes >> 20), "cpus", i.millicpus / 1000.0, "pids",
                              (json_int_t)i.pids, "disk_mb", (json_int_t)(i.disk_bytes >> 20), "env", i.env,
                              "metadata", i.metadata, "notes", i.notes);
        if (o && paused)
                json_object_set_new(o, "timeout_remaining_ms", json_integer((json_int_t)i.timeout_remaining_ms));
        if (o)
                json_object_set_new(o, "network", pd_api_network_json(srv, s, false));
        if (o) {
                json_object_set_new(o, "auto_pause", json_boolean(i.auto_pause));
                /* What pausing does on this tier (the freezer keeps memory). */
                json_object_set_new(o, "pause_mode", json_string(i.tier_pauses_to_disk ? "disk" : "memory"));
                /* how this pause was done: "disk" = its memory was released,
                 * "files" = only its filesystem kept (resume boots afresh) */
                if (paused)
                        json_object_set_new(o, "paused_to",
                                            json_string(i.paused_files                 ? "files"
                                                        : i.state == PD_SB_PAUSED_DISK ? "disk"
                                                                                       : "memory"));
                /* a guest's CPU: emulated (tcg) or hardware virtualization (kvm) */
                if (i.accel[0])
                        json_object_set_new(o, "accel", json_string(i.accel));
        }
        pd_sandbox_info_clear(&i);
        return o;
}

json_t *pd_api_metrics_json(const struct pd_sandbox_metrics *m)
{
        return json_pack("{s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "cpu_seconds", (double)m->st.cpu_ns / 1e9,
                         "memory_bytes", (json_int_t)m->st.memory_current, "memory_peak_bytes",
                         (json_int_t)m->st.memory_peak, "memory_limit_bytes", (json_int_t)m->memory_limit, "pids",
                         (json_int_t)m->st.pids_current, "pids_limit", (json_int_t)m->pids_limit, "disk_used_bytes",
                         (json_int_t)m->st.disk_used, "disk_limit_bytes", (json_int_t)m->disk_limit, "oom_kills",
                         (json_int_t)m->st.oom_kills);
}
