/* The container's init between clone and exec (init.c), and what create.c
 * hands it. */
#pragma once
#include "oci/oci.h"
#include "jail/seccomp-policy.h"

struct oci_init_args {
        const struct oci_config *cfg;
        struct oci_state *st;
        int sync;                       /* SOCK_SEQPACKET to the runtime */
        int console;                    /* connected console socket, or -1 */
        int fifo;                       /* O_PATH of exec.fifo */
        int nsfd[OCI_MAX_NS];           /* namespaces joined by path, or -1 */
        int unshare_flags;              /* created after joining a user namespace */
        int preserve_fds;
        const struct pd_bpf *seccomp;
        const struct pd_bpf *notify;    /* supervised: paddock's filter with user notification */
};

/* Datagrams: 'G' go (runtime to init, with the init's host pid); for
 * supervised, 'L' (init to runtime, the listener fd attached) and 'G' again
 * once the supervisor holds it; then 'R' ready or 'E' error. */
struct oci_sync_msg {
        char kind;
        int code;
        pid_t pid;
        char msg[PD_ERROR_MSG_MAX];
};

struct create_opts_pub {
        const char *pid_file, *console_socket;
        int preserve_fds;
        /* run in the foreground with terminal=true and no console socket:
         * the pty master comes back here for the runtime to relay. */
        int *relay_master;
};

int oci_create(const struct oci_global *g, const char *id, const struct create_opts_pub *po, struct oci_config *cfg,
               pid_t *out_pid, struct pd_error *err);
__attribute__((noreturn)) void oci_init_main(struct oci_init_args *a);

/* supervise.c: a sync datagram (fd: an attached one, or left as is). */
ssize_t oci_recv_msg(int sock, struct oci_sync_msg *m, int *fd);
/* Start paddock-supervisor on listener lfd (always consumed) for the
 * container of st, whose init's root and user namespace it uses. */
int oci_supervisor_start(const struct oci_state *st, const char *uid_map, int lfd, pid_t *out_pid, uint64_t *out_start,
                         struct pd_error *err);
/* supervised (init.c): install bpf with user notification, send its
 * listener over sync and wait for the runtime's 'G'. */
int oci_hand_listener(int sync, const struct pd_bpf *notify, struct pd_error *err);
