/* The agent's processes as API JSON: LIST entries (process objects),
 * exits, and output text that may not be UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "server/core/pool.h"
#include "server/api/procs.h"

/* JSON text of bytes that may not be UTF-8: invalid sequences become
 * U+FFFD (jansson refuses invalid UTF-8). */
static size_t utf8_seq_len(const unsigned char *p, size_t left)
{
        unsigned char c = p[0];
        size_t n;
        uint32_t cp;
        if (c < 0x80)
                return 1;
        if ((c & 0xe0) == 0xc0) {
                n = 2;
                cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
                n = 3;
                cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
                n = 4;
                cp = c & 0x07;
        } else {
                return 0;
        }
        if (n > left)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

json_t *pd_procs_text_json(const char *buf, size_t len)
{
        json_t *j = json_stringn(buf ? buf : "", len);
        if (j)
                return j;
        char *out = malloc(len * 3 + 1);
        if (!out)
                return json_string("");
        size_t o = 0;
        const unsigned char *p = (const unsigned char *)buf;
        for (size_t i = 0; i < len;) {
                size_t n = p[i] ? utf8_seq_len(p + i, len - i) : 1;
                if (n == 0) {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                } else {
                        memcpy(out + o, p + i, n);
                        o += n;
                        i += n;
                }
        }
        j = json_stringn_nocheck(out, o);
        free(out);
        return j;
}

static json_t *text_or_null(const char *s)
{
        return s ? pd_procs_text_json(s, strlen(s)) : json_null();
}

static json_t *proc_object(const struct pd_proc *p)
{
        json_t *o = json_object(), *cmd = json_array();
        for (size_t i = 0; i < p->argc; i++)
                json_array_append_new(cmd, pd_procs_text_json(p->argv[i], strlen(p->argv[i])));
        if (p->tag)
                json_object_set_new(o, "tag", text_or_null(p->tag));
        if (p->cwd)
                json_object_set_new(o, "cwd", text_or_null(p->cwd));
        json_object_set_new(o, "pid", json_integer(p->pid));
        if (!json_object_get(o, "tag"))
                json_object_set_new(o, "tag", json_null());
        json_object_set_new(o, "cmd", cmd);
        json_object_set_new(o, "state", json_string(p->exited ? "exited" : "running"));
        json_object_set_new(o, "exit_code", p->exited && p->has_code ? json_integer(p->exit_code) : json_null());
        json_object_set_new(o, "signal", p->exited && p->has_signal ? json_integer(p->signo) : json_null());
        if (p->exited)
                json_object_set_new(o, "reason", json_string(p->reason[0] ? p->reason : "exit"));
        json_object_set_new(o, "stdin", json_boolean(p->stdin_open));
        json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)p->end[0]));
        json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)p->end[1]));
        if (p->pty)
                json_object_set_new(o, "pty", json_pack("{s:i,s:i}", "rows", (int)p->rows, "cols", (int)p->cols));
        else
                json_object_set_new(o, "pty", json_null());
        return o;
}

void pd_procs_list_json(const struct pd_proc_list *l, uint32_t want_pid, struct pd_proc_info *one, json_t **all)
{
        if (one)
                memset(one, 0, sizeof *one);
        if (all)
                *all = json_array();
        for (size_t i = 0; i < l->n; i++) {
                const struct pd_proc *p = &l->v[i];
                /* the warm pool's own warm-up command is not the user's */
                bool warmup = p->tag && (!strcmp(p->tag, PD_POOL_WARMUP) || !strcmp(p->tag, PD_TEMPLATE_WARMUP));
                bool want = one && want_pid && p->pid == want_pid && !one->found;
                if (!(all && !warmup) && !want)
                        continue;
                json_t *o = proc_object(p);
                if (all && !warmup)
                        json_array_append(*all, o);
                if (want) {
                        *one = (struct pd_proc_info){ .pid = p->pid, .found = true, .exited = p->exited,
                                                      .pty = p->pty, .stdin_open = p->stdin_open,
                                                      .end = { p->end[0], p->end[1] }, .obj = json_incref(o) };
                }
                json_decref(o);
        }
}

int pd_procs_list(struct pd_client *c, uint32_t want_pid, struct pd_proc_info *one, json_t **all,
                  struct pd_error *err)
{
        if (one)
                memset(one, 0, sizeof *one);
        if (all)
                *all = NULL;
        struct pd_proc_list l;
        int k = pd_client_list(c, &l, err);
        if (k >= 0)
                pd_procs_list_json(&l, want_pid, one, all);
        pd_proc_list_free(&l);
        return k;
}

json_t *pd_procs_exit_json(const struct pd_exit *x)
{
        return json_pack("{s:o,s:o,s:s}", "exit_code", x->has_code ? json_integer(x->code) : json_null(),
                         "signal", x->has_signal ? json_integer(x->signo) : json_null(), "reason", x->reason);
}
