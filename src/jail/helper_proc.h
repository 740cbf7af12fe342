/* Helper executables started by a sandbox's creator (the supervised tier's
 * supervisor, the process tier's Landlock audit reader): fork+exec with a
 * readiness pipe, and a stop by pidfd that never signals a reused pid.
 *
 * The creator may be the multi-threaded server, so the forked child makes
 * only async-signal-safe calls until it execs. The helper gets its own
 * session and no parent-death signal: it outlives its creator. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Fork+exec path with argv (environment: a fixed PATH only). Its fds: 0
 * /dev/null, 1 and 2 the file `log` in dirfd (appended, created 0600),
 * then fds[0..nfds-1] from 3 on, then the write end of a ready pipe (fd
 * 3 + nfds). Returns the child's pid with the pipe's read end in *ready_r,
 * or -errno with *step naming what failed: "stdio", "pipe" or "fork". */
pid_t pd_helper_spawn(const char *path, char *const argv[], int dirfd, const char *log, const int *fds, int nfds,
                      int *ready_r, const char **step);

/* Wait up to timeout_ms for what the helper writes on its ready pipe: at
 * most size - 1 bytes into msg, NUL-terminated, their count (or -errno) in
 * *n (0 when nothing came). Returns poll's result: 0 on timeout. */
int pd_helper_wait_ready(int ready_r, int timeout_ms, char *msg, size_t size, ssize_t *n);

/* SIGKILL and reap a helper that did not start. */
void pd_helper_kill(pid_t pid);

/* Stop the helper pid whose /proc start time is start (checked again once
 * a pidfd pins it; 0 or a mismatch: only reap it if it is our zombie):
 * send sig (0: none), give it grace_ms to exit, then SIGKILL. Reaped when
 * it is our child; otherwise waited for up to reap_ms. */
void pd_helper_stop(pid_t pid, uint64_t start, int sig, int grace_ms, int reap_ms);
