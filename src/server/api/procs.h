/* Processes through the agent: private declarations shared by the files
 * behind /sandboxes/{id}/processes... and /exec, and by the E2B layer.
 *
 *   routes_procs.c  the route table and the small handlers (start, list,
 *                   get, signal, stdin, resize)
 *   procs_spawn.c   spawn options from a JSON body (argv, env, user, cwd, pty)
 *   procs_json.c    the agent's process list and exits as API JSON
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

/* A process to start, from a JSON body: the client's options and what
 * they point to. */
struct pd_spawn_req {
        struct pd_spawn_opts opts;      /* points into the fields below */
        struct pd_strv args, env;
        json_t *argv;                   /* for the audit */
        struct pd_route_user user;
        char cwd[PATH_MAX];
        const char *tag;                /* in the body */
        bool pty;
};

/* The options of POST /processes (exec: of POST /exec, whose body may
 * carry stdin_data); on a bad body, write a message into msg and return
 * -EINVAL. Free sr with pd_spawn_req_free whatever the result. */
int pd_spawn_build(struct pd_srv_sandbox *s, json_t *body, bool exec, struct pd_spawn_req *sr, char *msg,
                   size_t msgsz);
void pd_spawn_req_free(struct pd_spawn_req *sr);
/* Answer a failed SPAWN: a command that cannot run is the caller's 400. */
enum MHD_Result pd_spawn_reply_error(struct pd_req *r, int k, const struct pd_error *err,
                                     const struct pd_spawn_req *sr);
/* A JSON string of at most max bytes without NUL bytes (jansson keeps
 * them, with json_string_length, when a client sends \u0000). */
bool pd_json_clean_str(const json_t *j, size_t max);
/* The environment of every process started through an API (native, E2B):
 * the defaults (PATH, HOME, USER, LOGNAME, SHELL, LANG, HOSTNAME; TERM
 * with a pty), then the sandbox's own env (create's env / envVars) over
 * them. A new object. */
json_t *pd_spawn_env_base(const struct pd_srv_sandbox *s, const struct pd_route_user *u, bool pty);
/* The sandbox's own env over env (entries that could not be an
 * environment variable are skipped: create refused them already). */
void pd_spawn_env_sandbox(json_t *env, const struct pd_srv_sandbox *s);
/* A request's env object over env. 0, or -EINVAL with msg on the first
 * name that is empty or holds '=' or a value that is not a string without
 * NUL bytes of at most 128 KiB. */
int pd_spawn_env_merge(json_t *env, json_t *req, char *msg, size_t msgsz);
/* env as "NAME=value" strings. */
int pd_spawn_env_list(json_t *env, struct pd_strv *out);
/* The process.start audit event; via: "processes" or "exec". */
void pd_spawn_audit(struct pd_req *r, struct pd_srv_sandbox *s, const struct pd_spawn_req *sr, uint32_t pid,
                    const char *via);

/* ---- procs_json.c ---- */

/* One LIST entry. */
struct pd_proc_info {
        uint32_t pid;
        bool found, exited, pty;
        bool stdin_open;        /* the host may still write its stdin */
        uint64_t end[2];
        json_t *obj;            /* API process object */
};

/* LIST; with want_pid, fill *one about that pid (one->found false if
 * absent; one->obj referenced); with all, an array of process objects. */
int pd_procs_list(struct pd_client *c, uint32_t want_pid, struct pd_proc_info *one, json_t **all,
                  struct pd_error *err);
/* The same over a decoded LIST (pd_proc_list_decode). */
void pd_procs_list_json(const struct pd_proc_list *l, uint32_t want_pid, struct pd_proc_info *one, json_t **all);
/* JSON text of bytes that may not be UTF-8 (invalid sequences: U+FFFD). */
json_t *pd_procs_text_json(const char *buf, size_t len);
/* {"exit_code", "signal", "reason"} of how a process ended. */
json_t *pd_procs_exit_json(const struct pd_exit *x);

/* ---- routes_procs.c ---- */

/* Common prologue of the /processes/{pid}... routes: sandbox, pid, agent
 * connection. */
struct pd_pid_ctx {
        struct pd_srv_sandbox *s;
        uint32_t pid;
        struct pd_client c;
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
