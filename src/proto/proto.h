/* The paddock agent protocol: frames on one byte stream between a host
 * component (paddock run, the server) and paddock-agent inside a sandbox.
 * docs/protocol.md is the prose version of this file; keep them together.
 *
 * Frame: a 16-byte big-endian header, then `len` payload bytes.
 *
 *   u32 len     payload length, <= PD_FRAME_MAX (checked before buffering)
 *   u16 type    enum pd_frame_type
 *   u16 flags   PD_F_* (meaning depends on type)
 *   u32 id      request id (requests/replies) or process/stream id (data)
 *   u32 aux     type-specific small value (stream number, errno, ...)
 *
 * Control payloads are attribute lists (msg.h): repeated {u16 tag, u16 0,
 * u32 len, bytes, pad to 4}. Unknown tags are ignored, so either side may
 * add attributes without a version bump. Bulk data (process output, stdin,
 * file contents, tunnel bytes) is raw bytes, never encoded.
 *
 * Conversation:
 *   host  -> HELLO {VERSION, CLIENT}
 *   agent -> HELLO {VERSION, AGENT}        (or ERROR if versions differ)
 *   host  -> LIST                          (resume step)
 *   agent -> REPLY {PROC...}               one PROC nested list per process
 *   host  -> ATTACH {PID, STREAM, OFFSET, FOLLOW}  per stream to reattach
 *   ... requests in any order; replies carry the request's id.
 */
#pragma once
#include <stdint.h>

#define PD_PROTO_VERSION 1u
#define PD_FRAME_HDR_LEN 16u
#define PD_FRAME_MAX (1u << 20)     /* 1 MiB: biggest payload either side accepts */
#define PD_FRAME_PREHELLO_MAX 4096u /* before HELLO only small frames are read */
#define PD_DATA_CHUNK (256u << 10)  /* senders split bulk data into chunks of this */

enum pd_frame_type {
        /* handshake */
        PD_T_HELLO = 1,
        /* generic replies: id = request id */
        PD_T_REPLY = 2,         /* attrs depend on the request */
        PD_T_ERROR = 3,         /* aux = errno; attrs {MESSAGE} */
        /* requests, host -> agent; each gets REPLY or ERROR with the same id */
        PD_T_LIST = 10,         /* -> REPLY {PROC {...}}* */
        PD_T_SPAWN = 11,        /* {ARG+ ENV* CWD? UID? GID? GROUPS* PTY_ROWS? PTY_COLS? STDIN? TAG? TIMEOUT_MS? FOLLOW?} -> REPLY {PID};
                                 * FOLLOW=1 attaches this connection to all output from 0 (as ATTACH FOLLOW would);
                                 * a failed exec answers ERROR aux=errno {MESSAGE EXEC_ERRNO} */
        PD_T_SIGNAL = 12,       /* {PID SIGNO GROUP?} -> REPLY */
        PD_T_STDIN_CLOSE = 13,  /* {PID} -> REPLY */
        PD_T_RESIZE = 14,       /* {PID PTY_ROWS PTY_COLS} -> REPLY */
        PD_T_ATTACH = 15,       /* {PID STREAM OFFSET FOLLOW} -> REPLY {OFFSET=first offset sent}; then OUTPUT/GAP/EXIT */
        PD_T_DETACH = 16,       /* {PID} -> REPLY */
        PD_T_PING = 17,         /* {} -> REPLY {TIME_NS} */
        /* file requests: UID/GID optional (default: the agent's own) */
        PD_T_FILE_STAT = 20,    /* {PATH UID GID} -> REPLY {ENTRY} */
        PD_T_FILE_LIST = 21,    /* {PATH UID GID DEPTH?} -> REPLY {ENTRY*} */
        PD_T_FILE_MKDIR = 22,   /* {PATH UID GID MODE? PARENTS?} -> REPLY {ENTRY} */
        PD_T_FILE_MOVE = 23,    /* {PATH PATH2 UID GID} -> REPLY {ENTRY} */
        PD_T_FILE_REMOVE = 24,  /* {PATH UID GID} -> REPLY */
        PD_T_FILE_READ = 25,    /* {PATH UID GID OFFSET? LENGTH? DESCRIBE?} -> [FILE_OPENED] DATA* then REPLY {SIZE} */
        PD_T_FILE_WRITE = 26,   /* {PATH UID GID MODE? APPEND? {META_KEY META_VAL}*} then DATA* (last has PD_F_END) -> REPLY {ENTRY} */
        PD_T_WATCH = 27,        /* {PATH RECURSIVE? WATCH_ENTRY? WATCH_LOCAL?} -> REPLY; then WATCH_EVENT with this id until UNWATCH */
        PD_T_UNWATCH = 28,      /* id field of the frame = watch id -> REPLY */
        PD_T_TUNNEL_OPEN = 30,  /* {PORT} -> REPLY; then DATA both ways with this id */
        PD_T_TUNNEL_CLOSE = 31, /* id = tunnel id, either direction; no reply */
        PD_T_SHUTDOWN = 32,     /* {} -> REPLY; agent kills every process and exits */
        /* data, either direction */
        PD_T_DATA = 40,         /* raw bytes; id = request/tunnel id; PD_F_END on the last */
        PD_T_STDIN = 41,        /* raw bytes to process id's stdin (or pty) */
        /* events, agent -> host */
        PD_T_OUTPUT = 50,       /* id = pid, aux = stream; payload = u64 offset BE + raw bytes */
        PD_T_GAP = 51,          /* id = pid, aux = stream; payload = u64 from BE + u64 to BE (evicted) */
        PD_T_EXIT = 52,         /* id = pid; attrs {PID EXIT_CODE? SIGNO? REASON END_OUT END_ERR} */
        PD_T_WATCH_EVENT = 53,  /* id = watch id; attrs {NAME EVENT ENTRY?} */
        PD_T_FILE_OPENED = 54,  /* id = a FILE_READ with DESCRIBE=1; attrs {SIZE?}: sent once, before its
                                 * DATA; SIZE = bytes to come, absent when the file's length is not
                                 * known (procfs, sysfs...: read to its end) */
};

enum pd_frame_flags {
        PD_F_END = 1u << 0,     /* last DATA frame of a transfer */
};

/* Output streams of a process (ATTACH STREAM, OUTPUT aux). A PTY process
 * has only PD_STREAM_PTY. */
enum pd_stream {
        PD_STREAM_STDOUT = 1,
        PD_STREAM_STDERR = 2,
        PD_STREAM_PTY = 3,
};

enum pd_attr_tag {
        PD_A_VERSION = 1,       /* u32 */
        PD_A_CLIENT = 2,        /* string */
        PD_A_AGENT = 3,         /* string: agent build */
        PD_A_MESSAGE = 4,       /* string: human error message */
        PD_A_ARG = 10,          /* string, repeated: argv in order */
        PD_A_ENV = 11,          /* string "K=V", repeated */
        PD_A_CWD = 12,          /* string */
        PD_A_UID = 13,          /* u32 */
        PD_A_GID = 14,          /* u32 */
        PD_A_GROUPS = 15,       /* u32, repeated: supplementary groups */
        PD_A_PTY_ROWS = 16,     /* u32 */
        PD_A_PTY_COLS = 17,     /* u32 */
        PD_A_STDIN = 18,        /* u32 bool: keep stdin open (pipe); else /dev/null */
        PD_A_TAG = 19,          /* string: caller's label for the process */
        PD_A_TIMEOUT_MS = 20,   /* u64: agent kills the process group at this deadline */
        PD_A_PID = 21,          /* u32: process id as the agent names it (pid in the sandbox) */
        PD_A_SIGNO = 22,        /* u32 */
        PD_A_GROUP = 23,        /* u32 bool: signal the whole process group */
        PD_A_STREAM = 24,       /* u32 enum pd_stream */
        PD_A_OFFSET = 25,       /* u64 absolute byte offset */
        PD_A_FOLLOW = 26,       /* u32 bool */
        PD_A_EXIT_CODE = 27,    /* u32: exit status when the process exited */
        PD_A_REASON = 28,       /* string: "exit", "signal", "timeout", "oom", "killed" */
        PD_A_STATE = 29,        /* string: "running", "exited" */
        PD_A_PROC = 30,         /* nested attr list describing one process */
        PD_A_END_OUT = 31,      /* u64: stdout (or pty) bytes ever produced */
        PD_A_END_ERR = 32,      /* u64: stderr bytes ever produced */
        PD_A_START_OUT = 33,    /* u64: oldest stdout offset still in the ring */
        PD_A_START_ERR = 34,    /* u64 */
        PD_A_PATH = 40,         /* string: path inside the sandbox */
        PD_A_PATH2 = 41,        /* string: move destination */
        PD_A_MODE = 42,         /* u32 */
        PD_A_PARENTS = 43,      /* u32 bool: create missing parents */
        PD_A_DEPTH = 44,        /* u32 */
        PD_A_LENGTH = 45,       /* u64 */
        PD_A_SIZE = 46,         /* u64 */
        PD_A_APPEND = 47,       /* u32 bool */
        PD_A_ENTRY = 48,        /* nested: NAME PATH FTYPE SIZE MODE UID GID MTIME_NS LINK? {META_KEY META_VAL}* */
        PD_A_NAME = 49,         /* string */
        PD_A_FTYPE = 50,        /* u32: 1 file, 2 dir, 3 symlink, 4 other */
        PD_A_MTIME_NS = 51,     /* u64 */
        PD_A_LINK = 52,         /* string: symlink target */
        PD_A_RECURSIVE = 53,    /* u32 bool */
        PD_A_EVENT = 54,        /* u32 enum pd_watch_event */
        PD_A_PORT = 55,         /* u32 */
        PD_A_TIME_NS = 56,      /* u64 */
        PD_A_EXEC_ERRNO = 57,   /* u32: errno of a failed execve (ENOENT -> 127, EACCES -> 126) */
        PD_A_DESCRIBE = 58,     /* u32 bool: FILE_READ answers FILE_OPENED first */
        /* File metadata (E2B's user.e2b.* xattrs, agent/xattr.c): in an
         * ENTRY, one META_KEY then its META_VAL per item (the key without
         * the prefix); in FILE_WRITE, the metadata the new file gets. */
        PD_A_META_KEY = 70,     /* string, repeated, paired with the next META_VAL */
        PD_A_META_VAL = 71,     /* string, repeated */
        PD_A_WATCH_ENTRY = 72,  /* u32 bool: WATCH: each WATCH_EVENT carries the ENTRY when it can */
        PD_A_WATCH_LOCAL = 73,  /* u32 bool: WATCH refuses a directory on a network filesystem */
};

enum pd_file_type { PD_FT_FILE = 1, PD_FT_DIR = 2, PD_FT_SYMLINK = 3, PD_FT_OTHER = 4 };

enum pd_watch_event {
        PD_WE_CREATE = 1, PD_WE_WRITE = 2, PD_WE_REMOVE = 3, PD_WE_RENAME = 4, PD_WE_CHMOD = 5,
};

struct pd_frame_hdr {
        uint32_t len;
        uint16_t type;
        uint16_t flags;
        uint32_t id;
        uint32_t aux;
};

/* Encode/decode the 16-byte header (host byte order <-> big-endian). */
void pd_frame_hdr_encode(const struct pd_frame_hdr *h, uint8_t out[PD_FRAME_HDR_LEN]);
void pd_frame_hdr_decode(const uint8_t in[PD_FRAME_HDR_LEN], struct pd_frame_hdr *h);
/* 0, or -EMSGSIZE if len exceeds `cap`, -EPROTO for an unknown type. */
int pd_frame_hdr_check(const struct pd_frame_hdr *h, uint32_t cap);
const char *pd_frame_type_name(uint16_t type);
