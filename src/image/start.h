/* A template's start and ready commands (start.c; docs/templates.md "Start
 * and ready commands"), for the builder's check and the server's creates. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/sandbox.h"

/* Start a template's start command in sb (as uid/gid, in cwd, with exactly
 * env, by /bin/sh -c) and run its ready command until it exits 0, backing
 * off up to 1 s between tries, for at most timeout_ms (<= 0: 60 s). A start
 * command that exits non-zero, or a ready command never ready, is an error
 * with the start command's last output (the start command is then killed).
 * *pid: the start command's (it keeps running). start.c */
struct pd_template_start {
        const char *start, *ready;
        uint32_t uid, gid;
        const char *cwd;
        const char *const *env;
        size_t n_env;
        int timeout_ms;
};
/* The error code of a start command that exited non-zero or was killed:
 * the template's fault, not the server's (a create answers 4xx with it,
 * docs/api.md). An errno nothing else on the create path sets. */
#define PD_E_START_FAILED EBADE
int pd_template_start(struct pd_sandbox *sb, const struct pd_template_start *s, uint32_t *pid,
                      struct pd_error *err);
