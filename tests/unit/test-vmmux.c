/* Unit tests for the microvm channel multiplexer (src/proto/vmmux.c): a
 * host mux and a guest mux joined by a socketpair (the "serial port"), an
 * echo server standing in for the agent; then a hand-written hostile guest
 * against the host mux. TAP output. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/vmmux.h"
#include "tap.h"

static int listen_at(const char *path)
{
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        unlink(path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0)
                exit(99);
        return fd;
}

static int connect_to(const char *path)
{
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
                return -1;
        return fd;
}

/* The "agent": echoes every connection (a process per connection). */
static void echo_server(int l)
{
        signal(SIGCHLD, SIG_IGN);
        for (;;) {
                int c = accept(l, NULL, NULL);
                if (c < 0)
                        continue;
                if (fork() == 0) {
                        char b[65536];
                        ssize_t n;
                        while ((n = read(c, b, sizeof b)) > 0)
                                if (write(c, b, (size_t)n) != n)
                                        break;
                        _exit(0);
                }
                close(c);
        }
}

static pid_t spawn_mux(const struct pd_mux_cfg *cfg, int close_fd)
{
        pid_t pid = fork();
        if (pid == 0) {
                if (close_fd >= 0)
                        close(close_fd);
                struct pd_error err = { 0 };
                int r = pd_mux_run(cfg, &err);
                if (r < 0)
                        fprintf(stderr, "# mux: %s\n", err.msg);
                _exit(r < 0 ? 1 : 0);
        }
        return pid;
}

static int read_full(int fd, void *buf, size_t n, int timeout_ms)
{
        size_t got = 0;
        while (got < n) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, timeout_ms) <= 0)
                        return -1;
                ssize_t k = read(fd, (char *)buf + got, n - got);
                if (k <= 0)
                        return -1;
                got += (size_t)k;
        }
        return 0;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
        for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t)(i * 31 + seed + (i >> 9));
}

static void test_pair(const char *dir)
{
        char agent_path[256], host_path[256];
        snprintf(agent_path, sizeof agent_path, "%s/agent.sock", dir);
        snprintf(host_path, sizeof host_path, "%s/host.sock", dir);
        int al = listen_at(agent_path), hl = listen_at(host_path);
        pid_t echo = fork();
        if (echo == 0)
                echo_server(al);
        close(al);
        int tp[2], ready[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, tp) < 0 || pipe(ready) < 0)
                exit(99);
        fcntl(tp[0], F_SETFL, O_NONBLOCK);
        fcntl(tp[1], F_SETFL, O_NONBLOCK);
        struct pd_mux_cfg guest = { .guest = true, .trunk_fd = tp[1], .listen_fd = -1, .agent_path = agent_path,
                                    .hup_wait_fd = -1, .ready_fd = -1 };
        pid_t g = spawn_mux(&guest, tp[0]);
        fcntl(hl, F_SETFL, O_NONBLOCK);
        struct pd_mux_cfg host = { .guest = false, .trunk_fd = tp[0], .listen_fd = hl, .hup_wait_fd = -1,
                                   .ready_fd = ready[1] };
        pid_t h = spawn_mux(&host, tp[1]);
        close(tp[0]);
        close(tp[1]);
        close(ready[1]);
        close(hl);
        char r = 0;
        ok(read_full(ready[0], &r, 1, 10000) == 0 && r == 'R', "host mux reports ready after SYNC_ACK");

        /* 3 MiB through one channel: many times the flow-control window */
        size_t big = 3u << 20;
        uint8_t *out = malloc(big), *in = malloc(big);
        fill(out, big, 1);
        int c1 = connect_to(host_path);
        pid_t wr = fork();
        if (wr == 0) {
                (void)!write(c1, out, big);
                _exit(0);
        }
        ok(c1 >= 0 && read_full(c1, in, big, 20000) == 0 && memcmp(in, out, big) == 0,
           "3 MiB echoed intact through one channel");
        waitpid(wr, NULL, 0);

        /* a channel whose reader stalls does not stall another channel */
        int c2 = connect_to(host_path), c3 = connect_to(host_path);
        pid_t wr2 = fork();
        if (wr2 == 0) {
                (void)!write(c2, out, big);     /* nobody reads its echo */
                _exit(0);
        }
        char msg[] = "still flowing", got[sizeof msg] = "";
        ok(c3 >= 0 && write(c3, msg, sizeof msg) == (ssize_t)sizeof msg &&
           read_full(c3, got, sizeof msg, 10000) == 0 && memcmp(got, msg, sizeof msg) == 0,
           "a stalled channel does not block the others");
        kill(wr2, SIGKILL);
        waitpid(wr2, NULL, 0);
        close(c2);

        /* closing a client ends its channel on the guest side: many rounds of
         * connect/close must not exhaust the 256 channels */
        int good = 1;
        for (int i = 0; i < 300 && good; i++) {
                int c = connect_to(host_path);
                char x = (char)i, y = 0;
                good = c >= 0 && write(c, &x, 1) == 1 && read_full(c, &y, 1, 10000) == 0 && x == y;
                if (c >= 0)
                        close(c);
        }
        ok(good, "300 connections one after another (channels are released)");

        /* the guest's end going away ends the host mux (QEMU gone) */
        kill(g, SIGKILL);
        waitpid(g, NULL, 0);
        int st = 0;
        ok(waitpid(h, &st, 0) == h && WIFEXITED(st) && WEXITSTATUS(st) == 0, "host mux exits when the trunk ends");
        close(c1);
        close(c3);
        kill(echo, SIGKILL);
        waitpid(echo, NULL, 0);
        free(out);
        free(in);
}

static void put_hdr(uint8_t *h, uint32_t id, uint8_t type, uint32_t len)
{
        memset(h, 0, PD_MUX_HDR);
        uint32_t be = htobe32(id), bl = htobe32(len);
        memcpy(h, &be, 4);
        h[4] = type;
        memcpy(h + 8, &bl, 4);
}

/* A fake guest on the trunk: answers the host mux's SYNC (after junk) and
 * has one client connected, whose channel (id 1) it saw OPEN. Returns the
 * client fd; *trunk and *mux are the guest's end and the host mux pid. */
static int fake_guest(const char *dir, int *trunk, pid_t *mux)
{
        char host_path[256];
        snprintf(host_path, sizeof host_path, "%s/h2.sock", dir);
        int hl = listen_at(host_path);
        int tp[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, tp) < 0)
                exit(99);
        fcntl(tp[0], F_SETFL, O_NONBLOCK);
        fcntl(hl, F_SETFL, O_NONBLOCK);
        struct pd_mux_cfg host = { .guest = false, .trunk_fd = tp[0], .listen_fd = hl, .hup_wait_fd = -1,
                                   .ready_fd = -1 };
        pid_t h = spawn_mux(&host, tp[1]);
        close(tp[0]);
        close(hl);
        uint8_t sync[PD_MUX_HDR + PD_MUX_SYNC_LEN];
        if (read_full(tp[1], sync, sizeof sync, 10000) < 0)
                return -1;
        uint8_t ack[64 + PD_MUX_HDR + PD_MUX_NONCE];
        memset(ack, 0x5a, 64);          /* junk from "an earlier host": dropped */
        put_hdr(ack + 64, 0, PD_MUX_SYNC_ACK, PD_MUX_NONCE);
        memcpy(ack + 64 + PD_MUX_HDR, sync + PD_MUX_HDR, PD_MUX_NONCE);
        (void)!write(tp[1], ack, sizeof ack);
        /* a client, so there is a channel (id 1) to misuse */
        int c = connect_to(host_path);
        uint8_t open_hdr[PD_MUX_HDR];
        if (c < 0 || read_full(tp[1], open_hdr, sizeof open_hdr, 10000) < 0 || open_hdr[4] != PD_MUX_OPEN)
                return -1;
        *trunk = tp[1];
        *mux = h;
        return c;
}

/* A hostile guest sends `bad`; the host mux must stop with an error. */
static int hostile(const char *dir, const uint8_t *bad, size_t n)
{
        int trunk;
        pid_t h;
        int c = fake_guest(dir, &trunk, &h);
        if (c < 0)
                return -1;
        int tp[2] = { -1, trunk };
        (void)!write(tp[1], bad, n);
        /* the mux must stop: wait on its pidfd, bounded */
        int pfd = (int)syscall(SYS_pidfd_open, h, 0);
        struct pollfd p = { .fd = pfd, .events = POLLIN };
        int st = 0;
        if (pfd < 0 || poll(&p, 1, 10000) != 1) {
                kill(h, SIGKILL);
                waitpid(h, &st, 0);
                close(c);
                close(tp[1]);
                if (pfd >= 0)
                        close(pfd);
                return 0;       /* still running: it did not refuse */
        }
        close(pfd);
        waitpid(h, &st, 0);
        close(c);
        close(tp[1]);
        return WIFEXITED(st) && WEXITSTATUS(st) == 1;
}

/* DATA with no payload is legal and carries nothing: the channel goes on
 * (the old code handed memcpy a NULL buffer for it: UB that UBSan reports). */
static void test_zero_length_data(const char *dir)
{
        int trunk;
        pid_t h;
        int c = fake_guest(dir, &trunk, &h);
        uint8_t b[3 * PD_MUX_HDR + 2];
        put_hdr(b, 1, PD_MUX_DATA, 0);
        put_hdr(b + PD_MUX_HDR, 1, PD_MUX_DATA, 0);
        put_hdr(b + 2 * PD_MUX_HDR, 1, PD_MUX_DATA, 2);
        memcpy(b + 3 * PD_MUX_HDR, "hi", 2);
        char got[3] = "";
        ok(c >= 0 && write(trunk, b, sizeof b) == (ssize_t)sizeof b && read_full(c, got, 2, 10000) == 0 &&
           !memcmp(got, "hi", 2), "zero-length DATA frames from the guest: the channel goes on");
        int st = 0;
        ok(c >= 0 && waitpid(h, &st, WNOHANG) == 0, "zero-length DATA frames: the host mux keeps running");
        if (c >= 0) {
                kill(h, SIGKILL);
                waitpid(h, &st, 0);
                close(c);
                close(trunk);
        }
}

static void test_hostile(const char *dir)
{
        uint8_t b[PD_MUX_HDR + 8];
        put_hdr(b, 1, PD_MUX_DATA, PD_MUX_MAX_PAYLOAD + 1);
        ok(hostile(dir, b, PD_MUX_HDR) == 1, "oversized frame from the guest: host mux stops");
        put_hdr(b, 0, 99, 0);
        ok(hostile(dir, b, PD_MUX_HDR) == 1, "unknown frame type from the guest: host mux stops");
        put_hdr(b, 5, PD_MUX_OPEN, 0);
        ok(hostile(dir, b, PD_MUX_HDR) == 1, "OPEN from the guest (host-only frame): host mux stops");
        put_hdr(b, 1, PD_MUX_CREDIT, 4);
        uint32_t v = htobe32(PD_MUX_WINDOW);
        memcpy(b + PD_MUX_HDR, &v, 4);
        ok(hostile(dir, b, PD_MUX_HDR + 4) == 1, "credit beyond the window from the guest: host mux stops");
        /* more DATA than the window on one channel (its client reads nothing:
         * past what its socket buffer takes, nothing is credited back) */
        size_t n = (PD_MUX_HDR + 65536) * 16;
        uint8_t *flood = calloc(1, n);
        for (int i = 0; i < 16; i++)
                put_hdr(flood + (size_t)i * (PD_MUX_HDR + 65536), 1, PD_MUX_DATA, 65536);
        ok(hostile(dir, flood, n) == 1, "guest overrunning a channel's window: host mux stops");
        free(flood);
}

int main(void)
{
        signal(SIGPIPE, SIG_IGN);
        char dir[] = "/tmp/pd-test-vmmux-XXXXXX";
        if (!mkdtemp(dir))
                return 99;
        test_pair(dir);
        test_hostile(dir);
        test_zero_length_data(dir);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        (void)!system(cmd);
        return tap_done();
}
