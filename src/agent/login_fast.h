/* The login fast path (login_fast.c): `/bin/bash -l -c CMD` run without
 * bash where the agent knows exactly what bash would exec and with which
 * environment. */
#ifndef PD_AGENT_LOGIN_FAST_H
#define PD_AGENT_LOGIN_FAST_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ag_login_fast {
        char *cmd;              /* the words' storage */
        char **argv, **envp;    /* what bash would exec: argv[0] as typed */
        char path[PATH_MAX];    /* the program bash would find */
};

/* 1 and *out filled when argv is such a command and every condition
 * holds; 0 (nothing to free) when real bash must run. */
int ag_login_fast_plan(char *const *argv, char *const *envp, bool pty, const char *cwd, uid_t uid,
                       gid_t gid, const gid_t *groups, size_t ngroups, struct ag_login_fast *out);
void ag_login_fast_free(struct ag_login_fast *f);

#endif
