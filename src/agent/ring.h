/* Output ring: the bytes a process wrote on one stream, addressed by
 * absolute offset from 0. It keeps at most `max` of the newest bytes;
 * memory is allocated lazily and grows by doubling (from 16 KiB), so an
 * idle process costs nothing. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

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

/* Direct fill (the caller reads straight into the ring, no bounce buffer):
 * room for up to n new bytes at the end, growing toward max first, as at
 * most two iovecs (the second after the wrap). Returns how many iovecs (0:
 * no memory at all; append through pd_ring_append then). Writing into them
 * overwrites the oldest kept bytes when the ring is full; pd_ring_commit
 * then drops those from the kept range. */
int pd_ring_reserve(struct pd_ring *r, size_t n, struct iovec iov[2]);
/* n bytes (at most the reserved room) were written at the end. */
void pd_ring_commit(struct pd_ring *r, size_t n);
/* The kept bytes [off, off+n) (clamped to the end) in place, as at most two
 * iovecs, valid until the ring changes. Returns how many; *got: bytes. */
int pd_ring_peek(const struct pd_ring *r, uint64_t off, size_t n, struct iovec iov[2], size_t *got);
