/* Hostile agent replies against the checks and decoders (src/proto/
 * agent_check.c, the client's LIST decoder in src/proto/client_procs.c and
 * the server's process JSON over it, src/server/api/procs_json.c).
 * The agent lives in the sandbox: whatever it says must end in a clean
 * -EPROTO, never a leak or a crash. TAP. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent_check.h"
#include "proto/msg.h"
#include "server/api/procs.h"
#include "proto/proto.h"
#include "proto/client.h"
#include "tap.h"

/* ---- builders ---- */

static void put_proc(struct pd_msg *m, uint32_t pid, const char *state, const char *tag)
{
        size_t mark = pd_msg_nest_begin(m, PD_A_PROC);
        pd_msg_put_u32(m, PD_A_PID, pid);
        if (state)
                pd_msg_put_str(m, PD_A_STATE, state);
        if (tag)
                pd_msg_put_str(m, PD_A_TAG, tag);
        pd_msg_put_str(m, PD_A_ARG, "/bin/sleep");
        pd_msg_put_str(m, PD_A_ARG, "100");
        pd_msg_put_str(m, PD_A_CWD, "/home/user");
        pd_msg_put_u64(m, PD_A_END_OUT, 5);
        pd_msg_nest_end(m, mark);
}

static void put_entry(struct pd_msg *m, const char *name, uint32_t ftype, bool mtime)
{
        size_t mark = pd_msg_nest_begin(m, PD_A_ENTRY);
        pd_msg_put_str(m, PD_A_NAME, name);
        pd_msg_put_str(m, PD_A_PATH, "/home/user/x");
        pd_msg_put_u32(m, PD_A_FTYPE, ftype);
        pd_msg_put_u64(m, PD_A_SIZE, 12);
        pd_msg_put_u32(m, PD_A_MODE, 0644);
        pd_msg_put_u32(m, PD_A_UID, 1000);
        pd_msg_put_u32(m, PD_A_GID, 1000);
        if (mtime)
                pd_msg_put_u64(m, PD_A_MTIME_NS, 1);
        pd_msg_nest_end(m, mark);
}

static int procs(struct pd_msg *m, char *msg, size_t size)
{
        struct pd_error err = { 0 };
        int r = pd_agent_check_procs(m->buf, m->len, &err);
        snprintf(msg, size, "%s", err.msg);
        return r;
}

/* ---- process lists ---- */

static void test_procs(void)
{
        struct pd_msg m;
        char msg[256];

        pd_msg_init(&m);
        put_proc(&m, 7, "running", "job");
        put_proc(&m, 8, "exited", NULL);
        ok(m.failed == 0 && procs(&m, msg, sizeof msg) == 0, "a real LIST reply passes");

        put_proc(&m, 7, "running", NULL);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "process 7 listed twice"), "a pid listed twice");
        pd_msg_free(&m);

        pd_msg_init(&m);
        size_t mark = pd_msg_nest_begin(&m, PD_A_PROC);
        pd_msg_put_str(&m, PD_A_STATE, "running");
        pd_msg_nest_end(&m, mark);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "without PID"), "a process without a pid");
        pd_msg_free(&m);

        pd_msg_init(&m);
        put_proc(&m, 0, "running", NULL);
        ok(procs(&m, msg, sizeof msg) == -EPROTO, "pid 0");
        pd_msg_free(&m);

        pd_msg_init(&m);
        put_proc(&m, 9, NULL, NULL);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "without STATE"), "a process without a state");
        pd_msg_free(&m);

        pd_msg_init(&m);
        put_proc(&m, 9, "zombie", NULL);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "unknown state"), "a state that is not one");
        pd_msg_free(&m);

        pd_msg_init(&m);
        mark = pd_msg_nest_begin(&m, PD_A_PROC);
        pd_msg_put(&m, PD_A_PID, "\0\0\7", 3);
        pd_msg_put_str(&m, PD_A_STATE, "running");
        pd_msg_nest_end(&m, mark);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "PID of 3 bytes"), "a pid of the wrong size");
        pd_msg_free(&m);

        pd_msg_init(&m);
        mark = pd_msg_nest_begin(&m, PD_A_PROC);
        pd_msg_put_u32(&m, PD_A_PID, 3);
        pd_msg_put_u32(&m, PD_A_PID, 4);
        pd_msg_put_str(&m, PD_A_STATE, "running");
        pd_msg_nest_end(&m, mark);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "PID twice"), "two pids in one process");
        pd_msg_free(&m);

        char tag[300];
        memset(tag, 'x', sizeof tag - 1);
        tag[sizeof tag - 1] = '\0';
        pd_msg_init(&m);
        put_proc(&m, 3, "running", tag);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "TAG of 299 bytes"), "a tag over 255 bytes");
        pd_msg_free(&m);

        size_t big = (128u << 10) + 1;
        char *arg = malloc(big + 1);
        memset(arg, 'a', big);
        arg[big] = '\0';
        pd_msg_init(&m);
        mark = pd_msg_nest_begin(&m, PD_A_PROC);
        pd_msg_put_u32(&m, PD_A_PID, 3);
        pd_msg_put_str(&m, PD_A_STATE, "running");
        pd_msg_put_str(&m, PD_A_ARG, arg);
        pd_msg_nest_end(&m, mark);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "ARG of"), "an argument over MAX_ARG_STRLEN");
        pd_msg_free(&m);
        free(arg);

        pd_msg_init(&m);
        mark = pd_msg_nest_begin(&m, PD_A_PROC);
        pd_msg_put_u32(&m, PD_A_PID, 3);
        pd_msg_put_str(&m, PD_A_STATE, "running");
        pd_msg_put(&m, PD_A_CWD, "/tmp\0/etc", 9);
        pd_msg_nest_end(&m, mark);
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "NUL"), "a string with a NUL byte");
        pd_msg_free(&m);

        pd_msg_init(&m);
        for (uint32_t i = 1; i <= PD_AGENT_PROCS_MAX + 1; i++) {
                mark = pd_msg_nest_begin(&m, PD_A_PROC);
                pd_msg_put_u32(&m, PD_A_PID, i);
                pd_msg_put_str(&m, PD_A_STATE, "running");
                pd_msg_nest_end(&m, mark);
        }
        ok(m.failed == 0 && procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "more than 8192"),
           "more processes than the cap");
        pd_msg_free(&m);

        pd_msg_init(&m);
        put_proc(&m, 7, "running", NULL);
        m.len -= 6;     /* cut into the last attribute */
        ok(procs(&m, msg, sizeof msg) == -EPROTO && strstr(msg, "malformed"), "a truncated reply");
        pd_msg_free(&m);

        pd_msg_init(&m);
        mark = pd_msg_nest_begin(&m, PD_A_PROC);
        pd_msg_put_u32(&m, PD_A_PID, 3);
        pd_msg_put_str(&m, PD_A_STATE, "running");
        pd_msg_put_str(&m, 999, "a newer agent's field");
        pd_msg_nest_end(&m, mark);
        ok(procs(&m, msg, sizeof msg) == 0, "an unknown attribute passes (newer agents)");
        pd_msg_free(&m);
}

/* ---- the LIST decoder: refuses, and leaks nothing either way ---- */

static void test_procs_decode(void)
{
        struct pd_msg good, dup;
        pd_msg_init(&good);
        put_proc(&good, 7, "running", "job");
        put_proc(&good, 8, "exited", NULL);
        pd_msg_init(&dup);
        put_proc(&dup, 7, "running", NULL);
        put_proc(&dup, 7, "running", NULL);

        struct pd_proc_info one;
        json_t *all = NULL;
        struct pd_error err = { 0 };
        struct pd_proc_list l;
        int r = pd_proc_list_decode(good.buf, good.len, &l, &err);
        if (r == 0)
                pd_procs_list_json(&l, 7, &one, &all);
        ok(r == 0 && l.n == 2 && l.v[0].tag && !strcmp(l.v[0].tag, "job") && l.v[0].argc == 2 &&
           !strcmp(l.v[0].argv[1], "100") && !strcmp(l.v[0].cwd, "/home/user") && l.v[1].exited && !l.v[1].tag,
           "a real LIST decodes (client)");
        ok(r == 0 && one.found && one.pid == 7 && json_array_size(all) == 2 && one.obj &&
           !strcmp(json_string_value(json_object_get(one.obj, "tag")), "job"), "a real LIST decodes (API JSON)");
        pd_proc_list_free(&l);
        json_decref(one.obj);
        json_decref(all);

        r = pd_proc_list_decode(dup.buf, dup.len, &l, &err);
        ok(r == -EPROTO && l.n == 0 && !l.mem, "a pid listed twice: -EPROTO, nothing decoded");

        size_t before = 0;
        for (int i = 0; i < 3000; i++) {
                if (i == 100)
                        before = mallinfo2().uordblks;
                struct pd_error e = { 0 };
                if (pd_proc_list_decode(dup.buf, dup.len, &l, &e) == 0)
                        pd_procs_list_json(&l, 7, &one, &all);
                pd_proc_list_free(&l);
                if (pd_proc_list_decode(good.buf, good.len, &l, &e) == 0) {
                        pd_procs_list_json(&l, 7, &one, &all);
                        json_decref(one.obj);
                        json_decref(all);
                }
                pd_proc_list_free(&l);
        }
        size_t after = mallinfo2().uordblks;
        ok(after <= before + 4096, "2,900 hostile and good LIST replies decoded: the heap does not grow");
        if (after > before + 4096)
                printf("# heap grew by %zu bytes\n", after - before);
        pd_msg_free(&good);
        pd_msg_free(&dup);
}

/* ---- file entries, watch events ---- */

static int entries(struct pd_msg *m, unsigned min, unsigned max, char *msg, size_t size)
{
        struct pd_error err = { 0 };
        int r = pd_agent_check_entries(m->buf, m->len, min, max, &err);
        snprintf(msg, size, "%s", err.msg);
        return r;
}

static void test_entries(void)
{
        struct pd_msg m;
        char msg[256];
        pd_msg_init(&m);
        put_entry(&m, "x", PD_FT_FILE, true);
        put_entry(&m, "y", PD_FT_DIR, true);
        ok(entries(&m, 0, PD_AGENT_ENTRIES_MAX, msg, sizeof msg) == 0, "a real FILE_LIST reply passes");
        ok(entries(&m, 1, 1, msg, sizeof msg) == -EPROTO && strstr(msg, "more than 1"),
           "two entries where one is expected");
        pd_msg_free(&m);

        pd_msg_init(&m);
        ok(entries(&m, 1, 1, msg, sizeof msg) == -EPROTO && strstr(msg, "no entry"), "no entry where one is expected");
        pd_msg_free(&m);

        pd_msg_init(&m);
        put_entry(&m, "x", PD_FT_FILE, false);
        ok(entries(&m, 1, 1, msg, sizeof msg) == -EPROTO && strstr(msg, "without MTIME_NS"), "an entry without its time");
        pd_msg_free(&m);

        pd_msg_init(&m);
        put_entry(&m, "x", 7, true);
        ok(entries(&m, 1, 1, msg, sizeof msg) == -EPROTO && strstr(msg, "FTYPE 7"), "a file type that is not one");
        pd_msg_free(&m);

        char name[NAME_MAX + 2];
        memset(name, 'n', sizeof name - 1);
        name[sizeof name - 1] = '\0';
        pd_msg_init(&m);
        put_entry(&m, name, PD_FT_FILE, true);
        ok(entries(&m, 1, 1, msg, sizeof msg) == -EPROTO && strstr(msg, "NAME of 256"), "a name over NAME_MAX");
        pd_msg_free(&m);

        pd_msg_init(&m);
        for (unsigned i = 0; i < 3; i++)
                put_entry(&m, "x", PD_FT_FILE, true);
        ok(entries(&m, 0, 2, msg, sizeof msg) == -EPROTO && strstr(msg, "more than 2"), "more entries than the cap");
        pd_msg_free(&m);
}

/* Metadata pairs (META_KEY then META_VAL) in entries, as a hostile agent
 * may send them: out of order, unpaired, too long. */
static void test_entries_meta(void)
{
        struct pd_msg m;
        struct pd_entries es;
        struct pd_error err = { 0 };
        pd_msg_init(&m);
        size_t mark = pd_msg_nest_begin(&m, PD_A_ENTRY);
        pd_msg_put_str(&m, PD_A_NAME, "x");
        pd_msg_put_str(&m, PD_A_PATH, "/x");
        pd_msg_put_u32(&m, PD_A_FTYPE, PD_FT_FILE);
        pd_msg_put_u64(&m, PD_A_SIZE, 1);
        pd_msg_put_u32(&m, PD_A_MODE, 0644);
        pd_msg_put_u32(&m, PD_A_UID, 0);
        pd_msg_put_u32(&m, PD_A_GID, 0);
        pd_msg_put_u64(&m, PD_A_MTIME_NS, 1);
        pd_msg_put_str(&m, PD_A_META_VAL, "orphan value");      /* no key before it: dropped */
        pd_msg_put_str(&m, PD_A_META_KEY, "author");
        pd_msg_put_str(&m, PD_A_META_VAL, "mish");
        pd_msg_put_str(&m, PD_A_META_KEY, "lost");              /* replaced by the next key */
        pd_msg_put_str(&m, PD_A_META_KEY, "tag");
        pd_msg_put_str(&m, PD_A_META_VAL, "t");
        pd_msg_put_str(&m, PD_A_META_VAL, "second value");      /* no key: dropped */
        pd_msg_put_str(&m, PD_A_META_KEY, "dangling");          /* no value: dropped */
        pd_msg_nest_end(&m, mark);
        ok(pd_entries_decode(m.buf, m.len, 1, 1, &es, &err) == 0 && es.n == 1, "an entry with metadata decodes");
        ok(es.n == 1 && es.v[0].n_meta == 2 && !strcmp(es.v[0].meta[0].key, "author") &&
                   !strcmp(es.v[0].meta[0].val, "mish") && !strcmp(es.v[0].meta[1].key, "tag") &&
                   !strcmp(es.v[0].meta[1].val, "t"),
           "only whole pairs are kept, in order");
        pd_entries_free(&es);
        pd_msg_free(&m);

        char big[4098];
        memset(big, 'v', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        pd_msg_init(&m);
        mark = pd_msg_nest_begin(&m, PD_A_ENTRY);
        pd_msg_put_str(&m, PD_A_NAME, "x");
        pd_msg_put_str(&m, PD_A_PATH, "/x");
        pd_msg_put_u32(&m, PD_A_FTYPE, PD_FT_FILE);
        pd_msg_put_u64(&m, PD_A_SIZE, 1);
        pd_msg_put_u32(&m, PD_A_MODE, 0644);
        pd_msg_put_u32(&m, PD_A_UID, 0);
        pd_msg_put_u32(&m, PD_A_GID, 0);
        pd_msg_put_u64(&m, PD_A_MTIME_NS, 1);
        pd_msg_put_str(&m, PD_A_META_KEY, "k");
        pd_msg_put_str(&m, PD_A_META_VAL, big);
        pd_msg_nest_end(&m, mark);
        ok(pd_entries_decode(m.buf, m.len, 1, 1, &es, &err) == -EPROTO && strstr(err.msg, "META_VAL of 4097"),
           "a metadata value over 4096 bytes");
        pd_entries_free(&es);
        pd_msg_free(&m);
}

static void test_watch(void)
{
        struct pd_msg m;
        struct pd_error err = { 0 };
        pd_msg_init(&m);
        pd_msg_put_str(&m, PD_A_NAME, "sub/file.txt");
        pd_msg_put_u32(&m, PD_A_EVENT, PD_WE_WRITE);
        ok(pd_agent_check_watch_event(m.buf, m.len, &err) == 0, "a real WATCH_EVENT passes");
        pd_msg_free(&m);

        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_EVENT, PD_WE_WRITE);
        ok(pd_agent_check_watch_event(m.buf, m.len, &err) == -EPROTO, "a WATCH_EVENT without a name");
        pd_msg_free(&m);

        pd_msg_init(&m);
        pd_msg_put_str(&m, PD_A_NAME, "f");
        pd_msg_put_u32(&m, PD_A_EVENT, 99);
        ok(pd_agent_check_watch_event(m.buf, m.len, &err) == -EPROTO, "an event type that is not one");
        pd_msg_free(&m);

        pd_msg_init(&m);
        pd_msg_put_str(&m, PD_A_NAME, "f");
        pd_msg_put_str(&m, PD_A_NAME, "g");
        pd_msg_put_u32(&m, PD_A_EVENT, PD_WE_WRITE);
        ok(pd_agent_check_watch_event(m.buf, m.len, &err) == -EPROTO && strstr(err.msg, "NAME twice"),
           "two names in one event");
        pd_msg_free(&m);
}

int main(void)
{
        test_procs();
        test_procs_decode();
        test_entries();
        test_entries_meta();
        test_watch();
        return tap_done();
}
