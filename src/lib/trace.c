#include "lib/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "lib/util.h"

void pd_trace(const char *step)
{
        static int enabled = -1;
        static uint64_t last;
        if (enabled < 0) {
                const char *e = getenv("PADDOCK_TRACE");
                enabled = !e || !*e || *e == '0' ? 0 : strcmp(e, "cpu") == 0 ? 2 : 1;
                last = pd_now_ns();
        }
        if (!enabled)
                return;
        uint64_t now = pd_now_ns();
        if (enabled == 2) {
                /* this process's CPU and page faults so far (a cloned
                 * child starts from 0), and its reaped children's CPU:
                 * bench/start-time.py takes the differences */
                struct rusage self, kids;
                getrusage(RUSAGE_SELF, &self);
                getrusage(RUSAGE_CHILDREN, &kids);
                double cpu = (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec) * 1e3 +
                             (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e3;
                double kcpu = (double)(kids.ru_utime.tv_sec + kids.ru_stime.tv_sec) * 1e3 +
                              (double)(kids.ru_utime.tv_usec + kids.ru_stime.tv_usec) / 1e3;
                fprintf(stderr, "trace: %8.3f ms  %s  [cpu %.3f ms, %ld faults, children %.3f ms]\n",
                        (double)(now - last) / 1e6, step, cpu, self.ru_minflt, kcpu);
        } else {
                fprintf(stderr, "trace: %8.3f ms  %s\n", (double)(now - last) / 1e6, step);
        }
        last = now;
}
