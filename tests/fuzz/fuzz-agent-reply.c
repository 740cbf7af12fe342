/* libFuzzer target: the decoders of what an agent answers (the client's,
 * src/proto/client*.c, and the server's JSON over them). The agent runs
 * inside the sandbox, so code there may own it and answer anything: file
 * ENTRY lists (native and E2B JSON), a process LIST (through pd_procs_list,
 * over a socketpair, as the routes call it), an EXIT, a WATCH_EVENT, an
 * ERROR's message, output bytes turned into JSON text.
 *
 * The input is one attribute payload, handed to each decoder. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/agent_check.h"
#include "server/e2b/e2b.h"
#include "server/api/procs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > 65536)
                return 0;
        /* an exact-size copy: ASan sees any read past the end */
        uint8_t *p = malloc(size ? size : 1);
        if (!p)
                return 0;
        memcpy(p, data, size);

        struct pd_error err = { 0 };
        struct pd_entries es;
        if (pd_entries_decode(p, size, 0, PD_AGENT_ENTRIES_MAX, &es, &err) == 0) {
                for (size_t i = 0; i < es.n; i++) {
                        json_decref(pd_e2b_entry_json(&es.v[i]));
                        json_t *o = json_object();
                        pd_route_entry_names(&es.v[i], o, "link_target");
                        json_decref(o);
                }
        }
        pd_entries_free(&es);
        struct pd_exit x;
        pd_exit_decode(p, size, &x);
        json_decref(pd_procs_exit_json(&x));
        struct pd_watch_ev ev;
        (void)pd_watch_event_decode(p, size, &ev, &err);
        json_decref(pd_procs_text_json((const char *)p, size));
        char msg[256];
        pd_conn_error_text(p, size, msg, sizeof msg);

        /* LIST: the REPLY waits in the socket before the request is sent */
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        struct pd_client c;
        pd_client_init(&c);
        if (pd_conn_init(&c.conn, sv[0]) < 0)
                abort();
        c.conn.next_id = 7;
        uint8_t hdr[PD_FRAME_HDR_LEN];
        struct pd_frame_hdr h = { .len = (uint32_t)size, .type = PD_T_REPLY, .id = 7 };
        pd_frame_hdr_encode(&h, hdr);
        if (write(sv[1], hdr, sizeof hdr) != (ssize_t)sizeof hdr || (size && write(sv[1], p, size) != (ssize_t)size))
                abort();
        struct pd_proc_info one;
        json_t *all = NULL;
        if (pd_procs_list(&c, 2, &one, &all, &err) == 0 && one.found)
                json_decref(one.obj);
        json_decref(all);
        pd_client_close(&c);
        close(sv[1]);
        free(p);
        return 0;
}
