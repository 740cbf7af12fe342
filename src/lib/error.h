/* pd_error: a fixed-size error object filled on failure (crun's pattern).
 * Functions return >= 0 on success or a negative errno, and fill *err with a
 * human message. Fixed size, no malloc, so a post-clone child may use it. */
#pragma once
#include <errno.h>
#include <stdarg.h>

#define PD_ERROR_MSG_MAX 512

struct pd_error {
        int code;                       /* positive errno, 0 = no error */
        char msg[PD_ERROR_MSG_MAX];
};

/* Set err (if non-NULL) to "fmt: strerror(code)" and return -code. */
int pd_error_set(struct pd_error *err, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Same, without appending strerror. */
int pd_error_setx(struct pd_error *err, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Prefix context on the way up: "ctx: old message". Returns -err->code. */
int pd_error_prefix(struct pd_error *err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
void pd_error_clear(struct pd_error *err);
