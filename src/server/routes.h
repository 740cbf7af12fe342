/* What paddock serve answers: the route tables and matchers of its parts,
 * registered with the core's router in dispatch order (routes.c). */
#pragma once
#include "server/core/server.h"

int pd_server_routes(struct pd_server *srv, struct pd_error *err);
