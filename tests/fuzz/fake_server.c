/* The server the HTTP fuzz targets (fuzz-http.c) talk to: the real HTTP
 * layer and routes (src/server/ without manager.c), over a link-time
 * stand-in for the sandbox manager that holds one fake sandbox and never
 * builds a real one, whose agent is a thread in this process answering
 * every request from canned replies (fake_agent below). So a fuzz input
 * reaches routing, auth, body caps, JSON decoding, spawn building,
 * multipart, Connect envelopes and the replies' formatting, and nothing
 * outside this process is touched. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fake_server.h"
#include "server/routes.h"
#include "server/e2b/e2b.h"
#include "server/core/manager.h"
#include "server/core/pool.h"
#include "proto/msg.h"
#include "server/core/store.h"
#include "lib/tier.h"

static struct pd_server srv;
static struct pd_srv_sandbox fake;      /* the one sandbox; never freed */
static struct pd_sandbox fake_sb;
static int stop_efd = -1, changed_efd = -1;

/* ---- the fake agent: one thread per connection --------------------- */

static void put_entry(struct pd_msg *m, const char *path)
{
        size_t mark = pd_msg_nest_begin(m, PD_A_ENTRY);
        const char *base = strrchr(path, '/');
        pd_msg_put_str(m, PD_A_NAME, base && base[1] ? base + 1 : "f");
        pd_msg_put_str(m, PD_A_PATH, path);
        pd_msg_put_u32(m, PD_A_FTYPE, PD_FT_FILE);
        pd_msg_put_u64(m, PD_A_SIZE, 4);
        pd_msg_put_u32(m, PD_A_MODE, 0644);
        pd_msg_put_u32(m, PD_A_UID, 1000);
        pd_msg_put_u32(m, PD_A_GID, 1000);
        pd_msg_put_u64(m, PD_A_MTIME_NS, 1700000000000000000ull);
        pd_msg_nest_end(m, mark);
}

static void exit_frame(struct pd_conn *c, uint32_t pid)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_u32(&m, PD_A_PID, pid);
        pd_msg_put_u32(&m, PD_A_EXIT_CODE, 0);
        pd_msg_put_str(&m, PD_A_REASON, "exit");
        pd_msg_put_u64(&m, PD_A_END_OUT, 3);
        pd_msg_put_u64(&m, PD_A_END_ERR, 0);
        pd_conn_queue_msg(c, PD_T_EXIT, pid, &m);
        pd_msg_free(&m);
}

static void answer(struct pd_conn *c, const struct pd_frame_hdr *h, const uint8_t *p, uint32_t *write_id)
{
        struct pd_msg m;
        pd_msg_init(&m);
        struct pd_attr a;
        char path[512] = "/home/user/f";
        if (pd_msg_find(p, h->len, PD_A_PATH, &a))
                (void)pd_attr_str(&a, path, sizeof path);
        uint16_t type = PD_T_REPLY;
        uint32_t aux = 0;
        switch (h->type) {
        case PD_T_HELLO:
                pd_msg_put_u32(&m, PD_A_VERSION, PD_PROTO_VERSION);
                pd_msg_put_str(&m, PD_A_AGENT, "paddock-fuzz-agent");
                type = PD_T_HELLO;
                break;
        case PD_T_LIST: {
                size_t mark = pd_msg_nest_begin(&m, PD_A_PROC);
                pd_msg_put_u32(&m, PD_A_PID, 2);
                pd_msg_put_str(&m, PD_A_STATE, "exited");
                pd_msg_put_u32(&m, PD_A_EXIT_CODE, 0);
                pd_msg_put_str(&m, PD_A_REASON, "exit");
                pd_msg_put_str(&m, PD_A_TAG, "fuzz");
                pd_msg_put_str(&m, PD_A_ARG, "true");
                pd_msg_put_u64(&m, PD_A_END_OUT, 3);
                pd_msg_put_u64(&m, PD_A_END_ERR, 0);
                pd_msg_put_u64(&m, PD_A_START_OUT, 0);
                pd_msg_put_u64(&m, PD_A_START_ERR, 0);
                pd_msg_nest_end(&m, mark);
                break;
        }
        case PD_T_SPAWN:
                pd_msg_put_u32(&m, PD_A_PID, 2);
                pd_conn_queue_msg(c, PD_T_REPLY, h->id, &m);
                pd_msg_reset(&m);
                /* the process ran and ended at once: output, then EXIT */
                uint8_t out[8 + 3] = { 0, 0, 0, 0, 0, 0, 0, 0, 'o', 'k', '\n' };
                pd_conn_queue(c, PD_T_OUTPUT, 0, 2, PD_STREAM_STDOUT, out, sizeof out);
                exit_frame(c, 2);
                pd_msg_free(&m);
                return;
        case PD_T_ATTACH: {
                /* what EXIT will claim was written (3 bytes of stdout), then EXIT */
                uint32_t stream = PD_STREAM_STDOUT;
                if (pd_msg_find(p, h->len, PD_A_STREAM, &a))
                        (void)pd_attr_u32(&a, &stream);
                pd_msg_put_u64(&m, PD_A_OFFSET, 0);
                pd_conn_queue_msg(c, PD_T_REPLY, h->id, &m);
                pd_msg_free(&m);
                if (stream != PD_STREAM_STDERR) {
                        uint8_t out[8 + 3] = { 0, 0, 0, 0, 0, 0, 0, 0, 'o', 'k', '\n' };
                        pd_conn_queue(c, PD_T_OUTPUT, 0, 2, stream, out, sizeof out);
                }
                exit_frame(c, 2);
                return;
        }
        case PD_T_FILE_STAT:
        case PD_T_FILE_MKDIR:
        case PD_T_FILE_MOVE:
                put_entry(&m, path);
                break;
        case PD_T_FILE_LIST:
                put_entry(&m, "/home/user/a");
                put_entry(&m, "/home/user/b");
                break;
        case PD_T_FILE_READ:
                pd_conn_queue(c, PD_T_DATA, PD_F_END, h->id, 0, "data", 4);
                pd_msg_put_u64(&m, PD_A_SIZE, 4);
                break;
        case PD_T_FILE_WRITE:
                *write_id = h->id;      /* REPLY at its last DATA */
                pd_msg_free(&m);
                return;
        case PD_T_DATA:
                if (h->id == *write_id && (h->flags & PD_F_END)) {
                        put_entry(&m, "/home/user/upload");
                        pd_conn_queue_msg(c, PD_T_REPLY, h->id, &m);
                        *write_id = 0;
                }
                pd_msg_free(&m);
                return;
        case PD_T_STDIN:
        case PD_T_TUNNEL_CLOSE:
                pd_msg_free(&m);
                return;
        case PD_T_FILE_REMOVE:
        case PD_T_SIGNAL:
        case PD_T_STDIN_CLOSE:
        case PD_T_RESIZE:
        case PD_T_DETACH:
        case PD_T_UNWATCH:
        case PD_T_SHUTDOWN:
                break;
        case PD_T_PING:
                pd_msg_put_u64(&m, PD_A_TIME_NS, 1);
                break;
        default:
                /* WATCH and TUNNEL_OPEN would stream until the client went
                 * away: refused, as an agent may */
                type = PD_T_ERROR;
                aux = ENOTSUP;
                pd_msg_put_str(&m, PD_A_MESSAGE, "not in the fuzz agent");
                break;
        }
        if (type == PD_T_ERROR)
                pd_conn_queue(c, type, 0, h->id, aux, m.buf, m.len);
        else
                pd_conn_queue_msg(c, type, h->id, &m);
        pd_msg_free(&m);
}

static void *fake_agent(void *arg)
{
        struct pd_conn c;
        if (pd_conn_init(&c, (int)(intptr_t)arg) < 0)
                return NULL;
        uint32_t write_id = 0;
        for (;;) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                int r = pd_conn_wait(&c, &h, &p, 60000);
                if (r < 0)
                        break;
                answer(&c, &h, p, &write_id);
                if (pd_conn_flush_all(&c, 10000) < 0)
                        break;
        }
        pd_conn_close(&c);
        return NULL;
}

static int fake_connect(struct pd_sandbox *sb, struct pd_error *err)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return pd_error_set(err, errno, "socketpair");
        pthread_t t;
        if (pthread_create(&t, NULL, fake_agent, (void *)(intptr_t)sv[1]) != 0) {
                close(sv[0]);
                close(sv[1]);
                return pd_error_setx(err, EAGAIN, "fake agent thread");
        }
        pthread_detach(t);
        return sv[0];
}

static int no_op(struct pd_sandbox *sb, struct pd_error *err)
{
        return pd_error_setx(err, ENOTSUP, "not in the fuzz tier");
}

static int no_snapshot(struct pd_sandbox *sb, const char *name, struct pd_error *err)
{
        return pd_error_setx(err, ENOTSUP, "not in the fuzz tier");
}

static int fake_stats(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        out->memory_current = 1u << 20;
        out->pids_current = 2;
        return 0;
}

static const struct pd_tier_ops fake_ops = {
        .name = "fuzz",
        .create = no_op,
        .connect = fake_connect,
        .pause = no_op,
        .resume = no_op,
        .snapshot = no_snapshot,
        .destroy = no_op,
        .stats = fake_stats,
        .adopt = no_op,
};

/* ---- the manager, as far as the routes see it ---------------------- */

uint64_t pd_boot_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int pd_server_stop_fd(struct pd_server *s)
{
        return stop_efd;
}

int pd_manager_changed_fd(struct pd_server *s)
{
        return changed_efd;
}

struct pd_srv_sandbox *pd_server_sandbox_get(struct pd_server *s, const char *id, const struct pd_key *key)
{
        if (!id || strcmp(id, fake.id) || (key && strcmp(key->id, fake.key_id)))
                return NULL;
        pthread_mutex_lock(&s->lock);
        fake.refs++;
        pthread_mutex_unlock(&s->lock);
        return &fake;
}

void pd_server_sandbox_put(struct pd_server *s, struct pd_srv_sandbox *sb)
{
        if (!sb)
                return;
        pthread_mutex_lock(&s->lock);
        sb->refs--;
        pthread_mutex_unlock(&s->lock);
}

int pd_manager_snapshot(struct pd_server *s, const struct pd_key *key, struct pd_srv_sandbox ***out, size_t *n)
{
        struct pd_srv_sandbox **v = calloc(1, sizeof *v);
        if (!v)
                return -ENOMEM;
        *n = 0;
        if ((v[0] = pd_server_sandbox_get(s, fake.id, key)))
                *n = 1;
        *out = v;
        return 0;
}

void pd_manager_snapshot_free(struct pd_server *s, struct pd_srv_sandbox **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                pd_server_sandbox_put(s, v[i]);
        free(v);
}

void pd_manager_counts(struct pd_server *s, struct pd_manager_counts *out)
{
        memset(out, 0, sizeof *out);
        out->running = 1;
}

size_t pd_manager_pool_ready(struct pd_server *s, struct pd_pool_count *out, size_t max)
{
        return 0;
}

unsigned pd_manager_slots_free(struct pd_server *s, const struct pd_key *key)
{
        return 4;
}

int pd_manager_create(struct pd_server *s, const struct pd_key *key, const struct pd_create_req *req,
                      struct pd_srv_sandbox **out, struct pd_error *err)
{
        /* what the route decoded is checked, not built: the create
         * "returns" the one fake sandbox */
        if (req->made) {
                pd_sandbox_free(req->made);
                return pd_error_setx(err, ENOTSUP, "fork not in the fuzz manager");
        }
        *out = pd_server_sandbox_get(s, fake.id, NULL);
        return 0;
}

int pd_manager_delete(struct pd_server *s, struct pd_srv_sandbox *sb, struct pd_error *err)
{
        return 0;
}

int pd_manager_set_timeout(struct pd_server *s, struct pd_srv_sandbox *sb, uint32_t timeout_s, struct pd_error *err)
{
        return 0;
}

int pd_manager_pause(struct pd_server *s, struct pd_srv_sandbox *sb, struct pd_error *err)
{
        return 0;
}

int pd_manager_pause_mode(struct pd_server *s, struct pd_srv_sandbox *sb, enum pd_pause_mode mode,
                          struct pd_error *err)
{
        return 0;
}

int pd_manager_resume(struct pd_server *s, struct pd_srv_sandbox *sb, struct pd_error *err)
{
        return 0;
}

int pd_manager_resume_on_traffic(struct pd_server *s, struct pd_srv_sandbox *sb, struct pd_error *err)
{
        return pd_sb_can(sb->id, pd_srv_sandbox_state(sb), PD_OP_PORTS, err);
}

int pd_manager_set_ports_public(struct pd_server *s, struct pd_srv_sandbox *sb, bool pub, struct pd_error *err)
{
        __atomic_store_n(&sb->ports_public, pub, __ATOMIC_RELAXED);
        return 0;
}

void pd_manager_sandbox_info(struct pd_server *s, struct pd_srv_sandbox *sb, struct pd_sandbox_info *out)
{
        /* what lifecycle.c's says, with fixed values */
        memset(out, 0, sizeof *out);
        snprintf(out->id, sizeof out->id, "%s", sb->id);
        snprintf(out->template_name, sizeof out->template_name, "%s", sb->template_name);
        snprintf(out->isolation, sizeof out->isolation, "container");
        out->state = pd_srv_sandbox_state(sb);
        out->created_ms = 1767225600000ull;
        out->expires_ms = out->created_ms + 300000;
        out->timeout_s = sb->timeout_s;
        out->memory_bytes = 512ull << 20;
        out->disk_bytes = 1024ull << 20;
        out->pids = 512;
        out->millicpus = 1000;
        out->env = json_incref(sb->env);
        out->metadata = json_incref(sb->metadata);
        out->notes = json_array();
}

void pd_sandbox_info_clear(struct pd_sandbox_info *i)
{
        json_decref(i->env);
        json_decref(i->metadata);
        json_decref(i->notes);
        i->env = i->metadata = i->notes = NULL;
}

int pd_manager_stats(struct pd_server *s, struct pd_srv_sandbox *sb, struct pd_sandbox_metrics *out,
                     struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        out->st.memory_current = 1 << 20;
        out->st.pids_current = 2;
        out->memory_limit = 512ull << 20;
        out->pids_limit = 512;
        return 0;
}

int pd_manager_net_info(struct pd_server *s, struct pd_srv_sandbox *sb, struct pd_net_info *out,
                        struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        return 0;       /* no policy: {"mode":"none"} */
}

int pd_manager_net_update(struct pd_server *s, struct pd_srv_sandbox *sb, const struct pd_key *key,
                          const struct pd_netpol *pol, struct pd_error *err)
{
        return pd_error_setx(err, ENOTSUP, "no network in the fuzz manager");
}

void pd_manager_create_params(struct pd_server *s, struct pd_srv_sandbox *sb, struct pd_create_req *out)
{
        memset(out, 0, sizeof *out);
        pd_spec_defaults(&out->spec);
        snprintf(out->template_name, sizeof out->template_name, "%s", sb->template_name);
        out->env = sb->env;
        out->metadata = sb->metadata;
        out->timeout_s = sb->timeout_s;
}

void pd_manager_agent_died(struct pd_server *s, struct pd_srv_sandbox *sb)
{
}

/* pool.c's (not linked): the fake agent never dies */
bool pd_agent_alive(struct pd_sandbox *sb)
{
        return true;
}

int pd_manager_start(struct pd_server *s, struct pd_error *err)
{
        return 0;
}

void pd_manager_begin_stop(struct pd_server *s)
{
}

void pd_manager_stop(struct pd_server *s)
{
}

/* ---- setup ------------------------------------------------------------ */

int fake_server_start(const char *state_dir, unsigned port, struct fake_server_info *info)
{
        struct pd_error err = { 0 };
        static char listen[32];
        stop_efd = eventfd(0, EFD_CLOEXEC);
        changed_efd = eventfd(0, EFD_CLOEXEC);
        pthread_mutex_init(&srv.lock, NULL);
        if (pd_state_open(state_dir, &srv.state, &err) < 0 || pd_store_open(srv.state.dir, &srv.store, &err) < 0)
                goto fail;
        struct pd_key key;
        if (pd_store_key_create(srv.store, "default", info->key, &key, &err) < 0)
                goto fail;
        snprintf(listen, sizeof listen, "127.0.0.1:%u", port);
        srv.cfg.listen_addr = listen;
        srv.cfg.state_dir = srv.state.dir;
        srv.cfg.pool_size = 0;
        srv.cfg.max_sandboxes = 8;
        srv.cfg.max_per_key = 8;
        srv.cfg.default_timeout_s = 300;
        srv.cfg.domain = "localhost";
        srv.cfg.e2b_network = "none";
        srv.audit_dirfd = -1;   /* no audit files */

        /* the one sandbox, owned by the key */
        pd_id_new(fake.id);
        snprintf(fake.key_id, sizeof fake.key_id, "%s", key.id);
        snprintf(fake.template_name, sizeof fake.template_name, "base");
        fake.state = PD_SB_RUNNING;
        fake.env = json_object();
        fake.metadata = json_pack("{s:s}", "owner", "fuzz");
        fake.timeout_s = 300;
        fake.refs = 1;
        pthread_mutex_init(&fake.lock, NULL);
        snprintf(fake_sb.id, sizeof fake_sb.id, "%s", fake.id);
        fake_sb.state = &srv.state;
        pd_spec_defaults(&fake_sb.spec);
        fake_sb.ops = &fake_ops;
        fake_sb.dirfd = -1;
        fake_sb.agent_pidfd = -1;
        fake.sb = &fake_sb;
        snprintf(info->sandbox_id, sizeof info->sandbox_id, "%s", fake.id);
        if (pd_e2b_token(&srv, fake.id, info->token) < 0) {
                pd_error_setx(&err, EIO, "e2b token");
                goto fail;
        }
        /* the route tables serve registers (src/server/routes.c): without
         * them every request is a 404 and the targets reach no route */
        if (pd_server_routes(&srv, &err) < 0)
                goto fail;
        if (pd_http_start(&srv, &err) < 0)
                goto fail;
        return 0;
fail:
        fprintf(stderr, "fake server: %s\n", err.msg);
        return -1;
}
