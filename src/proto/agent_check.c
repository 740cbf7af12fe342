/* Checks of agent payloads before the client decodes them (agent_check.h).
 * A table of rules per nested list; one walk per payload. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent_check.h"
#include "proto/msg.h"
#include "proto/proto.h"

#define ARG_MAX_BYTES (128u << 10)      /* MAX_ARG_STRLEN: one argv or envp string */
#define TAG_MAX_BYTES 255u              /* what the server lets a caller set */
#define WORD_MAX_BYTES 31u              /* STATE, REASON */

enum kind { K_U32, K_U64, K_STR };

struct rule {
        uint16_t tag;
        enum kind kind;
        bool required, repeat;
        uint32_t max;           /* K_STR: bytes; K_U32: largest value (0: any) */
        const char *name;
};

static const struct rule proc_rules[] = {
        { PD_A_PID, K_U32, true, false, 0, "PID" },
        { PD_A_STATE, K_STR, true, false, WORD_MAX_BYTES, "STATE" },
        { PD_A_TAG, K_STR, false, false, TAG_MAX_BYTES, "TAG" },
        { PD_A_EXIT_CODE, K_U32, false, false, 255, "EXIT_CODE" },
        { PD_A_SIGNO, K_U32, false, false, 64, "SIGNO" },
        { PD_A_REASON, K_STR, false, false, WORD_MAX_BYTES, "REASON" },
        { PD_A_STDIN, K_U32, false, false, 1, "STDIN" },
        { PD_A_START_OUT, K_U64, false, false, 0, "START_OUT" },
        { PD_A_END_OUT, K_U64, false, false, 0, "END_OUT" },
        { PD_A_START_ERR, K_U64, false, false, 0, "START_ERR" },
        { PD_A_END_ERR, K_U64, false, false, 0, "END_ERR" },
        { PD_A_ARG, K_STR, false, true, ARG_MAX_BYTES, "ARG" },
        { PD_A_ENV, K_STR, false, true, ARG_MAX_BYTES, "ENV" },
        { PD_A_CWD, K_STR, false, false, PATH_MAX - 1, "CWD" },
        { PD_A_PTY_ROWS, K_U32, false, false, 65535, "PTY_ROWS" },
        { PD_A_PTY_COLS, K_U32, false, false, 65535, "PTY_COLS" },
};

static const struct rule entry_rules[] = {
        /* a name is one component, but the root's entry is named "/" */
        { PD_A_NAME, K_STR, true, false, NAME_MAX, "NAME" },
        { PD_A_PATH, K_STR, true, false, PATH_MAX - 1, "PATH" },
        { PD_A_FTYPE, K_U32, true, false, PD_FT_OTHER, "FTYPE" },
        { PD_A_SIZE, K_U64, true, false, 0, "SIZE" },
        { PD_A_MODE, K_U32, true, false, 07777, "MODE" },
        { PD_A_UID, K_U32, true, false, 0, "UID" },
        { PD_A_GID, K_U32, true, false, 0, "GID" },
        { PD_A_MTIME_NS, K_U64, true, false, 0, "MTIME_NS" },
        { PD_A_LINK, K_STR, false, false, PATH_MAX - 1, "LINK" },
        { PD_A_META_KEY, K_STR, false, true, 255, "META_KEY" },
        { PD_A_META_VAL, K_STR, false, true, 4096, "META_VAL" },
};

static const struct rule watch_rules[] = {
        /* relative to the watched directory, which may be recursive */
        { PD_A_NAME, K_STR, true, false, PATH_MAX - 1, "NAME" },
        { PD_A_EVENT, K_U32, true, false, PD_WE_CHMOD, "EVENT" },
};

/* Check one list against rules; *pid (if not NULL) gets PD_A_PID. */
static int check_list(const uint8_t *p, size_t len, const struct rule *rules, size_t n, const char *what,
                      uint32_t *pid, struct pd_error *err)
{
        unsigned seen[32] = { 0 };
        struct pd_msg_iter it;
        struct pd_attr a;
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                size_t i = 0;
                while (i < n && rules[i].tag != a.tag)
                        i++;
                if (i == n)
                        continue;       /* a newer agent's attribute */
                const struct rule *rl = &rules[i];
                if (seen[i]++ && !rl->repeat)
                        return pd_error_setx(err, EPROTO, "agent reply: %s with %s twice", what, rl->name);
                uint32_t v32 = 0;
                uint64_t v64 = 0;
                switch (rl->kind) {
                case K_U32:
                        if (!pd_attr_u32(&a, &v32))
                                return pd_error_setx(err, EPROTO, "agent reply: %s.%s of %u bytes", what, rl->name,
                                                     a.len);
                        if (rl->max && v32 > rl->max)
                                return pd_error_setx(err, EPROTO, "agent reply: %s.%s %u out of range", what,
                                                     rl->name, v32);
                        if (pid && a.tag == PD_A_PID)
                                *pid = v32;
                        break;
                case K_U64:
                        if (!pd_attr_u64(&a, &v64))
                                return pd_error_setx(err, EPROTO, "agent reply: %s.%s of %u bytes", what, rl->name,
                                                     a.len);
                        break;
                case K_STR:
                        if (a.len > rl->max)
                                return pd_error_setx(err, EPROTO, "agent reply: %s.%s of %u bytes (at most %u)",
                                                     what, rl->name, a.len, rl->max);
                        if (memchr(a.data, '\0', a.len))
                                return pd_error_setx(err, EPROTO, "agent reply: %s.%s holds a NUL byte", what,
                                                     rl->name);
                        break;
                }
        }
        if (it.error)
                return pd_error_setx(err, EPROTO, "agent reply: malformed %s", what);
        for (size_t i = 0; i < n; i++)
                if (rules[i].required && !seen[i])
                        return pd_error_setx(err, EPROTO, "agent reply: %s without %s", what, rules[i].name);
        return 0;
}

static bool is_state(const struct pd_attr *a)
{
        return (a->len == 7 && !memcmp(a->data, "running", 7)) || (a->len == 6 && !memcmp(a->data, "exited", 6));
}

static int cmp_u32(const void *x, const void *y)
{
        uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
        return a < b ? -1 : a > b;
}

int pd_agent_check_procs(const uint8_t *p, size_t len, struct pd_error *err)
{
        _Static_assert(sizeof proc_rules / sizeof proc_rules[0] <= 32, "seen[] too small");
        uint32_t *pids = NULL;
        size_t n = 0;
        int r = 0;
        struct pd_msg_iter it;
        struct pd_attr a;
        pd_msg_iter_init(&it, p, len);
        while (r == 0 && pd_msg_next(&it, &a)) {
                if (a.tag != PD_A_PROC)
                        continue;
                if (n == PD_AGENT_PROCS_MAX) {
                        r = pd_error_setx(err, EPROTO, "agent reply: more than %u processes", PD_AGENT_PROCS_MAX);
                        break;
                }
                uint32_t pid = 0;
                r = check_list(a.data, a.len, proc_rules, sizeof proc_rules / sizeof proc_rules[0], "PROC", &pid,
                               err);
                if (r < 0)
                        break;
                struct pd_attr st;
                if (pid == 0 || pid > INT_MAX) {
                        r = pd_error_setx(err, EPROTO, "agent reply: PROC with pid %u", pid);
                } else if (!pd_msg_find(a.data, a.len, PD_A_STATE, &st) || !is_state(&st)) {
                        r = pd_error_setx(err, EPROTO, "agent reply: PROC %u in an unknown state", pid);
                } else {
                        if (!pids && !(pids = malloc(PD_AGENT_PROCS_MAX * sizeof *pids)))
                                r = pd_error_set(err, ENOMEM, "agent reply");
                        else
                                pids[n++] = pid;
                }
        }
        if (r == 0 && it.error)
                r = pd_error_setx(err, EPROTO, "agent reply: malformed process list");
        if (r == 0 && n > 1) {
                qsort(pids, n, sizeof *pids, cmp_u32);
                for (size_t i = 1; i < n && r == 0; i++)
                        if (pids[i] == pids[i - 1])
                                r = pd_error_setx(err, EPROTO, "agent reply: process %u listed twice", pids[i]);
        }
        free(pids);
        return r;
}

int pd_agent_check_entries(const uint8_t *p, size_t len, unsigned min, unsigned max, struct pd_error *err)
{
        unsigned n = 0;
        struct pd_msg_iter it;
        struct pd_attr a;
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                if (a.tag != PD_A_ENTRY)
                        continue;
                if (n == max)
                        return pd_error_setx(err, EPROTO, "agent reply: more than %u entries", max);
                int r = check_list(a.data, a.len, entry_rules, sizeof entry_rules / sizeof entry_rules[0], "ENTRY",
                                   NULL, err);
                if (r < 0)
                        return r;
                struct pd_attr ft;
                uint32_t t = 0;
                if (pd_msg_find(a.data, a.len, PD_A_FTYPE, &ft) && pd_attr_u32(&ft, &t) && t == 0)
                        return pd_error_setx(err, EPROTO, "agent reply: ENTRY of file type 0");
                n++;
        }
        if (it.error)
                return pd_error_setx(err, EPROTO, "agent reply: malformed entry list");
        if (n < min)
                return pd_error_setx(err, EPROTO, "agent reply: no entry");
        return 0;
}

static const struct rule opened_rules[] = {
        { PD_A_SIZE, K_U64, false, false, 0, "SIZE" },
};

int pd_agent_check_file_opened(const uint8_t *p, size_t len, uint64_t *size, struct pd_error *err)
{
        int r = check_list(p, len, opened_rules, 1, "FILE_OPENED", NULL, err);
        if (r < 0)
                return r;
        struct pd_attr a;
        return pd_msg_find(p, len, PD_A_SIZE, &a) && pd_attr_u64(&a, size) ? 1 : 0;
}

int pd_agent_check_watch_event(const uint8_t *p, size_t len, struct pd_error *err)
{
        int r = check_list(p, len, watch_rules, sizeof watch_rules / sizeof watch_rules[0], "WATCH_EVENT", NULL, err);
        if (r < 0)
                return r;
        struct pd_attr a;
        uint32_t ev = 0;
        if (pd_msg_find(p, len, PD_A_EVENT, &a) && pd_attr_u32(&a, &ev) && ev == 0)
                return pd_error_setx(err, EPROTO, "agent reply: WATCH_EVENT of type 0");
        return 0;
}
