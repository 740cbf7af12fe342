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
 * PD_SANDBOX_TOOLS_DIR when the build defines it. */
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
#define RESP_HDR_MAX (16u << 10)

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

static int bridge_start(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_client *c, struct pd_error *err)
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
        pd_spawn_env_sandbox(env, s);
        struct pd_strv envs = { 0 };
        k = pd_spawn_env_list(env, &envs);
        json_decref(env);
        static const char *const argv[] = { "/usr/bin/python3", BRIDGE_PATH, "--port", "49999" };
        const struct pd_spawn_opts o = {
                .argv = argv, .argc = PD_ARRAY_SIZE(argv), .env = (const char *const *)envs.v, .envc = envs.n,
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
        pd_log("info", "e2b kernel bridge started sandbox=%s", s->id);
        return 0;
}

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

static void ci_frame(struct pd_e2b_stream *st, const struct pd_frame_hdr *h, const uint8_t *p)
{
        if (h->id != st->id)
                return;
        if (h->type == PD_T_DATA) {
                if (h->len && pd_e2b_stream_put(st, p, h->len) < 0)
                        st->done = true;
        } else if (h->type == PD_T_TUNNEL_CLOSE || h->type == PD_T_ERROR) {
                st->done = true;
        }
}

static void ci_idle(struct pd_e2b_stream *st)
{
        /* a long computation: keep waiting */
}

static void ci_fail(struct pd_e2b_stream *st, int k)
{
        st->done = true;
}

static enum MHD_Result ci_error(struct pd_req *r, unsigned status, const char *msg)
{
        return pd_reply_json(r, status, json_pack("{s:s, s:s}", "error", msg, "message", msg));
}

enum MHD_Result pd_e2b_ci_forward(struct pd_req *r, struct pd_e2b_call *c)
{
        struct pd_e2b_stream *st = pd_e2b_stream_new(r, c->s);
        if (!st)
                return MHD_NO;
        c->s = NULL;
        struct pd_error err = { 0 };
        uint32_t tid = 0;
        int k = pd_route_agent(st->s, &st->cl, &err);
        if (k >= 0)
                k = bridge_tunnel(r->srv, st->s, &st->cl, &tid, &err);
        if (k < 0) {
                pd_log("warn", "e2b code interpreter unreachable sandbox=%s error=\"%s\"", st->s->id, err.msg);
                enum MHD_Result ret = ci_error(r, 502, err.msg);
                pd_e2b_stream_free(st);
                return ret;
        }
        st->id = tid;
        /* the request, HTTP/1.1 with a length and Connection: close */
        const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
        char head[2048];
        int hn = snprintf(head, sizeof head,
                          "%s %s HTTP/1.1\r\nHost: localhost:49999\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n\r\n",
                          r->method, c->path, ct ? ct : "application/json", c->len);
        if (hn < 0 || (size_t)hn >= sizeof head || strpbrk(c->path, "\r\n ") || (ct && strpbrk(ct, "\r\n"))) {
                pd_e2b_stream_free(st);
                return ci_error(r, 400, "bad request line");
        }
        return pd_tunnel_http_relay(r, st, tid, head, (size_t)hn, c->body, c->len, false, "the code interpreter");
}

static bool hop_header(const char *line, size_t n)
{
        static const char *const hop[] = { "Connection:", "Keep-Alive:", "Transfer-Encoding:", "Content-Length:",
                                           "Proxy-Connection:", "Upgrade:", "Date:", "Server:" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(hop); i++) {
                size_t l = strlen(hop[i]);
                if (n >= l && !strncasecmp(line, hop[i], l))
                        return true;
        }
        return false;
}

enum MHD_Result pd_tunnel_http_relay(struct pd_req *r, struct pd_e2b_stream *st, uint32_t tid, const char *head,
                                     size_t head_len, const char *body, size_t body_len, bool all_headers,
                                     const char *what)
{
        char msg[160];
        int k = pd_client_tunnel_send(&st->cl, tid, head, head_len);
        if (k >= 0)
                k = pd_client_tunnel_send(&st->cl, tid, body, body_len);
        if (k >= 0)
                k = pd_client_flush(&st->cl, CALL_TIMEOUT_MS);
        pd_route_watch(&st->cl, r->srv, r->conn, st->s);
        /* the response head */
        char *hb = NULL;
        size_t hlen = 0;
        char *eoh = NULL;
        while (k >= 0 && !eoh) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                k = pd_client_next(&st->cl, &h, &p, 120000);
                if (k < 0)
                        break;
                if (h.id != tid)
                        continue;
                if (h.type == PD_T_TUNNEL_CLOSE || h.type == PD_T_ERROR) {
                        k = -ECONNRESET;
                        break;
                }
                if (h.type != PD_T_DATA || !h.len)
                        continue;
                if (hlen + h.len > RESP_HDR_MAX + PD_DATA_CHUNK) {
                        k = -EMSGSIZE;
                        break;
                }
                char *nb = realloc(hb, hlen + h.len + 1);
                if (!nb) {
                        k = -ENOMEM;
                        break;
                }
                hb = nb;
                memcpy(hb + hlen, p, h.len);
                hlen += h.len;
                hb[hlen] = '\0';
                eoh = strstr(hb, "\r\n\r\n");
        }
        if (k < 0 || !eoh) {
                free(hb);
                pd_e2b_stream_free(st);
                snprintf(msg, sizeof msg, "%s closed the connection", what);
                return ci_error(r, 502, msg);
        }
        unsigned status = 502;
        if (!strncmp(hb, "HTTP/1.", 7) && strlen(hb) > 12)
                status = (unsigned)strtoul(hb + 9, NULL, 10);
        if (status < 100 || status > 599)
                status = 502;
        char rct[256] = "application/json";
        for (char *line = strstr(hb, "\r\n"); line && line < eoh; line = strstr(line + 2, "\r\n")) {
                size_t ll = strcspn(line + 2, "\r\n");
                if (all_headers && ll && !hop_header(line + 2, ll)) {
                        if (pd_e2b_stream_put_header(st, line + 2, ll) < 0) {
                                free(hb);
                                pd_e2b_stream_free(st);
                                return MHD_NO;
                        }
                        continue;
                }
                if (!strncasecmp(line + 2, "Content-Type:", 13)) {
                        const char *v = line + 15;
                        while (*v == ' ')
                                v++;
                        size_t vl = strcspn(v, "\r\n");
                        if (vl < sizeof rct) {
                                memcpy(rct, v, vl);
                                rct[vl] = '\0';
                        }
                }
        }
        size_t body_off = (size_t)(eoh + 4 - hb);
        if (hlen > body_off)
                pd_e2b_stream_put(st, hb + body_off, hlen - body_off);
        free(hb);
        st->on_frame = ci_frame;
        st->on_idle = ci_idle;
        st->on_fail = ci_fail;
        st->idle_ms = 30000;
        return pd_e2b_stream_reply(r, st, status, all_headers ? NULL : rct);
}
