/* Teardowns that outlive `paddock run` (bench/README.md, issue 19): the
 * CLI reports the command's exit and leaves the sandbox's teardown to a
 * child of its own. Each such teardown holds a shared flock on
 * <state>/teardown.lock until it has finished, so "every teardown of this
 * state dir is done" is an event: an exclusive flock on the same file.
 * A crashed teardown drops its lock; what it left is an ordinary record
 * that `paddock gc` collects. */
#pragma once
#include "lib/state.h"

/* The file's name in the state dir (tests wait on it too). */
#define PD_TEARDOWN_LOCK "teardown.lock"

/* An fd holding a shared lock on the state dir's teardown lock (CLOEXEC;
 * the lock lives as long as any copy of the fd), or -errno. */
int pd_teardown_hold(struct pd_state *st);
/* Block until no teardown of this state dir is in flight; 0 or -errno. */
int pd_teardown_wait(struct pd_state *st);
