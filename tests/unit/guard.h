/* Input buffers that end at an unmapped page, for tests of decoders of
 * untrusted input: a read one byte past the end faults at once (SIGSEGV,
 * a failed test) even without a sanitizer build.
 *
 *   uint8_t *p = guarded_copy(data, len);   p[len] is the first unmapped byte
 *   ...
 *   guarded_free(p, len);
 */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t guard_span(size_t len, size_t *page)
{
        *page = (size_t)sysconf(_SC_PAGESIZE);
        return (len + *page - 1) / *page * *page + *page;
}

__attribute__((unused)) static uint8_t *guarded_copy(const void *data, size_t len)
{
        size_t page, span = guard_span(len, &page);
        uint8_t *base = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED || mprotect(base + span - page, page, PROT_NONE) < 0) {
                perror("guarded_copy");
                exit(99);
        }
        uint8_t *p = base + span - page - len;
        if (len)
                memcpy(p, data, len);
        return p;
}

__attribute__((unused)) static void guarded_free(uint8_t *p, size_t len)
{
        size_t page, span = guard_span(len, &page);
        munmap(p + len + page - span, span);
}
