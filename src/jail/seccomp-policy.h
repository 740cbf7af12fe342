/* The sandbox's seccomp filter (DESIGN §5, docs/seccomp.md).
 *
 * An allowlist modelled on Docker's default profile, built with libseccomp,
 * exported as classic BPF and cached on disk, then installed by the
 * post-clone child with one seccomp(2) call. */
#pragma once
#include <errno.h>
#include <stdbool.h>
#include <linux/filter.h>

#include "lib/error.h"

/* errno for clone/unshare with a namespace flag. The kernel never returns
 * EOPNOTSUPP from clone or unshare, so it means "denied by paddock". */
#define PD_SECCOMP_NS_ERRNO EOPNOTSUPP
/* errno for the other argument-level denials (ioctl TIOCSTI/TIOCLINUX,
 * socket families, personality, seccomp listeners), as Docker does, and for
 * the process tier's bind() and unix sockets (deny_unix_names). */
#define PD_SECCOMP_DENY_ERRNO EPERM
/* Every syscall not allowed (including numbers libseccomp does not know)
 * returns ENOSYS, so programs take their "old kernel" fallback paths. */
#define PD_SECCOMP_DEFAULT_ERRNO ENOSYS

struct pd_seccomp_opts {
        /* Also deny socket(AF_INET/AF_INET6, SOCK_DGRAM or SOCK_RAW). */
        bool deny_udp_raw;
        /* Deny socket(AF_INET/AF_INET6) altogether: the process tier under
         * network none, which shares the host's network namespace (Landlock
         * cannot stop listen() on an unbound socket, MPTCP or TCP Fast Open
         * from reaching the host's network). */
        bool deny_inet;
        /* The process tier, which shares the host's ipc namespace: SysV IPC
         * (shm*, msg*, sem*) and POSIX message queues (mq_*) are left out of
         * the allowlist, so they answer ENOSYS, as on a kernel built without
         * them. Host objects stay out of reach and nothing the sandbox could
         * create outlives it (docs/seccomp.md). */
        bool deny_ipc;
        /* The process tier, which shares the host's network namespace and so
         * its abstract unix socket names: no socket(AF_UNIX), no bind() (any
         * family) and socketpair(AF_UNIX) of SOCK_STREAM or SOCK_SEQPACKET
         * only; the rest EPERM. seccomp cannot read bind()'s address, so no
         * socket of the sandbox may be named at all: none can squat an
         * abstract name a host client connects to, or reach a host socket. */
        bool deny_unix_names;
        /* supervised tier: open, openat, openat2, creat, connect, execve and
         * execveat return SCMP_ACT_NOTIFY (a supervisor decides) instead of
         * being allowed. Install with pd_seccomp_install_listener. */
        bool notify;
        /* with notify: also the calls that create, remove, rename, link
         * or change the metadata of a path or of an fd's file (the
         * supervisor performs them under the policy's path rules). */
        bool notify_paths;
        /* with notify: sendmsg and sendmmsg, and sendto with an address
         * (the supervisor performs them under the connect rules); sendto
         * without one (every send on a connected socket) stays allowed. */
        bool notify_sends;
};

/* A filter as raw BPF, owned by whoever holds it: free with pd_bpf_free. */
struct pd_bpf {
        struct sock_filter *insns;
        unsigned short len;
};

/* Build the filter with libseccomp and export it as raw BPF. */
int pd_seccomp_build(const struct pd_seccomp_opts *o, struct pd_bpf *out,
                     struct pd_error *err);

/* Like pd_seccomp_build, through a cache in cache_dir (may be NULL: no
 * cache). The file is named by a hash of the options, the libseccomp
 * version, PD_SECCOMP_POLICY_VERSION and the allowlist; it is used if it is
 * well formed, else rebuilt and replaced atomically. Failing to write the
 * cache is not an error. */
int pd_seccomp_load(const char *cache_dir, const struct pd_seccomp_opts *o,
                    struct pd_bpf *out, struct pd_error *err);

/* Install f in the calling thread. Async-signal-safe (no malloc, no stdio):
 * meant for the post-clone child just before exec. The caller must have set
 * no_new_privs (or hold CAP_SYS_ADMIN). Returns 0 or -errno. */
int pd_seccomp_install(const struct pd_bpf *f);

void pd_bpf_free(struct pd_bpf *f);
/* Install a filter built with .notify and return its user-notification
 * listener fd (CLOEXEC), or -errno. Post-clone child safe, like
 * pd_seccomp_install. */
int pd_seccomp_install_listener(const struct pd_bpf *f);
