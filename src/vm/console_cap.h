/* The cap on a microvm's console log (console_cap.c). */
#pragma once
#include <stdint.h>

#define PD_CONSOLE_LOG_MAX (1u << 20)   /* default cap: 1 MiB */

/* Keep the regular file at path at most max bytes (plus one burst of
 * writes) from a thread of this process, for as long as it runs.
 * 0 or -errno (the file missing or not a regular file). */
int pd_console_cap_start(const char *path, uint64_t max);
