/* Unit tests for src/proto/frame.c: the 16-byte frame header every agent
 * connection starts each frame with (docs/protocol.md "Frames"). A peer
 * chooses every byte of it; pd_frame_hdr_check decides, before anything
 * is buffered, whether the length is within the caller's cap and the type
 * is one the protocol has. TAP. */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proto/proto.h"
#include "guard.h"
#include "tap.h"

/* Every frame type, by its C name: a type added to proto.h without a name
 * in frame.c is found by tests/integration/agent/test_proto_header.py,
 * which compares frame.c's switch with the header's enum. */
static const uint16_t known[] = {
        PD_T_HELLO, PD_T_REPLY, PD_T_ERROR, PD_T_LIST, PD_T_SPAWN, PD_T_SIGNAL, PD_T_STDIN_CLOSE,
        PD_T_RESIZE, PD_T_ATTACH, PD_T_DETACH, PD_T_PING, PD_T_FILE_STAT, PD_T_FILE_LIST,
        PD_T_FILE_MKDIR, PD_T_FILE_MOVE, PD_T_FILE_REMOVE, PD_T_FILE_READ, PD_T_FILE_WRITE,
        PD_T_WATCH, PD_T_UNWATCH, PD_T_TUNNEL_OPEN, PD_T_TUNNEL_CLOSE, PD_T_SHUTDOWN, PD_T_DATA,
        PD_T_STDIN, PD_T_OUTPUT, PD_T_GAP, PD_T_EXIT, PD_T_WATCH_EVENT, PD_T_FILE_OPENED,
};
#define N_KNOWN (sizeof known / sizeof known[0])

static bool is_known(uint32_t t)
{
        for (size_t i = 0; i < N_KNOWN; i++)
                if (known[i] == t)
                        return true;
        return false;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;   /* fixed seed */

static uint32_t rnd(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (uint32_t)(rng >> 11);
}

static void test_layout(void)
{
        struct pd_frame_hdr h = { .len = 0x01020304, .type = 0x0506, .flags = 0x0708, .id = 0x090a0b0c,
                                  .aux = 0x0d0e0f10 };
        uint8_t out[PD_FRAME_HDR_LEN];
        memset(out, 0xee, sizeof out);
        pd_frame_hdr_encode(&h, out);
        static const uint8_t want[PD_FRAME_HDR_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
        ok(!memcmp(out, want, sizeof want), "encode: len, type, flags, id, aux, big-endian, 16 bytes");

        uint8_t *g = guarded_copy(want, sizeof want);
        struct pd_frame_hdr d;
        memset(&d, 0xee, sizeof d);
        pd_frame_hdr_decode(g, &d);
        ok(d.len == h.len && d.type == h.type && d.flags == h.flags && d.id == h.id && d.aux == h.aux,
           "decode reads exactly the 16 bytes back (input ends at a guard page)");
        guarded_free(g, sizeof want);
}

static void test_check(void)
{
        bool all = true, names = true;
        for (size_t i = 0; i < N_KNOWN; i++) {
                struct pd_frame_hdr h = { .len = 0, .type = known[i] };
                if (pd_frame_hdr_check(&h, PD_FRAME_MAX) != 0)
                        all = false;
                const char *n = pd_frame_type_name(known[i]);
                if (!n || !*n)
                        names = false;
                for (size_t j = 0; j < i && n; j++) {
                        const char *o = pd_frame_type_name(known[j]);
                        if (o && !strcmp(o, n))
                                names = false;
                }
        }
        ok(all, "every frame type of proto.h passes the check (%zu types)", N_KNOWN);
        ok(names, "every frame type has its own name");

        bool unknown = true;
        int n_unknown = 0;
        for (uint32_t t = 0; t <= UINT16_MAX; t++) {
                if (is_known(t))
                        continue;
                struct pd_frame_hdr h = { .len = 0, .type = (uint16_t)t };
                if (pd_frame_hdr_check(&h, PD_FRAME_MAX) != -EPROTO || pd_frame_type_name((uint16_t)t))
                        unknown = false;
                n_unknown++;
        }
        ok(unknown, "the other %d values of the type field are refused with EPROTO and have no name", n_unknown);

        struct pd_frame_hdr h = { .type = PD_T_DATA };
        h.len = PD_FRAME_MAX;
        ok(pd_frame_hdr_check(&h, PD_FRAME_MAX) == 0, "len == cap is accepted");
        h.len = PD_FRAME_MAX + 1;
        ok(pd_frame_hdr_check(&h, PD_FRAME_MAX) == -EMSGSIZE, "len == cap + 1 is refused with EMSGSIZE");
        h.len = UINT32_MAX;
        ok(pd_frame_hdr_check(&h, PD_FRAME_MAX) == -EMSGSIZE, "len 2^32-1 is refused");
        h.len = PD_FRAME_PREHELLO_MAX + 1;
        ok(pd_frame_hdr_check(&h, PD_FRAME_PREHELLO_MAX) == -EMSGSIZE &&
                   pd_frame_hdr_check(&h, PD_FRAME_MAX) == 0,
           "the cap is the caller's: 4097 bytes are refused before HELLO, accepted after");
        h.len = 0;
        ok(pd_frame_hdr_check(&h, 0) == 0, "an empty frame passes a cap of 0");
        h.len = PD_FRAME_MAX + 1;
        h.type = 0;
        ok(pd_frame_hdr_check(&h, PD_FRAME_MAX) == -EMSGSIZE,
           "an oversized frame of an unknown type is refused for its size first");
        h = (struct pd_frame_hdr){ .len = 1, .type = PD_T_PING, .flags = 0xffff, .id = UINT32_MAX,
                                   .aux = UINT32_MAX };
        ok(pd_frame_hdr_check(&h, PD_FRAME_MAX) == 0, "flags, id and aux are not the check's business");
}

/* Random headers: decode then check never disagrees with the rule, and
 * encoding a decoded header gives back the same bytes. */
static void test_random(void)
{
        enum { ROUNDS = 20000 };
        bool rule = true, back = true;
        int accepted = 0;
        for (int round = 0; round < ROUNDS; round++) {
                uint8_t in[PD_FRAME_HDR_LEN], out[PD_FRAME_HDR_LEN];
                for (size_t i = 0; i < sizeof in; i++)
                        in[i] = (uint8_t)rnd();
                if (round % 2) {        /* half with a known type and a plausible length */
                        uint16_t t = htobe16(known[rnd() % N_KNOWN]);
                        uint32_t l = htobe32(rnd() % (2 * PD_FRAME_MAX));
                        memcpy(in + 4, &t, 2);
                        memcpy(in, &l, 4);
                }
                uint8_t *g = guarded_copy(in, sizeof in);
                struct pd_frame_hdr h;
                pd_frame_hdr_decode(g, &h);
                guarded_free(g, sizeof in);
                uint32_t cap = round % 3 ? PD_FRAME_MAX : PD_FRAME_PREHELLO_MAX;
                int r = pd_frame_hdr_check(&h, cap);
                int want = h.len > cap ? -EMSGSIZE : !is_known(h.type) ? -EPROTO : 0;
                if (r != want)
                        rule = false;
                accepted += r == 0;
                pd_frame_hdr_encode(&h, out);
                if (memcmp(in, out, sizeof in))
                        back = false;
        }
        ok(rule, "%d random headers: 0 exactly when len <= cap and the type is known (%d accepted)", ROUNDS,
           accepted);
        ok(back, "encode(decode(bytes)) == bytes for every random header");
}

int main(void)
{
        test_layout();
        test_check();
        test_random();
        return tap_done();
}
