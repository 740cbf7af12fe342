/* libFuzzer target: the agent protocol's frame and attribute decoders
 * (src/proto/frame.c, msg.c, conn.c) on bytes a peer sends. The host reads
 * frames from an agent inside a sandbox, so every byte here is hostile.
 *
 * The input is the byte stream itself: it goes through a socketpair into a
 * pd_conn, frames come out of pd_conn_next exactly as the server and
 * `paddock run` read them, and every payload is walked as an attribute
 * list (nested PROC/ENTRY lists too) with the typed views. A list that
 * walks cleanly is re-encoded with pd_msg_put and must read back the same. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/conn.h"
#include "proto/msg.h"
#include "proto/proto.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static void walk(const uint8_t *p, size_t len, int depth)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        struct pd_msg copy;
        pd_msg_init(&copy);
        pd_msg_iter_init(&it, p, len);
        size_t n = 0;
        while (pd_msg_next(&it, &a)) {
                CHECK(a.data >= p && a.data + a.len <= p + len);
                uint32_t u32;
                uint64_t u64;
                char s[64];
                (void)pd_attr_u32(&a, &u32);
                (void)pd_attr_u64(&a, &u64);
                if (pd_attr_str(&a, s, sizeof s))
                        CHECK(strlen(s) == a.len);
                free(pd_attr_strdup(&a));
                if ((a.tag == PD_A_PROC || a.tag == PD_A_ENTRY) && depth < 4)
                        walk(a.data, a.len, depth + 1);
                pd_msg_put(&copy, a.tag, a.data, a.len);
                n++;
        }
        if (!it.error && !copy.failed) {
                /* what was read writes back to the same attributes */
                struct pd_msg_iter i2;
                struct pd_attr b;
                size_t m = 0;
                pd_msg_iter_init(&it, p, len);
                pd_msg_iter_init(&i2, copy.buf, copy.len);
                while (pd_msg_next(&i2, &b)) {
                        CHECK(pd_msg_next(&it, &a));
                        CHECK(a.tag == b.tag && a.len == b.len && !memcmp(a.data, b.data, a.len));
                        m++;
                }
                CHECK(!i2.error && m == n);
        }
        pd_msg_free(&copy);
        char text[256];
        pd_conn_error_text(p, len, text, sizeof text);
        struct pd_attr f;
        (void)pd_msg_find(p, len, PD_A_MESSAGE, &f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
                abort();
        /* what the socket takes at once (fuzz inputs are small: all of it) */
        ssize_t w = size ? write(sv[1], data, size) : 0;
        (void)w;
        close(sv[1]);
        struct pd_conn c;
        if (pd_conn_init(&c, sv[0]) < 0)
                abort();
        for (;;) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                int r = pd_conn_next(&c, &h, &p);
                if (r == 1) {
                        CHECK(h.len <= PD_FRAME_MAX && pd_frame_type_name(h.type));
                        /* header encode/decode round trip */
                        uint8_t raw[PD_FRAME_HDR_LEN];
                        struct pd_frame_hdr h2;
                        pd_frame_hdr_encode(&h, raw);
                        pd_frame_hdr_decode(raw, &h2);
                        CHECK(!memcmp(&h, &h2, sizeof h));
                        if (h.type != PD_T_DATA && h.type != PD_T_STDIN && h.type != PD_T_OUTPUT &&
                            h.type != PD_T_GAP)
                                walk(p, h.len, 0);
                        continue;
                }
                if (r < 0 || c.eof)
                        break;
                if (pd_conn_fill(&c) < 0)
                        break;
        }
        pd_conn_close(&c);
        return 0;
}
