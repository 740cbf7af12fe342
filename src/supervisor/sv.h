/* paddock-supervisor: the supervised tier's per-sandbox supervisor
 * (DESIGN §1, docs/security.md "`supervised` tier").
 *
 * Two processes, because no single one can do both halves:
 *   main    host root in the host's namespaces, no Landlock. Receives the
 *           notifications, copies the syscall's pointer arguments out of the
 *           caller (process_vm_readv), opens the caller's root, cwd or dirfd
 *           through /proc/TID/... as O_PATH, takes connect's socket with
 *           pidfd_getfd, reads the caller's credentials, and passes all that
 *           to the broker. Audits and continues execs itself. (A Landlock
 *           domain would stop all of this: Landlock forbids ptrace-class
 *           access from a domain to any process outside it, and the
 *           sandbox's processes have no domain.)
 *   broker  a child of main that joined the sandbox's user namespace
 *           (so capabilities and ids mean exactly what they mean to the
 *           caller), chrooted to the sandbox's root and restricted by a
 *           Landlock domain allowing only what lies beneath that root. For
 *           each call it takes on the caller's fsuid, fsgid, groups, umask
 *           and effective capabilities, performs the open or connect
 *           itself on what main copied, decides on what it actually
 *           opened and injects the result (SECCOMP_IOCTL_NOTIF_ADDFD with
 *           SEND, which fails unless the notification is still pending) or
 *           the error.
 * Files: main.c and intake.c (main: opens, connects, execs; the calls that
 * change paths and sends), broker.c, modify.c, send.c and denied.c (the
 * broker), policy.c, audit.c. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define SV_MAX_GROUPS 64
#define SV_ADDR_MAX 128                 /* >= sizeof(struct sockaddr_storage) */

enum sv_op { SV_OPEN = 1, SV_CONNECT = 2, SV_PATHOP = 3, SV_SEND = 4 };

/* SV_PATHOP: the calls that create, remove, rename or link a name or change
 * a file (modify.c), each family in one form. */
enum sv_pathop {
        PO_MKDIR = 1,   /* path, mode */
        PO_MKNOD,       /* path, mode, dev */
        PO_UNLINK,      /* path, flags (AT_REMOVEDIR) */
        PO_SYMLINK,     /* path (the new name), path2 (its content) */
        PO_LINK,        /* path (existing), path2 (new name; dir2), flags */
        PO_RENAME,      /* path (old), path2 (new; dir2), flags */
        PO_CHMOD,       /* path or fd, mode, flags */
        PO_CHOWN,       /* path or fd, uid, gid, flags */
        PO_TRUNCATE,    /* path or fd, length */
        PO_FALLOCATE,   /* fd, mode, offset, length */
        PO_SETXATTR,    /* path or fd, name (path2), value (tail), flags */
        PO_REMOVEXATTR, /* path or fd, name (path2) */
        PO_UTIMENS,     /* path or fd, times (tail: 2 struct timespec, or none = now), flags */
        PO_BIND,        /* fd (a socket), address */
};

/* The caller's credentials, as ids of the sandbox's user namespace. */
struct sv_creds {
        uint32_t fsuid, fsgid;
        uint32_t ngroups;
        uint32_t groups[SV_MAX_GROUPS];
        uint64_t cap_eff;
        uint32_t umask;
};

/* SV_SEND: tail holds nmsg records, each this header, then the address,
 * the data and the control part, each padded to 8 bytes. SCM_RIGHTS fds in
 * the control parts are passed along (after the job's own fds, in order). */
struct sv_msg {
        uint32_t namelen, datalen, controllen, nrights;
};

#define SV_SEND_MAX (64 * 1024)         /* data bytes per brokered send call */
#define SV_SEND_MSGS 64                 /* messages per brokered sendmmsg */
#define SV_RIGHTS_MAX 64                /* fds passed per brokered send call */
#define SV_TAIL_MAX (SV_SEND_MAX + SV_SEND_MSGS * (sizeof(struct sv_msg) + SV_ADDR_MAX + 1024) + 8192)
#define SV_JOB_FDS (4 + SV_RIGHTS_MAX)

/* One job from main to the broker (SOCK_SEQPACKET, with up to 4 fds:
 * root, dir, dir2, extra — which of them are present is in the flags —
 * then a send's SCM_RIGHTS fds). On the wire: the fields up to path, then
 * path and path2 NUL-terminated, then tail_len bytes of tail. */
struct sv_job {
        uint64_t id;                    /* notification id */
        uint32_t op;
        int32_t nr;                     /* syscall number, for the record */
        int32_t host_tid, ns_pid;       /* caller, in the host's / the sandbox's pid namespace */
        int32_t ns_tgid;                /* the caller's process (thread group) in the sandbox */
        uint32_t nfds;
        int8_t has_root, has_dir, has_extra;
        int8_t has_dir2;                /* path2 is relative to its own directory */
        int8_t sandbox_root;            /* no root fd: the caller's root is the sandbox's (the broker's own) */
        int8_t validated;               /* main checked ID_VALID after its reads (else the broker checks
                                         * before any action with a side effect; ADDFD checks itself) */
        int8_t cloexec;                 /* O_CLOEXEC requested: for ADDFD's newfd_flags */
        int8_t has_path2;
        uint64_t flags, mode, resolve;  /* open_how */
        uint32_t addrlen;               /* connect */
        uint8_t addr[SV_ADDR_MAX];
        struct sv_creds creds;
        uint32_t pathop;                /* SV_PATHOP: enum sv_pathop */
        uint64_t args[6];               /* SV_PATHOP, SV_SEND: the numbers the call needs */
        uint32_t nmsg, nrights;         /* SV_SEND */
        int32_t sock_type;              /* SV_SEND: SO_TYPE of the socket */
        uint32_t tail_len;
        char path[PATH_MAX];            /* NUL-terminated */
        char path2[PATH_MAX];
        uint8_t tail[SV_TAIL_MAX];
};

/* ---- policy.c ---- */
#include "supervisor/policy.h"

/* ---- audit.c ---- */
struct sv_audit {
        int fd;
        const char *sandbox;
        char buf[64 * 1024];
        size_t len;
        uint64_t window;                /* current second (CLOCK_MONOTONIC) */
        unsigned in_window;             /* lines written in it */
        unsigned long suppressed;       /* lines dropped in it */
        unsigned long suppressed_total;
        char ts[40];                    /* cached timestamp text */
        time_t ts_sec;
        uint64_t first_ns;              /* CLOCK_MONOTONIC of the oldest buffered line */
};

/* Buffered lines are written at the latest this long after the first of
 * them (or when the buffer fills, and when the process exits): one write()
 * per burst, not per brokered call. */
#define SV_AUDIT_DELAY_MS 100

/* Lines per second written in full; beyond that, one summary line per
 * second counts what was dropped. */
#define SV_AUDIT_RATE 2000

void sv_audit_init(struct sv_audit *a, int fd, const char *sandbox);
/* Start a line: returns false if the rate cap drops it. Then add fields
 * with sv_audit_str/_int and finish with sv_audit_end. */
bool sv_audit_begin(struct sv_audit *a, const char *event);
void sv_audit_str(struct sv_audit *a, const char *key, const char *val);
void sv_audit_strn(struct sv_audit *a, const char *key, const char *val, size_t n);
void sv_audit_int(struct sv_audit *a, const char *key, long long v);
void sv_audit_raw(struct sv_audit *a, const char *text);
void sv_audit_list(struct sv_audit *a, const char *key, const char *const *vals, const size_t *lens, unsigned n);
void sv_audit_end(struct sv_audit *a);
/* Write the buffered lines (complete lines only, one write()). */
void sv_audit_flush(struct sv_audit *a);
/* Milliseconds until the buffered lines are due (0: now), -1 if none. */
int sv_audit_due_ms(const struct sv_audit *a);
/* Write a single complete line now, unbuffered (forked helpers). */
void sv_audit_flush_line(struct sv_audit *a);

/* ---- broker.c ---- */
struct sv_deny_inode {
        uint64_t dev, ino;              /* as the sandbox's setup recorded them (struct pd_deny_inode) */
};
struct sv_broker_args {
        int listener;                   /* the seccomp listener */
        int sock;                       /* jobs from main */
        int rootfd;                     /* O_PATH of the sandbox's root */
        int userns;                     /* the sandbox's user namespace */
        int audit_fd;
        const char *sandbox;
        uint32_t uid_base;
        const struct sv_policy *policy;
        const struct sv_deny_inode *deny_inodes;        /* files deny mounts cover (sorted) */
        unsigned n_deny_inodes;
};
/* Set up (namespace, chroot, Landlock) and serve jobs until main goes.
 * Reports setup failure on sock as a text message. Never returns. */
_Noreturn void sv_broker_main(const struct sv_broker_args *a);

/* ---- shared helpers ---- */
int sv_deny_inode_cmp(const void *a, const void *b);   /* main.c */
const char *sv_syscall_name(int nr);                    /* audit.c */
