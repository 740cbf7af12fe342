/* E2B compatibility (docs/e2b.md): the route table and envd matcher that
 * src/server/routes.c registers, then the declarations the e2b_*.c files
 * share. Built on core/ (and api/procs.h's spawn helpers); nothing in
 * core/ or api/ includes this. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/template.h"
#include "server/core/agent_io.h"
#include "server/core/server.h"
#include "server/core/stream.h"
#include "server/core/tokens.h"
#include "server/core/tunnel.h"

/* The E2B control plane (/v2/sandboxes, /sandboxes/...) and the signed
 * /files URLs (e2b_api.c). */
extern const struct pd_route pd_routes_e2b[];
/* E2B's template build API, on the native builder (e2b_templates.c). */
extern const struct pd_route pd_routes_e2b_templates[];
/* E2B's template tags (e2b_tags.c): registered before the snapshots'
 * table (its DELETE /templates/{id}). */
extern const struct pd_route pd_routes_e2b_tags[];
/* A tag as E2B's tags are: 1..128 of [A-Za-z0-9_.-], a word character first. */
bool pd_e2b_tag_ok(const char *tag);
/* The tags (strings, checked) of build, the template's new build: they
 * replace the tags the template had (its one build before). 0 or -errno. */
/* The first line of a small record file under the state dir (O_NOFOLLOW):
 * 0, or -errno; e2b_templates.c. */
int pd_e2b_read_line(const char *path, char *buf, size_t size);
int pd_e2b_tags_record(struct pd_server *srv, const char *name, const char *build, json_t *tags);
/* ref "NAME:TAG": 0 with NAME in name when TAG is a tag of key's own
 * template NAME (Sandbox.create('NAME:TAG')), else -ENOENT. */
int pd_e2b_tag_resolve(struct pd_server *srv, const char *key_id, const char *ref, char *name, size_t size);
/* E2B's snapshots API (e2b_snapshots.c). */
extern const struct pd_route pd_routes_e2b_snapshots[];
/* name is one of key's snapshots (Sandbox.create(snapshotID) starts it). */
bool pd_e2b_own_snapshot(struct pd_server *srv, const struct pd_key *key, const char *name);
/* DELETE /templates/{id} of snapshot name (also for the id "tags", which
 * the tags' DELETE /templates/tags route takes first: e2b_tags.c). */
enum MHD_Result pd_e2b_snapshot_delete(struct pd_req *r, const char *name);
/* envd and the code interpreter: every request that carries an
 * E2b-Sandbox-Id header, whatever its path, without API-key auth (the
 * handler checks X-Access-Token itself). */
extern const struct pd_route_matcher pd_e2b_envd_matcher;
/* Its handler (e2b_envd.c), with the calling convention of a
 * PD_ROUTE_STREAM_BODY route; also behind GET/POST /files. */
enum MHD_Result pd_e2b_envd_handle(struct pd_req *r, const char *chunk, size_t *chunk_len);

#define PD_E2B_ENVD_VERSION "0.6.4"
#define PD_E2B_ENVD_PORT 49983
#define PD_E2B_CI_PORT 49999
#define PD_E2B_TOKEN_LEN PD_TOKEN_LEN

/* E2B control-plane error: {"code": status, "message": "..."}. */
enum MHD_Result pd_e2b_reply_error(struct pd_req *r, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* The control plane's sandbox object (GET /sandboxes/{id}, list items). */
json_t *pd_e2b_info_json(struct pd_server *srv, struct pd_srv_sandbox *s);
/* GET /v2/sandboxes, GET /sandboxes (e2b_list.c). */
enum MHD_Result pd_e2b_route_list(struct pd_req *r, const char *chunk, size_t *chunk_len);

/* e2b_network.c: allow_internet_access and network.{allowOut,denyOut} of a
 * create body as paddock's policy JSON (new reference), or NULL: no
 * network when why is empty, a bad request (why says) otherwise. */
json_t *pd_e2b_network_policy(struct pd_server *srv, json_t *body, char *why, size_t whysz);
/* The network of an E2B template build's RUN steps: open (E2B's builder
 * has the internet) unless the server caps E2B at none (then NULL). */
json_t *pd_e2b_build_network(struct pd_server *srv);
/* e2b_ports.c: network.allowPublicTraffic and autoResume of a create
 * body into cr (after autoPause is read): 0, or -1 with why set. */
struct pd_create_req;
struct pd_sandbox_info;
int pd_e2b_ports_opts(json_t *body, struct pd_create_req *cr, char *why, size_t whysz);
/* The create/connect answer's domain and trafficAccessToken; -1 if the
 * token cannot be made. */
int pd_e2b_ports_answer(struct pd_server *srv, struct pd_srv_sandbox *s, json_t *o);
/* The info's domain, network.allowPublicTraffic and lifecycle. */
void pd_e2b_ports_info(struct pd_server *srv, struct pd_srv_sandbox *s, const struct pd_sandbox_info *i, json_t *o);
/* PUT /sandboxes/{id}/network (e2b_network.c). */
enum MHD_Result pd_e2b_route_network(struct pd_req *r, const char *chunk, size_t *chunk_len);
/* The sandbox's envd access token: pd_token of its id (core/tokens.h). */
int pd_e2b_token(struct pd_server *srv, const char *sandbox_id, char out[PD_E2B_TOKEN_LEN + 1]);
/* Constant-time string equality (pd_streq_ct). */
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
        struct pd_template_run img;     /* the sandbox's image defaults (procs_image.c) */
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
/* The sandbox user of the call: user, root, or the image template's
 * User (its default when the call names none). */
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
/* The code-interpreter templates' pool preparation: a running bridge
 * with a warm default kernel (e2b_ci.c). */
extern const struct pd_pool_prep pd_e2b_ci_prep;

/* ---- Connect streams: the core's streaming response (core/stream.h) ---- */
/* A stream whose lost agent connection ends it with a Connect error. */
struct pd_agent_stream *pd_e2b_stream_new(struct pd_req *r, struct pd_srv_sandbox *s);
/* A Connect envelope into the stream (flags 0 message, 2 end). */
void pd_e2b_stream_msg(struct pd_agent_stream *st, uint8_t flags, json_t *msg /* stolen */);
void pd_e2b_stream_end_error(struct pd_agent_stream *st, const char *code, const char *msg);
/* Agent errno to a Connect code. */
const char *pd_e2b_connect_code(int neg_errno);
/* 200 application/connect+json holding only an end-of-stream error: how a
 * streaming call fails before its first message. */
enum MHD_Result pd_e2b_stream_error_reply(struct pd_req *r, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* ---- templates (e2b_tpl_recipe.c) ---- */

#define PD_E2B_TPL_STEPS_MAX 200
/* A TemplateBuildStartV2 body as recipe text (malloc'd): FROM its base,
 * then its steps; COPY sources under f-<filesHash>/ of the context, each
 * hash a key of hashes (the uploads there are). NULL with why. */
char *pd_e2b_recipe(json_t *body, json_t *hashes, char *why, size_t whysz);
/* fromImage as a registry reference: Docker's short names under
 * docker.io (library/ for one component); E2B's own base refused. 0 or
 * 400 with why. */
int pd_e2b_image_ref(const char *in, char *out, size_t size, char *why, size_t whysz);
