/* Per-sandbox audit log: <state>/audit/<id>.jsonl, append-only JSON lines
 * written only by the server (DESIGN §5: never by code in the sandbox).
 * One write() per line on an O_APPEND fd, so concurrent writers never
 * interleave inside a line. The file outlives the sandbox.
 *
 * GET /sandboxes/{id}/audit?follow=1 keeps the response open and sends
 * lines as they are appended (inotify on the file, no polling), until the
 * sandbox is deleted and its last line was sent. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/core/server.h"
#include "server/core/store.h"
#include "lib/util.h"

#define FOLLOW_RECHECK_MS 30000
#define LINE_HEAD 256

void pd_audit(struct pd_server *srv, const char *sandbox_id, const char *key_id, const char *event, json_t *fields)
{
        if (!sandbox_id || pd_id_check(sandbox_id) < 0 || srv->audit_dirfd < 0) {
                json_decref(fields);
                return;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char t[32];
        pd_rfc3339_ms((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u, t);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "ts", t, "sandbox", sandbox_id, "key",
                              key_id && *key_id ? key_id : "server", "event", event);
        if (!o) {
                json_decref(fields);
                return;
        }
        if (json_is_object(fields))
                json_object_update_missing(o, fields);
        json_decref(fields);
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!text)
                return;
        size_t n = strlen(text);
        char *line = realloc(text, n + 2);
        if (!line) {
                free(text);
                return;
        }
        line[n++] = '\n';
        line[n] = '\0';
        char name[PD_ID_LEN + 16];
        snprintf(name, sizeof name, "%s.jsonl", sandbox_id);
        int fd = openat(srv->audit_dirfd, name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                pd_log("error", "audit line lost sandbox=%s event=%s error=\"%s\"", sandbox_id, event,
                       strerror(errno));
                free(line);
                return;
        }
        ssize_t w = write(fd, line, n);
        if (w != (ssize_t)n)
                pd_log("error", "audit line lost sandbox=%s event=%s error=\"%s\"", sandbox_id, event,
                       w < 0 ? strerror(errno) : "short write");
        close(fd);
        free(line);
}

/* ---- streaming ---- */

struct follow {
        struct pd_server *srv;
        struct pd_srv_sandbox *s;       /* reference held; NULL once gone */
        int fd, ino, client_fd;
        char head[LINE_HEAD];           /* start of the line being sent */
        size_t head_len;
        bool last_terminal;             /* the last complete line ends the sandbox */
};

static bool is_terminal(const char *head, size_t len)
{
        /* Our own keys come first (JSON_PRESERVE_ORDER), and inside a JSON
         * string these quotes would be escaped: no false match. */
        char h[LINE_HEAD + 1];
        memcpy(h, head, len);
        h[len] = '\0';
        return strstr(h, "\"event\":\"sandbox.delete\"") || strstr(h, "\"event\":\"sandbox.timeout\"");
}

static void track_lines(struct follow *f, const char *buf, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (buf[i] == '\n') {
                        f->last_terminal = is_terminal(f->head, f->head_len);
                        f->head_len = 0;
                } else if (f->head_len < LINE_HEAD) {
                        f->head[f->head_len++] = buf[i];
                }
        }
}

static bool sandbox_deleted(struct follow *f)
{
        pthread_mutex_lock(&f->srv->lock);
        bool d = f->s->deleted;
        pthread_mutex_unlock(&f->srv->lock);
        return d;
}

static ssize_t follow_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct follow *f = cls;
        int quiet_rounds = 0;
        for (;;) {
                ssize_t n = pread(f->fd, buf, max, (off_t)pos);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (n > 0) {
                        track_lines(f, buf, (size_t)n);
                        return n;
                }
                bool gone = sandbox_deleted(f);
                if (gone && (f->last_terminal || quiet_rounds > 0))
                        return MHD_CONTENT_READER_END_OF_STREAM;
                struct pollfd p[3] = {
                        { .fd = f->ino, .events = POLLIN },
                        { .fd = pd_server_stop_fd(f->srv), .events = POLLIN },
                        { .fd = f->client_fd, .events = POLLRDHUP },
                };
                int r = poll(p, 3, gone ? 2000 : FOLLOW_RECHECK_MS);
                if (r < 0 && errno != EINTR)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (p[1].revents)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR))
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (r == 0 && gone)
                        quiet_rounds++;
                if (p[0].revents) {
                        char ev[4096];
                        while (read(f->ino, ev, sizeof ev) > 0)
                                ;
                }
        }
}

static void follow_free(void *cls)
{
        struct follow *f = cls;
        if (f->s)
                pd_server_sandbox_put(f->srv, f->s);
        if (f->fd >= 0)
                close(f->fd);
        if (f->ino >= 0)
                close(f->ino);
        free(f);
}

/* The first line names the key that created the sandbox: the only key that
 * may read the log of a sandbox that is gone. */
static bool log_owned_by(int fd, const char *key_id)
{
        char buf[1024];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        char *nl = strchr(buf, '\n');
        if (!nl)
                return false;
        *nl = '\0';
        json_t *j = json_loads(buf, 0, NULL);
        const char *k = json_string_value(json_object_get(j, "key"));
        bool ok = k && !strcmp(k, key_id);
        json_decref(j);
        return ok;
}

enum MHD_Result pd_audit_reply(struct pd_req *r, const char *sandbox_id, struct pd_srv_sandbox *live)
{
        struct pd_server *srv = r->srv;
        if (pd_id_check(sandbox_id) < 0 || strlen(sandbox_id) != PD_ID_LEN)
                return pd_reply_error(r, 404, "not_found", "no sandbox '%s'", sandbox_id);
        char name[PD_ID_LEN + 16];
        snprintf(name, sizeof name, "%s.jsonl", sandbox_id);
        int fd = openat(srv->audit_dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && !live)
                return pd_reply_error(r, 404, "not_found", "no sandbox '%s'", sandbox_id);
        if (fd >= 0 && !live && !log_owned_by(fd, r->key.id)) {
                close(fd);
                return pd_reply_error(r, 404, "not_found", "no sandbox '%s'", sandbox_id);
        }
        const char *fq = pd_req_query(r, "follow");
        bool follow = fq && (!strcmp(fq, "1") || !strcmp(fq, "true"));
        struct MHD_Response *resp;
        if (!follow || !live) {
                if (fd < 0)
                        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                else {
                        struct stat st;
                        if (fstat(fd, &st) < 0) {
                                close(fd);
                                return pd_reply_errno(r, -errno, "audit log");
                        }
                        resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
                }
        } else {
                struct follow *f = calloc(1, sizeof *f);
                if (!f) {
                        if (fd >= 0)
                                close(fd);
                        return pd_reply_errno(r, -ENOMEM, "audit follow");
                }
                f->srv = srv;
                f->fd = fd;
                f->ino = -1;
                if (f->fd < 0) {
                        /* no line yet: create the (empty) log so it can be watched */
                        f->fd = openat(srv->audit_dirfd, name, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                }
                char path[PATH_MAX + 64];
                snprintf(path, sizeof path, "%s/audit/%s", srv->state.dir, name);
                f->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
                if (f->fd < 0 || f->ino < 0 ||
                    inotify_add_watch(f->ino, path, IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF) < 0) {
                        int e = errno;
                        follow_free(f);
                        return pd_reply_errno(r, -e, "audit follow");
                }
                const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn,
                                                                            MHD_CONNECTION_INFO_CONNECTION_FD);
                f->client_fd = ci ? ci->connect_fd : -1;
                pthread_mutex_lock(&srv->lock);
                live->refs++;
                pthread_mutex_unlock(&srv->lock);
                f->s = live;
                resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, follow_read, f, follow_free);
                if (!resp) {
                        follow_free(f);
                        return MHD_NO;
                }
        }
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
        return pd_reply_response(r, 200, resp);
}
