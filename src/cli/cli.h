/* One file per verb; each parses its options, calls the library, formats
 * the result and returns the process exit status. */
#pragma once

#define PD_EXIT_PADDOCK 125     /* paddock's own error (DESIGN §8) */
#define PD_EXIT_CANNOT_EXEC 126
#define PD_EXIT_NOT_FOUND 127
#define PD_EXIT_TIMEOUT 124

int pd_cmd_run(int argc, char **argv);
int pd_cmd_gc(int argc, char **argv);

/* "paddock: <msg>" on stderr. */
void pd_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
