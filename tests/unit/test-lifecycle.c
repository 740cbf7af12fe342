/* The server's lifecycle table (src/server/core/lifecycle_table.c): every
 * (state, event) pair, checked against the transitions written out again
 * below. An allowed one persists, publishes and audits as declared, in that
 * order; an impossible one is refused naming the state and touches nothing.
 * TAP. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "server/core/lifecycle.h"

static int n_test, n_fail;

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(int cond, const char *fmt, ...)
{
        va_list ap;
        n_test++;
        if (!cond)
                n_fail++;
        printf("%sok %d - ", cond ? "" : "not ", n_test);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
}

/* The expected table, independent of the code under test. */
struct want {
        enum pd_sb_state from;
        enum pd_sb_event ev;
        enum pd_sb_state to;
        enum pd_sb_persist persist;
        const char *audit;
};

static const struct want wants[] = {
        { PD_SB_CREATING, PD_EV_CREATED, PD_SB_RUNNING, PD_PERSIST_PUT, "sandbox.create" },
        { PD_SB_CREATING, PD_EV_CREATE_FAILED, PD_SB_DELETED, PD_PERSIST_NONE, NULL },
        { PD_SB_RUNNING, PD_EV_PAUSE, PD_SB_PAUSED, PD_PERSIST_PUT, "sandbox.pause" },
        { PD_SB_RUNNING, PD_EV_PAUSE_DISK, PD_SB_PAUSED_DISK, PD_PERSIST_PUT, "sandbox.pause" },
        { PD_SB_RUNNING, PD_EV_AUTO_PAUSE, PD_SB_PAUSED, PD_PERSIST_PUT, "sandbox.auto_pause" },
        { PD_SB_RUNNING, PD_EV_AUTO_PAUSE_DISK, PD_SB_PAUSED_DISK, PD_PERSIST_PUT, "sandbox.auto_pause" },
        { PD_SB_PAUSED, PD_EV_RESUME, PD_SB_RUNNING, PD_PERSIST_PUT, "sandbox.resume" },
        { PD_SB_PAUSED_DISK, PD_EV_RESUME, PD_SB_RUNNING, PD_PERSIST_PUT, "sandbox.resume" },
        { PD_SB_PAUSED, PD_EV_AUTO_RESUME, PD_SB_RUNNING, PD_PERSIST_PUT, "sandbox.auto_resume" },
        { PD_SB_PAUSED_DISK, PD_EV_AUTO_RESUME, PD_SB_RUNNING, PD_PERSIST_PUT, "sandbox.auto_resume" },
        { PD_SB_RUNNING, PD_EV_SET_PORTS, PD_SB_RUNNING, PD_PERSIST_PUT, "ports.public" },
        { PD_SB_PAUSED, PD_EV_SET_PORTS, PD_SB_PAUSED, PD_PERSIST_PUT, "ports.public" },
        { PD_SB_PAUSED_DISK, PD_EV_SET_PORTS, PD_SB_PAUSED_DISK, PD_PERSIST_PUT, "ports.public" },
        { PD_SB_FAILED, PD_EV_SET_PORTS, PD_SB_FAILED, PD_PERSIST_PUT, "ports.public" },
        { PD_SB_RUNNING, PD_EV_SET_TIMEOUT, PD_SB_RUNNING, PD_PERSIST_PUT, "sandbox.set_timeout" },
        { PD_SB_PAUSED, PD_EV_SET_TIMEOUT, PD_SB_PAUSED, PD_PERSIST_PUT, "sandbox.set_timeout" },
        { PD_SB_PAUSED_DISK, PD_EV_SET_TIMEOUT, PD_SB_PAUSED_DISK, PD_PERSIST_PUT, "sandbox.set_timeout" },
        { PD_SB_FAILED, PD_EV_SET_TIMEOUT, PD_SB_FAILED, PD_PERSIST_PUT, "sandbox.set_timeout" },
        { PD_SB_RUNNING, PD_EV_AGENT_DIED, PD_SB_FAILED, PD_PERSIST_PUT, "sandbox.failed" },
        { PD_SB_PAUSED, PD_EV_AGENT_DIED, PD_SB_FAILED, PD_PERSIST_PUT, "sandbox.failed" },
        { PD_SB_RUNNING, PD_EV_LOST, PD_SB_FAILED, PD_PERSIST_PUT, "sandbox.failed" },
        { PD_SB_PAUSED, PD_EV_LOST, PD_SB_FAILED, PD_PERSIST_PUT, "sandbox.failed" },
        { PD_SB_PAUSED_DISK, PD_EV_LOST, PD_SB_FAILED, PD_PERSIST_PUT, "sandbox.failed" },
        { PD_SB_PAUSED_DISK, PD_EV_REVIVED, PD_SB_PAUSED_DISK, PD_PERSIST_PUT, NULL },
        { PD_SB_RUNNING, PD_EV_DELETE, PD_SB_DELETED, PD_PERSIST_DELETE, "sandbox.delete" },
        { PD_SB_PAUSED, PD_EV_DELETE, PD_SB_DELETED, PD_PERSIST_DELETE, "sandbox.delete" },
        { PD_SB_PAUSED_DISK, PD_EV_DELETE, PD_SB_DELETED, PD_PERSIST_DELETE, "sandbox.delete" },
        { PD_SB_FAILED, PD_EV_DELETE, PD_SB_DELETED, PD_PERSIST_DELETE, "sandbox.delete" },
        { PD_SB_RUNNING, PD_EV_TIMEOUT, PD_SB_DELETED, PD_PERSIST_DELETE, "sandbox.timeout" },
        { PD_SB_PAUSED, PD_EV_TIMEOUT, PD_SB_DELETED, PD_PERSIST_DELETE, "sandbox.timeout" },
        { PD_SB_PAUSED_DISK, PD_EV_TIMEOUT, PD_SB_DELETED, PD_PERSIST_DELETE, "sandbox.timeout" },
        { PD_SB_FAILED, PD_EV_TIMEOUT, PD_SB_DELETED, PD_PERSIST_DELETE, "sandbox.timeout" },
};

static const struct want *find(enum pd_sb_state from, enum pd_sb_event ev)
{
        for (size_t i = 0; i < sizeof wants / sizeof *wants; i++)
                if (wants[i].from == from && wants[i].ev == ev)
                        return &wants[i];
        return NULL;
}

/* ---- effects that record what they were asked to do ---- */

struct rec {
        char log[256];          /* "persist:<state> set:<state> audit:<event> " ... */
        int persist_result;
        int persist_failed;
};

static void logf_(struct rec *r, const char *what, const char *arg)
{
        size_t n = strlen(r->log);
        snprintf(r->log + n, sizeof r->log - n, "%s:%s ", what, arg);
}

static int fx_persist(void *c, enum pd_sb_state to, struct pd_error *err)
{
        struct rec *r = c;
        logf_(r, "persist", pd_sb_state_name(to));
        return r->persist_result < 0 ? pd_error_setx(err, -r->persist_result, "store refused") : 0;
}

static int fx_unpersist(void *c, struct pd_error *err)
{
        struct rec *r = c;
        logf_(r, "unpersist", "-");
        return r->persist_result < 0 ? pd_error_setx(err, -r->persist_result, "store refused") : 0;
}

static void fx_set_state(void *c, enum pd_sb_state to)
{
        logf_(c, "set", pd_sb_state_name(to));
}

static void fx_audit(void *c, const char *event)
{
        logf_(c, "audit", event);
}

static void fx_persist_failed(void *c, const struct pd_error *err)
{
        ((struct rec *)c)->persist_failed++;
}

static const struct pd_sb_effects fx = { fx_persist, fx_unpersist, fx_set_state, fx_audit, fx_persist_failed };

static void expected_log(const struct want *w, char *out, size_t size)
{
        struct rec r = { .log = "" };
        if (w->persist == PD_PERSIST_PUT)
                logf_(&r, "persist", pd_sb_state_name(w->to));
        else if (w->persist == PD_PERSIST_DELETE)
                logf_(&r, "unpersist", "-");
        logf_(&r, "set", pd_sb_state_name(w->to));
        if (w->audit)
                logf_(&r, "audit", w->audit);
        snprintf(out, size, "%s", r.log);
}

static void test_every_pair(void)
{
        for (int s = 0; s < PD_SB__MAX; s++)
                for (int e = 0; e < PD_EV__MAX; e++) {
                        const struct want *w = find(s, e);
                        enum pd_sb_state st = s;
                        struct rec r = { .log = "" };
                        struct pd_error err = { 0 };
                        int rc = pd_sb_apply("sb1", &st, e, &fx, &r, &err);
                        const char *sn = pd_sb_state_name(s), *en = pd_sb_event_name(e);
                        if (w) {
                                char want_log[256];
                                expected_log(w, want_log, sizeof want_log);
                                ok(rc == 0 && st == w->to, "%s + %s -> %s (rc %d, now %s)", sn, en,
                                   pd_sb_state_name(w->to), rc, pd_sb_state_name(st));
                                ok(!strcmp(r.log, want_log), "%s + %s: effects '%s' (want '%s')", sn, en, r.log,
                                   want_log);
                                ok(pd_sb_next("sb1", s, e, NULL) == (int)w->to, "%s + %s: pd_sb_next agrees", sn,
                                   en);
                        } else {
                                int want_rc = s == PD_SB_DELETED || s == PD_SB_CREATING ? -ENOENT : -EBUSY;
                                ok(rc == want_rc && st == (enum pd_sb_state)s && r.log[0] == '\0',
                                   "%s + %s refused (rc %d), nothing done ('%s')", sn, en, rc, r.log);
                                /* the message names the state (or says it is gone) */
                                ok(err.code == -want_rc &&
                                           strstr(err.msg, want_rc == -EBUSY ? sn : "is gone") &&
                                           strstr(err.msg, "sb1"),
                                   "%s + %s: message '%s'", sn, en, err.msg);
                        }
                }
}

static void test_store_failures(void)
{
        /* creating a sandbox whose record cannot be written is undone */
        enum pd_sb_state st = PD_SB_CREATING;
        struct rec r = { .log = "", .persist_result = -EIO };
        struct pd_error err = { 0 };
        int rc = pd_sb_apply("sb2", &st, PD_EV_CREATED, &fx, &r, &err);
        ok(rc == -EIO && st == PD_SB_CREATING && !strcmp(r.log, "persist:running ") && err.code == EIO,
           "created: a failed store write changes nothing (rc %d, '%s')", rc, r.log);
        /* any other transition carries on after saying so */
        st = PD_SB_RUNNING;
        struct rec r2 = { .log = "", .persist_result = -EIO };
        rc = pd_sb_apply("sb2", &st, PD_EV_PAUSE, &fx, &r2, &err);
        ok(rc == 0 && st == PD_SB_PAUSED && r2.persist_failed == 1 &&
                   !strcmp(r2.log, "persist:paused set:paused audit:sandbox.pause "),
           "pause: a failed store write is reported and carried on ('%s')", r2.log);
        st = PD_SB_FAILED;
        struct rec r3 = { .log = "", .persist_result = -EIO };
        rc = pd_sb_apply("sb2", &st, PD_EV_DELETE, &fx, &r3, &err);
        ok(rc == 0 && st == PD_SB_DELETED && r3.persist_failed == 1, "delete: a record that stays is reported");
}

static void test_out_of_range(void)
{
        enum pd_sb_state st = PD_SB_RUNNING;
        struct rec r = { .log = "" };
        struct pd_error err = { 0 };
        ok(pd_sb_apply("sb3", &st, PD_EV__MAX, &fx, &r, &err) == -EINVAL && r.log[0] == '\0',
           "an unknown event is -EINVAL");
        st = PD_SB__MAX;
        ok(pd_sb_apply("sb3", &st, PD_EV_DELETE, &fx, &r, &err) == -EINVAL && r.log[0] == '\0',
           "an unknown state is -EINVAL");
        ok(pd_sb_transition(PD_EV__MAX) == NULL && pd_sb_transition(PD_EV_PAUSE) != NULL, "table lookups");
}

static void test_store_names(void)
{
        ok(!strcmp(pd_sb_state_store_name(PD_SB_RUNNING), "running") &&
                   !strcmp(pd_sb_state_store_name(PD_SB_PAUSED), "paused") &&
                   !strcmp(pd_sb_state_store_name(PD_SB_PAUSED_DISK), "paused") &&
                   !strcmp(pd_sb_state_store_name(PD_SB_FAILED), "failed"),
           "store names are the API's words");
        for (int s = PD_SB_RUNNING; s <= PD_SB_FAILED; s++)
                ok((int)pd_sb_state_from_store(pd_sb_state_store_name(s), s == PD_SB_PAUSED_DISK) == s,
                   "%s survives the store", pd_sb_state_name(s));
        ok(pd_sb_state_from_store("failed", true) == PD_SB_FAILED, "paused_disk only qualifies paused");
        ok(pd_sb_state_from_store("bogus", false) == PD_SB_RUNNING && pd_sb_state_from_store(NULL, false) ==
                   PD_SB_RUNNING, "an unknown word is adopted as running (and checked)");
}

static void test_ops(void)
{
        static const struct {
                enum pd_sb_op op;
                unsigned allowed;       /* states */
        } t[] = {
                { PD_OP_AGENT, 1u << PD_SB_RUNNING },
                { PD_OP_PORTS, 1u << PD_SB_RUNNING },
                { PD_OP_SNAPSHOT, 1u << PD_SB_RUNNING | 1u << PD_SB_PAUSED },
                { PD_OP_STATS, 1u << PD_SB_RUNNING | 1u << PD_SB_PAUSED | 1u << PD_SB_PAUSED_DISK },
        };
        for (size_t i = 0; i < sizeof t / sizeof *t; i++)
                for (int s = 0; s < PD_SB__MAX; s++) {
                        struct pd_error err = { 0 };
                        int rc = pd_sb_can("sb4", s, t[i].op, &err);
                        bool want = t[i].allowed & (1u << s);
                        int want_rc = want ? 0 : s == PD_SB_DELETED || s == PD_SB_CREATING ? -ENOENT : -EBUSY;
                        ok(rc == want_rc && (want || strstr(err.msg, "sb4")), "op %d in %s: %d ('%s')",
                           (int)t[i].op, pd_sb_state_name(s), rc, err.msg);
                }
        struct pd_error err = { 0 };
        pd_sb_can("sb4", PD_SB_PAUSED_DISK, PD_OP_SNAPSHOT, &err);
        ok(strstr(err.msg, "paused to disk") != NULL, "a snapshot of a sandbox paused to disk says why");
}

int main(void)
{
        test_every_pair();
        test_store_failures();
        test_out_of_range();
        test_store_names();
        test_ops();
        printf("1..%d\n", n_test);
        return n_fail ? 1 : 0;
}
