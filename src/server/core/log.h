/* The server's log: structured lines on stderr (log.c). Only the edges of
 * the server log (STYLE §6); libraries return errors. */
#pragma once

/* "<RFC3339 ts> <level> <msg>\n" in one write; callers write msg as
 * "words key=value key=value". level: info, warn, error. */
void pd_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
