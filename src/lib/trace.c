#include "lib/trace.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/util.h"

void pd_trace(const char *step)
{
        static int enabled = -1;
        static uint64_t last;
        if (enabled < 0) {
                const char *e = getenv("PADDOCK_TRACE");
                enabled = e && *e && *e != '0';
                last = pd_now_ns();
        }
        if (!enabled)
                return;
        uint64_t now = pd_now_ns();
        fprintf(stderr, "trace: %8.3f ms  %s\n", (double)(now - last) / 1e6, step);
        last = now;
}
