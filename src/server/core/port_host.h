/* The names sandbox ports are reached by (docs/api.md, "Ports"):
 * http://<port>-<id>.<domain>, where <domain> is the server's --domain with
 * the server's own port appended when the setting names none, so that the
 * name works as it is from the same machine (E2B's getHost(port) is built
 * from the domain the create answer gives). */
#pragma once
#include <stddef.h>

#include "server/core/server.h"

#define PD_PORTS_DOMAIN_MAX 256

/* The domain of port URLs: "localhost:49982" for the defaults. */
void pd_ports_domain(struct pd_server *srv, char out[PD_PORTS_DOMAIN_MAX]);

/* The code interpreter's port inside a sandbox (E2B's 49999): whoever
 * reaches it runs code, so the port relay opens it only with the
 * sandbox's access token (E2B's envdAccessToken) or its owner's API key,
 * never with the port token alone or because the ports are public. */
#define PD_PORTS_CODE_PORT 49999u
