/* Client verbs split across remote*.c; each returns an exit status
 * (remote_http.h). argv[0] is the verb; --url/--key are already taken out. */
#pragma once
#include "cli/remote_http.h"

int pd_remote_exec(const struct pd_rc *rc, int argc, char **argv);
int pd_remote_logs(const struct pd_rc *rc, int argc, char **argv);
int pd_remote_cp(const struct pd_rc *rc, int argc, char **argv);
int pd_remote_port(const struct pd_rc *rc, int argc, char **argv);
/* snapshot ls | rm NAME... (remote_snapshot.c); is_admin: argv names one. */
bool pd_remote_snapshot_is_admin(int argc, char **argv);
int pd_remote_snapshot_admin(const struct pd_rc *rc, int argc, char **argv);
/* cp -r (remote_cp_tar.c): sandbox directory src to a local directory or
 * "-" (a tar stream on stdout); a local directory or "-" (a tar stream on
 * stdin) into the sandbox's dst (dst_is_dir: an existing directory there,
 * which receives src under its own name). */
int pd_remote_cp_tar_out(const struct pd_rc *rc, const char *id, const char *src, const char *dst);
int pd_remote_cp_tar_in(const struct pd_rc *rc, const char *src, const char *id, const char *dst, bool dst_is_dir);

/* "paddock VERB: unknown option" / missing operand: print, return PD_RC_USAGE. */
int pd_remote_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An id operand: PD_RC_USAGE after a message if it is not [a-z0-9]{20}. */
int pd_remote_check_id(const char *verb, const char *id);
/* DELETE path_fmt (one %s: the name) for each name, in order: a name check
 * refuses (nonzero: it said why) go on to the next; a success prints
 * done_fmt (one %s); returns the first failure's code, or at once
 * PD_RC_UNREACHABLE. `paddock kill`, `paddock snapshot rm`. */
int pd_remote_delete_each(const struct pd_rc *rc, const char *verb, const char *path_fmt, const char *done_fmt,
                          int (*check)(const char *verb, const char *name), int n, char **names);
