/* libFuzzer targets: the server's HTTP request handling, native API and
 * E2B (control plane and envd), through libmicrohttpd and the real route
 * code, on an in-process server with a fake manager and agent
 * (fake_server.c). One input is one request on a fresh TCP connection to
 * 127.0.0.1. Four targets share this file (FUZZ_HTTP_MODE):
 *
 *   http-native, http-e2b   the input is the request: head, blank line,
 *                           body. The harness sets Content-Length from the
 *                           body (any the input has is dropped), so body
 *                           mutations stay well-framed.
 *   e2b-connect             the input is a Connect request body (envelope:
 *                           flags, u32 BE length, JSON) to an envd method
 *                           picked by its first byte.
 *   multipart               the input is a multipart/form-data body of an
 *                           E2B upload (POST /files), boundary "FUZZ".
 *
 * In the head, @KEY@, @SBX@ and @TOKEN@ become the API key, the fake
 * sandbox's id and its envd access token, so the seeds are authorized. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_server.h"
#include "lib/util.h"

#define MODE_RAW 0
#define MODE_CONNECT 1
#define MODE_MULTIPART 2
#ifndef FUZZ_HTTP_MODE
#define FUZZ_HTTP_MODE MODE_RAW
#endif

static struct fake_server_info info;
static unsigned port;
static char state_dir[64];

/* the state dir (a sqlite file, the e2b secret), at exit: the server's
 * threads use it until then */
static void rm_state(void)
{
        pd_rm_rf(state_dir, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        /* a free port: bind 0, read it back, let the server take it */
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t al = sizeof a;
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(s, (struct sockaddr *)&a, &al) < 0)
                exit(1);
        port = ntohs(a.sin_port);
        close(s);
        snprintf(state_dir, sizeof state_dir, "/tmp/paddock-fuzz-http.XXXXXX");
        if (!mkdtemp(state_dir) || fake_server_start(state_dir, port, &info) < 0)
                exit(1);
        atexit(rm_state);
        return 0;
}

/* Append n bytes to a growing buffer. */
struct buf {
        char *p;
        size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t n)
{
        if (b->len + n + 1 > b->cap) {
                b->cap = (b->len + n + 1) * 2;
                b->p = realloc(b->p, b->cap);
                if (!b->p)
                        abort();
        }
        memcpy(b->p + b->len, p, n);
        b->len += n;
        b->p[b->len] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
        put(b, s, strlen(s));
}

/* The head's lines, placeholders replaced, Content-Length and Connection
 * dropped (the harness sets both). */
static void put_head(struct buf *b, const char *h, size_t n)
{
        size_t i = 0;
        while (i < n) {
                const char *eol = memchr(h + i, '\n', n - i);
                size_t ln = eol ? (size_t)(eol - (h + i)) + 1 : n - i;
                const char *l = h + i;
                if (i > 0 && ((ln >= 15 && !strncasecmp(l, "content-length:", 15)) ||
                              (ln >= 11 && !strncasecmp(l, "connection:", 11)))) {
                        i += ln;
                        continue;
                }
                for (size_t k = 0; k < ln;) {
                        if (l[k] == '@' && ln - k >= 5 && !memcmp(l + k, "@KEY@", 5)) {
                                puts_(b, info.key);
                                k += 5;
                        } else if (l[k] == '@' && ln - k >= 5 && !memcmp(l + k, "@SBX@", 5)) {
                                puts_(b, info.sandbox_id);
                                k += 5;
                        } else if (l[k] == '@' && ln - k >= 7 && !memcmp(l + k, "@TOKEN@", 7)) {
                                puts_(b, info.token);
                                k += 7;
                        } else {
                                put(b, l + k, 1);
                                k++;
                        }
                }
                i += ln;
        }
        /* the head ends with a line break before the harness's headers */
        if (b->len && b->p[b->len - 1] != '\n')
                puts_(b, "\r\n");
}

static void build(struct buf *req, const uint8_t *data, size_t size)
{
        const char *d = (const char *)data;
        const char *body;
        size_t blen;
#if FUZZ_HTTP_MODE == MODE_RAW
        const char *sep = memmem(d, size, "\r\n\r\n", 4);
        size_t hlen = sep ? (size_t)(sep - d) + 2 : size;
        body = sep ? sep + 4 : d + size;
        blen = sep ? size - hlen - 2 : 0;
        put_head(req, d, hlen);
#elif FUZZ_HTTP_MODE == MODE_CONNECT
        static const char *const methods[] = {
                "process.Process/Start", "process.Process/Connect", "process.Process/List",
                "process.Process/SendInput", "process.Process/SendSignal", "process.Process/Update",
                "process.Process/CloseStdin", "filesystem.Filesystem/Stat", "filesystem.Filesystem/ListDir",
                "filesystem.Filesystem/MakeDir", "filesystem.Filesystem/Move", "filesystem.Filesystem/Remove",
                "filesystem.Filesystem/WatchDir", "filesystem.Filesystem/CreateWatcher",
        };
        unsigned pick = size ? data[0] : 0;
        const char *m = methods[pick % (sizeof methods / sizeof *methods)];
        /* bit 7: unary JSON instead of a streaming envelope */
        char head[512];
        snprintf(head, sizeof head,
                 "POST /%s HTTP/1.1\r\nHost: localhost\r\nE2b-Sandbox-Id: @SBX@\r\n"
                 "X-Access-Token: @TOKEN@\r\nConnect-Protocol-Version: 1\r\n"
                 "Content-Type: application/%s\r\n",
                 m, pick & 0x80 ? "json" : "connect+json");
        put_head(req, head, strlen(head));
        body = size ? d + 1 : d;
        blen = size ? size - 1 : 0;
#else
        static const char head[] =
                "POST /files?path=/home/user/up.txt&username=user HTTP/1.1\r\nHost: localhost\r\n"
                "E2b-Sandbox-Id: @SBX@\r\nX-Access-Token: @TOKEN@\r\n"
                "Content-Type: multipart/form-data; boundary=FUZZ\r\n";
        put_head(req, head, sizeof head - 1);
        body = d;
        blen = size;
#endif
        char cl[64];
        snprintf(cl, sizeof cl, "Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
        puts_(req, cl);
        put(req, body, blen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct buf req = { 0 };
        build(&req, data, size);
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
                perror("fuzz-http: connect");
                abort();
        }
        /* send while reading (a server may answer early and stop reading) */
        size_t off = 0;
        char sink[16384];
        static int show = -1;
        bool shown = false;
        if (show < 0)
                show = getenv("FUZZ_HTTP_SHOW") != NULL;
        for (;;) {
                struct pollfd p = { .fd = s, .events = POLLIN | (off < req.len ? POLLOUT : 0) };
                /* a streaming answer (follow=1, watches) may go on as long as
                 * the client listens: hang up after 2 s like a client would */
                int k = poll(&p, 1, 2000);
                if (k == 0)
                        break;
                if (k < 0)
                        continue;
                if ((p.revents & POLLOUT) && off < req.len) {
                        ssize_t w = send(s, req.p + off, req.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (w > 0)
                                off += (size_t)w;
                        else if (w < 0 && errno != EAGAIN)
                                off = req.len;  /* the server closed: it answered or refused */
                }
                if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t r = read(s, sink, sizeof sink - 1);
                        if (r <= 0)
                                break;  /* the server closed (Connection: close) */
                        if (show && !shown) {
                                /* FUZZ_HTTP_SHOW=1: each answer's status line, to check seeds */
                                sink[r] = '\0';
                                fprintf(stderr, "fuzz-http: %.*s\n", (int)strcspn(sink, "\r\n"), sink);
                                shown = true;
                        }
                }
        }
        close(s);
        free(req.p);
        return 0;
}
