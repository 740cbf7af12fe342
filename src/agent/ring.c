#include "agent/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define RING_MIN (16u << 10)

void pd_ring_init(struct pd_ring *r, size_t max)
{
        memset(r, 0, sizeof *r);
        r->max = max ? max : 1;
}

void pd_ring_free(struct pd_ring *r)
{
        free(r->buf);
        r->buf = NULL;
        r->cap = 0;
}

/* Copy [off, off+n) out of a ring of capacity cap (both halves of a wrap). */
static void copy_out(const uint8_t *buf, size_t cap, uint64_t off, uint8_t *dst, size_t n)
{
        size_t pos = (size_t)(off % cap);
        size_t first = n < cap - pos ? n : cap - pos;
        memcpy(dst, buf + pos, first);
        memcpy(dst + first, buf, n - first);
}

static void copy_in(uint8_t *buf, size_t cap, uint64_t off, const uint8_t *src, size_t n)
{
        size_t pos = (size_t)(off % cap);
        size_t first = n < cap - pos ? n : cap - pos;
        memcpy(buf + pos, src, first);
        memcpy(buf, src + first, n - first);
}

static int ring_grow(struct pd_ring *r, size_t need)
{
        size_t cap = r->cap ? r->cap : RING_MIN;
        while (cap < need && cap < r->max)
                cap = cap > r->max / 2 ? r->max : cap * 2;
        if (cap > r->max)
                cap = r->max;
        if (cap <= r->cap)
                return 0;
        uint8_t *nb = malloc(cap);
        if (!nb)
                return -ENOMEM;
        size_t used = (size_t)(r->end - r->start);
        if (used) {
                /* re-place the kept bytes at their new positions (o % cap) */
                uint8_t *tmp = malloc(used);
                if (!tmp) {
                        free(nb);
                        return -ENOMEM;
                }
                copy_out(r->buf, r->cap, r->start, tmp, used);
                copy_in(nb, cap, r->start, tmp, used);
                free(tmp);
        }
        free(r->buf);
        r->buf = nb;
        r->cap = cap;
        return 0;
}

int pd_ring_append(struct pd_ring *r, const void *data, size_t n)
{
        const uint8_t *p = data;
        if (n == 0)
                return 0;
        size_t used = (size_t)(r->end - r->start);
        if (used + n > r->cap && r->cap < r->max) {
                size_t need = used + n < r->max ? used + n : r->max;
                if (ring_grow(r, need) < 0) {
                        if (!r->cap) {
                                r->end += n;
                                r->start = r->end;
                                return -ENOMEM;
                        }
                }
        }
        if (n > r->cap) {
                /* only the newest cap bytes can be kept */
                p += n - r->cap;
                r->end += n - r->cap;
                r->start = r->end;
                n = r->cap;
        }
        copy_in(r->buf, r->cap, r->end, p, n);
        r->end += n;
        if (r->end - r->start > r->cap)
                r->start = r->end - r->cap;
        return 0;
}

size_t pd_ring_read(const struct pd_ring *r, uint64_t off, void *out, size_t n)
{
        if (off < r->start || off >= r->end || !r->cap)
                return 0;
        uint64_t avail = r->end - off;
        if (n > avail)
                n = (size_t)avail;
        copy_out(r->buf, r->cap, off, out, n);
        return n;
}

int pd_ring_reserve(struct pd_ring *r, size_t n, struct iovec iov[2])
{
        if (n > r->max)
                n = r->max;
        size_t used = (size_t)(r->end - r->start);
        if (used + n > r->cap && r->cap < r->max)
                (void)ring_grow(r, used + n < r->max ? used + n : r->max);     /* short: reuse what exists */
        if (!r->cap || !n)
                return 0;
        if (n > r->cap)
                n = r->cap;
        size_t pos = (size_t)(r->end % r->cap);
        size_t first = n < r->cap - pos ? n : r->cap - pos;
        iov[0] = (struct iovec){ .iov_base = r->buf + pos, .iov_len = first };
        if (first == n)
                return 1;
        iov[1] = (struct iovec){ .iov_base = r->buf, .iov_len = n - first };
        return 2;
}

void pd_ring_commit(struct pd_ring *r, size_t n)
{
        r->end += n;
        if (r->end - r->start > r->cap)
                r->start = r->end - r->cap;
}

int pd_ring_peek(const struct pd_ring *r, uint64_t off, size_t n, struct iovec iov[2], size_t *got)
{
        *got = 0;
        if (off < r->start || off >= r->end || !r->cap || !n)
                return 0;
        if (n > r->end - off)
                n = (size_t)(r->end - off);
        size_t pos = (size_t)(off % r->cap);
        size_t first = n < r->cap - pos ? n : r->cap - pos;
        *got = n;
        iov[0] = (struct iovec){ .iov_base = r->buf + pos, .iov_len = first };
        if (first == n)
                return 1;
        iov[1] = (struct iovec){ .iov_base = r->buf, .iov_len = n - first };
        return 2;
}
