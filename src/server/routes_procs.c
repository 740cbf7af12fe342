/* placeholder: being written */
#include "server.h"
const struct pd_route pd_routes_procs[] = { { 0 } };
