/* TAP output for the C unit tests (meson runs them with protocol 'tap').
 * One header instead of a copy of ok() in every test file.
 *
 *   ok(cond, "fmt", ...)       one test point; its description is printf-style
 *   tap_skip(desc, why)        one test point that was skipped, with the reason
 *   return tap_done();         at the end of main: the plan "1..N", exit status
 *
 * The plan comes last (TAP allows it), so a test need not count its points
 * in advance. Every line is flushed: several tests fork, and a child must
 * not write its parent's buffered lines a second time.
 *
 * Each unit test is one translation unit, so the counters below are the
 * test's own. */
#pragma once
#include <stdarg.h>
#include <stdio.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3), unused)) static void ok(int cond, const char *fmt, ...)
{
        va_list ap;
        tap_n++;
        if (!cond)
                tap_failed++;
        printf("%sok %d - ", cond ? "" : "not ", tap_n);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
}

__attribute__((unused)) static void tap_skip(const char *desc, const char *why)
{
        printf("ok %d - %s # SKIP %s\n", ++tap_n, desc, why);
        fflush(stdout);
}

/* A note for the reader of the log (TAP ignores it). */
__attribute__((format(printf, 1, 2), unused)) static void tap_diag(const char *fmt, ...)
{
        va_list ap;
        printf("# ");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
}

/* The plan, printed last; main returns this (1 when any point failed). */
__attribute__((unused)) static int tap_done(void)
{
        printf("1..%d\n", tap_n);
        fflush(stdout);
        return tap_failed ? 1 : 0;
}
