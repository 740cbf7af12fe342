/* E2B code interpreter (E2b-Sandbox-Port: 49999, docs/e2b.md): each HTTP
 * request is relayed through an agent tunnel (TUNNEL_OPEN 49999) to the
 * kernel bridge inside the sandbox (src/sandbox-tools/kernel_bridge.py),
 * and its answer streamed back as it comes (/execute answers one JSON line
 * per output).
 *
 * The bridge is started on first use: the server writes the script to
 * /opt/paddock/kernel_bridge.py inside the sandbox (as root) and SPAWNs it
 * as "user" with the sandbox's envVars; then the tunnel is retried until
 * the bridge listens. The script is read from, in order:
 * $PADDOCK_SANDBOX_TOOLS/kernel_bridge.py, <exe dir>/../share/paddock/
 * sandbox-tools/, <exe dir>/../../src/sandbox-tools/ (a build tree), and
 * PD_SANDBOX_TOOLS_DIR when the build defines it.
 *
 * The code-interpreter templates' sandboxes come from a warm pool of their
 * own (pd_e2b_ci_prep): the filler starts the bridge with --warm in each
 * one before it is pooled and waits until its default kernel is up with
 * the common modules imported, so the first runCode answers at once. Such
 * a bridge started before its sandbox had an owner: every request relayed
 * to a bridge carries the sandbox's envVars (X-Paddock-Env), which it
 * applies to itself and its kernels. One bridge, its kernels, live in one
 * sandbox: a pooled sandbox is handed out once, so a warm kernel is never
 * shared. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/e2b/e2b.h"
#include "server/api/procs.h"
#include "lib/spec.h"
#include "lib/util.h"

#define CALL_TIMEOUT_MS 30000
#define BRIDGE_START_MS 90000
#define BRIDGE_PATH "/opt/paddock/kernel_bridge.py"
#define BRIDGE_TAG "paddock-e2b-kernel-bridge"
#define BRIDGE_MAX (1u << 20)
#define BRIDGE_READY_S 200      /* the pool's wait for a warm kernel (~20 s; > 60 s on a loaded host) */

static pthread_mutex_t bridge_lock = PTHREAD_MUTEX_INITIALIZER;

static char *read_file(const char *path, size_t *len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        char *buf = malloc(BRIDGE_MAX);
        size_t n = 0;
        ssize_t k;
        while (buf && n < BRIDGE_MAX && (k = read(fd, buf + n, BRIDGE_MAX - n)) > 0)
                n += (size_t)k;
        close(fd);
        if (!buf || n == 0 || n >= BRIDGE_MAX) {
                free(buf);
                return NULL;
        }
        *len = n;
        return buf;
}

static char *bridge_source(size_t *len)
{
        char path[PATH_MAX + 64];
        const char *env = getenv("PADDOCK_SANDBOX_TOOLS");
        char *b;
        if (env && *env) {
                snprintf(path, sizeof path, "%s/kernel_bridge.py", env);
                if ((b = read_file(path, len)))
                        return b;
        }
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
                exe[n] = '\0';
                char *dir = dirname(exe);
                static const char *const rel[] = { "../share/paddock/sandbox-tools", "../../src/sandbox-tools",
                                                   "../src/sandbox-tools" };
                for (size_t i = 0; i < PD_ARRAY_SIZE(rel); i++) {
                        snprintf(path, sizeof path, "%s/%s/kernel_bridge.py", dir, rel[i]);
                        if ((b = read_file(path, len)))
                                return b;
                }
        }
#ifdef PD_SANDBOX_TOOLS_DIR
        snprintf(path, sizeof path, "%s/kernel_bridge.py", PD_SANDBOX_TOOLS_DIR);
        if ((b = read_file(path, len)))
                return b;
#endif
        return NULL;
}

/* Write the bridge into the sandbox and start it as "user"; s: its
 * envVars (NULL: none yet, a pooled sandbox); warm: --warm. */
static int bridge_launch(struct pd_client *c, const struct pd_srv_sandbox *s, bool warm, struct pd_error *err)
{
        size_t len = 0;
        char *src = bridge_source(&len);
        if (!src)
                return pd_error_setx(err, ENOENT,
                                     "kernel_bridge.py not found (set PADDOCK_SANDBOX_TOOLS to src/sandbox-tools)");
        const struct pd_file_req dir = { .path = "/opt/paddock", .uid = 0, .gid = 0 };
        int k = pd_client_mkdir(c, &dir, -1, true, NULL, err);
        if (k < 0 && k != -EEXIST) {
                free(src);
                return k;
        }
        const struct pd_file_req file = { .path = BRIDGE_PATH, .uid = 0, .gid = 0 };
        uint32_t wid;
        k = pd_client_write_open(c, &file, 0644, &wid);
        if (k >= 0)
                k = pd_client_write_data(c, wid, src, len, true);
        free(src);
        if (k < 0)
                return pd_error_set(err, -k, "queue FILE_WRITE");
        if ((k = pd_client_write_finish(c, wid, NULL, CALL_TIMEOUT_MS, err)) < 0)
                return pd_error_prefix(err, "write %s", BRIDGE_PATH);

        /* the bridge's own environment, then the sandbox's envVars over it
         * (what its kernels inherit) */
        struct pd_route_user u;
        pd_route_user_parse("user", &u);
        json_t *env = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "PATH",
                                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME", u.home, "USER",
                                u.name, "LOGNAME", u.name, "LANG", "C.UTF-8", "PYTHONUNBUFFERED", "1", "MPLBACKEND",
                                "module://matplotlib_inline.backend_inline");
        if (s)
                pd_spawn_env_sandbox(env, s);
        struct pd_strv envs = { 0 };
        k = pd_spawn_env_list(env, &envs);
        json_decref(env);
        static const char *const argv[] = { "/usr/bin/python3", BRIDGE_PATH, "--port", "49999", "--warm" };
        const struct pd_spawn_opts o = {
                .argv = argv, .argc = PD_ARRAY_SIZE(argv) - (warm ? 0 : 1), .env = (const char *const *)envs.v,
                .envc = envs.n,
                .cwd = u.home, .uid = u.uid, .gid = u.gid, .groups = u.groups, .n_groups = u.n_groups,
                .tag = BRIDGE_TAG,
        };
        uint32_t pid;
        if (k < 0)
                k = pd_error_set(err, ENOMEM, "bridge environment");
        else
                k = pd_client_spawn(c, &o, &pid, err);
        pd_strv_free(&envs);
        if (k < 0)
                return pd_error_prefix(err, "start the kernel bridge");
        return 0;
}

static int bridge_start(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_client *c, struct pd_error *err)
{
        (void)srv;
        int k = bridge_launch(c, s, false, err);
        if (k == 0)
                pd_log("info", "e2b kernel bridge started sandbox=%s", s->id);
        return k;
}

/* The pool's preparation (manager.h): the bridge with --warm, then
 * `kernel_bridge.py --wait-ready 2` run inside until it exits 0 (the default
 * kernel is up, its imports done); 2: not yet, asked again unless the
 * server is stopping or BRIDGE_READY_S have passed; 1: it failed. */
static int ci_prep(struct pd_server *srv, struct pd_sandbox *sb, const bool *stop, struct pd_error *err)
{
        (void)srv;
        int fd = pd_sandbox_connect(sb, err);
        if (fd < 0)
                return fd;
        struct pd_client c;
        int k = pd_client_connect(&c, fd, "paddock-serve " PD_VERSION, err);
        if (k == 0)
                k = bridge_launch(&c, NULL, true, err);
        uint64_t deadline = pd_now_ms() + BRIDGE_READY_S * 1000u;
        while (k == 0) {
                static const char *const argv[] = { "/usr/bin/python3", BRIDGE_PATH, "--port", "49999", "--wait-ready",
                                                    "2" };
                const struct pd_spawn_opts o = { .argv = argv, .argc = PD_ARRAY_SIZE(argv), .cwd = "/tmp",
                                                 .uid = 65534, .gid = 65534, .tag = BRIDGE_TAG };
                const struct pd_run_io io = { .timeout_ms = 30000 };
                uint32_t pid;
                struct pd_exit x;
                k = pd_client_run(&c, &o, &io, &pid, &x, err);
                if (k < 0 || (x.has_code && x.code == 0))
                        break;
                if (!x.has_code || x.code != 2)
                        k = pd_error_setx(err, EIO, "the kernel bridge did not start its kernel (%s %d)", x.reason,
                                          x.has_code ? (int)x.code : -1);
                else if (__atomic_load_n(stop, __ATOMIC_RELAXED))
                        k = pd_error_setx(err, ECANCELED, "the server is stopping");
                else if (pd_now_ms() > deadline)
                        k = pd_error_setx(err, ETIMEDOUT, "the kernel bridge was not ready after %d s", BRIDGE_READY_S);
        }
        pd_client_close(&c);
        if (k == 0)
                pd_log("info", "e2b kernel bridge warm sandbox=%s", sb->id);
        return k;
}

const struct pd_pool_prep pd_e2b_ci_prep = { .name = "code-interpreter", .run = ci_prep };

/* A tunnel to the bridge, starting it when nobody listens. */
static int bridge_tunnel(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_client *c, uint32_t *tid,
                         struct pd_error *err)
{
        pd_route_watch(c, srv, NULL, s);
        int k = pd_client_tunnel_open(c, PD_E2B_CI_PORT, tid, err);
        if (k != -ECONNREFUSED)
                return k;
        pthread_mutex_lock(&bridge_lock);
        k = pd_client_tunnel_open(c, PD_E2B_CI_PORT, tid, err);
        if (k == -ECONNREFUSED) {
                k = bridge_start(srv, s, c, err);
                uint64_t deadline = pd_now_ms() + BRIDGE_START_MS;
                while (k >= 0) {
                        k = pd_client_tunnel_open(c, PD_E2B_CI_PORT, tid, err);
                        if (k != -ECONNREFUSED || pd_now_ms() > deadline)
                                break;
                        struct timespec ts = { 0, 100 * 1000000L };
                        nanosleep(&ts, NULL);
                        k = 0;
                }
        }
        pthread_mutex_unlock(&bridge_lock);
        return k;
}

/* The sandbox's envVars as base64 JSON (NULL: none), the bridge's
 * X-Paddock-Env. */
static char *sandbox_env_b64(struct pd_srv_sandbox *s)
{
        json_t *env = json_object();
        if (!env)
                return NULL;
        pd_spawn_env_sandbox(env, s);
        char *txt = json_object_size(env) ? json_dumps(env, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
        json_decref(env);
        if (!txt)
                return NULL;
        char *b = pd_e2b_b64(txt, strlen(txt));
        free(txt);
        return b;
}

static enum MHD_Result ci_error(struct pd_req *r, unsigned status, const char *msg)
{
        return pd_reply_json(r, status, json_pack("{s:s, s:s}", "error", msg, "message", msg));
}

/* Up to this much of a request (head and body) goes out with the
 * TUNNEL_OPEN, as the port relay's (api/ports.c): the agent buffers a
 * connecting tunnel's bytes only so far. */
#define PIPELINE_MAX (64u << 10)

/* The agent connection and tunnel to the bridge, with req (NULL: too big)
 * queued behind the TUNNEL_OPEN and the HELLO pipelined, as the port relay
 * opens its tunnels: one agent round trip where a connect, a TUNNEL_OPEN
 * and the request took three, on every runCode. *sent: req went with it.
 * Nobody listening (the bridge not started yet): bridge_tunnel starts it
 * and req is the caller's to send. */
static int ci_open(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_client *c, const char *req, size_t n,
                   uint32_t *tid, bool *sent, struct pd_error *err)
{
        *sent = false;
        int k;
        if (!req) {
                if ((k = pd_route_agent(s, c, err)) < 0)
                        return k;
                return bridge_tunnel(srv, s, c, tid, err);
        }
        k = pd_agentc_connect_pipelined(s, c, err);
        if (k == 0) {
                pd_route_watch(c, srv, NULL, s);
                k = pd_client_tunnel_open_with(c, PD_E2B_CI_PORT, req, n, tid, err);
        }
        if (k < 0 && pd_route_agent_untouched(c, k)) {
                pd_client_close(c);
                *err = (struct pd_error){ 0 };
                if ((k = pd_route_agent(s, c, err)) == 0) {
                        pd_route_watch(c, srv, NULL, s);
                        k = pd_client_tunnel_open_with(c, PD_E2B_CI_PORT, req, n, tid, err);
                }
        }
        if (k == 0)
                *sent = true;
        if (k != -ECONNREFUSED)
                return k;
        /* the agent dropped req with the failed connect */
        *err = (struct pd_error){ 0 };
        return bridge_tunnel(srv, s, c, tid, err);
}

enum MHD_Result pd_e2b_ci_forward(struct pd_req *r, struct pd_e2b_call *c)
{
        /* the request, HTTP/1.1 with a length and Connection: close, and
         * the sandbox's envVars for a bridge started before they were known */
        const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
        _pd_cleanup_free_ char *envh = sandbox_env_b64(c->s);
        _pd_cleanup_free_ char *req = NULL;
        int hn = asprintf(&req,
                          "%s %s HTTP/1.1\r\nHost: localhost:49999\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                          "%s%s%sConnection: close\r\n\r\n",
                          r->method, c->path, ct ? ct : "application/json", c->len, envh ? "X-Paddock-Env: " : "",
                          envh ? envh : "", envh ? "\r\n" : "");
        if (hn < 0 || strpbrk(c->path, "\r\n ") || (ct && strpbrk(ct, "\r\n")))
                return ci_error(r, 400, "bad request line");
        size_t rn = (size_t)hn + c->len;
        bool whole = rn <= PIPELINE_MAX;
        if (whole && c->len) {
                char *nb = realloc(req, rn);
                if (!nb)
                        return ci_error(r, 500, "out of memory");
                req = nb;
                memcpy(req + hn, c->body, c->len);
        }
        struct pd_agent_stream *st = pd_e2b_stream_new(r, c->s);
        if (!st)
                return MHD_NO;
        c->s = NULL;
        struct pd_error err = { 0 };
        uint32_t tid = 0;
        bool sent = false;
        int k = ci_open(r->srv, st->s, &st->cl, whole ? req : NULL, rn, &tid, &sent, &err);
        if (k < 0) {
                pd_log("warn", "e2b code interpreter unreachable sandbox=%s error=\"%s\"", st->s->id, err.msg);
                enum MHD_Result ret = ci_error(r, 502, err.msg);
                pd_agent_stream_free(st);
                return ret;
        }
        st->id = tid;
        if (sent)
                return pd_tunnel_http_relay(r, st, tid, NULL, 0, NULL, 0, false, "the code interpreter");
        return pd_tunnel_http_relay(r, st, tid, req, (size_t)hn, c->body, c->len, false, "the code interpreter");
}
