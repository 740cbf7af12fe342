/* libFuzzer target: the host side of the microvm channel multiplexer
 * (src/proto/vmmux.c, run by paddock-vm-relay) reading the trunk. The
 * trunk's far end is the guest, whose kernel and demux the sandboxed code
 * may own: every byte after the handshake is hostile.
 *
 * One run: pd_mux_run (host mode) in a thread on one end of a socketpair,
 * with two host clients already connected to its listener. This side plays
 * the guest: it reads SYNC, answers SYNC_ACK with the nonce (what a guest
 * must do before the host reads anything from it), waits for the host's
 * two OPENs (so channels 1 and 2 exist), then sends the fuzz input as the
 * rest of the trunk, ends it, and drains what the host writes until the
 * mux returns. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/vmmux.h"

static int listen_fd = -1;
static struct sockaddr_un addr;
static socklen_t addr_len;

struct run {
        struct pd_mux_cfg cfg;
        atomic_bool done;
        int done_fd;            /* written when the mux returned */
};

static void *mux_thread(void *p)
{
        struct run *r = p;
        struct pd_error err = { 0 };
        (void)pd_mux_run(&r->cfg, &err);
        atomic_store(&r->done, true);
        (void)!write(r->done_fd, "x", 1);
        return NULL;
}

/* Read exactly n bytes from fd (blocking with a deadline); false if the
 * host ended or stalled (a bug in the harness, not in the target). */
static bool read_n(int fd, uint8_t *buf, size_t n)
{
        size_t got = 0;
        while (got < n) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 30000) <= 0)
                        return false;
                ssize_t k = read(fd, buf + got, n - got);
                if (k <= 0)
                        return false;
                got += (size_t)k;
        }
        return true;
}

/* The next frame from the host: its type and payload (up to cap bytes). */
static bool read_frame(int fd, uint8_t *type, uint8_t *payload, size_t cap, uint32_t *len)
{
        uint8_t h[PD_MUX_HDR];
        if (!read_n(fd, h, sizeof h))
                return false;
        uint32_t l;
        memcpy(&l, h + 8, 4);
        l = be32toh(l);
        if (l > cap)
                return false;
        *type = h[4];
        *len = l;
        return read_n(fd, payload, l);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        addr.sun_family = AF_UNIX;
        /* abstract: nothing to clean up on disk */
        int n = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "paddock-fuzz-vmmux-%d", (int)getpid());
        addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
        if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&addr, addr_len) < 0 || listen(listen_fd, 16) < 0) {
                perror("fuzz-vmmux: listener");
                exit(1);
        }
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int sv[2], cl[2] = { -1, -1 };
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        for (int i = 0; i < 2; i++) {
                cl[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (cl[i] < 0 || connect(cl[i], (struct sockaddr *)&addr, addr_len) < 0)
                        abort();
        }
        static const uint8_t netcfg[PD_MUX_NETCFG_LEN] = { 2, 0, 0, 0, 0, 1, 10, 0, 0, 2, 10, 0, 0, 1,
                                                            10, 0, 0, 1, 24, 0x05, 0xdc };
        struct run r = { .cfg = { .guest = false, .trunk_fd = sv[0], .listen_fd = listen_fd,
                                  .hup_wait_fd = -1, .ready_fd = -1, .netcfg = netcfg } };
        int dp[2];
        if (pipe2(dp, O_CLOEXEC) < 0)
                abort();
        r.done_fd = dp[1];
        pthread_t t;
        if (pthread_create(&t, NULL, mux_thread, &r) != 0)
                abort();
        uint8_t type = 0, p[256];
        uint32_t len = 0;
        bool ok = read_frame(sv[1], &type, p, sizeof p, &len) && type == PD_MUX_SYNC && len == PD_MUX_SYNC_LEN;
        int step = 1;
        if (ok) {
                uint8_t ack[PD_MUX_HDR + PD_MUX_NONCE] = { 0 };
                uint32_t bl = htobe32(PD_MUX_NONCE);
                ack[4] = PD_MUX_SYNC_ACK;
                memcpy(ack + 8, &bl, 4);
                memcpy(ack + PD_MUX_HDR, p, PD_MUX_NONCE);
                ok = write(sv[1], ack, sizeof ack) == (ssize_t)sizeof ack;
        }
        /* NETCFG, then one OPEN per client */
        for (int opens = 0; ok && opens < 2;) {
                step++;
                ok = read_frame(sv[1], &type, p, sizeof p, &len);
                if (ok && type == PD_MUX_OPEN)
                        opens++;
        }
        if (!ok) {
                fprintf(stderr, "fuzz-vmmux: the host did not start as expected (step %d, frame type %u len %u, mux %s)\n",
                        step, type, len, atomic_load(&r.done) ? "returned" : "running");
                abort();
        }
        /* the guest's side of the trunk: the input, then the end */
        size_t off = 0;
        struct pollfd pfs[2] = { { .fd = sv[1] }, { .fd = dp[0], .events = POLLIN } }, *pf = &pfs[0];
        uint8_t sink[65536];
        while (!atomic_load(&r.done)) {
                pf->events = POLLIN | (off < size ? POLLOUT : 0);
                /* the clients' sockets are not polled: a full one only makes
                 * the host keep bytes, and the deadline drains them */
                if (poll(pfs, 2, 20) < 0 && errno != EINTR)
                        abort();
                if (pf->revents & POLLOUT && off < size) {
                        ssize_t k = send(sv[1], data + off, size - off, MSG_DONTWAIT);
                        if (k > 0)
                                off += (size_t)k;
                        else if (k < 0 && errno != EAGAIN)
                                off = size;     /* the host closed: it refused the stream */
                        if (off == size)
                                shutdown(sv[1], SHUT_WR);
                }
                if (pf->revents & POLLIN)
                        (void)!read(sv[1], sink, sizeof sink);
                if (size == 0 && off == 0) {
                        shutdown(sv[1], SHUT_WR);
                        off = 1;
                }
                for (int i = 0; i < 2; i++)
                        while (read(cl[i], sink, sizeof sink) > 0)
                                ;
        }
        pthread_join(t, NULL);
        close(sv[0]);
        close(sv[1]);
        close(cl[0]);
        close(cl[1]);
        close(dp[0]);
        close(dp[1]);
        return 0;
}
