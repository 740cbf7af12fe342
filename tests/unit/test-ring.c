/* Unit tests for the agent's output ring (src/agent/ring.c). TAP output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ring.h"
#include "tap.h"

static void fill(uint8_t *b, size_t n, uint64_t off)
{
        for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t)((off + i) * 7 + ((off + i) >> 8));
}

static int check(const struct pd_ring *r, uint64_t off, size_t n)
{
        uint8_t *got = malloc(n ? n : 1), *want = malloc(n ? n : 1);
        size_t k = pd_ring_read(r, off, got, n);
        fill(want, n, off);
        int good = k == n && memcmp(got, want, n) == 0;
        free(got);
        free(want);
        return good;
}

static void append_pattern(struct pd_ring *r, size_t n)
{
        uint8_t *b = malloc(n);
        fill(b, n, r->end);
        pd_ring_append(r, b, n);
        free(b);
}

/* Fill the ring the way the agent reads a pipe: straight into it. */
static void direct_pattern(struct pd_ring *r, size_t want, size_t take)
{
        struct iovec iov[2];
        int k = pd_ring_reserve(r, want, iov);
        uint64_t off = r->end;
        size_t done = 0;
        for (int i = 0; i < k && done < take; i++) {
                size_t n = iov[i].iov_len < take - done ? iov[i].iov_len : take - done;
                fill(iov[i].iov_base, n, off + done);
                done += n;
        }
        pd_ring_commit(r, done);
}

/* The bytes pd_ring_peek hands out are the ring's own and the right ones. */
static int peek_ok(const struct pd_ring *r, uint64_t off, size_t n, size_t want_got, int want_iov)
{
        struct iovec iov[2];
        size_t got;
        int k = pd_ring_peek(r, off, n, iov, &got);
        if (k != want_iov || got != want_got)
                return 0;
        uint8_t *want = malloc(got ? got : 1);
        fill(want, got, off);
        size_t at = 0;
        int good = 1;
        for (int i = 0; i < k; i++) {
                good &= memcmp(iov[i].iov_base, want + at, iov[i].iov_len) == 0;
                at += iov[i].iov_len;
        }
        free(want);
        return good && at == got;
}

static void test_direct(void)
{
        struct pd_ring r;
        struct iovec iov[2];
        pd_ring_init(&r, 100000);
        ok(pd_ring_reserve(&r, 0, iov) == 0 && r.buf == NULL, "reserving nothing allocates nothing");
        direct_pattern(&r, 50000, 50000);
        ok(r.cap >= 50000 && r.cap <= 100000 && r.end == 50000 && check(&r, 0, 50000),
           "a reservation grows the ring first; committed bytes read back");
        direct_pattern(&r, 65536, 1000);
        ok(r.end == 51000 && r.start == 0 && check(&r, 0, 51000), "a short read commits only what came");
        ok(peek_ok(&r, 100, 500, 500, 1), "peek: in place, one piece");
        ok(peek_ok(&r, 50000, 5000, 1000, 1), "peek: clamped to the end");
        struct iovec p[2];
        size_t got;
        ok(pd_ring_peek(&r, 51000, 10, p, &got) == 0 && got == 0, "peek at the end: nothing");
        direct_pattern(&r, 1u << 20, 1u << 20);
        ok(r.cap == 100000 && r.end == 151000 && r.start == 51000 && check(&r, 51000, 100000),
           "a reservation past the cap keeps the newest cap bytes");
        direct_pattern(&r, 30000, 30000);
        ok(r.end == 181000 && r.start == 81000 && check(&r, 81000, 100000), "direct fill across the physical wrap");
        ok(peek_ok(&r, 99000, 30000, 30000, 2), "peek across the wrap point: two pieces");
        ok(peek_ok(&r, 81000, 100000, 100000, 2), "peek of everything kept: two pieces");
        ok(pd_ring_peek(&r, 80999, 10, p, &got) == 0, "peek of an evicted offset: nothing");
        for (int i = 0; i < 500; i++) {
                if (i % 2)
                        direct_pattern(&r, 1 + (size_t)(i * 53) % 3000, (size_t)(i * 31) % 2000);
                else
                        append_pattern(&r, 1 + (size_t)(i * 37) % 500);
        }
        ok(r.end - r.start == 100000 && check(&r, r.start, 100000), "direct fills and appends mixed stay consistent");
        pd_ring_free(&r);
}

int main(void)
{
        struct pd_ring r;
        uint8_t buf[64];

        pd_ring_init(&r, 100000);
        ok(r.buf == NULL && r.cap == 0, "idle ring allocates nothing");
        ok(pd_ring_read(&r, 0, buf, sizeof buf) == 0, "empty ring reads nothing");
        append_pattern(&r, 10);
        ok(r.cap == 16384, "first append allocates 16 KiB");
        ok(r.start == 0 && r.end == 10 && check(&r, 0, 10), "append then read from 0");
        ok(check(&r, 3, 7), "read from the middle");
        ok(pd_ring_read(&r, 10, buf, sizeof buf) == 0, "read at the end returns nothing");
        ok(pd_ring_read(&r, 4, buf, 100) == 6, "read is clamped to the end");
        append_pattern(&r, 20000);
        ok(r.cap == 32768 && r.start == 0 && check(&r, 0, 20010), "grows by doubling, keeps bytes");
        append_pattern(&r, 70000);
        ok(r.cap == 100000, "growth stops at the cap");
        ok(r.end == 90010 && r.start == 0 && check(&r, 0, 90010), "nothing evicted below the cap");
        append_pattern(&r, 30000);
        ok(r.end == 120010 && r.start == 20010, "oldest bytes evicted past the cap");
        ok(pd_ring_read(&r, 100, buf, sizeof buf) == 0, "evicted offsets read nothing");
        ok(check(&r, 20010, 100000), "kept bytes intact across the wrap");
        ok(check(&r, 99990, 20), "read across the physical wrap point");
        append_pattern(&r, 250000);
        ok(r.end == 370010 && r.start == 270010 && check(&r, 270010, 100000),
           "append larger than the cap keeps the newest bytes");
        for (int i = 0; i < 1000; i++)
                append_pattern(&r, 1 + (size_t)(i * 37) % 500);
        ok(r.end - r.start == 100000 && check(&r, r.start, 100000), "many small appends stay consistent");
        pd_ring_free(&r);

        pd_ring_init(&r, 1000);
        append_pattern(&r, 600);
        ok(r.cap == 1000, "a cap below 16 KiB is honoured");
        append_pattern(&r, 600);
        ok(r.start == 200 && r.end == 1200 && check(&r, 200, 1000), "odd-sized cap wraps correctly");
        pd_ring_free(&r);

        test_direct();
        return tap_done();
}
