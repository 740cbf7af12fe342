/* A QMP client (QEMU's JSON monitor protocol) over a unix socket: one
 * command at a time, events skipped, every reply parsed with jansson. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/util.h"
#include "vm/vm.h"

struct pd_qmp {
        int fd;
        char buf[65536];
        size_t len;
};

/* Next JSON line that is not an event. */
static int read_msg(struct pd_qmp *q, int timeout_ms, json_t **out, struct pd_error *err)
{
        long long end = (long long)pd_now_ms() + timeout_ms;
        for (;;) {
                char *nl = memchr(q->buf, '\n', q->len);
                if (nl) {
                        *nl = '\0';
                        json_t *j = json_loads(q->buf, 0, NULL);
                        size_t used = (size_t)(nl - q->buf) + 1;
                        memmove(q->buf, q->buf + used, q->len - used);
                        q->len -= used;
                        if (!j)
                                return pd_error_setx(err, EPROTO, "QMP: unparsable reply");
                        if (json_object_get(j, "event")) {
                                json_decref(j);
                                continue;
                        }
                        *out = j;
                        return 0;
                }
                if (q->len == sizeof q->buf)
                        return pd_error_setx(err, EMSGSIZE, "QMP: reply too long");
                long long left = end - (long long)pd_now_ms();
                struct pollfd p = { .fd = q->fd, .events = POLLIN };
                if (left <= 0 || poll(&p, 1, (int)left) == 0)
                        return pd_error_setx(err, ETIMEDOUT, "QMP: no reply");
                ssize_t n = read(q->fd, q->buf + q->len, sizeof q->buf - q->len);
                if (n <= 0)
                        return pd_error_set(err, n == 0 ? EPIPE : errno, "QMP: read");
                q->len += (size_t)n;
        }
}

static int send_cmd(struct pd_qmp *q, const char *cmd, const char *args, int fd, struct pd_error *err)
{
        char line[2048];
        int n = snprintf(line, sizeof line, "{\"execute\":\"%s\"%s%s}\n", cmd, args ? ",\"arguments\":" : "",
                         args ? args : "");
        if (n < 0 || (size_t)n >= sizeof line)
                return pd_error_setx(err, E2BIG, "QMP command too long");
        struct iovec iov = { line, (size_t)n };
        union {
                char b[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } c;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (fd >= 0) {
                mh.msg_control = c.b;
                mh.msg_controllen = sizeof c.b;
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof fd);
        }
        if (sendmsg(q->fd, &mh, MSG_NOSIGNAL) != n)
                return pd_error_set(err, errno, "QMP: send %s", cmd);
        return 0;
}

static int command(struct pd_qmp *q, const char *cmd, const char *args, int fd, json_t **ret, struct pd_error *err)
{
        json_t *j = NULL;
        if (send_cmd(q, cmd, args, fd, err) < 0 || read_msg(q, 30000, &j, err) < 0)
                return -1;
        json_t *e = json_object_get(j, "error");
        if (e) {
                const char *d = json_string_value(json_object_get(e, "desc"));
                int r = pd_error_setx(err, EIO, "QMP %s: %s", cmd, d ? d : "error");
                json_decref(j);
                return r;
        }
        if (ret)
                *ret = j;
        else
                json_decref(j);
        return 0;
}

int pd_qmp_open(const char *path, int timeout_ms, struct pd_qmp **out, struct pd_error *err)
{
        struct pd_qmp *q = calloc(1, sizeof *q);
        if (!q)
                return pd_error_set(err, ENOMEM, "QMP");
        q->fd = -1;
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        long long end = (long long)pd_now_ms() + timeout_ms;
        /* QEMU creates the socket while it starts: retry until it listens */
        for (;;) {
                q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (q->fd < 0)
                        break;
                if (connect(q->fd, (struct sockaddr *)&a, sizeof a) == 0)
                        break;
                close(q->fd);
                q->fd = -1;
                if ((long long)pd_now_ms() > end)
                        break;
                struct timespec ts = { 0, 1000000 };
                nanosleep(&ts, NULL);
        }
        if (q->fd < 0) {
                free(q);
                return pd_error_set(err, errno, "QMP: connect '%s'", path);
        }
        json_t *g = NULL;
        if (read_msg(q, timeout_ms, &g, err) < 0 || command(q, "qmp_capabilities", NULL, -1, NULL, err) < 0) {
                json_decref(g);
                pd_qmp_close(q);
                return -1;
        }
        json_decref(g);
        *out = q;
        return 0;
}

int pd_qmp_cmd(struct pd_qmp *q, const char *cmd, const char *args_json, struct pd_error *err)
{
        return command(q, cmd, args_json, -1, NULL, err);
}

int pd_qmp_getfd(struct pd_qmp *q, const char *name, int fd, struct pd_error *err)
{
        char args[128];
        snprintf(args, sizeof args, "{\"fdname\":\"%s\"}", name);
        return command(q, "getfd", args, fd, NULL, err);
}

int pd_qmp_migration_status(struct pd_qmp *q, char *st, size_t size, struct pd_error *err)
{
        json_t *j = NULL;
        if (command(q, "query-migrate", NULL, -1, &j, err) < 0)
                return -1;
        const char *s = json_string_value(json_object_get(json_object_get(j, "return"), "status"));
        snprintf(st, size, "%s", s ? s : "");
        json_decref(j);
        if (strcmp(st, "completed") == 0)
                return 1;
        if (strcmp(st, "failed") == 0 || strcmp(st, "cancelled") == 0)
                return pd_error_setx(err, EIO, "migration %s", st);
        return 0;
}

int pd_qmp_wait_migration(struct pd_qmp *q, int timeout_ms, struct pd_error *err)
{
        long long end = (long long)pd_now_ms() + timeout_ms;
        for (;;) {
                char st[32];
                int r = pd_qmp_migration_status(q, st, sizeof st, err);
                if (r != 0)
                        return r < 0 ? r : 0;
                if ((long long)pd_now_ms() > end)
                        return pd_error_setx(err, ETIMEDOUT, "migration still '%s'", st);
                /* QMP has no blocking wait for this in 7.2; the save takes ms */
                struct timespec ts = { 0, 1000000 };
                nanosleep(&ts, NULL);
        }
}

void pd_qmp_close(struct pd_qmp *q)
{
        if (!q)
                return;
        if (q->fd >= 0)
                close(q->fd);
        free(q);
}
