/* Landlock for the `process` tier (DESIGN §1, docs/security.md).
 *
 * The host side builds the ruleset (opening every path it names) before it
 * forks; the post-fork child only calls pd_landlock_restrict(), which is a
 * single system call. The policy:
 *   workspace                       every filesystem right the ABI has
 *   /usr /bin /sbin /lib* /etc      read and execute
 *   /proc                           read
 *   /dev/null, zero, full, random, urandom, tty, ptmx, /dev/pts
 *                                   read, write, truncate, device ioctls
 *   the agent binary                read and execute
 *   TCP bind and connect            denied (no rules)
 *   abstract unix sockets, signals  scoped to the sandbox's domain
 * Everything else in the filesystem is denied. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "lib/error.h"

struct pd_landlock_opts {
        const char *workspace;          /* all rights beneath it */
        const char *agent_path;         /* read + execute on this one file */
        /* Accept a kernel whose ABI lacks a right the policy needs; what is
         * missing is then listed in pd_landlock_info.weaker. */
        bool allow_weaker;
};

struct pd_landlock_info {
        int abi;                        /* the ABI the ruleset was built for */
        char weaker[256];               /* names of missing needed rights, comma separated ("" = none) */
};

/* The kernel's Landlock ABI version; 0 when Landlock is not enabled.
 * $PADDOCK_LANDLOCK_ABI_MAX (a test hook) can only lower it. */
int pd_landlock_abi(void);

/* Build the ruleset; returns its fd (CLOEXEC). Fails with EOPNOTSUPP naming
 * every missing right when the ABI is too old and allow_weaker is false, and
 * always when Landlock is off. */
int pd_landlock_ruleset(const struct pd_landlock_opts *o, struct pd_landlock_info *info,
                        struct pd_error *err);


/* Enforce the ruleset on the calling thread (and what it execs). No malloc:
 * for the post-fork child. no_new_privs must be set first. 0 or -errno. */
int pd_landlock_restrict(int ruleset_fd);
