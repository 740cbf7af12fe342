/* PADDOCK_TRACE=1: print how long each start-up step took, on stderr.
 * PADDOCK_TRACE=cpu: each line also says this process's CPU time and page
 * faults so far, and its reaped children's CPU (bench/start-time.py).
 * Costs one getenv per process when off. */
#pragma once
#include <stdbool.h>

void pd_trace(const char *step);
