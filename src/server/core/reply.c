/* Replies of the server's routes (server.h): JSON bodies, errors in the
 * API's shape {"error": {"code", "message"}}, errno to HTTP status, and
 * reading a request's JSON body and query. pd_reply_response, which every
 * reply ends in, is http.c's: it marks the request answered. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/server.h"
#include "server/core/log.h"

/* The message of an error body in any of the server's shapes: native
 * {"error": {"message"}}, E2B's {"message"} or {"error": "..."}. */
static const char *error_message(json_t *body)
{
        json_t *e = json_object_get(body, "error");
        const char *m = json_string_value(json_object_get(e, "message"));
        if (!m)
                m = json_string_value(json_object_get(body, "message"));
        if (!m)
                m = json_string_value(e);
        return m ? m : "(no message)";
}

/* A 5xx is the server's failure, never the client's: the operator gets a
 * line with its cause (the message the client got), whatever answered it
 * (native, E2B, tunnel). Quotes and control bytes are escaped: the
 * message may quote what a client sent. */
static void esc(const char *m, char *out, size_t size)
{
        size_t n = 0;
        for (; *m && n + 4 < size; m++) {
                unsigned char c = (unsigned char)*m;
                if (c == '"' || c == '\\') {
                        out[n++] = '\\';
                        out[n++] = (char)c;
                } else {
                        out[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
                }
        }
        out[n] = '\0';
}

static void log_5xx(struct pd_req *r, unsigned status, json_t *body)
{
        char cause[512], target[80] = "-";
        esc(error_message(body), cause, sizeof cause);
        if (r->n_params && r->params[0])
                esc(r->params[0], target, sizeof target);
        pd_log("error", "answered %u method=%s target=\"%s\" cause=\"%s\"", status, r->method ? r->method : "-",
               target, cause);
}

enum MHD_Result pd_reply_json(struct pd_req *r, unsigned status, json_t *body)
{
        if (status >= 500 && status <= 599)
                log_5xx(r, status, body);
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!text)
                return MHD_NO;
        size_t n = strlen(text);
        /* one trailing newline: friendlier for curl users */
        char *t2 = realloc(text, n + 2);
        if (t2) {
                text = t2;
                text[n++] = '\n';
                text[n] = '\0';
        }
        struct MHD_Response *resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        r->resp_bytes = (int64_t)n;
        return pd_reply_response(r, status, resp);
}

enum MHD_Result pd_reply_empty(struct pd_req *r, unsigned status)
{
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        r->resp_bytes = 0;
        return pd_reply_response(r, status, resp);
}

enum MHD_Result pd_reply_error(struct pd_req *r, unsigned status, const char *code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        json_t *body = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
        if (!body) /* message not UTF-8 (it may quote user input) */
                body = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", "(message not printable)");
        return pd_reply_json(r, status, body);
}

enum MHD_Result pd_reply_errno(struct pd_req *r, int neg_errno, const char *message)
{
        int e = neg_errno < 0 ? -neg_errno : neg_errno;
        unsigned status;
        const char *code;
        switch (e) {
        case ENOENT:
        case ESRCH: status = 404; code = "not_found"; break;
        case EINVAL:
        case ENAMETOOLONG:
        case ELOOP:
        case EISDIR:
        case ENOTDIR: status = 400; code = "bad_request"; break;
        case EEXIST:
        case EALREADY:
        case EPIPE:
        case EBUSY: status = 409; code = "conflict"; break;
        case ENOSPC:
        case EDQUOT: status = 507; code = "no_space"; break;
        case EACCES:
        case EPERM: status = 403; code = "forbidden"; break;
        case EMSGSIZE:
        case EFBIG: status = 413; code = "too_large"; break;
        case ETIMEDOUT: status = 504; code = "timeout"; break;
        default: status = 500; code = "internal"; break;
        }
        return pd_reply_error(r, status, code, "%s", message && *message ? message : strerror(e));
}

json_t *pd_req_json(struct pd_req *r, enum MHD_Result *ret)
{
        if (!r->body || r->body_len == 0) {
                *ret = pd_reply_error(r, 400, "bad_request", "empty body: expected a JSON object");
                return NULL;
        }
        json_error_t je;
        json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je);
        if (!j) {
                *ret = pd_reply_error(r, 400, "bad_request", "invalid JSON at line %d column %d: %s", je.line,
                                      je.column, je.text);
                return NULL;
        }
        if (!json_is_object(j)) {
                json_decref(j);
                *ret = pd_reply_error(r, 400, "bad_request", "the body must be a JSON object");
                return NULL;
        }
        return j;
}

const char *pd_req_query(struct pd_req *r, const char *name)
{
        return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

void pd_deferred_fail(struct pd_deferred_error *d, unsigned status, const char *code, const char *fmt, ...)
{
        if (d->status)
                return;
        d->status = status;
        snprintf(d->code, sizeof d->code, "%s", code);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
}
