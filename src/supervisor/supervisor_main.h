/* paddock-supervisor, main's internals shared by main.c (opens, connects,
 * execs) and intake.c (the calls that change paths, and sends). */
#pragma once
#include <linux/seccomp.h>
#include <sys/types.h>

#include "supervisor/sv.h"

#define UID_RANGE 65536u

/* Open /proc/TID/status files, by tid: reread (pread at 0 regenerates it)
 * for every call instead of opened and closed. An entry whose thread is
 * gone reads ESRCH (the fd holds the thread's struct pid, never a later
 * thread with the same number) and is reopened. */
#define STATUS_CACHE 256
struct status_fd {
        pid_t tid;
        int fd;
};

struct sv_main {
        int listener, sock, procfd;
        pid_t broker;
        uint32_t uid_base;
        struct status_fd status[STATUS_CACHE];
        /* The sandbox's root (the broker's chroot): a caller whose root is
         * this very directory on this very mount needs no root fd. */
        uint64_t root_ino, root_mnt;
        uint32_t root_dev_major, root_dev_minor, root_mnt_mask;
        /* --root-fixed: every caller descends from the sandbox's first
         * process (none joins from outside, as an OCI exec does), so until
         * one of them calls chroot every caller's root is the sandbox's:
         * nothing else inside can change a root (pivot_root, setns, mount
         * namespaces and the new mount API are refused). chroot_seen: one
         * did (its notification is seen before the call takes effect); from
         * then on each caller's root is checked per call. */
        bool root_fixed, chroot_seen;
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        size_t req_size, resp_size;
        struct sv_audit audit;
        struct sv_job job;
};


void sv_respond(struct sv_main *m, uint64_t id, int error, uint32_t flags);
void sv_respond_val(struct sv_main *m, uint64_t id, int64_t val);
bool sv_id_valid(struct sv_main *m, uint64_t id);
ssize_t sv_read_string(pid_t tid, uint64_t addr, char *buf, size_t max);
int sv_read_mem(pid_t tid, uint64_t addr, void *buf, size_t n);
int sv_read_status(struct sv_main *m, pid_t tid, struct sv_creds *c, int *ns_pid, int *ns_tgid);
void sv_send_job(struct sv_main *m, const int *fds, unsigned nfds);
void sv_audit_fail(struct sv_main *m, const char *event, const char *path, int e);
int sv_open_proc(struct sv_main *m, pid_t tid, const char *what, int flags);
bool sv_root_is_sandbox(struct sv_main *m, pid_t tid);
void sv_rewrite_proc_self(char *path, int ns_tgid, int ns_pid);
/* The fd number /dev/stdin, /dev/fd/N, /proc/self/fd/N... name, else -1. */
int sv_magic_fd(const char *p, int ns_tgid, int ns_pid);
/* A dup of the caller's fd (pidfd_getfd), or -errno. */
int sv_take_fd(pid_t tid, int fd);

/* intake.c */
void sv_handle_pathop(struct sv_main *m, const struct seccomp_notif *n);
void sv_handle_send(struct sv_main *m, const struct seccomp_notif *n);
bool sv_is_pathop(int nr);
bool sv_is_send(int nr);
