/* The agent's file descriptors at exec, for every tier. Post-clone child
 * code: no malloc. */
#pragma once

#include "jail/cgroup.h"

/* stdio to /dev/null, the agent's listening socket at fd 3, the workload's
 * cgroup.procs fds at 4, 5, ..., and every other fd CLOEXEC, so nothing the
 * caller of paddock left open reaches the sandbox. The fds in keep[] (the
 * agent's exec fd, the sync socket) survive until exec: they are moved above
 * the placed range first, and *keep[i] updated. 0 or -errno. */
int pd_fds_for_agent(int listen_fd, const int *cg_fds, int n_cg, int *const *keep, int n_keep);

/* Close every fd >= 3 except the n listed ones. The first thing a setup
 * child does: fds it inherited from a multi-threaded creator may carry
 * locks (a flock on a shared registry held by another thread at clone
 * time) that must not live on in a child that could get stuck. */
int pd_fds_close_except(const int *keep, int n);

/* Exec paddock-agent (from its O_PATH fd) with the fd layout above:
 * --listen-fd 3, --cgroup-fd 4.., plus one tier option (e.g. "--home DIR"
 * or "--sudo-socket PATH"). Returns only on failure, with -errno. */
int pd_fds_exec_agent(int agent_fd, int n_cg, const char *opt, const char *optval);

/* The agent's command line for the fd layout above (what
 * pd_fds_exec_agent execs; the in-process agent of src/jail/agent_inproc.c
 * gets the same). Returns argc or -EINVAL. */
struct pd_agent_argv {
        char cgargs[PD_CG_MAX_CTRL][16];
        char *argv[6 + 2 * PD_CG_MAX_CTRL];
};
int pd_fds_agent_argv(struct pd_agent_argv *a, int n_cg, const char *opt, const char *optval);

/* The agent's whole environment. */
#define PD_AGENT_ENV_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
