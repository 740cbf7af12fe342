/* Output ring: the bytes a process wrote on one stream, addressed by
 * absolute offset from 0. It keeps at most `max` of the newest bytes;
 * memory is allocated lazily and grows by doubling (from 16 KiB), so an
 * idle process costs nothing. */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct pd_ring {
        uint8_t *buf;
        size_t cap;             /* allocated bytes; byte at offset o lives at buf[o % cap] */
        size_t max;             /* capacity limit */
        uint64_t start, end;    /* [start, end) is kept */
};

void pd_ring_init(struct pd_ring *r, size_t max);
void pd_ring_free(struct pd_ring *r);
/* Append n bytes, evicting the oldest if needed. 0 or -ENOMEM (then the
 * offsets still advance, the bytes are lost and reported as a gap). */
int pd_ring_append(struct pd_ring *r, const void *data, size_t n);
/* Copy up to n bytes starting at absolute offset off (clamped to what is
 * kept). Returns the number of bytes copied; 0 if off >= end or off < start. */
size_t pd_ring_read(const struct pd_ring *r, uint64_t off, void *out, size_t n);
static inline uint64_t pd_ring_start(const struct pd_ring *r) { return r->start; }
static inline uint64_t pd_ring_end(const struct pd_ring *r) { return r->end; }
