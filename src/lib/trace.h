/* PADDOCK_TRACE=1: print how long each start-up step took, on stderr.
 * Costs one getenv per process when off. */
#pragma once
#include <stdbool.h>

void pd_trace(const char *step);
