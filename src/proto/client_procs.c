/* LIST: the agent's process table, checked (agent_check.c) and decoded
 * into one allocation the caller frees with pd_proc_list_free. */
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent_check.h"
#include "proto/client_priv.h"

void *pd_carve_take(struct pd_carve *c, size_t n, size_t align)
{
        uintptr_t at = ((uintptr_t)c->p + align - 1) & ~(uintptr_t)(align - 1);
        c->p = (char *)at + n;
        return (void *)at;
}

const char *pd_carve_str(struct pd_carve *c, const struct pd_attr *a)
{
        char *s = pd_carve_take(c, (size_t)a->len + 1, 1);
        memcpy(s, a->data, a->len);
        s[a->len] = '\0';
        return s;
}

void pd_proc_list_free(struct pd_proc_list *l)
{
        free(l->mem);
        memset(l, 0, sizeof *l);
}

const struct pd_proc *pd_proc_list_find(const struct pd_proc_list *l, uint32_t pid)
{
        for (size_t i = 0; i < l->n; i++)
                if (l->v[i].pid == pid)
                        return &l->v[i];
        return NULL;
}

static bool is_str_tag(uint16_t tag)
{
        return tag == PD_A_TAG || tag == PD_A_REASON || tag == PD_A_CWD || tag == PD_A_ARG || tag == PD_A_ENV;
}

/* One PROC, already checked: every field once (ARG, ENV repeated), of its
 * size, strings without NUL. */
static void proc_decode(const struct pd_attr *proc, struct pd_proc *x, struct pd_carve *cv)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        size_t nargs = 0, nenv = 0;
        pd_msg_iter_init(&it, proc->data, proc->len);
        while (pd_msg_next(&it, &a)) {
                nargs += a.tag == PD_A_ARG;
                nenv += a.tag == PD_A_ENV;
        }
        const char **argv = pd_carve_take(cv, nargs * sizeof *argv, alignof(const char *));
        const char **env = pd_carve_take(cv, nenv * sizeof *env, alignof(const char *));
        *x = (struct pd_proc){ .reason = "", .argv = argv, .env = env };
        uint32_t v;
        pd_msg_iter_init(&it, proc->data, proc->len);
        while (pd_msg_next(&it, &a)) {
                switch (a.tag) {
                case PD_A_PID: pd_attr_u32(&a, &x->pid); break;
                case PD_A_STATE: x->exited = a.len == 6 && !memcmp(a.data, "exited", 6); break;
                case PD_A_TAG: x->tag = pd_carve_str(cv, &a); break;
                case PD_A_EXIT_CODE: x->has_code = pd_attr_u32(&a, &x->exit_code); break;
                case PD_A_SIGNO: x->has_signal = pd_attr_u32(&a, &x->signo); break;
                case PD_A_REASON: x->reason = pd_carve_str(cv, &a); break;
                case PD_A_STDIN: x->stdin_open = pd_attr_u32(&a, &v) && v; break;
                case PD_A_START_OUT: pd_attr_u64(&a, &x->start[0]); break;
                case PD_A_END_OUT: pd_attr_u64(&a, &x->end[0]); break;
                case PD_A_START_ERR: pd_attr_u64(&a, &x->start[1]); break;
                case PD_A_END_ERR: pd_attr_u64(&a, &x->end[1]); break;
                case PD_A_ARG: argv[x->argc++] = pd_carve_str(cv, &a); break;
                case PD_A_ENV: env[x->envc++] = pd_carve_str(cv, &a); break;
                case PD_A_CWD: x->cwd = pd_carve_str(cv, &a); break;
                case PD_A_PTY_ROWS: x->pty = pd_attr_u32(&a, &x->rows); break;
                case PD_A_PTY_COLS: pd_attr_u32(&a, &x->cols); break;
                }
        }
}

int pd_proc_list_decode(const uint8_t *p, size_t len, struct pd_proc_list *out, struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        /* what a hostile agent may say (a pid twice, no pid, ...) is
         * refused whole before anything is decoded */
        int r = pd_agent_check_procs(p, len, err);
        if (r < 0)
                return r;
        /* first pass: the size of everything */
        size_t n = 0, ptrs = 0, bytes = 0;
        struct pd_msg_iter it, in;
        struct pd_attr a, b;
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                if (a.tag != PD_A_PROC)
                        continue;
                n++;
                pd_msg_iter_init(&in, a.data, a.len);
                while (pd_msg_next(&in, &b)) {
                        ptrs += b.tag == PD_A_ARG || b.tag == PD_A_ENV;
                        if (is_str_tag(b.tag))
                                bytes += (size_t)b.len + 1;
                }
        }
        /* each proc's two pointer arrays may each need aligning */
        size_t size = n * sizeof(struct pd_proc) + (ptrs + 2 * n) * sizeof(char *) + bytes + alignof(struct pd_proc);
        if (!(out->mem = malloc(size)))
                return pd_error_set(err, ENOMEM, "process list");
        struct pd_carve cv = { .p = out->mem, .end = (char *)out->mem + size };
        out->v = pd_carve_take(&cv, n * sizeof *out->v, alignof(struct pd_proc));
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a))
                if (a.tag == PD_A_PROC)
                        proc_decode(&a, &out->v[out->n++], &cv);
        return 0;
}

int pd_client_list(struct pd_client *c, struct pd_proc_list *out, struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        const uint8_t *p;
        size_t len;
        int r = pd_client_call(c, PD_T_LIST, NULL, &p, &len, err);
        return r < 0 ? r : pd_proc_list_decode(p, len, out, err);
}
