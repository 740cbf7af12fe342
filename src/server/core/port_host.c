/* The domain of port URLs (port_host.h). */
#include "server/core/port_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The port the server listens on: what the daemon bound (--listen with
 * port 0 included), else what the setting says; 0 if neither is known. */
static unsigned listen_port(struct pd_server *srv)
{
        if (srv->mhd) {
                const union MHD_DaemonInfo *i = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
                if (i && i->port)
                        return i->port;
        }
        const char *a = srv->cfg.listen_addr, *c = a ? strrchr(a, ':') : NULL;
        if (!c)
                return 0;
        char *end;
        unsigned long p = strtoul(c + 1, &end, 10);
        return *end == '\0' && p > 0 && p <= 65535 ? (unsigned)p : 0;
}

void pd_ports_domain(struct pd_server *srv, char out[PD_PORTS_DOMAIN_MAX])
{
        const char *d = srv->cfg.domain ? srv->cfg.domain : "localhost";
        unsigned port = strchr(d, ':') ? 0 : listen_port(srv);
        if (port)
                snprintf(out, PD_PORTS_DOMAIN_MAX, "%s:%u", d, port);
        else
                snprintf(out, PD_PORTS_DOMAIN_MAX, "%s", d);
}
