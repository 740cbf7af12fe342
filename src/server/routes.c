/* The server assembled: the one place that knows core/, api/ and e2b/
 * together. Order matters for the matchers: a sandbox port's Host or path
 * wins over everything, as the service behind it is relayed the request as
 * sent; then E2B's envd, which the SDK reaches on our address with an
 * E2b-Sandbox-Id header whatever the path; then the paths. The tables'
 * patterns do not overlap but for E2B's DELETE /templates/tags, whose table
 * comes before the snapshots' DELETE /templates/{id} (the first match wins). */
#include "server/routes.h"

#include <errno.h>

#include "server/api/api.h"
#include "server/api/ports_cache.h"
#include "server/core/sb_hooks.h"
#include "server/e2b/e2b.h"

int pd_server_routes(struct pd_server *srv, struct pd_error *err)
{
        static const struct {
                const char *group;
                const struct pd_route *table;
        } tables[] = {
                { "native", pd_routes_sandboxes }, { "native", pd_routes_procs },
                { "native", pd_routes_files },     { "e2b", pd_routes_e2b },
                { "native", pd_routes_ports },     { "native", pd_routes_snapshots },
                { "native", pd_routes_network },   { "native", pd_routes_templates },
                { "e2b", pd_routes_e2b_templates }, { "e2b", pd_routes_e2b_tags },
                { "e2b", pd_routes_e2b_snapshots },
                { "console", pd_routes_console },  { "native", pd_routes_console_session },
                { "native", pd_routes_console_pty }, { "native", pd_routes_tiers },
        };
        /* the port relay's kept connections close when their sandbox
         * stops being served (paused, deleted) */
        if (pd_sb_hooks_register(pd_ports_cache_drop_sandbox) < 0)
                return pd_error_setx(err, ENOSPC, "too many sandbox stop hooks");
        if (pd_http_register_matcher(srv, &pd_ports_matcher) < 0 ||
            pd_http_register_matcher(srv, &pd_e2b_envd_matcher) < 0)
                return pd_error_setx(err, ENOSPC, "too many route matchers");
        for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
                if (pd_http_register(srv, tables[i].group, tables[i].table) < 0)
                        return pd_error_setx(err, ENOSPC, "too many route tables");
        return 0;
}
