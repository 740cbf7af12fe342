/* Tokens of the server (tokens.c): E2B's envd access token, the ports'
 * token, URL signatures; all HMACs of the server's secret. */
#pragma once
#include <stdbool.h>

#include "server/core/server.h"

#define PD_TOKEN_LEN 64         /* hex chars */

/* Hex HMAC-SHA256(server secret, label). */
int pd_token(struct pd_server *srv, const char *label, char out[PD_TOKEN_LEN + 1]);
/* A sandbox's port token: the HMAC of "port:<id>"; E2B clients know it as
 * the trafficAccessToken. */
int pd_ports_token(struct pd_server *srv, const char *id, char out[PD_TOKEN_LEN + 1]);
/* Constant-time string equality. */
bool pd_streq_ct(const char *a, const char *b);
