/* One file per verb; each parses its options, calls the library, formats
 * the result and returns the process exit status. */
#pragma once

#define PD_EXIT_PADDOCK 125     /* paddock's own error (DESIGN §8) */
#define PD_EXIT_CANNOT_EXEC 126
#define PD_EXIT_NOT_FOUND 127
#define PD_EXIT_TIMEOUT 124

int pd_cmd_run(int argc, char **argv);
int pd_cmd_gc(int argc, char **argv);
/* tiers.c: the chooser */
int pd_cmd_tiers(int argc, char **argv);
/* server side (serve.c): run the server; local admin verbs on a state dir */
int pd_cmd_serve(int argc, char **argv);
int pd_cmd_key(int argc, char **argv);
int pd_cmd_template(int argc, char **argv);
/* doctor.c: what this host can do */
int pd_cmd_doctor(int argc, char **argv);
/* client side (remote.c): verbs that talk to a running server over HTTP
 * (PADDOCK_URL, PADDOCK_API_KEY): create ls exec logs cp kill stats audit
 * pause resume timeout. verb is argv[0]. */
int pd_cmd_remote(const char *verb, int argc, char **argv);

/* "paddock: <msg>" on stderr. */
void pd_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
