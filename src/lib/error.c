#include "lib/error.h"

#include <stdio.h>
#include <string.h>

static int pd_error_vset(struct pd_error *err, int code, int with_errno,
                         const char *fmt, va_list ap)
{
        if (code <= 0)
                code = EIO;
        if (!err)
                return -code;
        err->code = code;
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        if (n < 0)
                n = 0;
        if (with_errno && (size_t)n < sizeof err->msg)
                snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(code));
        return -code;
}

int pd_error_set(struct pd_error *err, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = pd_error_vset(err, code, 1, fmt, ap);
        va_end(ap);
        return r;
}

int pd_error_setx(struct pd_error *err, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = pd_error_vset(err, code, 0, fmt, ap);
        va_end(ap);
        return r;
}

int pd_error_prefix(struct pd_error *err, const char *fmt, ...)
{
        if (!err)
                return -EIO;
        char old[PD_ERROR_MSG_MAX];
        memcpy(old, err->msg, sizeof old);
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n + 3 < sizeof err->msg) {
                size_t room = sizeof err->msg - (size_t)n - 3;
                memcpy(err->msg + n, ": ", 2);
                size_t ol = strnlen(old, room);
                memcpy(err->msg + n + 2, old, ol);
                err->msg[n + 2 + ol] = '\0';
        }
        if (err->code <= 0)
                err->code = EIO;
        return -err->code;
}

void pd_error_clear(struct pd_error *err)
{
        if (err) {
                err->code = 0;
                err->msg[0] = '\0';
        }
}
