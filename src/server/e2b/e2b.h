/* E2B compatibility (docs/e2b.md): private declarations shared by the
 * e2b_*.c files. The public entry points (route table, envd handler) are
 * declared at the end of server.h. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/core/server.h"

#define PD_E2B_ENVD_VERSION "0.6.1"
#define PD_E2B_ENVD_PORT 49983
#define PD_E2B_CI_PORT 49999
#define PD_E2B_TOKEN_LEN 64     /* hex chars */

/* E2B control-plane error: {"code": status, "message": "..."}. */
enum MHD_Result pd_e2b_reply_error(struct pd_req *r, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* The sandbox's envd access token: hex HMAC-SHA256(server secret, id). The
 * secret is <state>/e2b-secret (32 random bytes, 0600, made on first use),
 * so tokens survive a server restart and need no column in the store. */
/* e2b_network.c: allow_internet_access and network.{allowOut,denyOut} of a
 * create body as paddock's policy JSON (new reference), or NULL: no
 * network when why is empty, a bad request (why says) otherwise. */
json_t *pd_e2b_network_policy(struct pd_server *srv, json_t *body, char *why, size_t whysz);
int pd_e2b_token(struct pd_server *srv, const char *sandbox_id, char out[PD_E2B_TOKEN_LEN + 1]);
/* Constant-time string equality. */
bool pd_e2b_streq(const char *a, const char *b);
/* Standard base64 (with padding) of len bytes into a new string. */
char *pd_e2b_b64(const void *data, size_t len);

/* ---- envd (e2b_envd.c) ---- */

/* Per-request state of an envd call (r->route_state). */
struct pd_e2b_call {
        struct pd_srv_sandbox *s;       /* referenced */
        char path[512];                 /* URL path */
        char *body;                     /* buffered body (JSON calls, CI) */
        size_t len, cap, max;
        bool too_large;
        unsigned port;                  /* 49983 or 49999 */
        char user[32];                  /* from Authorization: Basic (default "user") */
        bool user_given;
        bool signed_ok;                 /* authorised by a URL signature */
        struct pd_deferred_error fail;  /* an error to answer at the end */
        void *upload;                   /* e2b_fs.c: multipart / raw upload */
};

/* Connect protocol helpers. */
enum MHD_Result pd_e2b_connect_error(struct pd_req *r, unsigned status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
enum MHD_Result pd_e2b_connect_agent_error(struct pd_req *r, int neg_errno, const char *msg);
/* Append one envelope (flags, 4-byte BE length, JSON) to a growing buffer. */
int pd_e2b_envelope(char **buf, size_t *len, size_t *cap, uint8_t flags, json_t *msg /* stolen */);
/* The sandbox user of the call (user/root). */
bool pd_e2b_call_user(struct pd_e2b_call *c, struct pd_route_user *u);

/* ---- filesystem (e2b_fs.c) ---- */
enum MHD_Result pd_e2b_fs_unary(struct pd_req *r, struct pd_e2b_call *c, const char *method, json_t *body);
enum MHD_Result pd_e2b_fs_watch(struct pd_req *r, struct pd_e2b_call *c, json_t *body);
/* REST /files: upload chunks are fed as they come; then the answer. */
enum MHD_Result pd_e2b_files_chunk(struct pd_req *r, struct pd_e2b_call *c, const char *chunk, size_t len);
enum MHD_Result pd_e2b_files_finish(struct pd_req *r, struct pd_e2b_call *c);
void pd_e2b_files_free(struct pd_e2b_call *c);
/* Entry JSON (envd EntryInfo) of an agent's entry. */
json_t *pd_e2b_entry_json(const struct pd_entry *e);

/* ---- code interpreter (e2b_ci.c) ---- */
enum MHD_Result pd_e2b_ci_forward(struct pd_req *r, struct pd_e2b_call *c);

/* ---- a streaming response fed by one agent connection ---- */
struct pd_e2b_stream;
typedef void (*pd_e2b_stream_fn)(struct pd_e2b_stream *st, const struct pd_frame_hdr *h, const uint8_t *p);
struct pd_e2b_stream {
        struct pd_server *srv;
        struct pd_srv_sandbox *s;       /* referenced; dropped at free */
        struct pd_client cl;            /* watched (pd_route_watch) by the response's reader */
        struct MHD_Connection *mc;
        char *buf;                      /* bytes ready for the client */
        size_t len, pos, cap;
        bool done;                      /* nothing more after buf */
        bool failed;                    /* with done: the body is incomplete, abort the connection */
        uint64_t size;                  /* Content-Length; MHD_SIZE_UNKNOWN (default): chunked */
        uint64_t sent;                  /* body bytes taken in (downloads) */
        int idle_ms;                    /* on_idle after this long without a frame */
        pd_e2b_stream_fn on_frame;
        void (*on_idle)(struct pd_e2b_stream *st);
        void (*on_fail)(struct pd_e2b_stream *st, int neg_errno);  /* agent gone, sandbox deleted... */
        void (*on_free)(struct pd_e2b_stream *st);
        uint32_t id;
        int kind;
        bool pty;
        void *priv;
        char *resp_headers;             /* "Name: value\n" lines added to the response */
        size_t resp_headers_len;
};
/* Add one "Name: value" header line (n bytes) to the response to come. */
int pd_e2b_stream_put_header(struct pd_e2b_stream *st, const char *line, size_t n);
/* Allocate with the client closed. */
struct pd_e2b_stream *pd_e2b_stream_new(struct pd_req *r, struct pd_srv_sandbox *s);
void pd_e2b_stream_free(struct pd_e2b_stream *st);
int pd_e2b_stream_put(struct pd_e2b_stream *st, const void *p, size_t n);
/* A Connect envelope into the stream (flags 0 message, 2 end). */
void pd_e2b_stream_msg(struct pd_e2b_stream *st, uint8_t flags, json_t *msg /* stolen */);
void pd_e2b_stream_end_error(struct pd_e2b_stream *st, const char *code, const char *msg);
/* Queue the response (takes st over); content_type NULL: none added. */
enum MHD_Result pd_e2b_stream_reply(struct pd_req *r, struct pd_e2b_stream *st, unsigned status,
                                    const char *content_type);
/* Agent errno to a Connect code. */
const char *pd_e2b_connect_code(int neg_errno);
/* 200 application/connect+json holding only an end-of-stream error: how a
 * streaming call fails before its first message. */
enum MHD_Result pd_e2b_stream_error_reply(struct pd_req *r, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
