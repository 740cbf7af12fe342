/* Processes through the agent: private declarations shared by the files
 * behind /sandboxes/{id}/processes... and /exec, and by the E2B layer.
 *
 *   routes_procs.c  the route table and the small handlers (start, list,
 *                   get, signal, stdin, resize)
 *   procs_spawn.c   a SPAWN request from a JSON body (argv, env, user, cwd, pty)
 *   procs_json.c    the agent's LIST entries and EXIT payloads as API JSON
 *   procs_output.c  GET .../output: raw or frames, resumable by offset
 *   procs_exec.c    POST /exec: spawn, collect both streams, wait */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/core/server.h"

#define PROCS_CALL_TIMEOUT_MS 30000

/* ---- procs_spawn.c ---- */

struct pd_spawn_req {
        struct pd_msg msg;
        json_t *argv;           /* for the audit */
        struct pd_route_user user;
        char cwd[PATH_MAX];
        const char *tag;
        bool pty, stdin_open;
};

/* Build SPAWN from body (exec: the /exec body, which may carry stdin_data);
 * on a bad body, write a message into msg and return -EINVAL. Free sr with
 * pd_spawn_req_free whatever the result. */
int pd_spawn_build(struct pd_srv_sandbox *s, json_t *body, bool exec, struct pd_spawn_req *sr, char *msg,
                   size_t msgsz);
void pd_spawn_req_free(struct pd_spawn_req *sr);
/* Answer a failed SPAWN: a command that cannot run is the caller's 400. */
enum MHD_Result pd_spawn_reply_error(struct pd_req *r, int k, const struct pd_error *err,
                                     const struct pd_spawn_req *sr);
/* A JSON string of at most max bytes without NUL bytes (jansson keeps
 * them, with json_string_length, when a client sends \u0000). */
bool pd_json_clean_str(const json_t *j, size_t max);
/* One PD_A_ENV attribute "k=v". */
int pd_spawn_env_put(struct pd_msg *m, const char *k, const char *v);
/* The process.start audit event; via: "processes" or "exec". */
void pd_spawn_audit(struct pd_req *r, struct pd_srv_sandbox *s, const struct pd_spawn_req *sr, uint32_t pid,
                    const char *via);

/* ---- procs_json.c ---- */

/* One LIST entry. */
struct pd_proc_info {
        uint32_t pid;
        bool found, exited, pty, has_code, has_sig;
        bool stdin_open;        /* the host may still write its stdin */
        uint32_t exit_code, signo, rows, cols;
        uint64_t start[2], end[2];
        char reason[32];
        json_t *obj;            /* API process object */
};

/* LIST; with want_pid, fill *one about that pid (one->found false if
 * absent; one->obj referenced); with all, an array of process objects. */
int pd_procs_list(struct pd_conn *c, uint32_t want_pid, struct pd_proc_info *one, json_t **all,
                  struct pd_error *err);
/* The same over a LIST reply already received (checked with
 * agent_check.h first: -EPROTO, nothing decoded, for a hostile one). */
int pd_procs_list_decode(const uint8_t *reply, size_t rlen, uint32_t want_pid, struct pd_proc_info *one,
                         json_t **all, struct pd_error *err);
/* JSON text of bytes that may not be UTF-8 (invalid sequences: U+FFFD). */
json_t *pd_procs_text_json(const char *buf, size_t len);
/* An EXIT payload; reason "exit" unless it says otherwise. */
struct pd_proc_exit {
        uint32_t code, sig;
        bool has_code, has_sig;
        char reason[32];
};
void pd_procs_exit_parse(const uint8_t *p, size_t len, struct pd_proc_exit *x);
/* {"exit_code", "signal", "reason"} of an EXIT payload. */
json_t *pd_procs_exit_json(const uint8_t *p, size_t len);

/* ---- routes_procs.c ---- */

/* Common prologue of the /processes/{pid}... routes: sandbox, pid, agent
 * connection. */
struct pd_pid_ctx {
        struct pd_srv_sandbox *s;
        uint32_t pid;
        struct pd_conn c;
        struct pd_error err;
};

/* false with a reply queued in *ret. */
bool pd_pid_ctx_open(struct pd_req *r, struct pd_pid_ctx *x, enum MHD_Result *ret);
void pd_pid_ctx_close(struct pd_req *r, struct pd_pid_ctx *x);
enum MHD_Result pd_procs_reply_no_process(struct pd_req *r, uint32_t pid);
/* A decimal uint64 (no sign, no junk). */
bool pd_procs_parse_u64(const char *s, uint64_t *out);

/* ---- the big handlers ---- */
enum MHD_Result pd_procs_route_output(struct pd_req *r, const char *chunk, size_t *chunk_len);
enum MHD_Result pd_procs_route_exec(struct pd_req *r, const char *chunk, size_t *chunk_len);
