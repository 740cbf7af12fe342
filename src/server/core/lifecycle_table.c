/* The lifecycle table (lifecycle.h): every transition a server sandbox can
 * make, with what it persists and audits, in one place. A (state, event)
 * pair the table does not list is refused, never half-applied: the record
 * in the store and the state in memory only ever change together. */
#include "server/core/lifecycle.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define S(x) (1u << PD_SB_##x)
#define LIVE (S(RUNNING) | S(PAUSED) | S(PAUSED_DISK) | S(FAILED))

static const struct pd_sb_transition table[PD_EV__MAX] = {
        /*                        from                       to              store               must   audit                 verb */
        [PD_EV_CREATED]         = { S(CREATING),             PD_SB_RUNNING,     PD_PERSIST_PUT,    true,  "sandbox.create",     "finish creating it" },
        [PD_EV_CREATE_FAILED]   = { S(CREATING),             PD_SB_DELETED,     PD_PERSIST_NONE,   false, NULL,                 "abandon its creation" },
        [PD_EV_PAUSE]           = { S(RUNNING),              PD_SB_PAUSED,      PD_PERSIST_PUT,    false, "sandbox.pause",      "pause it (only a running sandbox can be paused)" },
        [PD_EV_PAUSE_DISK]      = { S(RUNNING),              PD_SB_PAUSED_DISK, PD_PERSIST_PUT,    false, "sandbox.pause",      "pause it (only a running sandbox can be paused)" },
        [PD_EV_AUTO_PAUSE]      = { S(RUNNING),              PD_SB_PAUSED,      PD_PERSIST_PUT,    false, "sandbox.auto_pause", "pause it at its deadline" },
        [PD_EV_AUTO_PAUSE_DISK] = { S(RUNNING),              PD_SB_PAUSED_DISK, PD_PERSIST_PUT,    false, "sandbox.auto_pause", "pause it at its deadline" },
        [PD_EV_RESUME]          = { S(PAUSED) | S(PAUSED_DISK), PD_SB_RUNNING,  PD_PERSIST_PUT,    false, "sandbox.resume",     "resume it (only a paused sandbox can be resumed)" },
        [PD_EV_AUTO_RESUME]     = { S(PAUSED) | S(PAUSED_DISK), PD_SB_RUNNING,  PD_PERSIST_PUT,    false, "sandbox.auto_resume", "resume it on traffic" },
        [PD_EV_SET_TIMEOUT]     = { LIVE,                    PD_SB_SAME,        PD_PERSIST_PUT,    false, "sandbox.set_timeout", "set its timeout" },
        [PD_EV_SET_PORTS]       = { LIVE,                    PD_SB_SAME,        PD_PERSIST_PUT,    false, "ports.public",       "change its ports' access" },
        [PD_EV_AGENT_DIED]      = { S(RUNNING) | S(PAUSED),  PD_SB_FAILED,      PD_PERSIST_PUT,    false, "sandbox.failed",     "mark it failed" },
        [PD_EV_LOST]            = { S(RUNNING) | S(PAUSED) | S(PAUSED_DISK), PD_SB_FAILED, PD_PERSIST_PUT, false, "sandbox.failed", "mark it failed" },
        [PD_EV_REVIVED]         = { S(PAUSED_DISK),          PD_SB_SAME,        PD_PERSIST_PUT,    false, NULL,                 "revive it" },
        [PD_EV_DELETE]          = { LIVE,                    PD_SB_DELETED,     PD_PERSIST_DELETE, false, "sandbox.delete",     "delete it" },
        [PD_EV_TIMEOUT]         = { LIVE,                    PD_SB_DELETED,     PD_PERSIST_DELETE, false, "sandbox.timeout",    "delete it at its deadline" },
};

static const char *const state_names[PD_SB__MAX] = {
        [PD_SB_CREATING] = "creating",     [PD_SB_RUNNING] = "running", [PD_SB_PAUSED] = "paused",
        [PD_SB_PAUSED_DISK] = "paused to disk", [PD_SB_FAILED] = "failed",  [PD_SB_DELETED] = "deleted",
};

static const char *const event_names[PD_EV__MAX] = {
        [PD_EV_CREATED] = "created",       [PD_EV_CREATE_FAILED] = "create_failed",
        [PD_EV_PAUSE] = "pause",           [PD_EV_PAUSE_DISK] = "pause_disk",
        [PD_EV_AUTO_PAUSE] = "auto_pause", [PD_EV_AUTO_PAUSE_DISK] = "auto_pause_disk",
        [PD_EV_RESUME] = "resume",         [PD_EV_SET_TIMEOUT] = "set_timeout",
        [PD_EV_AUTO_RESUME] = "auto_resume", [PD_EV_SET_PORTS] = "set_ports",
        [PD_EV_AGENT_DIED] = "agent_died", [PD_EV_LOST] = "lost",
        [PD_EV_REVIVED] = "revived",       [PD_EV_DELETE] = "delete",
        [PD_EV_TIMEOUT] = "timeout",
};

const struct pd_sb_transition *pd_sb_transition(enum pd_sb_event ev)
{
        return (unsigned)ev < PD_EV__MAX ? &table[ev] : NULL;
}

const char *pd_sb_state_name(enum pd_sb_state s)
{
        return (unsigned)s < PD_SB__MAX ? state_names[s] : "unknown";
}

const char *pd_sb_event_name(enum pd_sb_event ev)
{
        return (unsigned)ev < PD_EV__MAX ? event_names[ev] : "unknown";
}

int pd_sb_next(const char *id, enum pd_sb_state from, enum pd_sb_event ev, struct pd_error *err)
{
        const struct pd_sb_transition *t = pd_sb_transition(ev);
        if (!t || (unsigned)from >= PD_SB__MAX)
                return pd_error_setx(err, EINVAL, "sandbox %s: no lifecycle event %d from state %d", id, (int)ev,
                                     (int)from);
        if (!(t->from & (1u << from))) {
                /* creating: not visible to anyone but its creator yet */
                if (from == PD_SB_DELETED || from == PD_SB_CREATING)
                        return pd_error_setx(err, ENOENT, "sandbox %s is gone", id);
                return pd_error_setx(err, EBUSY, "sandbox %s is %s: cannot %s", id, state_names[from], t->verb);
        }
        return t->to == PD_SB_SAME ? (int)from : (int)t->to;
}

int pd_sb_apply(const char *id, enum pd_sb_state *state, enum pd_sb_event ev, const struct pd_sb_effects *fx,
                void *ctx, struct pd_error *err)
{
        enum pd_sb_state from = *state;
        int to = pd_sb_next(id, from, ev, err);
        if (to < 0)
                return to;
        const struct pd_sb_transition *t = &table[ev];
        struct pd_error e2 = { 0 };
        int r = 0;
        if (t->persist == PD_PERSIST_PUT)
                r = fx->persist(ctx, (enum pd_sb_state)to, &e2);
        else if (t->persist == PD_PERSIST_DELETE)
                r = fx->unpersist(ctx, &e2);
        if (r < 0) {
                if (t->must_persist) {
                        if (err)
                                *err = e2;
                        return r;
                }
                if (fx->persist_failed)
                        fx->persist_failed(ctx, &e2);
        }
        *state = (enum pd_sb_state)to;
        if (fx->set_state)
                fx->set_state(ctx, (enum pd_sb_state)to);
        if (t->audit && fx->audit)
                fx->audit(ctx, t->audit);
        return 0;
}

const char *pd_sb_state_store_name(enum pd_sb_state s)
{
        switch (s) {
        case PD_SB_PAUSED:
        case PD_SB_PAUSED_DISK: return "paused";
        case PD_SB_FAILED: return "failed";
        default: return "running";
        }
}

enum pd_sb_state pd_sb_state_from_store(const char *name, bool paused_disk)
{
        if (name && !strcmp(name, "paused"))
                return paused_disk ? PD_SB_PAUSED_DISK : PD_SB_PAUSED;
        if (name && !strcmp(name, "failed"))
                return PD_SB_FAILED;
        /* "running", or a word of a later version: adoption checks the
         * agent before the sandbox is served again */
        return PD_SB_RUNNING;
}

/* What each state allows besides transitions, and why not. */
static const struct {
        unsigned in;
        const char *refused[PD_SB__MAX];
} ops[PD_OP__MAX] = {
        [PD_OP_AGENT] = { S(RUNNING),
                          { [PD_SB_PAUSED] = "is paused; resume it first",
                            [PD_SB_PAUSED_DISK] = "is paused; resume it first",
                            [PD_SB_FAILED] = "has failed and cannot run anything" } },
        [PD_OP_PORTS] = { S(RUNNING), { 0 } },
        [PD_OP_SNAPSHOT] = { S(RUNNING) | S(PAUSED),
                             { [PD_SB_PAUSED_DISK] = "is paused to disk: resume it first",
                               [PD_SB_FAILED] = "is failed: only a running or paused sandbox can be snapshotted or "
                                                "forked" } },
        [PD_OP_STATS] = { S(RUNNING) | S(PAUSED) | S(PAUSED_DISK),
                          { [PD_SB_FAILED] = "has failed: nothing left to measure" } },
};

int pd_sb_can(const char *id, enum pd_sb_state s, enum pd_sb_op op, struct pd_error *err)
{
        if ((unsigned)op >= PD_OP__MAX || (unsigned)s >= PD_SB__MAX)
                return pd_error_setx(err, EINVAL, "sandbox %s: no operation %d in state %d", id, (int)op, (int)s);
        if (ops[op].in & (1u << s))
                return 0;
        if (s == PD_SB_DELETED || s == PD_SB_CREATING)
                return pd_error_setx(err, ENOENT, "sandbox %s is gone", id);
        if (ops[op].refused[s])
                return pd_error_setx(err, EBUSY, "sandbox %s %s", id, ops[op].refused[s]);
        return pd_error_setx(err, EBUSY, "sandbox %s is %s", id, state_names[s]);
}
