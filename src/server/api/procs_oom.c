/* Was a process's SIGKILL the kernel's out-of-memory killer? Every surface
 * that reports an exit (POST /exec, the process object, the output
 * stream's exit record, E2B's end event) asks here, so an OOM kill reads
 * the same everywhere: reason "oom" and the memory limit that was hit.
 *
 * The agent cannot tell (it sees no cgroupfs inside the sandbox); the host
 * reads the workload cgroup's OOM-kill count (v2 memory.events oom_kill,
 * v1 memory.oom_control oom_kill) through the tier's stats. The count is
 * per sandbox, not per process: a SIGKILL from another source in a
 * sandbox that already had an OOM kill is reported as oom too (docs/api.md
 * says so). */
#include <signal.h>
#include <string.h>

#include "server/core/manager.h"
#include "server/api/procs.h"

static void oom_set(json_t *o, uint64_t mb)
{
        json_object_set_new(o, "reason", json_string("oom"));
        if (mb)
                json_object_set_new(o, "memory_limit_mb", json_integer((json_int_t)mb));
}

bool pd_procs_oom(struct pd_server *srv, struct pd_srv_sandbox *s, bool killed, uint64_t *limit_mb)
{
        *limit_mb = 0;
        if (!killed || !s)
                return false;
        struct pd_sandbox_metrics m;
        struct pd_error err = { 0 };
        if (pd_manager_stats(srv, s, &m, &err) < 0 || !m.st.oom_kills)
                return false;
        *limit_mb = m.memory_limit >> 20;
        return true;
}

uint64_t pd_procs_memory_limit_mb(struct pd_server *srv, struct pd_srv_sandbox *s)
{
        struct pd_sandbox_metrics m;
        struct pd_error err = { 0 };
        (void)pd_manager_stats(srv, s, &m, &err);       /* the limit is filled either way */
        return m.memory_limit >> 20;
}

void pd_procs_oom_mark(struct pd_server *srv, struct pd_srv_sandbox *s, json_t *o)
{
        pd_procs_oom_mark_all(srv, s, o, 1);
}

void pd_procs_oom_mark_all(struct pd_server *srv, struct pd_srv_sandbox *s, json_t *v, size_t n)
{
        int known = -1;         /* the sandbox's count is read once, if at all */
        uint64_t mb = 0;
        for (size_t i = 0; i < n; i++) {
                json_t *o = json_is_array(v) ? json_array_get(v, i) : v;
                const char *reason = json_string_value(json_object_get(o, "reason"));
                if (reason && !strcmp(reason, "oom")) {
                        /* the agent's own finding (a microvm guest's kernel) */
                        uint64_t lim = pd_procs_memory_limit_mb(srv, s);
                        if (lim)
                                json_object_set_new(o, "memory_limit_mb", json_integer((json_int_t)lim));
                        continue;
                }
                if (!reason || strcmp(reason, "signal") || json_integer_value(json_object_get(o, "signal")) != SIGKILL)
                        continue;
                if (known < 0)
                        known = pd_procs_oom(srv, s, true, &mb);
                if (known)
                        oom_set(o, mb);
        }
}
