/* The end of `paddock run`: the sandbox's teardown, after the command's
 * result is reported (issue 19, bench/README.md). */
#pragma once
#include "lib/sandbox.h"

#include <stdbool.h>

/* Whether sb's teardown goes on after `paddock run` exits: the container
 * tier, unless PADDOCK_TEARDOWN=sync. (Other tiers wait for processes of
 * their own, QEMU or runsc, that only their parent can reap.) */
bool pd_run_teardown_in_background(const struct pd_sandbox *sb);
/* Hand sb's teardown to a child of this process that holds the state
 * dir's teardown lock (lib/teardown.h) until it is done, with its stdio on
 * /dev/null so that nobody reading our output waits for it (its errors go
 * to <state>/teardown.log), and _exit(status) at once. Returns only when
 * that failed (-errno; nothing happened): destroy sb here. */
int pd_run_teardown_handoff(struct pd_sandbox *sb, struct pd_state *st, int status);
/* 0 when PADDOCK_TEARDOWN is unset, empty, "sync" or "async"; else a
 * message for the user and -EINVAL. */
int pd_run_teardown_check_env(void);
