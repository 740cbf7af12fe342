/* The host side of the agent protocol (proto.h): every host component that
 * talks to a paddock-agent (paddock run, paddock serve's routes, the warm
 * pool, the microvm template, paddock-oci's microvm shim) does it through
 * these calls. Nothing outside src/proto builds a frame or an attribute
 * list by hand (tests/arch/test_frames_only_in_proto.py).
 *
 *   requests     typed options in, one function per request out; a request
 *                that has a reply waits for it (REPLY or ERROR with the same
 *                id), handing the frames that arrive meanwhile (OUTPUT, EXIT,
 *                WATCH_EVENT... of earlier requests) to c->on_frame
 *   _nowait      the same request queued, its answer not awaited: for event
 *                loops that read the connection themselves (paddock run);
 *                the _queue/_wait pairs split a call the same way
 *   decoders     what the agent says, checked (agent_check.h) before it is
 *                decoded: a hostile agent gets -EPROTO, never a half-read
 *                list
 *
 * Calls return 0 (or a count) or -errno with err filled; an ERROR frame
 * becomes its errno and the agent's message. Reply payloads and the
 * strings decoded from them are valid until the next call on the client,
 * unless a decoder copies them (lists, entries: freed by their _free). */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "proto/conn.h"
#include "proto/msg.h"
#include "proto/proto.h"

#define PD_CLIENT_TIMEOUT_MS 30000      /* default wait for a reply */

/* ------------------------------------------------------------------ */
/* the connection                                                       */

/* What else ends a wait besides a frame and the deadline: the server
 * gives up on an agent when its sandbox is deleted, when the server stops,
 * or when the HTTP client it works for has gone. */
struct pd_client_watch {
        int hup_fd;                     /* -1: none. A hang-up on it: -ECONNABORTED */
        int stop_fd;                    /* -1: none. Readable: -ESHUTDOWN */
        bool (*gone)(void *ctx);        /* NULL: none. true: -ESHUTDOWN (checked every 500 ms) */
        void *gone_ctx;
};

struct pd_client;
/* A frame that is not the reply a call waits for. Return 0 to go on
 * waiting, or -errno (err filled) to end the call with that error. */
typedef int (*pd_client_frame_fn)(void *ctx, const struct pd_frame_hdr *h, const uint8_t *p,
                                  struct pd_error *err);

struct pd_client {
        struct pd_conn conn;            /* the transport; conn.fd < 0: closed */
        struct pd_client_watch watch;
        pd_client_frame_fn on_frame;    /* NULL: such frames are dropped */
        void *frame_ctx;
        int timeout_ms;                 /* per reply; PD_CLIENT_TIMEOUT_MS after connect */
        bool refused;                   /* the last call failed on the agent's ERROR, not the connection */
        bool hello_pending;             /* pipelined connect: the HELLO answer is still to come */
        char agent[128];                /* the agent's build, from its HELLO */
};

/* A closed client (nothing to free): pd_client_close is then a no-op. */
void pd_client_init(struct pd_client *c);
/* Take over fd (a connected stream socket) and do the HELLO exchange.
 * name: who we are ("paddock-serve 0.1.0"). On failure fd is closed. */
int pd_client_connect(struct pd_client *c, int fd, const char *name, struct pd_error *err);
/* As pd_client_connect, but the HELLO is only queued: it goes out with the
 * first request, and pd_client_next takes its answer (a refusal: that
 * call's -errno), which saves a round trip. While hello_pending is still
 * set after a failed call, the agent answered nothing at all, so nothing
 * of that call ran (an agent over its connection limit closes at once). */
int pd_client_connect_pipelined(struct pd_client *c, int fd, const char *name, struct pd_error *err);
void pd_client_close(struct pd_client *c);
static inline bool pd_client_is_open(const struct pd_client *c)
{
        return c->conn.fd >= 0;
}
/* The next frame from the agent, whatever it is (flushing what is queued
 * meanwhile), honouring c->watch. timeout_ms < 0: no deadline.
 * 1 with a frame (payload valid until the next read), or -errno:
 * -ETIMEDOUT, -EPIPE (the agent closed), -ECONNABORTED, -ESHUTDOWN... */
int pd_client_next(struct pd_client *c, struct pd_frame_hdr *h, const uint8_t **p, int timeout_ms);
/* A frame that is here already or arrives without waiting (one
 * non-blocking receive): 1 with it (as pd_client_next), 0 if none yet (an
 * end or an error is left for pd_client_next to report), -errno for a
 * malformed frame. For filling a buffer with what is ready. */
int pd_client_next_nowait(struct pd_client *c, struct pd_frame_hdr *h, const uint8_t **p);
/* Wait for the REPLY of request id (the _queue functions return ids);
 * other frames go to c->on_frame. *p, *len: its payload (may be NULL).
 * timeout_ms <= 0: c->timeout_ms. An ERROR with that id: its -errno. */
int pd_client_wait_reply(struct pd_client *c, uint32_t id, const uint8_t **p, size_t *len, int timeout_ms,
                         struct pd_error *err);
/* Write everything queued (the _nowait calls only queue). */
int pd_client_flush(struct pd_client *c, int timeout_ms);

/* An ERROR frame's payload as -errno with the agent's message. */
int pd_frame_error(const struct pd_frame_hdr *h, const uint8_t *p, struct pd_error *err);

/* ------------------------------------------------------------------ */
/* processes                                                            */

/* SPAWN, typed. Every string is borrowed for the duration of the call. */
struct pd_spawn_opts {
        const char *const *argv;        /* argc strings; argv[0] the command (non-empty) */
        size_t argc;
        const char *const *env;         /* envc "NAME=value" strings, exactly the process's env */
        size_t envc;
        const char *cwd;                /* NULL: the agent's own ("/") */
        uint32_t uid, gid;              /* always sent: 0 is root */
        const uint32_t *groups;         /* supplementary groups; none: the agent sets none */
        size_t n_groups;
        /* a terminal of this size (both 0: none, pipes); stdin is the pty */
        uint16_t pty_rows, pty_cols;
        /* Without a pty: stdin a pipe the host writes (pd_client_stdin, then
         * stdin_close), or /dev/null. Callers differ on purpose: the native
         * API opens it only when asked ("stdin": true, or /exec with
         * stdin_data), E2B's envd unless asked not to (stdin: false),
         * paddock run and paddock-oci always (they relay their own stdin). */
        bool stdin_open;
        const char *tag;                /* NULL: none; at most 255 bytes */
        uint64_t timeout_ms;            /* 0: none; else the agent kills the process group then */
        /* This connection gets all the process's output from offset 0
         * (OUTPUT, GAP, EXIT frames), attached before it can write: for a
         * caller that reads it on this connection (exec, E2B Start, paddock
         * run); a caller that only starts it (POST /processes) says no. */
        bool follow;
};

/* A growing list of owned strings: argv and env of spawn options. */
struct pd_strv {
        char **v;
        size_t n, cap;
};
int pd_strv_add(struct pd_strv *s, const char *str);
/* "name=value". */
int pd_strv_add_kv(struct pd_strv *s, const char *name, const char *value);
void pd_strv_free(struct pd_strv *s);

/* The SPAWN payload of o: 0, -EINVAL (no command), -EMSGSIZE (over one
 * frame: PD_FRAME_MAX). The one place a SPAWN is encoded. */
int pd_spawn_encode(const struct pd_spawn_opts *o, struct pd_msg *m);
/* Would o encode? The same answers, without encoding: callers refuse a
 * request that is too large before they connect to the agent. */
int pd_spawn_check(const struct pd_spawn_opts *o);

/* How a process ended (an EXIT frame). */
struct pd_exit {
        bool has_code, has_signal;
        uint32_t code, signo;
        char reason[32];                /* "exit" (default), "signal", "timeout", "oom", "killed" */
        uint64_t end_out, end_err;      /* bytes each stream produced in all */
};
void pd_exit_decode(const uint8_t *p, size_t len, struct pd_exit *x);
/* An OUTPUT frame: false if too short to hold its offset. */
bool pd_output_decode(const struct pd_frame_hdr *h, const uint8_t *p, uint64_t *offset, const uint8_t **data,
                      size_t *n);
/* A GAP frame: bytes [from, to) of stream h->aux were evicted unread. */
bool pd_gap_decode(const struct pd_frame_hdr *h, const uint8_t *p, uint64_t *from, uint64_t *to);

/* Start a process: its pid in *pid. A command that cannot run is an error
 * whose message starts "cannot execute" (ENOENT, EACCES...); a bad cwd
 * "cannot change directory". */
int pd_client_spawn(struct pd_client *c, const struct pd_spawn_opts *o, uint32_t *pid, struct pd_error *err);
/* HELLO and SPAWN in one round trip (paddock run's start time): take over
 * fd, then as pd_client_connect + pd_client_spawn. *refused: the agent
 * answered SPAWN with an error (the command could not start), as opposed
 * to a connection or handshake failure. */
int pd_client_connect_spawn(struct pd_client *c, int fd, const char *name, const struct pd_spawn_opts *o,
                            uint32_t *pid, bool *refused, struct pd_error *err);

/* Run to the end: spawn with follow, then hand its output over until EXIT. */
struct pd_run_io {
        /* after the SPAWN reply, before any output (NULL: nothing) */
        void (*on_spawned)(void *ctx, uint32_t pid);
        /* each OUTPUT chunk: stream PD_STREAM_*, offset of data[0] (NULL: dropped) */
        void (*on_output)(void *ctx, uint32_t stream, uint64_t offset, const uint8_t *data, size_t n);
        void *ctx;
        /* with o->stdin_open: written to its stdin, which is then closed */
        const void *stdin_data;
        size_t stdin_len;
        int timeout_ms;                 /* from the spawn to the EXIT; < 0: none */
};
/* 0 with *x filled. *pid is 0 when the spawn failed (nothing ran), else
 * the process's, also on a later failure (the caller may kill it). */
int pd_client_run(struct pd_client *c, const struct pd_spawn_opts *o, const struct pd_run_io *io, uint32_t *pid,
                  struct pd_exit *x, struct pd_error *err);

/* ATTACH pid's stream from offset; *first: the first offset it will send
 * (later than asked: evicted, a gap; or past the end). The _queue form
 * gives the request id for pd_client_attach_wait. */
int pd_client_attach(struct pd_client *c, uint32_t pid, uint32_t stream, uint64_t offset, bool follow,
                     uint64_t *first, struct pd_error *err);
int pd_client_attach_queue(struct pd_client *c, uint32_t pid, uint32_t stream, uint64_t offset, bool follow,
                           uint32_t *id);
int pd_client_attach_wait(struct pd_client *c, uint32_t id, uint64_t *first, struct pd_error *err);

/* SIGNAL: group, the whole process group. */
int pd_client_signal(struct pd_client *c, uint32_t pid, int signo, bool group, struct pd_error *err);
int pd_client_signal_nowait(struct pd_client *c, uint32_t pid, int signo, bool group);
/* Queue bytes for pid's stdin (in PD_DATA_CHUNK frames; not awaited: a
 * PING after them tells they were taken). */
int pd_client_stdin(struct pd_client *c, uint32_t pid, const void *data, size_t n);
/* Move what is readable on fd to pid's stdin; at its end queue
 * STDIN_CLOSE and return 1 (stop watching fd), else 0. */
int pd_client_stdin_from_fd(struct pd_client *c, int fd, uint32_t pid);
int pd_client_stdin_close(struct pd_client *c, uint32_t pid, struct pd_error *err);
int pd_client_stdin_close_nowait(struct pd_client *c, uint32_t pid);
int pd_client_resize(struct pd_client *c, uint32_t pid, uint32_t rows, uint32_t cols, struct pd_error *err);
int pd_client_resize_nowait(struct pd_client *c, uint32_t pid, uint32_t rows, uint32_t cols);
/* PING: the agent's clock in *time_ns (may be NULL). Answered after every
 * frame sent before it was taken. */
int pd_client_ping(struct pd_client *c, uint64_t *time_ns, struct pd_error *err);
/* SHUTDOWN: the agent kills every process and exits. */
int pd_client_shutdown(struct pd_client *c, struct pd_error *err);

/* One process of a LIST. Strings point into the list's storage. */
struct pd_proc {
        uint32_t pid;
        bool exited;
        bool has_code, has_signal;      /* with exited */
        uint32_t exit_code, signo;
        const char *reason;             /* "" while running; else as pd_exit */
        const char *tag;                /* NULL: none */
        bool stdin_open;                /* the host may still write its stdin */
        bool pty;
        uint32_t rows, cols;
        uint64_t start[2], end[2];      /* [0] stdout (or pty), [1] stderr: oldest offset kept, end */
        const char *const *argv;        /* argc strings */
        size_t argc;
        const char *const *env;         /* envc "NAME=value" strings */
        size_t envc;
        const char *cwd;                /* NULL: not said */
};
struct pd_proc_list {
        struct pd_proc *v;
        size_t n;
        void *mem;
};
/* LIST. Free with pd_proc_list_free (also after a failure). */
int pd_client_list(struct pd_client *c, struct pd_proc_list *out, struct pd_error *err);
/* A LIST reply's payload: checked (every PROC well formed, no pid twice, at
 * most PD_AGENT_PROCS_MAX), then decoded. -EPROTO and an empty list for a
 * hostile one. */
int pd_proc_list_decode(const uint8_t *p, size_t len, struct pd_proc_list *out, struct pd_error *err);
void pd_proc_list_free(struct pd_proc_list *l);
/* The process with that pid, or NULL. */
const struct pd_proc *pd_proc_list_find(const struct pd_proc_list *l, uint32_t pid);

/* ------------------------------------------------------------------ */
/* files (client_files.c)                                               */

/* A FILE_* request: the agent resolves path inside the sandbox's root,
 * as uid/gid. */
struct pd_file_req {
        const char *path;
        uint32_t uid, gid;
        /* FILE_WRITE only: metadata (user.e2b.* xattrs, docs/e2b.md) the
         * new file gets, n_meta pairs {key, value} in meta[2i], meta[2i+1] */
        const char *const *meta;
        size_t n_meta;
};

/* One item of a file's metadata (key without the user.e2b. prefix). */
struct pd_meta_item {
        const char *key, *val;
};

/* One ENTRY. Strings point into the entries' storage. */
struct pd_entry {
        const char *name, *path;
        const char *link;               /* a symlink's target; NULL otherwise */
        uint32_t ftype;                 /* enum pd_file_type */
        uint32_t mode, uid, gid;
        uint64_t size, mtime_ns;
        const struct pd_meta_item *meta;        /* n_meta items; an older agent sends none */
        size_t n_meta;
};
struct pd_entries {
        struct pd_entry *v;
        size_t n;
        void *mem;
};
/* Between min and max ENTRY items of a reply, checked then decoded. */
int pd_entries_decode(const uint8_t *p, size_t len, unsigned min, unsigned max, struct pd_entries *out,
                      struct pd_error *err);
void pd_entries_free(struct pd_entries *e);

/* Each fills out (one entry; out may be NULL: the reply is not read).
 * Free out with pd_entries_free, also after a failure. */
int pd_client_stat(struct pd_client *c, const struct pd_file_req *f, struct pd_entries *out, struct pd_error *err);
/* depth 1..64 (1: the directory's own entries). */
int pd_client_list_dir(struct pd_client *c, const struct pd_file_req *f, uint32_t depth, struct pd_entries *out,
                       struct pd_error *err);
/* mode < 0: the agent's default (0755). */
int pd_client_mkdir(struct pd_client *c, const struct pd_file_req *f, int mode, bool parents, struct pd_entries *out,
                    struct pd_error *err);
int pd_client_move(struct pd_client *c, const struct pd_file_req *f, const char *to, struct pd_entries *out,
                   struct pd_error *err);
int pd_client_remove(struct pd_client *c, const struct pd_file_req *f, struct pd_error *err);

/* FILE_READ with DESCRIBE: the agent opens the file and says how long it
 * is; then DATA frames with the request id, REPLY after the last (ERROR:
 * a read failed midway). */
struct pd_read {
        uint32_t id;
        bool size_known;                /* false: read to the end (procfs...) */
        uint64_t size;
        /* An agent that does not know DESCRIBE sends DATA first: that frame
         * (valid until the next read on the client), or its REPLY at once
         * (done: an empty file). */
        const uint8_t *first;
        size_t first_len;
        bool has_first, done;
};
int pd_client_read_open(struct pd_client *c, const struct pd_file_req *f, struct pd_read *rd, struct pd_error *err);

/* FILE_WRITE: open, then DATA (end: the last), then its REPLY. mode < 0:
 * keep the file's, or 0644 for a new one. *id: the transfer's. */
int pd_client_write_open(struct pd_client *c, const struct pd_file_req *f, int mode, uint32_t *id);
int pd_client_write_data(struct pd_client *c, uint32_t id, const void *data, size_t n, bool end);
/* Did the agent give up on the transfer already (ERROR with id, or the
 * connection closed)? Never blocks: 0, or its -errno. */
int pd_client_write_check(struct pd_client *c, uint32_t id, struct pd_error *err);
/* After the last DATA: its REPLY (the file's entry into out, may be NULL). */
int pd_client_write_finish(struct pd_client *c, uint32_t id, struct pd_entries *out, int timeout_ms,
                           struct pd_error *err);

/* WATCH path: *id is the watch's, which every WATCH_EVENT carries. */
int pd_client_watch(struct pd_client *c, const struct pd_file_req *f, bool recursive, uint32_t *id,
                    struct pd_error *err);
/* entries: each WATCH_EVENT also carries the ENTRY of what it names when
 * the agent could stat it (pd_entries_decode(payload, len, 0, 1, ...));
 * local: a directory on a network filesystem (NFS, SMB, FUSE) is refused
 * (-EXDEV). */
int pd_client_watch_entries(struct pd_client *c, const struct pd_file_req *f, bool recursive, bool entries,
                            bool local, uint32_t *id, struct pd_error *err);
struct pd_watch_ev {
        char name[PATH_MAX];                /* relative to the watched directory */
        uint32_t event;                 /* enum pd_watch_event */
};
/* A WATCH_EVENT payload, checked then decoded. */
int pd_watch_event_decode(const uint8_t *p, size_t len, struct pd_watch_ev *ev, struct pd_error *err);

/* ------------------------------------------------------------------ */
/* tunnels                                                              */

/* TUNNEL_OPEN port: *tid its id (DATA both ways). -ECONNREFUSED: nobody
 * listens there. */
int pd_client_tunnel_open(struct pd_client *c, unsigned port, uint32_t *tid, struct pd_error *err);
/* The same with data queued behind the TUNNEL_OPEN (one agent round trip
 * instead of two for a request that is known up front): the agent writes
 * it once its connect succeeds and drops it if the connect fails. */
int pd_client_tunnel_open_with(struct pd_client *c, unsigned port, const void *data, size_t n, uint32_t *tid,
                               struct pd_error *err);
/* Queue bytes into the tunnel (PD_DATA_CHUNK frames). */
int pd_client_tunnel_send(struct pd_client *c, uint32_t tid, const void *data, size_t n);
int pd_client_tunnel_close(struct pd_client *c, uint32_t tid);
