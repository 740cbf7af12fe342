/* Client verbs split across remote*.c; each returns an exit status
 * (remote_http.h). argv[0] is the verb; --url/--key are already taken out. */
#pragma once
#include "cli/remote_http.h"

int pd_remote_exec(const struct pd_rc *rc, int argc, char **argv);
int pd_remote_logs(const struct pd_rc *rc, int argc, char **argv);
int pd_remote_cp(const struct pd_rc *rc, int argc, char **argv);

/* "paddock VERB: unknown option" / missing operand: print, return PD_RC_USAGE. */
int pd_remote_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An id operand: PD_RC_USAGE after a message if it is not [a-z0-9]{20}. */
int pd_remote_check_id(const char *verb, const char *id);
