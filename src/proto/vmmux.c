/* The microvm channel multiplexer (vmmux.h): one poll() loop, used by the
 * host relay and by the guest demux alike. libc only: it links into the
 * static agent. */
#include "proto/vmmux.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define TRUNK_OUT_PAUSE (1u << 20)      /* stop reading channels above this */

struct mbuf {
        uint8_t *data;
        size_t head, len, cap;
};

struct chan {
        bool used;
        uint32_t id;
        int fd;
        struct mbuf out;        /* bytes for fd, from the peer */
        uint32_t credit;        /* bytes we may still send the peer */
        uint32_t unacked;       /* bytes written to fd, not yet credited back */
        uint32_t inflight;      /* bytes the peer sent that we have not credited back */
        bool peer_closed;       /* close fd once out is drained */
};

struct mux {
        const struct pd_mux_cfg *cfg;
        struct chan ch[PD_MUX_MAX_CHANNELS];
        unsigned nch;
        uint32_t next_id;
        struct mbuf tout;
        uint8_t tin[PD_MUX_HDR + PD_MUX_MAX_PAYLOAD];
        size_t tin_len;
        bool synced;            /* host: SYNC_ACK seen */
        uint8_t nonce[PD_MUX_NONCE];
        bool hup;               /* guest: no host on the port */
};

static int mbuf_add(struct mbuf *b, const void *p, size_t n)
{
        /* nothing to add (a zero-length DATA frame is legal): an empty
         * buffer has no data pointer yet, and memcpy must not get NULL */
        if (n == 0)
                return 0;
        if (b->head && b->head == b->len)
                b->head = b->len = 0;
        if (b->len + n > b->cap) {
                if (b->head) {
                        memmove(b->data, b->data + b->head, b->len - b->head);
                        b->len -= b->head;
                        b->head = 0;
                }
                if (b->len + n > b->cap) {
                        size_t cap = b->cap ? b->cap : 16384;
                        while (cap < b->len + n)
                                cap *= 2;
                        uint8_t *d = realloc(b->data, cap);
                        if (!d)
                                return -ENOMEM;
                        b->data = d;
                        b->cap = cap;
                }
        }
        memcpy(b->data + b->len, p, n);
        b->len += n;
        return 0;
}

static size_t mbuf_used(const struct mbuf *b) { return b->len - b->head; }

static void mbuf_free(struct mbuf *b)
{
        free(b->data);
        memset(b, 0, sizeof *b);
}

/* Flush as much of b as fd takes; <0 on a hard error. */
static int mbuf_flush(struct mbuf *b, int fd, size_t *written)
{
        while (mbuf_used(b)) {
                ssize_t n = write(fd, b->data + b->head, mbuf_used(b));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return -errno;
                }
                b->head += (size_t)n;
                if (written)
                        *written += (size_t)n;
        }
        b->head = b->len = 0;
        return 0;
}

static int send_frame(struct mux *m, uint32_t id, uint8_t type, const void *p, uint32_t len)
{
        uint8_t h[PD_MUX_HDR] = { 0 };
        uint32_t be = htobe32(id), bl = htobe32(len);
        memcpy(h, &be, 4);
        h[4] = type;
        memcpy(h + 8, &bl, 4);
        if (mbuf_add(&m->tout, h, sizeof h) < 0 || (len && mbuf_add(&m->tout, p, len) < 0))
                return -ENOMEM;
        return 0;
}

static struct chan *chan_find(struct mux *m, uint32_t id)
{
        for (unsigned i = 0; i < PD_MUX_MAX_CHANNELS; i++)
                if (m->ch[i].used && m->ch[i].id == id)
                        return &m->ch[i];
        return NULL;
}

static struct chan *chan_new(struct mux *m, uint32_t id, int fd)
{
        for (unsigned i = 0; i < PD_MUX_MAX_CHANNELS; i++) {
                struct chan *c = &m->ch[i];
                if (!c->used) {
                        memset(c, 0, sizeof *c);
                        c->used = true;
                        c->id = id;
                        c->fd = fd;
                        c->credit = PD_MUX_WINDOW;
                        m->nch++;
                        return c;
                }
        }
        return NULL;
}

static void chan_drop(struct mux *m, struct chan *c, bool tell_peer)
{
        if (tell_peer)
                (void)send_frame(m, c->id, PD_MUX_CLOSE, NULL, 0);
        if (c->fd >= 0)
                close(c->fd);
        mbuf_free(&c->out);
        c->used = false;
        m->nch--;
}

static void drop_all(struct mux *m)
{
        for (unsigned i = 0; i < PD_MUX_MAX_CHANNELS; i++)
                if (m->ch[i].used)
                        chan_drop(m, &m->ch[i], false);
}

static int guest_connect_agent(const char *path)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        strncpy(a.sun_path, path, sizeof a.sun_path - 1);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
                close(fd);
                return -1;
        }
        fcntl(fd, F_SETFL, O_NONBLOCK);
        return fd;
}

static int host_send_sync(struct mux *m)
{
        uint8_t p[PD_MUX_SYNC_LEN];
        struct timespec ts;
        if (getrandom(m->nonce, sizeof m->nonce, 0) != (ssize_t)sizeof m->nonce ||
            getrandom(p + PD_MUX_NONCE + 12, PD_MUX_ENTROPY, 0) != (ssize_t)PD_MUX_ENTROPY)
                return -EIO;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t sec = htobe64((uint64_t)ts.tv_sec);
        uint32_t nsec = htobe32((uint32_t)ts.tv_nsec);
        memcpy(p, m->nonce, PD_MUX_NONCE);
        memcpy(p + PD_MUX_NONCE, &sec, 8);
        memcpy(p + PD_MUX_NONCE + 8, &nsec, 4);
        return send_frame(m, 0, PD_MUX_SYNC, p, sizeof p);
}

/* Host, before SYNC_ACK: drop bytes up to and including the answer that
 * carries our nonce (what came before belongs to an earlier connection). */
static void host_scan_ack(struct mux *m)
{
        uint8_t pat[PD_MUX_HDR + PD_MUX_NONCE] = { 0 };
        uint32_t bl = htobe32(PD_MUX_NONCE);
        pat[4] = PD_MUX_SYNC_ACK;
        memcpy(pat + 8, &bl, 4);
        memcpy(pat + PD_MUX_HDR, m->nonce, PD_MUX_NONCE);
        uint8_t *hit = memmem(m->tin, m->tin_len, pat, sizeof pat);
        if (hit) {
                size_t used = (size_t)(hit - m->tin) + sizeof pat;
                memmove(m->tin, m->tin + used, m->tin_len - used);
                m->tin_len -= used;
                m->synced = true;
                if (m->cfg->ready_fd >= 0) {
                        (void)!write(m->cfg->ready_fd, "R", 1);
                        close(m->cfg->ready_fd);
                }
        } else if (m->tin_len >= sizeof pat) {
                size_t keep = sizeof pat - 1;
                memmove(m->tin, m->tin + m->tin_len - keep, keep);
                m->tin_len = keep;
        }
}

static int handle_frame(struct mux *m, uint32_t id, uint8_t type, const uint8_t *p, uint32_t len,
                        struct pd_error *err)
{
        const struct pd_mux_cfg *cfg = m->cfg;
        struct chan *c = id ? chan_find(m, id) : NULL;
        switch (type) {
        case PD_MUX_OPEN:
                if (!cfg->guest)
                        return pd_error_setx(err, EPROTO, "guest sent OPEN");
                if (c || id == 0)
                        return 0;
                int fd = guest_connect_agent(cfg->agent_path);
                if (fd < 0 || !(c = chan_new(m, id, fd))) {
                        if (fd >= 0)
                                close(fd);
                        return send_frame(m, id, PD_MUX_CLOSE, NULL, 0);
                }
                return 0;
        case PD_MUX_DATA:
                if (!c && cfg->guest && id)
                        /* a channel this demux never had (a new demux after the
                         * old one was killed): tell the host it is gone */
                        return send_frame(m, id, PD_MUX_CLOSE, NULL, 0);
                if (!c || c->peer_closed)
                        return 0;       /* we closed it; the peer had not seen that yet */
                /* the peer may have at most a window of bytes in flight,
                 * however fast we pass them on */
                if (len > PD_MUX_WINDOW - c->inflight) {
                        if (!cfg->guest)
                                return pd_error_setx(err, EPROTO, "guest overran channel %u's window", id);
                        chan_drop(m, c, true);
                        return 0;
                }
                c->inflight += len;
                return mbuf_add(&c->out, p, len);
        case PD_MUX_CLOSE:
                if (c) {
                        /* deliver what is pending first; with nothing pending no
                         * POLLOUT will come to finish it: drop it now */
                        c->peer_closed = true;
                        if (!mbuf_used(&c->out))
                                chan_drop(m, c, false);
                }
                return 0;
        case PD_MUX_CREDIT: {
                uint32_t v;
                if (len != 4)
                        return pd_error_setx(err, EPROTO, "CREDIT of %u bytes", len);
                memcpy(&v, p, 4);
                v = be32toh(v);
                if (c) {
                        if (v > PD_MUX_WINDOW - c->credit)
                                return cfg->guest ? 0 : pd_error_setx(err, EPROTO, "credit overflow");
                        c->credit += v;
                }
                return 0;
        }
        case PD_MUX_SYNC: {
                if (!cfg->guest)
                        return pd_error_setx(err, EPROTO, "guest sent SYNC");
                if (len != PD_MUX_SYNC_LEN)
                        return 0;
                drop_all(m);
                uint64_t sec;
                uint32_t nsec;
                memcpy(&sec, p + PD_MUX_NONCE, 8);
                memcpy(&nsec, p + PD_MUX_NONCE + 8, 4);
                if (cfg->on_sync)
                        cfg->on_sync(be64toh(sec), be32toh(nsec), p + PD_MUX_NONCE + 12, PD_MUX_ENTROPY);
                return send_frame(m, 0, PD_MUX_SYNC_ACK, p, PD_MUX_NONCE);
        }
        case PD_MUX_NETCFG:
                if (!cfg->guest)
                        return pd_error_setx(err, EPROTO, "guest sent NETCFG");
                if (len == PD_MUX_NETCFG_LEN && cfg->on_netcfg)
                        cfg->on_netcfg(p, len);
                return 0;
        case PD_MUX_RESET:
                /* the guest's demux was restarted: its ends of our channels are
                 * gone; closing ours tells the clients (they reconnect) */
                if (!cfg->guest)
                        drop_all(m);
                return 0;
        default:
                if (!cfg->guest)
                        return pd_error_setx(err, EPROTO, "unknown frame type %u from the guest", type);
                return 0;
        }
}

static int parse_trunk(struct mux *m, struct pd_error *err)
{
        if (!m->cfg->guest && !m->synced) {
                host_scan_ack(m);
                if (!m->synced)
                        return 0;
        }
        size_t off = 0;
        while (m->tin_len - off >= PD_MUX_HDR) {
                const uint8_t *h = m->tin + off;
                uint32_t id, len;
                memcpy(&id, h, 4);
                memcpy(&len, h + 8, 4);
                id = be32toh(id);
                len = be32toh(len);
                if (len > PD_MUX_MAX_PAYLOAD) {
                        if (!m->cfg->guest)
                                return pd_error_setx(err, EMSGSIZE, "frame of %u bytes from the guest", len);
                        /* lost sync with the host: wait for its next SYNC connection */
                        m->tin_len = 0;
                        return 0;
                }
                if (m->tin_len - off < PD_MUX_HDR + len)
                        break;
                int r = handle_frame(m, id, h[4], h + PD_MUX_HDR, len, err);
                if (r < 0)
                        return r;
                off += PD_MUX_HDR + len;
        }
        memmove(m->tin, m->tin + off, m->tin_len - off);
        m->tin_len -= off;
        return 0;
}

static void host_accept(struct mux *m)
{
        for (;;) {
                int fd = accept4(m->cfg->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                uint32_t id = ++m->next_id ? m->next_id : ++m->next_id;
                struct chan *c = chan_new(m, id, fd);
                if (!c || send_frame(m, id, PD_MUX_OPEN, NULL, 0) < 0) {
                        if (c)
                                chan_drop(m, c, false);
                        else
                                close(fd);
                }
        }
}

/* Read from a channel fd into DATA frames, within its credit. */
static void chan_read(struct mux *m, struct chan *c)
{
        static uint8_t buf[PD_MUX_MAX_PAYLOAD];
        while (c->credit && mbuf_used(&m->tout) < TRUNK_OUT_PAUSE) {
                size_t want = c->credit < sizeof buf ? c->credit : sizeof buf;
                ssize_t n = read(c->fd, buf, want);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        chan_drop(m, c, true);
                        return;
                }
                if (send_frame(m, c->id, PD_MUX_DATA, buf, (uint32_t)n) < 0) {
                        chan_drop(m, c, true);
                        return;
                }
                c->credit -= (uint32_t)n;
        }
}

static void chan_write(struct mux *m, struct chan *c)
{
        size_t w = 0;
        int r = mbuf_flush(&c->out, c->fd, &w);
        c->unacked += (uint32_t)w;
        if (r < 0) {
                chan_drop(m, c, !c->peer_closed);
                return;
        }
        if (c->unacked && (c->unacked >= PD_MUX_WINDOW / 4 || !mbuf_used(&c->out))) {
                uint32_t v = htobe32(c->unacked);
                (void)send_frame(m, c->id, PD_MUX_CREDIT, &v, 4);
                c->inflight -= c->unacked;
                c->unacked = 0;
        }
        if (c->peer_closed && !mbuf_used(&c->out))
                chan_drop(m, c, false);
}

/* Guest: the host went away (or never came): forget everything it had. */
static void guest_hangup(struct mux *m)
{
        drop_all(m);
        m->tin_len = 0;
        m->tout.head = m->tout.len = 0;
        m->hup = true;
}

int pd_mux_run(const struct pd_mux_cfg *cfg, struct pd_error *err)
{
        struct mux *m = calloc(1, sizeof *m);
        if (!m)
                return pd_error_set(err, ENOMEM, "mux");
        m->cfg = cfg;
        int ret = 0;
        if (!cfg->guest && host_send_sync(m) < 0) {
                ret = pd_error_set(err, EIO, "SYNC");
                goto out;
        }
        /* in order after SYNC, before any OPEN: the guest's network is set
         * before the first command runs */
        if (!cfg->guest && cfg->netcfg && send_frame(m, 0, PD_MUX_NETCFG, cfg->netcfg, PD_MUX_NETCFG_LEN) < 0) {
                ret = pd_error_set(err, EIO, "NETCFG");
                goto out;
        }
        /* a host that is connected already (this demux replaces one that
         * was killed) learns that its channels are gone */
        if (cfg->guest && send_frame(m, 0, PD_MUX_RESET, NULL, 0) < 0) {
                ret = pd_error_set(err, ENOMEM, "RESET");
                goto out;
        }
        struct pollfd pf[PD_MUX_MAX_CHANNELS + 2];
        struct chan *pc[PD_MUX_MAX_CHANNELS + 2];
        for (;;) {
                int n = 0, timeout = -1;
                if (cfg->guest && m->hup) {
                        /* the port says "no host": SIGIO tells us when one comes; the
                         * timeout covers a connect that raced our check */
                        pf[n] = (struct pollfd){ .fd = cfg->hup_wait_fd, .events = POLLIN };
                        pc[n++] = NULL;
                        timeout = 200;
                } else {
                        pf[n] = (struct pollfd){ .fd = cfg->trunk_fd,
                                                 .events = POLLIN | (mbuf_used(&m->tout) ? POLLOUT : 0) };
                        pc[n++] = NULL;
                }
                if (!cfg->guest && m->synced && m->nch < PD_MUX_MAX_CHANNELS) {
                        pf[n] = (struct pollfd){ .fd = cfg->listen_fd, .events = POLLIN };
                        pc[n++] = NULL;
                }
                bool room = mbuf_used(&m->tout) < TRUNK_OUT_PAUSE && !m->hup;
                for (unsigned i = 0; i < PD_MUX_MAX_CHANNELS; i++) {
                        struct chan *c = &m->ch[i];
                        if (!c->used)
                                continue;
                        short ev = 0;
                        if (room && c->credit && !c->peer_closed)
                                ev |= POLLIN;
                        if (mbuf_used(&c->out))
                                ev |= POLLOUT;
                        pf[n] = (struct pollfd){ .fd = c->fd, .events = ev };
                        pc[n++] = c;
                }
                int k = poll(pf, (nfds_t)n, timeout);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        ret = pd_error_set(err, errno, "poll");
                        goto out;
                }
                /* trunk (or the hang-up waiter) is pf[0] */
                if (cfg->guest && m->hup) {
                        if (pf[0].revents & POLLIN) {
                                struct signalfd_siginfo si;
                                while (read(cfg->hup_wait_fd, &si, sizeof si) > 0)
                                        ;
                        }
                        m->hup = false; /* try the port again */
                } else {
                        if (pf[0].revents & POLLOUT) {
                                int r = mbuf_flush(&m->tout, cfg->trunk_fd, NULL);
                                /* EPIPE/ECONNRESET: QEMU went away while we
                                 * wrote, the same end as reading EOF */
                                if (r < 0 && !cfg->guest) {
                                        if (r != -EPIPE && r != -ECONNRESET)
                                                ret = pd_error_set(err, -r, "write to the guest");
                                        goto out;
                                }
                        }
                        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                                ssize_t r = read(cfg->trunk_fd, m->tin + m->tin_len,
                                                 sizeof m->tin - m->tin_len);
                                if (r > 0) {
                                        m->tin_len += (size_t)r;
                                        if (parse_trunk(m, err) < 0) {
                                                ret = -EPROTO;
                                                goto out;
                                        }
                                } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                                        if (!cfg->guest)
                                                goto out;       /* QEMU is gone */
                                        guest_hangup(m);
                                }
                        }
                }
                for (int i = 1; i < n; i++) {
                        struct chan *c = pc[i];
                        if (!c) {
                                if (pf[i].revents & POLLIN)
                                        host_accept(m);
                                continue;
                        }
                        if (!c->used || pf[i].fd != c->fd)
                                continue;
                        if (pf[i].revents & POLLOUT)
                                chan_write(m, c);
                        if (c->used && (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) && !c->peer_closed)
                                chan_read(m, c);
                }
        }
out:
        drop_all(m);
        mbuf_free(&m->tout);
        free(m);
        return ret;
}
