/* The agent's process payloads as API JSON: LIST entries (process
 * objects), EXIT payloads, and output text that may not be UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "server/core/agent_check.h"
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

static json_t *proc_object(const uint8_t *p, size_t len, struct pd_proc_info *pi)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        json_t *o = json_object(), *cmd = json_array();
        char *str;
        memset(pi, 0, sizeof *pi);
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                switch (a.tag) {
                case PD_A_PID: pd_attr_u32(&a, &pi->pid); break;
                case PD_A_TAG:
                        if ((str = pd_attr_strdup(&a))) {
                                json_object_set_new(o, "tag", pd_procs_text_json(str, strlen(str)));
                                free(str);
                        }
                        break;
                case PD_A_STATE:
                        if ((str = pd_attr_strdup(&a))) {
                                pi->exited = !strcmp(str, "exited");
                                free(str);
                        }
                        break;
                case PD_A_EXIT_CODE: pi->has_code = pd_attr_u32(&a, &pi->exit_code); break;
                case PD_A_SIGNO: pi->has_sig = pd_attr_u32(&a, &pi->signo); break;
                case PD_A_REASON: pd_attr_str(&a, pi->reason, sizeof pi->reason); break;
                case PD_A_STDIN: {
                        uint32_t v = 0;
                        pi->stdin_open = pd_attr_u32(&a, &v) && v;
                        break;
                }
                case PD_A_START_OUT: pd_attr_u64(&a, &pi->start[0]); break;
                case PD_A_END_OUT: pd_attr_u64(&a, &pi->end[0]); break;
                case PD_A_START_ERR: pd_attr_u64(&a, &pi->start[1]); break;
                case PD_A_END_ERR: pd_attr_u64(&a, &pi->end[1]); break;
                case PD_A_ARG:
                        if ((str = pd_attr_strdup(&a))) {
                                json_array_append_new(cmd, pd_procs_text_json(str, strlen(str)));
                                free(str);
                        }
                        break;
                case PD_A_CWD:
                        if ((str = pd_attr_strdup(&a))) {
                                json_object_set_new(o, "cwd", pd_procs_text_json(str, strlen(str)));
                                free(str);
                        }
                        break;
                case PD_A_PTY_ROWS: pi->pty = pd_attr_u32(&a, &pi->rows); break;
                case PD_A_PTY_COLS: pd_attr_u32(&a, &pi->cols); break;
                }
        }
        json_object_set_new(o, "pid", json_integer(pi->pid));
        if (!json_object_get(o, "tag"))
                json_object_set_new(o, "tag", json_null());
        json_object_set_new(o, "cmd", cmd);
        json_object_set_new(o, "state", json_string(pi->exited ? "exited" : "running"));
        json_object_set_new(o, "exit_code", pi->exited && pi->has_code ? json_integer(pi->exit_code) : json_null());
        json_object_set_new(o, "signal", pi->exited && pi->has_sig ? json_integer(pi->signo) : json_null());
        if (pi->exited)
                json_object_set_new(o, "reason", json_string(pi->reason[0] ? pi->reason : "exit"));
        json_object_set_new(o, "stdin", json_boolean(pi->stdin_open));
        json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)pi->end[0]));
        json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)pi->end[1]));
        if (pi->pty)
                json_object_set_new(o, "pty", json_pack("{s:i,s:i}", "rows", (int)pi->rows, "cols", (int)pi->cols));
        else
                json_object_set_new(o, "pty", json_null());
        return o;
}

int pd_procs_list_decode(const uint8_t *reply, size_t rlen, uint32_t want_pid, struct pd_proc_info *one,
                         json_t **all, struct pd_error *err)
{
        if (one)
                memset(one, 0, sizeof *one);
        if (all)
                *all = NULL;
        /* what a hostile agent may say (a pid twice, no pid, ...) is
         * refused whole before anything is decoded */
        int k = pd_agent_check_procs(reply, rlen, err);
        if (k < 0)
                return k;
        if (all)
                *all = json_array();
        struct pd_msg_iter it;
        struct pd_attr a;
        pd_msg_iter_init(&it, reply, rlen);
        while (pd_msg_next(&it, &a)) {
                if (a.tag != PD_A_PROC)
                        continue;
                struct pd_proc_info pi;
                json_t *o = proc_object(a.data, a.len, &pi);
                /* the warm pool's own warm-up command is not the user's */
                json_t *tag = json_object_get(o, "tag");
                bool warmup = json_is_string(tag) && (!strcmp(json_string_value(tag), PD_POOL_WARMUP) ||
                                                      !strcmp(json_string_value(tag), PD_TEMPLATE_WARMUP));
                if (all && !warmup)
                        json_array_append(*all, o);
                if (one && want_pid && pi.pid == want_pid && !one->found) {
                        *one = pi;
                        one->found = true;
                        one->obj = json_incref(o);
                }
                json_decref(o);
        }
        return 0;
}

int pd_procs_list(struct pd_conn *c, uint32_t want_pid, struct pd_proc_info *one, json_t **all,
                  struct pd_error *err)
{
        uint8_t *reply = NULL;
        size_t rlen = 0;
        if (one)
                memset(one, 0, sizeof *one);
        if (all)
                *all = NULL;
        int k = pd_agentc_call(c, PD_T_LIST, NULL, &reply, &rlen, PROCS_CALL_TIMEOUT_MS, err);
        if (k >= 0)
                k = pd_procs_list_decode(reply, rlen, want_pid, one, all, err);
        free(reply);
        return k;
}

void pd_procs_exit_parse(const uint8_t *p, size_t len, struct pd_proc_exit *x)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        *x = (struct pd_proc_exit){ .reason = "exit" };
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                if (a.tag == PD_A_EXIT_CODE)
                        x->has_code = pd_attr_u32(&a, &x->code);
                else if (a.tag == PD_A_SIGNO)
                        x->has_sig = pd_attr_u32(&a, &x->sig);
                else if (a.tag == PD_A_REASON)
                        pd_attr_str(&a, x->reason, sizeof x->reason);
        }
}

json_t *pd_procs_exit_json(const uint8_t *p, size_t len)
{
        struct pd_proc_exit x;
        pd_procs_exit_parse(p, len, &x);
        return json_pack("{s:o,s:o,s:s}", "exit_code", x.has_code ? json_integer(x.code) : json_null(),
                         "signal", x.has_sig ? json_integer(x.sig) : json_null(), "reason", x.reason);
}
