/* Console sessions (docs/console.md): a browser signs in with an API key
 * once and then carries an opaque random token in an HttpOnly cookie. The
 * token maps, in this process's memory only, to the key; every request
 * re-checks the key against the store, so a revoked key ends its sessions.
 * A restart of paddock serve ends every session (sign in again). */
#pragma once
#include <stdbool.h>

#include "server/core/server.h"

#define PD_SESSION_COOKIE "pd_session"
#define PD_SESSION_TOKEN_LEN 64         /* hex chars */
#define PD_SESSION_TTL_S (12 * 3600)    /* absolute lifetime */
#define PD_SESSION_MAX 256              /* beyond this the oldest is dropped */

/* A new session for the key whose text is key_text (already checked by the
 * caller): its token into token. -ENOMEM/-EIO (no randomness). */
int pd_session_create(const char *key_text, char token[PD_SESSION_TOKEN_LEN + 1], struct pd_error *err);
/* The key of a live session (its text re-checked against the store): true
 * and *key filled, or false (unknown, expired, key revoked). */
bool pd_session_lookup(struct pd_server *srv, const char *token, struct pd_key *key);
/* End a session (no-op if unknown). */
void pd_session_delete(const char *token);
