/* The container tier's sandbox child running paddock-agent's loop itself
 * instead of exec'ing the agent binary (`paddock run` only: the lean binary
 * links the agent in, src/agent/inproc.h). Post-clone child code: no
 * malloc. */
#pragma once

#include "lib/error.h"

typedef int (*pd_agent_main_fn)(int argc, char **argv);

/* What the exec would have done, done by hand, after pd_fds_for_agent and
 * before the seccomp filter: every fd above the agent's (4 + n_cg ..)
 * closed but sync_fd; caught signals back to their default action (ignored
 * ones stay ignored, as across exec); the name, command line and
 * environment paddock was started with wiped from this copy of its memory,
 * so /proc/1/cmdline and /proc/1/comm read paddock-agent and nothing of the
 * caller's environment is left in the sandbox's PID 1. 0 or -errno. */
int pd_agent_inproc_prepare(int n_cg, int sync_fd, struct pd_error *err);

/* Close sync_fd (the host reads its hang-up as the agent having started,
 * as it reads the close-on-exec of the exec path), then run the agent's
 * main with the command line pd_fds_exec_agent would have given it. */
_Noreturn void pd_agent_inproc_run(pd_agent_main_fn fn, int sync_fd, int n_cg, const char *opt,
                                   const char *optval);
