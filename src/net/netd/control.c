/* The control socket (netd_client.h): router.c adds, updates and removes
 * sandboxes. Length-prefixed JSON; the socket is 0600 in paddock's
 * runtime directory, but every request is still checked in full. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/netd/netd.h"
#include "lib/util.h"

#define MAX_CONTROL_CONNS 16

struct control_conn {
        struct netd_ev ev;
        int fd;
        uint8_t hdr[4];
        size_t hdr_have;
        char *body;
        size_t body_len, body_have;
};

static struct netd_ev listen_ev = { .kind = K_CONTROL_LISTEN };
static int listen_fd = -1;
static unsigned n_conns;

int netd_control_listen(struct netd *d, const char *path, struct pd_error *err)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof sa.sun_path)
                return pd_error_setx(err, ENAMETOOLONG, "control socket path too long");
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(err, errno, "control socket");
        unlink(path);
        mode_t old = umask(077);
        int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
        umask(old);
        if (r < 0 || listen(fd, 16) < 0) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "bind control socket '%s'", path);
        }
        listen_fd = fd;
        return netd_watch(d, fd, EPOLLIN, &listen_ev) < 0 ? pd_error_set(err, errno, "epoll") : 0;
}

void netd_sandbox_free(struct netd *d, struct netd_sandbox *sb)
{
        netd_dns_forget(d, sb);
        netd_proxy_forget(d, sb);
        for (struct netd_sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next)
                if (*pp == sb) {
                        *pp = sb->next;
                        break;
                }
        if (sb->audit_fd >= 0)
                close(sb->audit_fd);
        pd_netpol_free(&sb->policy);
        netd_pins_forget_all(sb);
        netd_cache_free(sb);
        free(sb);
}

static int parse_addrs(json_t *arr, struct netd_sandbox *sb, struct pd_error *err)
{
        size_t i;
        json_t *v;
        if (!json_is_array(arr) || json_array_size(arr) == 0 ||
            json_array_size(arr) > PD_NETD_MAX_ADDRS)
                return pd_error_setx(err, EINVAL, "\"addrs\": 1..%d addresses", PD_NETD_MAX_ADDRS);
        json_array_foreach(arr, i, v) {
                struct netd_addr *a = &sb->addrs[sb->n_addrs];
                const char *s = json_string_value(v);
                if (s && inet_pton(AF_INET, s, a->a) == 1)
                        a->family = AF_INET;
                else if (s && inet_pton(AF_INET6, s, a->a) == 1)
                        a->family = AF_INET6;
                else
                        return pd_error_setx(err, EINVAL, "\"addrs\"[%zu]: not an address", i);
                sb->n_addrs++;
        }
        return 0;
}

static bool addr_taken(struct netd *d, const struct netd_addr *a)
{
        for (struct netd_sandbox *s = d->sandboxes; s; s = s->next)
                for (unsigned i = 0; i < s->n_addrs; i++)
                        if (s->addrs[i].family == a->family && !memcmp(s->addrs[i].a, a->a, 16))
                                return true;
        return false;
}

static int op_add(struct netd *d, json_t *req, struct pd_error *err)
{
        const char *id = json_string_value(json_object_get(req, "id"));
        const char *iface = json_string_value(json_object_get(req, "iface"));
        const char *audit = json_string_value(json_object_get(req, "audit"));
        if (!id || pd_nft_key_check(id) != 0)
                return pd_error_setx(err, EINVAL, "\"id\": [a-z0-9]{1,%d}", PD_NFT_KEY_MAX);
        if (netd_sandbox_by_id(d, id))
                return pd_error_setx(err, EEXIST, "sandbox '%s' already added", id);
        if (iface && strlen(iface) >= 16)
                return pd_error_setx(err, EINVAL, "\"iface\": too long");
        if (!audit || audit[0] != '/')
                return pd_error_setx(err, EINVAL, "\"audit\": an absolute path");
        struct netd_sandbox *sb = calloc(1, sizeof *sb);
        if (!sb)
                return pd_error_set(err, ENOMEM, "sandbox");
        sb->audit_fd = -1;
        snprintf(sb->id, sizeof sb->id, "%s", id);
        snprintf(sb->iface, sizeof sb->iface, "%s", iface ? iface : "");
        int r = parse_addrs(json_object_get(req, "addrs"), sb, err);
        for (unsigned i = 0; r >= 0 && i < sb->n_addrs; i++)
                if (addr_taken(d, &sb->addrs[i]))
                        r = pd_error_setx(err, EEXIST, "address of sandbox '%s' already in use", id);
        if (r >= 0)
                r = pd_netpol_from_json(json_object_get(req, "policy"), &sb->policy, err);
        if (r >= 0) {
                sb->audit_fd = open(audit, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                                    0600);
                if (sb->audit_fd < 0)
                        r = pd_error_set(err, errno, "open audit log '%s'", audit);
        }
        if (r < 0) {
                if (sb->audit_fd >= 0)
                        close(sb->audit_fd);
                pd_netpol_free(&sb->policy);
                free(sb);
                return r;
        }
        sb->next = d->sandboxes;
        d->sandboxes = sb;
        return 0;
}

/* After a policy change: the kernel's pins are dropped, then the names
 * the new policy still grants are pinned again for what is left of their
 * TTL, so cached answers keep working and revoked ones stop at once. */
static int repin(struct netd *d, struct netd_sandbox *sb, struct pd_error *err)
{
        if (d->nft && pd_nft_unpin_all(d->nft, sb->id, err) < 0)
                return pd_error_prefix(err, "sandbox %s: unpin", sb->id);
        struct netd_pinned_name *old = sb->names;
        unsigned n_old = sb->n_names;
        free(sb->pin_expiry);           /* the kernel's pins are gone */
        sb->pin_expiry = NULL;
        sb->names = NULL;
        sb->n_names = sb->next_name = 0;
        uint64_t now = pd_now_ms();
        int r = 0;
        for (unsigned i = 0; old && i < n_old && r >= 0; i++) {
                const struct pd_netpol_rule *g[16];
                size_t ng = pd_netpol_name_grants(&sb->policy, old[i].name, g, 16);
                for (unsigned k = 0; k < old[i].n && r >= 0; k++) {
                        struct netd_pin *pin = &old[i].pins[k];
                        if (pin->expires_ms <= now)
                                continue;
                        uint32_t left = (uint32_t)((pin->expires_ms - now + 999) / 1000);
                        for (size_t j = 0; j < ng; j++) {
                                if (!pd_netpol_pin_ok(&sb->policy, g[j], pin->addr.family,
                                                      pin->addr.a, NULL))
                                        continue;
                                struct pd_nft_pin np = { .family = pin->addr.family,
                                                         .proto = g[j]->proto,
                                                         .port_lo = g[j]->port_lo,
                                                         .port_hi = g[j]->port_hi,
                                                         .ttl_s = left };
                                memcpy(np.addr, pin->addr.a, 16);
                                if (!netd_pins_budget(d, sb, 1))
                                        continue;       /* asked again, it will be refused */
                                if (d->nft)
                                        r = pd_nft_pin(d->nft, sb->id, &np, 1, err);
                                if (r >= 0)
                                        netd_pins_charge(d, sb, 1, left);
                                netd_pins_remember(sb, old[i].name, &pin->addr, left);
                        }
                }
        }
        free(old);
        return r;
}

static int op_update(struct netd *d, json_t *req, struct pd_error *err)
{
        const char *id = json_string_value(json_object_get(req, "id"));
        struct netd_sandbox *sb = id ? netd_sandbox_by_id(d, id) : NULL;
        if (!sb)
                return pd_error_setx(err, ENOENT, "no sandbox '%.64s'", id ? id : "");
        struct pd_netpol p;
        int r = pd_netpol_from_json(json_object_get(req, "policy"), &p, err);
        if (r < 0)
                return r;
        pd_netpol_free(&sb->policy);
        sb->policy = p;
        struct netd_audit a = { .kind = "policy", .allow = true, .reason = "policy changed" };
        netd_audit(sb, &a);
        return repin(d, sb, err);
}

static int handle(struct netd *d, const char *body, size_t len, struct pd_error *err)
{
        json_error_t je;
        json_t *req = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(req)) {
                json_decref(req);
                return pd_error_setx(err, EINVAL, "request is not a JSON object");
        }
        const char *op = json_string_value(json_object_get(req, "op"));
        int r;
        if (!op)
                r = pd_error_setx(err, EINVAL, "no \"op\"");
        else if (strcmp(op, "ping") == 0)
                r = 0;
        else if (strcmp(op, "add") == 0)
                r = op_add(d, req, err);
        else if (strcmp(op, "update") == 0)
                r = op_update(d, req, err);
        else if (strcmp(op, "remove") == 0) {
                const char *id = json_string_value(json_object_get(req, "id"));
                struct netd_sandbox *sb = id ? netd_sandbox_by_id(d, id) : NULL;
                if (sb)
                        netd_sandbox_free(d, sb);
                r = id ? 0 : pd_error_setx(err, EINVAL, "no \"id\"");
        } else
                r = pd_error_setx(err, EINVAL, "unknown op '%.32s'", op);
        json_decref(req);
        return r;
}

static void conn_free(struct netd_ev *ev)
{
        struct control_conn *c = (struct control_conn *)ev;
        close(c->fd);
        free(c->body);
        free(c);
        n_conns--;
}

static void reply(struct netd *d, struct control_conn *c, int r, const struct pd_error *err)
{
        json_t *o = r < 0 ? json_pack("{s:b, s:s}", "ok", 0, "error", err->msg)
                          : json_pack("{s:b}", "ok", 1);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!s) {
                netd_kill(d, &c->ev);
                return;
        }
        size_t n = strlen(s);
        uint8_t h[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
        /* replies are small; the client reads them before its next request */
        if (pd_write_all(c->fd, h, 4) < 0 || pd_write_all(c->fd, s, n) < 0)
                netd_kill(d, &c->ev);
        free(s);
}

static void conn_event(struct netd *d, struct control_conn *c)
{
        for (;;) {
                ssize_t n;
                if (c->hdr_have < 4) {
                        n = recv(c->fd, c->hdr + c->hdr_have, 4 - c->hdr_have, 0);
                } else {
                        n = recv(c->fd, c->body + c->body_have, c->body_len - c->body_have, 0);
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        netd_kill(d, &c->ev);
                        return;
                }
                if (c->hdr_have < 4) {
                        c->hdr_have += (size_t)n;
                        if (c->hdr_have < 4)
                                continue;
                        c->body_len = (size_t)c->hdr[0] << 24 | (size_t)c->hdr[1] << 16 |
                                      (size_t)c->hdr[2] << 8 | c->hdr[3];
                        if (c->body_len == 0 || c->body_len > PD_NETD_MSG_MAX ||
                            !(c->body = malloc(c->body_len))) {
                                netd_kill(d, &c->ev);
                                return;
                        }
                        c->body_have = 0;
                        continue;
                }
                c->body_have += (size_t)n;
                if (c->body_have < c->body_len)
                        continue;
                struct pd_error err = { 0 };
                int r = handle(d, c->body, c->body_len, &err);
                if (r < 0)
                        fprintf(stderr, "paddock-netd: request refused: %s\n", err.msg);
                free(c->body);
                c->body = NULL;
                c->hdr_have = 0;
                reply(d, c, r, &err);
                if (c->ev.dead)
                        return;
        }
}

void netd_control_event(struct netd *d, struct netd_ev *ev, uint32_t events)
{
        if (ev->kind == K_CONTROL) {
                conn_event(d, (struct control_conn *)ev);
                return;
        }
        for (;;) {
                int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct control_conn *c = n_conns < MAX_CONTROL_CONNS ? calloc(1, sizeof *c) : NULL;
                if (!c) {
                        close(fd);
                        continue;
                }
                n_conns++;
                c->ev = (struct netd_ev){ .kind = K_CONTROL, .free_fn = conn_free };
                c->fd = fd;
                if (netd_watch(d, fd, EPOLLIN, &c->ev) < 0)
                        netd_kill(d, &c->ev);
        }
}
