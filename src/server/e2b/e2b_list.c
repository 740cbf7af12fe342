/* E2B's sandbox list (docs/e2b.md): GET /v2/sandboxes (and /sandboxes,
 * which older SDKs call).
 *
 * Order: by start time, newest first (order=asc: oldest first), over the
 * whole result before it is cut into pages, as E2B sorts it; equal start
 * times fall back to the id so the order is total. Filters, all ANDed:
 * metadata ("k=v&k2=v2", URL-encoded pairs), state (running, paused;
 * repeated or comma-separated), startedAfter (RFC 3339: started at or
 * after), template. limit 1..1000.
 *
 * Paging: the next token names the last item of the page by its sort key
 * (start time and id), not by its position, so sandboxes created or killed
 * between two pages neither repeat an item nor skip one that was there
 * all along. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/e2b/e2b.h"
#include "server/core/manager.h"

#define LIST_MAX 1000

struct list_q {
        char *meta;                     /* "k=v&k2=v2" (decoded once by MHD) */
        char states[128];
        bool states_too_long;
};

static enum MHD_Result collect_q(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct list_q *q = cls;
        if (!value)
                return MHD_YES;
        if (!strcmp(key, "state")) {
                size_t l = strlen(q->states);
                int n = snprintf(q->states + l, sizeof q->states - l, "%s%s", l ? "," : "", value);
                if (n < 0 || (size_t)n >= sizeof q->states - l)
                        q->states_too_long = true;
        } else if (!strcmp(key, "metadata") && !q->meta) {
                q->meta = strdup(value);
        }
        return MHD_YES;
}

static int hexval(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void url_decode(char *s)
{
        char *o = s;
        for (char *p = s; *p; p++) {
                if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
                        *o++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
                        p += 2;
                } else {
                        *o++ = *p == '+' ? ' ' : *p;
                }
        }
        *o = '\0';
}

static bool meta_match(json_t *md, const char *filter)
{
        if (!filter || !*filter)
                return true;
        char *copy = strdup(filter), *save = NULL;
        bool ok = copy != NULL;
        for (char *pair = copy ? strtok_r(copy, "&", &save) : NULL; pair && ok; pair = strtok_r(NULL, "&", &save)) {
                char *eq = strchr(pair, '=');
                if (eq)
                        *eq = '\0';
                url_decode(pair);
                if (eq)
                        url_decode(eq + 1);
                json_t *v = json_object_get(md, pair);
                ok = json_is_string(v) && (!eq || !strcmp(json_string_value(v), eq + 1));
        }
        free(copy);
        return ok;
}

/* Every name in states is running or paused (the only states E2B lists). */
static bool states_valid(const char *states)
{
        char copy[128], *save = NULL;
        snprintf(copy, sizeof copy, "%s", states);
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (strcmp(t, "running") && strcmp(t, "paused"))
                        return false;
        return true;
}

static bool state_match(const char *states, const char *state)
{
        if (!*states)
                return true;
        char copy[128], *save = NULL;
        snprintf(copy, sizeof copy, "%s", states);
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (!strcmp(t, state))
                        return true;
        return false;
}

/* n decimal digits at *p (no sign, no blanks), advancing *p. */
static int digits(const char **p, int n)
{
        int v = 0;
        for (int i = 0; i < n; i++, (*p)++) {
                if (**p < '0' || **p > '9')
                        return -1;
                v = v * 10 + (**p - '0');
        }
        return v;
}

/* RFC 3339 ("2026-01-02T03:04:05.678Z", "...+02:00") to ms since the
 * epoch; what the SDKs send is Date.toISOString(). */
static int parse_rfc3339_ms(const char *t, int64_t *out)
{
        const char *p = t;
        int Y = digits(&p, 4);
        if (Y < 0 || *p++ != '-')
                return -EINVAL;
        int M = digits(&p, 2);
        if (M < 1 || M > 12 || *p++ != '-')
                return -EINVAL;
        int D = digits(&p, 2);
        if (D < 1 || D > 31 || (*p != 'T' && *p != 't' && *p != ' '))
                return -EINVAL;
        p++;
        int h = digits(&p, 2);
        if (h < 0 || h > 23 || *p++ != ':')
                return -EINVAL;
        int m = digits(&p, 2);
        if (m < 0 || m > 59 || *p++ != ':')
                return -EINVAL;
        int s = digits(&p, 2);
        if (s < 0 || s > 60)
                return -EINVAL;
        int64_t ms = 0;
        if (*p == '.') {
                p++;
                int n = 0;
                for (; *p >= '0' && *p <= '9'; p++, n++)
                        if (n < 3)
                                ms = ms * 10 + (*p - '0');
                if (!n)
                        return -EINVAL;
                for (; n < 3; n++)
                        ms *= 10;
        }
        int64_t off_s = 0;
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int sign = *p++ == '-' ? -1 : 1;
                int oh = digits(&p, 2);
                if (oh < 0 || oh > 23 || *p++ != ':')
                        return -EINVAL;
                int om = digits(&p, 2);
                if (om < 0 || om > 59)
                        return -EINVAL;
                off_s = sign * (oh * 3600 + om * 60);
        } else {
                return -EINVAL;
        }
        if (*p)
                return -EINVAL;
        struct tm tm = { .tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m,
                         .tm_sec = s };
        time_t secs = timegm(&tm);
        if (secs == (time_t)-1 && !(Y == 1969 && M == 12 && D == 31))
                return -EINVAL;
        *out = ((int64_t)secs - off_s) * 1000 + ms;
        return 0;
}

/* The sort key of one sandbox; the token is "<start ms>_<id>". */
struct item {
        uint64_t ms;
        struct pd_srv_sandbox *s;
};

static int cmp_key(uint64_t ams, const char *aid, uint64_t bms, const char *bid)
{
        if (ams != bms)
                return ams < bms ? -1 : 1;
        return strcmp(aid, bid);
}

static int cmp_desc(const void *a, const void *b)
{
        const struct item *x = a, *y = b;
        return -cmp_key(x->ms, x->s->id, y->ms, y->s->id);
}

static int cmp_asc(const void *a, const void *b)
{
        return -cmp_desc(a, b);
}

static int parse_token(const char *t, uint64_t *ms, char id[PD_ID_LEN + 1])
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(t, &end, 10);
        if (errno || end == t || *end != '_' || !end[1] || strlen(end + 1) > PD_ID_LEN)
                return -EINVAL;
        for (const char *p = end + 1; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
                        return -EINVAL;
        *ms = v;
        snprintf(id, PD_ID_LEN + 1, "%s", end + 1);
        return 0;
}

static enum MHD_Result list_error(struct pd_req *r, struct list_q *q, const char *msg)
{
        free(q->meta);
        return pd_e2b_reply_error(r, 400, "%s", msg);
}

enum MHD_Result pd_e2b_route_list(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct list_q q = { 0 };
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_q, &q);
        if (q.states_too_long || !states_valid(q.states))
                return list_error(r, &q, "state must be running or paused");
        long limit = LIST_MAX;
        const char *ls = pd_req_query(r, "limit");
        if (ls && *ls) {
                char *end;
                limit = strtol(ls, &end, 10);
                if (*end || limit < 1 || limit > LIST_MAX)
                        return list_error(r, &q, "limit must be 1..1000");
        }
        bool asc = false;
        const char *os = pd_req_query(r, "order");
        if (os && *os) {
                if (strcmp(os, "asc") && strcmp(os, "desc"))
                        return list_error(r, &q, "order must be asc or desc");
                asc = !strcmp(os, "asc");
        }
        int64_t after = INT64_MIN;
        const char *sa = pd_req_query(r, "startedAfter");
        if (sa && *sa && parse_rfc3339_ms(sa, &after) < 0)
                return list_error(r, &q, "startedAfter must be an RFC 3339 time");
        uint64_t tok_ms = 0;
        char tok_id[PD_ID_LEN + 1] = "";
        const char *next = pd_req_query(r, "nextToken");
        bool have_tok = next && *next;
        if (have_tok && parse_token(next, &tok_ms, tok_id) < 0)
                return list_error(r, &q, "nextToken is not one this server gave");
        const char *tplq = pd_req_query(r, "template");

        struct pd_srv_sandbox **v = NULL;
        size_t n = 0;
        if (pd_manager_snapshot(r->srv, &r->key, &v, &n) < 0) {
                free(q.meta);
                return pd_e2b_reply_error(r, 500, "cannot list sandboxes");
        }
        struct item *items = calloc(n + 1, sizeof *items);
        if (!items) {
                pd_manager_snapshot_free(r->srv, v, n);
                free(q.meta);
                return pd_e2b_reply_error(r, 500, "no memory");
        }
        for (size_t i = 0; i < n; i++)
                items[i] = (struct item){ .ms = v[i]->created_ms, .s = v[i] };
        qsort(items, n, sizeof *items, asc ? cmp_asc : cmp_desc);

        json_t *arr = json_array();
        const struct item *last = NULL;
        bool more = false;
        for (size_t i = 0; i < n && arr; i++) {
                const struct item *it = &items[i];
                if (have_tok) {
                        int c = cmp_key(it->ms, it->s->id, tok_ms, tok_id);
                        if (asc ? c <= 0 : c >= 0)
                                continue;       /* on an earlier page */
                }
                if ((int64_t)it->ms < after || (tplq && *tplq && strcmp(tplq, it->s->template_name)))
                        continue;
                json_t *info = pd_e2b_info_json(r->srv, it->s);
                if (!info)
                        continue;
                const char *st = json_string_value(json_object_get(info, "state"));
                if (!state_match(q.states, st ? st : "") || !meta_match(json_object_get(info, "metadata"), q.meta)) {
                        json_decref(info);
                        continue;
                }
                if (json_array_size(arr) >= (size_t)limit) {
                        json_decref(info);
                        more = true;
                        break;
                }
                json_array_append_new(arr, info);
                last = it;
        }
        char token[32 + PD_ID_LEN] = "";
        if (more && last)
                snprintf(token, sizeof token, "%llu_%s", (unsigned long long)last->ms, last->s->id);
        free(items);
        pd_manager_snapshot_free(r->srv, v, n);
        free(q.meta);
        char *text = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
        json_decref(arr);
        if (!text)
                return MHD_NO;
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        if (*token)
                MHD_add_response_header(resp, "X-Next-Token", token);
        return pd_reply_response(r, 200, resp);
}
