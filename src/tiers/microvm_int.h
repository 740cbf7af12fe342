/* Between the microvm tier's files: microvm.c (QEMU, clones, pause, fork)
 * and microvm_snap.c (named snapshots of a guest). */
#pragma once
#include "lib/sandbox.h"

/* Save the whole guest (RAM, devices; its writable layer is a tmpfs in that
 * RAM) into fd. The guest is stopped for the save and left as it was
 * before (running, or paused in memory). */
int pd_microvm_save_full(struct pd_sandbox *sb, int fd, struct pd_error *err);
/* Build a new sandbox (not created yet) from a full save in fd: runtime
 * dir, cgroup, uid, a QEMU restoring it, the relay (clock and RNG synced). */
int pd_microvm_start_from(struct pd_sandbox *sb, int fd, struct pd_error *err);

/* -ENOTSUP (err: "WHAT of a microvm sandbox with a network ...") when sb's
 * guest has a NIC, else 0: saves of such a guest are not restorable yet. */
int pd_microvm_refuse_with_network(struct pd_sandbox *sb, const char *what, struct pd_error *err);

/* microvm_snap.c: the tier's snapshot op, and create from such a snapshot
 * (1 = sb->spec.template_name names a microvm snapshot and sb was started
 * from it, 0 = it does not name one, <0 = error). */
int pd_microvm_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err);
int pd_microvm_create_from_snapshot(struct pd_sandbox *sb, struct pd_error *err);

/* microvm_console.c: copy sb's console log (a start that failed) into
 * <state>/vm/failed/, out gets "console log kept in PATH" (or why not);
 * console_gc removes the kept logs older than 7 days (paddock gc), returns
 * how many are left or -errno. */
void pd_microvm_keep_console(struct pd_sandbox *sb, char *out, size_t size);
int pd_microvm_console_gc(struct pd_state *st);
