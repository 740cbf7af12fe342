/* Client of paddock-netd's control socket (netd_client.h). Blocking,
 * one request at a time; used by router.c. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/netd_client.h"
#include "lib/util.h"

#define REPLY_MAX 65536
#define REPLY_TIMEOUT_MS 10000

struct pd_netd_client {
        int fd;
};

int pd_netd_connect(const char *path, int timeout_ms, struct pd_netd_client **out,
                    struct pd_error *err)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof sa.sun_path)
                return pd_error_setx(err, ENAMETOOLONG, "netd socket path too long");
        strcpy(sa.sun_path, path);
        uint64_t deadline = pd_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
        for (;;) {
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return pd_error_set(err, errno, "socket");
                if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
                        struct pd_netd_client *c = malloc(sizeof *c);
                        if (!c) {
                                close(fd);
                                return pd_error_set(err, ENOMEM, "netd client");
                        }
                        c->fd = fd;
                        *out = c;
                        return 0;
                }
                int e = errno;
                close(fd);
                /* netd starting: the socket appears when it listens. The
                 * caller normally waits on --ready-fd first; this is the
                 * fallback, a short bounded retry. */
                if ((e != ENOENT && e != ECONNREFUSED) || pd_now_ms() >= deadline)
                        return pd_error_set(err, e, "connect to paddock-netd '%s'", path);
                poll(NULL, 0, 10);
        }
}

void pd_netd_close(struct pd_netd_client *c)
{
        if (!c)
                return;
        close(c->fd);
        free(c);
}

static int read_full(int fd, void *buf, size_t n, uint64_t deadline)
{
        size_t have = 0;
        while (have < n) {
                int left = (int)(deadline > pd_now_ms() ? deadline - pd_now_ms() : 0);
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, left);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r == 0 ? -ETIMEDOUT : -errno;
                ssize_t k = read(fd, (char *)buf + have, n - have);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k == 0 ? -ECONNRESET : -errno;
                have += (size_t)k;
        }
        return 0;
}

/* Send req (stolen), wait for {"ok":...}. */
static int call(struct pd_netd_client *c, json_t *req, struct pd_error *err)
{
        if (!req)
                return pd_error_set(err, ENOMEM, "netd request");
        char *s = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        if (!s)
                return pd_error_set(err, ENOMEM, "netd request");
        size_t n = strlen(s);
        if (n > PD_NETD_MSG_MAX) {
                free(s);
                return pd_error_setx(err, E2BIG, "netd request of %zu bytes", n);
        }
        uint8_t h[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
        int r = pd_write_all(c->fd, h, 4);
        if (r >= 0)
                r = pd_write_all(c->fd, s, n);
        free(s);
        if (r < 0)
                return pd_error_set(err, -r, "write to paddock-netd");
        uint64_t deadline = pd_now_ms() + REPLY_TIMEOUT_MS;
        if ((r = read_full(c->fd, h, 4, deadline)) < 0)
                return pd_error_set(err, -r, "read from paddock-netd");
        size_t len = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
        if (len == 0 || len > REPLY_MAX)
                return pd_error_setx(err, EPROTO, "paddock-netd reply of %zu bytes", len);
        char *body = malloc(len);
        if (!body)
                return pd_error_set(err, ENOMEM, "netd reply");
        if ((r = read_full(c->fd, body, len, deadline)) < 0) {
                free(body);
                return pd_error_set(err, -r, "read from paddock-netd");
        }
        json_t *o = json_loadb(body, len, 0, NULL);
        free(body);
        json_t *ok = json_object_get(o, "ok");
        if (!json_is_boolean(ok)) {
                json_decref(o);
                return pd_error_setx(err, EPROTO, "paddock-netd: malformed reply");
        }
        if (json_is_true(ok)) {
                json_decref(o);
                return 0;
        }
        const char *msg = json_string_value(json_object_get(o, "error"));
        r = pd_error_setx(err, EINVAL, "paddock-netd: %s", msg ? msg : "request refused");
        json_decref(o);
        return r;
}

int pd_netd_ping(struct pd_netd_client *c, struct pd_error *err)
{
        return call(c, json_pack("{s:s}", "op", "ping"), err);
}

int pd_netd_add(struct pd_netd_client *c, const struct pd_netd_sandbox *sb,
                struct pd_error *err)
{
        json_t *addrs = json_array();
        for (int i = 0; addrs && i < PD_NETD_MAX_ADDRS && sb->addrs[i]; i++)
                json_array_append_new(addrs, json_string(sb->addrs[i]));
        json_t *pol = pd_netpol_to_json(sb->policy);
        if (!addrs || !pol) {
                json_decref(addrs);
                json_decref(pol);
                return pd_error_set(err, ENOMEM, "netd request");
        }
        return call(c, json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "op", "add", "id", sb->id,
                                 "iface", sb->iface ? sb->iface : "", "audit", sb->audit_path,
                                 "addrs", addrs, "policy", pol), err);
}

int pd_netd_update(struct pd_netd_client *c, const char *id, const struct pd_netpol *p,
                   struct pd_error *err)
{
        json_t *pol = pd_netpol_to_json(p);
        if (!pol)
                return pd_error_set(err, ENOMEM, "netd request");
        return call(c, json_pack("{s:s, s:s, s:o}", "op", "update", "id", id, "policy", pol), err);
}

int pd_netd_remove(struct pd_netd_client *c, const char *id, struct pd_error *err)
{
        return call(c, json_pack("{s:s, s:s}", "op", "remove", "id", id), err);
}
