/* What an agent says, checked before the host-side client (client.h)
 * decodes it.
 *
 * The agent is code inside the sandbox: a compromised agent, or a microvm
 * guest's kernel, may send anything that fits in a frame (1 MiB). Each check
 * walks one payload: every attribute well formed; the fields a decoder needs
 * present, of their size and range; a field meant once not twice; no process
 * or entry listed twice; strings without NUL bytes and within the kernel's
 * limits (a name NAME_MAX, a path PATH_MAX, an argument MAX_ARG_STRLEN);
 * counts within what a real agent sends in one frame. Unknown tags pass
 * (either side may add attributes, docs/protocol.md).
 *
 * 0, or -EPROTO with a message saying what was wrong: nothing of it is
 * decoded (the server's routes answer 502). Pure functions over bytes
 * (tests/unit). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

#define PD_AGENT_PROCS_MAX 8192u        /* PROC entries in a LIST reply */
#define PD_AGENT_ENTRIES_MAX 16384u     /* ENTRY items in a FILE_LIST reply */

/* A LIST reply: PROC {PID STATE ...}*. */
int pd_agent_check_procs(const uint8_t *p, size_t len, struct pd_error *err);
/* A FILE_* reply: between min and max ENTRY {NAME PATH FTYPE SIZE MODE UID
 * GID MTIME_NS LINK?} items. */
int pd_agent_check_entries(const uint8_t *p, size_t len, unsigned min, unsigned max, struct pd_error *err);
/* A WATCH_EVENT payload: {NAME EVENT}. */
int pd_agent_check_watch_event(const uint8_t *p, size_t len, struct pd_error *err);
/* A FILE_OPENED payload: {SIZE?}. 1 with *size set, 0 when the length is
 * not known (no SIZE), or -EPROTO. */
int pd_agent_check_file_opened(const uint8_t *p, size_t len, uint64_t *size, struct pd_error *err);
