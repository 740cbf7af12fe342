/* paddock-agent internals shared by its files. One single-threaded epoll
 * loop; every object that owns an fd embeds a struct ag_handler whose
 * callback the loop calls. Objects are never freed inside a callback
 * batch: they are marked dead and reaped after it (STYLE §10). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/error.h"
#include "proto/msg.h"
#include "proto/proto.h"
#include "agent/ring.h"

#define AG_MAX_CONNS 256     /* host connections at once; each costs a few KiB */
#define AG_MAX_EXITED 64
#define AG_OUT_LOW (256u << 10)         /* generate lazy frames below this */
#define AG_OUT_HIGH (2u << 20)          /* stop reading inputs above this */
#define AG_STDIN_MAX (1u << 20)         /* per-process stdin buffer */
#define AG_TUNNEL_BUF (1u << 20)

#define ag_container_of(ptr, type, member) \
        ((type *)((char *)(ptr) - offsetof(type, member)))

struct agent;
struct ag_handler;
typedef void (*ag_cb)(struct agent *ag, struct ag_handler *h, uint32_t events);

struct ag_handler {
        ag_cb fn;
        int fd;                 /* -1 when not registered */
        uint32_t events;
};

/* loop.c */
int ag_ev_add(struct agent *ag, struct ag_handler *h, int fd, uint32_t events, ag_cb fn);
void ag_ev_mod(struct agent *ag, struct ag_handler *h, uint32_t events);
/* Remove from epoll and close the fd. */
void ag_ev_close(struct agent *ag, struct ag_handler *h);
/* free(p) once the current batch of events is handled (a later event of
 * the batch may still point at it; its handler fd is -1 by then). */
void ag_defer_free(struct agent *ag, void *p);
void ag_grave_flush(struct agent *ag);

/* A byte queue. */
struct ag_buf {
        uint8_t *data;
        size_t head, len, cap;  /* bytes [head, len) are pending */
};
int ag_buf_append(struct ag_buf *b, const void *p, size_t n);
void ag_buf_consume(struct ag_buf *b, size_t n);
void ag_buf_free(struct ag_buf *b);
static inline size_t ag_buf_used(const struct ag_buf *b) { return b->len - b->head; }

/* --- processes (proc.c, spawn.c) --- */
struct ag_proc;
struct ag_stream {
        struct ag_handler h;
        struct ag_proc *p;
        int idx;                /* 0 = stdout or pty, 1 = stderr */
        struct pd_ring ring;
        bool paused;            /* EPOLLIN removed: a FOLLOW reader is behind */
        bool pipe_grown;        /* F_SETPIPE_SZ tried (proc.c) */
        bool pipe_big;          /* ... and the pipe holds AG_READ_MAX now */
        /* coalescing of a busy stream (proc.c): EPOLLIN off, read every
         * AG_BATCH_NS instead of on every write of the process */
        bool batching;
        uint64_t batch_due_ns;
        uint64_t win_start_ns;  /* immediate mode: bytes read in this window */
        size_t win_bytes;
};

struct ag_sudo_client;

struct ag_proc {
        struct ag_proc *next;
        pid_t pid;
        char *tag, *cwd;
        char **argv, **envp;
        bool pty;
        uint32_t rows, cols;
        struct ag_stream out[2];
        struct ag_handler in;   /* stdin pipe or dup of the pty master */
        struct ag_buf inbuf;
        bool in_close;          /* close stdin once inbuf drained */
        struct ag_handler timer;
        int status;
        bool reaped;            /* waitpid reported it */
        bool exited;            /* reaped and pipes drained: end offsets final */
        bool timed_out;
        bool oom_killed;        /* guest: SIGKILLed while the kernel's OOM count rose */
        uint64_t oom_at_start;  /* guest: /proc/vmstat oom_kill at spawn */
        uint64_t end_at_exit[2];
        uint64_t exit_seq;
        bool dead;
        struct ag_sudo_client *sudo;    /* spawned for a sudo client; not listed */
};

/* --- connections (conn.c, attach.c) --- */
struct ag_attach {
        struct ag_proc *p;
        int idx;
        uint64_t next;
        bool follow;
        bool gap_pending;
        uint64_t gap_from;
};

struct ag_fread;
struct ag_fwrite;
struct ag_watch;
struct ag_tunnel;

struct ag_conn {
        struct ag_handler h;
        struct ag_conn *next;
        bool dead, hello, closing;
        bool want_in;           /* input currently enabled */
        struct ag_buf in, out;
        uint64_t produced;      /* frames queued or sent so far (ag_conn_pump's progress) */
        struct ag_attach *att;
        size_t natt;
        uint32_t *exit_sent;
        size_t nexit;
        struct ag_fread *reads;
        struct ag_fwrite *writes;
        struct ag_watch *watches;
        struct ag_tunnel *tunnels;
};

struct agent {
        int epfd, listen_fd, sigfd, rootfd;
        const char *listen_path;        /* --listen-path (gvisor tier), else NULL */
        bool pid1;
        bool guest;             /* a microvm guest's init: the kernel is the sandbox's own */
        int *cgroup_fds;
        size_t ncgroup;
        size_t ring_size;
        struct ag_handler listen_h, sig_h;
        struct ag_proc *procs;
        struct ag_conn *conns;
        size_t nconns;
        uint64_t exit_seq;
        bool quit;
        struct ag_handler sudo_h;
        char *sudo_path;
        struct ag_sudo_client *sudo_clients;
        void **grave;           /* freed after the current batch */
        size_t ngrave, capgrave;
};

/* Request handlers: return 0 to send REPLY with `reply`, AG_DONE when the
 * handler replied itself (or a reply comes later), AG_BLOCKED to retry the
 * same frame once buffers drain, or -errno with err filled (ERROR). */
#define AG_DONE 1
#define AG_BLOCKED 2
struct ag_req {
        const struct pd_frame_hdr *h;
        const uint8_t *payload;
        struct pd_msg *reply;
        struct pd_error *err;
};

/* guest.c: the agent as a microvm guest's init: mounts, modules, root
 * disk, its own listener (ag->listen_fd) and the serial-port demux. */
int ag_guest_boot(struct agent *ag, struct pd_error *err);
/* After reaping children: restart the demux if the workload killed it. */
void ag_guest_check(struct agent *ag);
/* The guest kernel's OOM kills so far (/proc/vmstat oom_kill; 0 if unknown).
 * Only a guest's own kernel: in a container it would count the host's. */
uint64_t ag_guest_oom_kills(void);
/* guest_net.c: eth0 from the host's NETCFG frame (vmmux.h) */
void ag_guest_net_apply(const uint8_t *p, size_t n);

/* conn.c */
void ag_conn_accept(struct agent *ag);
int ag_conn_send(struct agent *ag, struct ag_conn *c, uint16_t type, uint16_t flags,
                 uint32_t id, uint32_t aux, const void *payload, size_t len);
int ag_conn_send2(struct agent *ag, struct ag_conn *c, uint16_t type, uint16_t flags,
                  uint32_t id, uint32_t aux, const void *p1, size_t n1, const void *p2, size_t n2);
void ag_conn_send_error(struct agent *ag, struct ag_conn *c, uint32_t id, const struct pd_error *err);
/* A frame whose payload is parts (at most 3), written straight to the
 * socket when nothing is queued ahead of it; what the socket does not take
 * is queued. */
struct iovec;
int ag_conn_send_iov(struct agent *ag, struct ag_conn *c, uint16_t type, uint32_t id, uint32_t aux,
                     const struct iovec *parts, size_t nparts);
/* Generate lazy frames, write what the socket takes, update epoll interest. */
void ag_conn_pump(struct agent *ag, struct ag_conn *c);
void ag_conn_kill(struct agent *ag, struct ag_conn *c);
void ag_conns_reap(struct agent *ag);
/* Retry frames that were blocked on a full buffer. */
void ag_conns_kick(struct agent *ag);

/* attach.c */
/* Attach connection c to stream idx of p from offset off (SPAWN with FOLLOW
 * and ATTACH both use it). *first gets the first offset that will be sent. */
int ag_attach_add(struct agent *ag, struct ag_conn *c, struct ag_proc *p, int idx, uint64_t off, bool follow,
                  uint64_t *first);
int ag_req_attach(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_detach(struct agent *ag, struct ag_conn *c, struct ag_req *r);
/* Append OUTPUT/GAP/EXIT frames while c->out is below AG_OUT_LOW. */
void ag_attach_generate(struct agent *ag, struct ag_conn *c);
void ag_attach_drop_proc(struct agent *ag, struct ag_proc *p);
void ag_attach_conn_free(struct agent *ag, struct ag_conn *c);
/* Lowest offset a FOLLOW reader still needs on a stream (UINT64_MAX: none). */
uint64_t ag_attach_min_next(struct agent *ag, struct ag_proc *p, int idx);
/* New output or an exit on p: push it to every attached connection. */
void ag_attach_notify(struct agent *ag, struct ag_proc *p);

/* proc.c */
struct ag_proc *ag_proc_find(struct agent *ag, uint32_t pid);
void ag_proc_reap_all(struct agent *ag);
void ag_proc_resume_streams(struct agent *ag, struct ag_proc *p);
/* Coalesced reads of busy streams (proc.c): how long the loop may sleep
 * before one is due (ns; -1: none batching), and the reads that are due. */
int64_t ag_batch_wait_ns(struct agent *ag);
void ag_batch_run(struct agent *ag);
void ag_procs_collect(struct agent *ag);
void ag_proc_kill_all(struct agent *ag);
int ag_req_list(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_signal(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_stdin(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_stdin_close(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_resize(struct agent *ag, struct ag_conn *c, struct ag_req *r);
void ag_proc_put_exit_attrs(const struct ag_proc *p, struct pd_msg *m);

/* spawn.c */
struct ag_spawn {
        char **argv, **envp;    /* NULL-terminated */
        const char *cwd;        /* NULL: home of uid */
        bool has_uid, has_gid, pty, stdin_pipe;
        uint32_t uid, gid, rows, cols;
        uint32_t *groups;
        size_t ngroups;
        bool has_groups;
        int stdio[3];           /* sudo: fds to use as 0,1,2; -1 otherwise */
};
int ag_req_spawn(struct agent *ag, struct ag_conn *c, struct ag_req *r);
/* Start a process; on success *out is in the table. */
int ag_spawn(struct agent *ag, const struct ag_spawn *s, struct ag_proc **out, struct pd_error *err);
/* /etc/passwd lookup without NSS (static binary). */
int ag_home_of(uid_t uid, char *buf, size_t size, gid_t *gid);

/* files.c, fileio.c */
int ag_req_file_stat(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_file_list(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_file_mkdir(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_file_move(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_file_remove(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_file_read(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_file_write(struct agent *ag, struct ag_conn *c, struct ag_req *r);
/* DATA for a FILE_WRITE: 1 if the id was one, 0 if not. */
int ag_fwrite_data(struct agent *ag, struct ag_conn *c, const struct pd_frame_hdr *h,
                   const uint8_t *payload);
void ag_fread_generate(struct agent *ag, struct ag_conn *c);
void ag_fileio_conn_free(struct agent *ag, struct ag_conn *c);

/* --home (the process tier, docs/protocol.md): the sandbox's home and
 * workspace, a host directory; NULL otherwise. With it the agent runs as
 * one unprivileged uid in the host's filesystem. */
extern const char *ag_home;
/* With --home: /home/user and /root (and anything under them) name the
 * home. Copies in (mapped or not) into out: 0, or -ENAMETOOLONG. */
int ag_map_home(const char *in, char *out, size_t size);
/* With --home: requests for uid/gid 0 or 1000 mean the agent's own. */
uint32_t ag_map_uid(uint32_t uid);
uint32_t ag_map_gid(uint32_t gid);

/* path.c: resolve request paths inside the root */
struct ag_fsid {
        int olduid, oldgid;
        bool by_euid;   /* no setfsuid (gVisor): the effective ids were swapped */
};
int ag_req_creds(const uint8_t *payload, size_t len, uint32_t *uid, uint32_t *gid, struct pd_error *err);
void ag_fsid_enter(struct ag_fsid *s, uint32_t uid, uint32_t gid);
void ag_fsid_leave(struct ag_fsid *s);
/* Build the sandbox-absolute path of a request path (relative = from uid's
 * home), validated. */
int ag_path_abs(const char *in, uint32_t uid, char *out, size_t size, struct pd_error *err);
/* pd_open_in_root (lib/openat2.h) in the sandbox's root, RESOLVE_IN_ROOT. */
int ag_open_in_root(struct agent *ag, const char *abs, int flags, mode_t mode);
/* Open the parent directory of abs (O_PATH), and copy the last component
 * into name ("" for "/"). */
int ag_open_parent(struct agent *ag, const char *abs, char *name, size_t size, struct pd_error *err);
int ag_put_entry(struct pd_msg *m, int dirfd, const char *name, const char *abspath,
                 struct pd_error *err);
/* xattr.c: file metadata (user.e2b.* xattrs) into an entry being built,
 * and a FILE_WRITE's META_KEY/META_VAL pairs onto its new file's fd. */
struct stat;
void ag_put_meta(struct pd_msg *m, int dirfd, const char *name, const struct stat *st);
int ag_meta_apply(const struct ag_req *r, int fd, const char *abs, struct pd_error *err);
/* Read a string attribute into a malloc'd path; required. */
int ag_get_path(const struct ag_req *r, uint16_t tag, uint32_t uid, char *out, size_t size);

/* watch.c */
int ag_req_watch(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_req_unwatch(struct agent *ag, struct ag_conn *c, struct ag_req *r);
void ag_watch_conn_free(struct agent *ag, struct ag_conn *c);
void ag_watch_resume(struct agent *ag, struct ag_conn *c);

/* tunnel.c */
int ag_req_tunnel_open(struct agent *ag, struct ag_conn *c, struct ag_req *r);
int ag_tunnel_close_req(struct agent *ag, struct ag_conn *c, const struct pd_frame_hdr *h);
/* DATA for a tunnel: 1 consumed, 0 not a tunnel, AG_BLOCKED retry later. */
int ag_tunnel_data(struct agent *ag, struct ag_conn *c, const struct pd_frame_hdr *h,
                   const uint8_t *payload);
void ag_tunnel_resume(struct agent *ag, struct ag_conn *c);
void ag_tunnel_conn_free(struct agent *ag, struct ag_conn *c);

/* sudo.c (client), sudod.c (agent side) */
int ag_sudo_main(int argc, char **argv);
int ag_sudod_start(struct agent *ag, const char *path, struct pd_error *err);
void ag_sudod_proc_exited(struct agent *ag, struct ag_proc *p);
void ag_sudod_reap(struct agent *ag);

/* Attribute helpers for requests (conn.c) */
/* 1 found, 0 absent, -EINVAL (err filled) when the size is wrong. */
int ag_get_u32(const struct ag_req *r, uint16_t tag, uint32_t *v);
int ag_get_u64(const struct ag_req *r, uint16_t tag, uint64_t *v);
/* String attribute copied into out: 1, 0 absent, -EINVAL bad/too long. */
int ag_get_str(const struct ag_req *r, uint16_t tag, char *out, size_t size);
/* -EINVAL with a message naming the attribute */
int ag_missing(struct pd_error *err, const char *what);
