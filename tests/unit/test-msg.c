/* Unit tests for src/proto/msg.c, the attribute lists every control frame
 * carries (docs/protocol.md "Frames"). The reader is the first thing that
 * touches what an agent (inside the sandbox, so untrusted) or a host client
 * sends: it must stay inside its input whatever the lengths say, refuse a
 * truncated list, and leave typed values alone when their size is wrong.
 * Inputs are placed right before an unmapped page (guard.h), so a read past
 * the end crashes the test instead of passing unnoticed. TAP. */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "proto/proto.h"
#include "guard.h"
#include "tap.h"

/* ---- helpers ---- */

/* An attribute written by hand (not by the code under test). */
static size_t raw_attr(uint8_t *out, uint16_t tag, uint16_t zero, uint32_t len, const void *data, size_t n)
{
        uint16_t t = htobe16(tag), z = htobe16(zero);
        uint32_t l = htobe32(len);
        memcpy(out, &t, 2);
        memcpy(out + 2, &z, 2);
        memcpy(out + 4, &l, 4);
        if (n)
                memcpy(out + 8, data, n);
        return 8 + n;
}

struct seen {
        int n, error;
        struct pd_attr a[64];
};

/* Walk a payload (copied before a guard page); every attribute must lie
 * inside it. The attributes kept in *s point into `payload` itself (the
 * copy is gone when walk returns), so a nested list can be walked next. */
static bool walk(const void *payload, size_t len, struct seen *s)
{
        uint8_t *p = guarded_copy(payload, len);
        struct pd_msg_iter it;
        struct pd_attr a;
        bool inside = true;
        memset(s, 0, sizeof *s);
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                if (a.data < p || a.data + a.len > p + len)
                        inside = false;
                if (s->n < 64) {
                        s->a[s->n] = a;
                        s->a[s->n].data = (const uint8_t *)payload + (a.data - p);
                }
                s->n++;
        }
        s->error = it.error;
        /* the iterator never points past its input, and the next call
         * after the end (or an error) stays false */
        if (it.p > it.end || pd_msg_next(&it, &a))
                inside = false;
        guarded_free(p, len);
        return inside;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;   /* fixed seed: every run sees the same inputs */

static uint32_t rnd(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (uint32_t)(rng >> 11);
}

/* ---- the builder ---- */

static void test_build_layout(void)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_PID, 0x01020304);
        pd_msg_put_u64(&m, PD_A_OFFSET, 0x0102030405060708ull);
        pd_msg_put_str(&m, PD_A_PATH, "abcde");
        pd_msg_put(&m, PD_A_TAG, NULL, 0);
        static const uint8_t want[] = {
                0, PD_A_PID, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4,
                0, PD_A_OFFSET, 0, 0, 0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8,
                0, PD_A_PATH, 0, 0, 0, 0, 0, 5, 'a', 'b', 'c', 'd', 'e', 0, 0, 0,
                0, PD_A_TAG, 0, 0, 0, 0, 0, 0,
        };
        ok(m.failed == 0 && m.len == sizeof want && !memcmp(m.buf, want, sizeof want),
           "u32, u64, string and empty attributes: big-endian {tag, 0, len}, data, zero padding to 4");
        pd_msg_free(&m);

        bool pads = true;
        for (size_t n = 0; n < 12; n++) {
                uint8_t data[12];
                memset(data, 0xff, sizeof data);
                pd_msg_init(&m);
                pd_msg_put(&m, 7, data, n);
                size_t padded = (n + 3) / 4 * 4;
                if (m.len != 8 + padded)
                        pads = false;
                for (size_t i = 8 + n; i < m.len; i++)
                        if (m.buf[i] != 0)
                                pads = false;
                pd_msg_free(&m);
        }
        ok(pads, "lengths 0..11 pad to a multiple of 4 with zero bytes");
}

static void test_build_nested(void)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_VERSION, 1);
        size_t outer = pd_msg_nest_begin(&m, PD_A_PROC);
        pd_msg_put_u32(&m, PD_A_PID, 7);
        size_t inner = pd_msg_nest_begin(&m, PD_A_ENTRY);
        pd_msg_put_str(&m, PD_A_NAME, "x");
        pd_msg_nest_end(&m, inner);
        pd_msg_put_str(&m, PD_A_STATE, "running");
        pd_msg_nest_end(&m, outer);
        pd_msg_put_u32(&m, PD_A_PID, 9);

        struct seen top, mid, low;
        bool in = walk(m.buf, m.len, &top);
        ok(in && top.error == 0 && top.n == 3 && top.a[1].tag == PD_A_PROC && top.a[1].len == 8 + 4 + 8 + 8 + 4 + 8 + 8,
           "a nested list's length is patched to its contents (3 attributes at the top)");
        in = top.n == 3 && walk(top.a[1].data, top.a[1].len, &mid);
        ok(in && mid.error == 0 && mid.n == 3 && mid.a[0].tag == PD_A_PID && mid.a[1].tag == PD_A_ENTRY &&
                   mid.a[2].tag == PD_A_STATE,
           "the nested list decodes on its own: PID, ENTRY, STATE");
        in = mid.n == 3 && walk(mid.a[1].data, mid.a[1].len, &low);
        char name[8] = "";
        ok(in && low.error == 0 && low.n == 1 && pd_attr_str(&low.a[0], name, sizeof name) && !strcmp(name, "x"),
           "a list two levels deep decodes");
        uint32_t v = 0;
        ok(top.n == 3 && pd_attr_u32(&top.a[2], &v) && v == 9, "the attribute after a nested list is intact");
        pd_msg_free(&m);

        pd_msg_init(&m);
        size_t empty = pd_msg_nest_begin(&m, PD_A_PROC);
        pd_msg_nest_end(&m, empty);
        in = walk(m.buf, m.len, &top);
        ok(in && top.n == 1 && top.a[0].len == 0 && m.len == 8, "an empty nested list is 8 bytes of header");
        pd_msg_free(&m);
}

static void test_build_cap(void)
{
        struct pd_msg m;
        pd_msg_init(&m);
        uint8_t *big = calloc(1, PD_FRAME_MAX);
        if (!big) {
                ok(0, "calloc");
                return;
        }
        ok(pd_msg_put(&m, 1, big, PD_FRAME_MAX - 8) == 0 && m.len == PD_FRAME_MAX,
           "an attribute filling PD_FRAME_MAX exactly is accepted");
        ok(pd_msg_put(&m, 2, NULL, 0) == -EMSGSIZE && m.len == PD_FRAME_MAX && m.failed == -EMSGSIZE,
           "one more attribute is refused with EMSGSIZE and nothing is appended");
        ok(pd_msg_put_u32(&m, 3, 1) == -EMSGSIZE && m.len == PD_FRAME_MAX, "the failure is sticky");
        ok(pd_msg_nest_begin(&m, PD_A_PROC) == (size_t)-1 && m.len == PD_FRAME_MAX,
           "a nested list cannot begin after a failure");
        pd_msg_nest_end(&m, (size_t)-1);
        ok(m.len == PD_FRAME_MAX, "ending the refused nested list changes nothing");
        pd_msg_reset(&m);
        ok(m.len == 0 && m.failed == 0 && pd_msg_put_u32(&m, 3, 1) == 0 && m.len == 12, "reset clears the failure");
        pd_msg_reset(&m);
        ok(pd_msg_put(&m, 1, big, PD_FRAME_MAX - 7) == -EMSGSIZE && m.len == 0,
           "an attribute one byte over the cap (after padding) is refused");
        pd_msg_reset(&m);
        ok(pd_msg_put(&m, 1, big, (size_t)UINT32_MAX + 1) == -EMSGSIZE && m.len == 0,
           "a length beyond u32 is refused, not truncated into the header");
        pd_msg_free(&m);
        free(big);
}

/* ---- the reader ---- */

static void test_read_edges(void)
{
        uint8_t b[256] = { 0 };
        struct seen s;
        size_t n;
        uint32_t u = 0x11111111;
        uint64_t q = 0x2222222222222222ull;

        ok(walk(b, 0, &s) && s.n == 0 && s.error == 0, "an empty payload is an empty list");

        bool trunc = true;
        n = raw_attr(b, PD_A_PID, 0, 4, "\0\0\0\1", 4);
        for (size_t cut = 1; cut < 8; cut++)
                if (!walk(b, cut, &s) || s.n != 0 || s.error != -EPROTO)
                        trunc = false;
        ok(trunc, "1 to 7 bytes (a truncated attribute header) are refused with EPROTO");
        trunc = true;
        for (size_t cut = 8; cut < n; cut++)
                if (!walk(b, cut, &s) || s.n != 0 || s.error != -EPROTO)
                        trunc = false;
        ok(trunc, "an attribute whose data is cut short is refused");

        n = raw_attr(b, PD_A_PID, 0, 4, "\0\0\0\1", 4);
        n += raw_attr(b + n, PD_A_NAME, 0, 1000, "abc", 3);
        ok(walk(b, n, &s) && s.n == 1 && s.error == -EPROTO && s.a[0].tag == PD_A_PID,
           "a length past the end: the attributes before it are read, then EPROTO");

        static const uint32_t huge[] = { 0xffffffffu, 0xfffffffdu, 0x80000000u, PD_FRAME_MAX + 1 };
        bool refused = true;
        for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
                n = raw_attr(b, PD_A_NAME, 0, huge[i], "abcdefgh", 8);
                if (!walk(b, n, &s) || s.n != 0 || s.error != -EPROTO)
                        refused = false;
        }
        ok(refused, "lengths near 2^32 are refused (no wrap-around in the bounds check)");

        n = raw_attr(b, PD_A_NAME, 0, 3, "abc", 3);     /* last attribute, pad missing */
        ok(walk(b, n, &s) && s.n == 1 && s.error == 0 && s.a[0].len == 3,
           "the last attribute may end without its padding");
        n = raw_attr(b, PD_A_NAME, 0, 3, "abc\0", 4);   /* padded */
        n += raw_attr(b + n, PD_A_PID, 0, 4, "\0\0\0\7", 4);
        ok(walk(b, n, &s) && s.n == 2 && s.error == 0 && pd_attr_u32(&s.a[1], &u) && u == 7,
           "padding is skipped: the next attribute starts at the 4-byte boundary");
        n = raw_attr(b, PD_A_NAME, 0, 3, "abc", 3);
        n += raw_attr(b + n, PD_A_PID, 0, 4, "\0\0\0\7", 4);
        ok(walk(b, n, &s) && s.n == 1 && s.error == -EPROTO,
           "a missing pad in the middle shifts the next header by one byte, which is then refused");

        n = raw_attr(b, 0xbeef, 0, 2, "zz\0\0", 4);
        n += raw_attr(b + n, 0, 0, 0, NULL, 0);
        n += raw_attr(b + n, PD_A_PID, 0, 4, "\0\0\0\5", 4);
        struct pd_attr a;
        ok(walk(b, n, &s) && s.n == 3 && s.error == 0 && s.a[0].tag == 0xbeef && s.a[1].tag == 0 &&
                   pd_msg_find(b, n, PD_A_PID, &a) && pd_attr_u32(&a, &u) && u == 5,
           "unknown tags (0xbeef, 0) are returned to the caller and skipped by find");
        n = raw_attr(b, PD_A_PID, 0xffff, 4, "\0\0\0\5", 4);
        ok(walk(b, n, &s) && s.n == 1 && s.error == 0, "the reserved u16 is not checked (tolerant reader)");

        n = raw_attr(b, PD_A_PID, 0, 4, "\0\0\0\1", 4);
        n += raw_attr(b + n, PD_A_PID, 0, 4, "\0\0\0\2", 4);
        ok(pd_msg_find(b, n, PD_A_PID, &a) && pd_attr_u32(&a, &u) && u == 1, "find returns the first of repeats");
        ok(!pd_msg_find(b, n, PD_A_NAME, &a), "find of an absent tag is false");
        n = raw_attr(b, PD_A_TAG, 0, 1000, "x", 1);
        ok(!pd_msg_find(b, n, PD_A_TAG, &a), "find does not return a malformed attribute");

        /* typed views */
        uint8_t raw9[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
        bool sizes = true;
        for (uint32_t len = 0; len <= 9; len++) {
                struct pd_attr t = { .tag = 1, .len = len, .data = raw9 };
                u = 0x11111111;
                q = 0x2222222222222222ull;
                bool r32 = pd_attr_u32(&t, &u), r64 = pd_attr_u64(&t, &q);
                if (r32 != (len == 4) || (!r32 && u != 0x11111111) || (r32 && u != 0x01020304))
                        sizes = false;
                if (r64 != (len == 8) || (!r64 && q != 0x2222222222222222ull) ||
                    (r64 && q != 0x0102030405060708ull))
                        sizes = false;
        }
        ok(sizes, "u32 and u64 views accept exactly 4 and 8 bytes and leave the output alone otherwise");
}

static void test_strings(void)
{
        char out[8];
        struct pd_attr a = { .tag = PD_A_NAME, .len = 7, .data = (const uint8_t *)"1234567" };
        ok(pd_attr_str(&a, out, sizeof out) && !strcmp(out, "1234567"), "a string of size-1 bytes fits");
        memcpy(out, "XXXXXXX", 8);
        a.data = (const uint8_t *)"12345678";
        a.len = 8;
        ok(!pd_attr_str(&a, out, sizeof out) && !strcmp(out, "XXXXXXX"),
           "a string of size bytes (no room for NUL) is refused; the buffer is untouched");
        a.data = (const uint8_t *)"ab\0cd";
        a.len = 5;
        ok(!pd_attr_str(&a, out, sizeof out) && !strcmp(out, "XXXXXXX"), "an embedded NUL is refused");
        a.len = 3;
        ok(!pd_attr_str(&a, out, sizeof out), "a trailing NUL inside the length is refused too");
        a.len = 0;
        ok(pd_attr_str(&a, out, sizeof out) && out[0] == '\0', "an empty string is \"\"");
        ok(!pd_attr_str(&a, out, 0), "an output of size 0 takes nothing");

        a.data = (const uint8_t *)"hello";
        a.len = 5;
        char *d = pd_attr_strdup(&a);
        ok(d && !strcmp(d, "hello"), "strdup copies and terminates");
        free(d);
        a.data = (const uint8_t *)"he\0lo";
        ok(pd_attr_strdup(&a) == NULL, "strdup refuses an embedded NUL");
        a.len = 0;
        d = pd_attr_strdup(&a);
        ok(d && d[0] == '\0', "strdup of an empty string is \"\"");
        free(d);
        /* the string sits right before a guard page: no terminator is looked for past len */
        uint8_t *g = guarded_copy("tail", 4);
        a.data = g;
        a.len = 4;
        d = pd_attr_strdup(&a);
        ok(d && !strcmp(d, "tail") && pd_attr_str(&a, out, sizeof out) && !strcmp(out, "tail"),
           "a string ending at the buffer's end is read without looking past it");
        free(d);
        guarded_free(g, 4);
}

static void test_nested_hostile(void)
{
        uint8_t b[128], inner[64];
        struct seen top, in;
        size_t ni = raw_attr(inner, PD_A_PID, 0, 4, "\0\0\0\1", 4);
        ni += raw_attr(inner + ni, PD_A_NAME, 0, 60, "abcd", 4);      /* inner length lies */
        size_t n = raw_attr(b, PD_A_PROC, 0, (uint32_t)ni, inner, ni);
        n += raw_attr(b + n, PD_A_PID, 0, 4, "\0\0\0\2", 4);
        ok(walk(b, n, &top) && top.n == 2 && top.error == 0, "the outer list is well formed");
        ok(walk(top.a[0].data, top.a[0].len, &in) && in.n == 1 && in.error == -EPROTO,
           "an inner length beyond the nested list is refused, not read from the outer list");

        n = raw_attr(b, PD_A_PROC, 0, 40, inner, 8);    /* nested list longer than the payload */
        ok(walk(b, n, &top) && top.n == 0 && top.error == -EPROTO, "a nested list past the end is refused whole");
}

/* ---- random input ---- */

/* Random bytes and mutated valid lists: the reader returns, stays inside
 * its input, and every view agrees with the attribute's length. */
static void test_random(void)
{
        enum { ROUNDS = 4000 };
        uint8_t buf[512];
        bool inside = true, views = true, ends = true;
        int errors = 0;
        for (int round = 0; round < ROUNDS; round++) {
                size_t n;
                if (round % 2) {
                        n = rnd() % sizeof buf;
                        for (size_t i = 0; i < n; i++)
                                buf[i] = (uint8_t)rnd();
                } else {
                        struct pd_msg m;
                        pd_msg_init(&m);
                        int k = 1 + (int)(rnd() % 8);
                        for (int i = 0; i < k; i++) {
                                uint8_t d[40];
                                size_t dl = rnd() % sizeof d;
                                for (size_t j = 0; j < dl; j++)
                                        d[j] = (uint8_t)rnd();
                                pd_msg_put(&m, (uint16_t)rnd(), d, dl);
                        }
                        n = m.len < sizeof buf ? m.len : sizeof buf;
                        memcpy(buf, m.buf, n);
                        pd_msg_free(&m);
                        int flips = 1 + (int)(rnd() % 4);
                        for (int i = 0; i < flips && n; i++) {
                                size_t at = rnd() % n;
                                if (rnd() % 2)
                                        buf[at] ^= (uint8_t)(1u << (rnd() % 8));
                                else if (at + 8 <= n)   /* a length field written anywhere */
                                        memcpy(buf + at, (uint32_t[]){ htobe32(rnd()) }, 4);
                        }
                        if (n && rnd() % 3 == 0)
                                n -= rnd() % n;         /* truncated */
                }
                uint8_t *p = guarded_copy(buf, n);
                struct pd_msg_iter it;
                struct pd_attr a;
                size_t steps = 0;
                pd_msg_iter_init(&it, p, n);
                while (pd_msg_next(&it, &a)) {
                        steps++;
                        if (a.data < p + 8 || a.data + a.len > p + n)
                                inside = false;
                        uint32_t u;
                        uint64_t q;
                        char s[64];
                        if (pd_attr_u32(&a, &u) != (a.len == 4) || pd_attr_u64(&a, &q) != (a.len == 8))
                                views = false;
                        if (pd_attr_str(&a, s, sizeof s) &&
                            (a.len >= sizeof s || strlen(s) != a.len || memcmp(s, a.data, a.len)))
                                views = false;
                        struct pd_msg_iter sub;     /* any attribute may be read as a nested list */
                        struct pd_attr b;
                        pd_msg_iter_init(&sub, a.data, a.len);
                        while (pd_msg_next(&sub, &b))
                                if (b.data < a.data || b.data + b.len > a.data + a.len)
                                        inside = false;
                }
                if (steps > n / 8 + 1 || (it.error != 0 && it.error != -EPROTO) || it.p > it.end ||
                    pd_msg_next(&it, &a))
                        ends = false;
                errors += it.error != 0;
                guarded_free(p, n);
        }
        ok(inside, "%d random and mutated lists: every attribute (and nested attribute) lies inside the input",
           ROUNDS);
        ok(views, "typed views agree with the attribute length on every random attribute");
        ok(ends, "iteration ends within len/8+1 steps, inside the input, with error 0 or EPROTO, and stays ended");
        ok(errors > ROUNDS / 10 && errors < ROUNDS, "the inputs exercise both outcomes (%d of %d refused)", errors,
           ROUNDS);
}

/* A random tree of attributes built with the builder reads back the same. */
struct node {
        uint16_t tag;
        int nkids;              /* -1: a leaf with data */
        uint8_t data[24];
        size_t len;
        struct node *kids;
};

static void gen(struct node *n, int depth)
{
        n->tag = (uint16_t)rnd();
        if (depth < 3 && rnd() % 3 == 0) {
                n->nkids = (int)(rnd() % 5);
                n->kids = calloc((size_t)n->nkids + 1, sizeof *n->kids);
                for (int i = 0; i < n->nkids; i++)
                        gen(&n->kids[i], depth + 1);
        } else {
                n->nkids = -1;
                n->len = rnd() % sizeof n->data;
                for (size_t i = 0; i < n->len; i++)
                        n->data[i] = (uint8_t)rnd();
        }
}

static void put(struct pd_msg *m, const struct node *n)
{
        if (n->nkids < 0) {
                pd_msg_put(m, n->tag, n->data, n->len);
                return;
        }
        size_t mark = pd_msg_nest_begin(m, n->tag);
        for (int i = 0; i < n->nkids; i++)
                put(m, &n->kids[i]);
        pd_msg_nest_end(m, mark);
}

static bool same(const uint8_t *p, size_t len, const struct node *kids, int nkids)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        int i = 0;
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                if (i >= nkids || a.tag != kids[i].tag)
                        return false;
                if (kids[i].nkids < 0) {
                        if (a.len != kids[i].len || memcmp(a.data, kids[i].data, a.len))
                                return false;
                } else if (!same(a.data, a.len, kids[i].kids, kids[i].nkids)) {
                        return false;
                }
                i++;
        }
        return it.error == 0 && i == nkids;
}

static void drop(struct node *n)
{
        for (int i = 0; i < n->nkids; i++)
                drop(&n->kids[i]);
        free(n->kids);
}

static void test_roundtrip(void)
{
        enum { ROUNDS = 2000 };
        bool all = true;
        for (int round = 0; round < ROUNDS; round++) {
                struct node root = { .nkids = (int)(rnd() % 6) };
                root.kids = calloc((size_t)root.nkids + 1, sizeof *root.kids);
                for (int i = 0; i < root.nkids; i++)
                        gen(&root.kids[i], 0);
                struct pd_msg m;
                pd_msg_init(&m);
                for (int i = 0; i < root.nkids; i++)
                        put(&m, &root.kids[i]);
                uint8_t *g = guarded_copy(m.buf, m.len);
                if (m.failed || m.len % 4 || !same(g, m.len, root.kids, root.nkids))
                        all = false;
                guarded_free(g, m.len);
                pd_msg_free(&m);
                drop(&root);
        }
        ok(all, "%d random trees (nested up to 4 levels) read back exactly as built", ROUNDS);
}

int main(void)
{
        test_build_layout();
        test_build_nested();
        test_build_cap();
        test_read_edges();
        test_strings();
        test_nested_hostile();
        test_random();
        test_roundtrip();
        return tap_done();
}
