/* The relay's gate (relay.h): reads the SYNs the router holds in NFQUEUE,
 * asks the worker to connect out for each new 4-tuple, and gives the
 * kernel its verdict when the worker answers. Runs in the router netns
 * with CAP_NET_ADMIN only; it parses nothing of a packet but the IP and
 * TCP headers' addresses and ports. Single-threaded, poll loop. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libmnl/libmnl.h>

#include "net/relay.h"
#include "lib/util.h"

#define MAX_ENTRIES 4096                /* tuples pending or just accepted */
#define PENDING_MS 75000                /* the worker gives up at 60 s */
#define DONE_MS 10000                   /* a SYN retransmitted after its accept */
#define QUEUE_MAXLEN 4096
#define COPY_LEN 128                    /* IPv6 header + TCP ports */

enum { FREE = 0, PENDING, DONE };

struct entry {
        int state;
        uint32_t id;                    /* our request id */
        uint32_t pkt;                   /* the held packet's queue id */
        uint32_t isn;                   /* the SYN's sequence number */
        uint64_t at;
        struct pd_relay_req key;
};

static struct entry tab[MAX_ENTRIES];
static uint32_t next_id = 1;

#define logf_(...) pd_uplink_log("relay gate", __VA_ARGS__)

static int nl_send(int fd, struct nlmsghdr *h)
{
        struct sockaddr_nl to = { .nl_family = AF_NETLINK };
        return sendto(fd, h, h->nlmsg_len, 0, (struct sockaddr *)&to, sizeof to) < 0 ? -errno : 0;
}

static struct nlmsghdr *nfq_hdr(char *buf, int type, uint16_t flags)
{
        struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
        h->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | type;
        h->nlmsg_flags = NLM_F_REQUEST | flags;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(h, sizeof *g);
        g->nfgen_family = AF_UNSPEC;
        g->version = NFNETLINK_V0;
        g->res_id = htons(PD_RELAY_QUEUE);
        return h;
}

int pd_relay_gate_bind(int nfq)
{
        char buf[512];
        struct nlmsghdr *h = nfq_hdr(buf, NFQNL_MSG_CONFIG, NLM_F_ACK);
        struct nfqnl_msg_config_cmd cmd = { .command = NFQNL_CFG_CMD_BIND };
        mnl_attr_put(h, NFQA_CFG_CMD, sizeof cmd, &cmd);
        struct nfqnl_msg_config_params p = { .copy_range = htonl(COPY_LEN), .copy_mode = NFQNL_COPY_PACKET };
        mnl_attr_put(h, NFQA_CFG_PARAMS, sizeof p, &p);
        mnl_attr_put_u32(h, NFQA_CFG_QUEUE_MAXLEN, htonl(QUEUE_MAXLEN));
        int r = nl_send(nfq, h);
        if (r < 0)
                return r;
        ssize_t n = recv(nfq, buf, sizeof buf, 0);
        if (n < (ssize_t)sizeof(struct nlmsghdr))
                return n < 0 ? -errno : -EIO;
        struct nlmsghdr *a = (struct nlmsghdr *)buf;
        if (a->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = mnl_nlmsg_get_payload(a);
                return e->error;
        }
        return 0;
}

static void verdict(int nfq, uint32_t pkt, uint32_t v, uint32_t mark)
{
        char buf[256];
        struct nlmsghdr *h = nfq_hdr(buf, NFQNL_MSG_VERDICT, 0);
        struct nfqnl_msg_verdict_hdr vh = { .verdict = htonl(v), .id = htonl(pkt) };
        mnl_attr_put(h, NFQA_VERDICT_HDR, sizeof vh, &vh);
        if (mark)
                mnl_attr_put_u32(h, NFQA_MARK, htonl(mark));
        int r = nl_send(nfq, h);
        if (r < 0)
                logf_("verdict: %s", strerror(-r));
}

static struct entry *find_tuple(const struct pd_relay_req *k)
{
        for (int i = 0; i < MAX_ENTRIES; i++)
                if (tab[i].state != FREE && tab[i].key.family == k->family && tab[i].key.sport == k->sport &&
                    tab[i].key.dport == k->dport && !memcmp(tab[i].key.src, k->src, 16) &&
                    !memcmp(tab[i].key.dst, k->dst, 16))
                        return &tab[i];
        return NULL;
}

static struct entry *find_id(uint32_t id)
{
        for (int i = 0; i < MAX_ENTRIES; i++)
                if (tab[i].state == PENDING && tab[i].id == id)
                        return &tab[i];
        return NULL;
}

static struct entry *slot(void)
{
        for (int i = 0; i < MAX_ENTRIES; i++)
                if (tab[i].state == FREE)
                        return &tab[i];
        return NULL;
}

/* The tuple and sequence number of a queued IPv4/IPv6 TCP packet, or -1. */
static int parse(const uint8_t *p, size_t len, struct pd_relay_req *k, uint32_t *isn)
{
        memset(k, 0, sizeof *k);
        size_t l4;
        if (len >= 20 && (p[0] >> 4) == 4) {
                l4 = (size_t)(p[0] & 15) * 4;
                if (p[9] != IPPROTO_TCP || l4 < 20)
                        return -1;
                k->family = AF_INET;
                memcpy(k->src, p + 12, 4);
                memcpy(k->dst, p + 16, 4);
        } else if (len >= 40 && (p[0] >> 4) == 6) {
                l4 = 40;
                if (p[6] != IPPROTO_TCP)        /* extension headers: not relayed */
                        return -1;
                k->family = AF_INET6;
                memcpy(k->src, p + 8, 16);
                memcpy(k->dst, p + 24, 16);
        } else {
                return -1;
        }
        if (len < l4 + 8)
                return -1;
        memcpy(&k->sport, p + l4, 2);
        memcpy(&k->dport, p + l4 + 2, 2);
        memcpy(isn, p + l4 + 4, 4);
        return 0;
}

struct ctx {
        int nfq, chan;
};

static void on_packet(struct ctx *c, uint32_t pkt, const uint8_t *p, size_t len)
{
        struct pd_relay_req k;
        uint32_t isn;
        if (parse(p, len, &k, &isn) < 0) {
                verdict(c->nfq, pkt, NF_DROP, 0);
                return;
        }
        struct entry *e = find_tuple(&k);
        if (e && e->state == PENDING) {
                verdict(c->nfq, pkt, NF_DROP, 0);       /* a retransmission: the first is held */
                return;
        }
        if (e && e->state == DONE && e->isn == isn) {
                verdict(c->nfq, pkt, NF_ACCEPT, 0);     /* its SYN-ACK was lost: the listener answers */
                return;
        }
        if (e && e->state == DONE)
                e->state = FREE;        /* the tuple used again by a new connection */
        if (c->chan < 0 || !(e = slot())) {
                verdict(c->nfq, pkt, NF_DROP, 0);       /* no worker, or full: as a lost SYN */
                return;
        }
        e->state = PENDING;
        e->id = next_id++;
        if (!next_id)
                next_id = 1;
        e->pkt = pkt;
        e->isn = isn;
        e->at = pd_now_ms();
        e->key = k;
        e->key.id = e->id;
        if (send(c->chan, &e->key, sizeof e->key, MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof e->key) {
                verdict(c->nfq, pkt, NF_DROP, 0);
                e->state = FREE;
        }
}

static int attr_cb(const struct nlattr *a, void *data)
{
        const struct nlattr **tb = data;
        int type = mnl_attr_get_type(a);
        if (type <= NFQA_MAX)
                tb[type] = a;
        return MNL_CB_OK;
}

static void read_queue(struct ctx *c)
{
        static char buf[65536];
        ssize_t n = recv(c->nfq, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0) {
                if (errno == ENOBUFS)
                        logf_("queue: messages lost (ENOBUFS): those SYNs are dropped");
                return;
        }
        int left = (int)n;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left); h = mnl_nlmsg_next(h, &left)) {
                if ((h->nlmsg_type & 0xff) != NFQNL_MSG_PACKET || (h->nlmsg_type >> 8) != NFNL_SUBSYS_QUEUE)
                        continue;
                const struct nlattr *tb[NFQA_MAX + 1] = { 0 };
                if (mnl_attr_parse(h, sizeof(struct nfgenmsg), attr_cb, tb) < 0 || !tb[NFQA_PACKET_HDR])
                        continue;
                const struct nfqnl_msg_packet_hdr *ph = mnl_attr_get_payload(tb[NFQA_PACKET_HDR]);
                uint32_t pkt = ntohl(ph->packet_id);
                if (!tb[NFQA_PAYLOAD]) {
                        verdict(c->nfq, pkt, NF_DROP, 0);
                        continue;
                }
                on_packet(c, pkt, mnl_attr_get_payload(tb[NFQA_PAYLOAD]), mnl_attr_get_payload_len(tb[NFQA_PAYLOAD]));
        }
}

static void on_result(struct ctx *c, const struct pd_relay_res *res)
{
        struct entry *e = find_id(res->id);
        if (!e)
                return;
        switch (res->err) {
        case 0:
                verdict(c->nfq, e->pkt, NF_ACCEPT, 0);
                e->state = DONE;
                e->at = pd_now_ms();
                return;
        case ECONNREFUSED: case EPERM: case EACCES:
                verdict(c->nfq, e->pkt, NF_REPEAT, PD_RELAY_MARK_REFUSE);
                break;
        case EHOSTUNREACH: case ENETUNREACH:
                verdict(c->nfq, e->pkt, NF_REPEAT, PD_RELAY_MARK_UNREACH);
                break;
        default:
                verdict(c->nfq, e->pkt, NF_DROP, 0);
                break;
        }
        e->state = FREE;
}

/* The worker went away: what it had not answered is dropped (the
 * sandboxes retransmit; the next worker gets those SYNs). */
static void drop_pending(struct ctx *c)
{
        for (int i = 0; i < MAX_ENTRIES; i++) {
                if (tab[i].state == PENDING)
                        verdict(c->nfq, tab[i].pkt, NF_DROP, 0);
                tab[i].state = FREE;
        }
}

static void expire(struct ctx *c)
{
        uint64_t now = pd_now_ms();
        for (int i = 0; i < MAX_ENTRIES; i++) {
                if (tab[i].state == PENDING && now - tab[i].at > PENDING_MS) {
                        verdict(c->nfq, tab[i].pkt, NF_DROP, 0);
                        tab[i].state = FREE;
                } else if (tab[i].state == DONE && now - tab[i].at > DONE_MS) {
                        tab[i].state = FREE;
                }
        }
}

static int recv_fd(int ctl)
{
        char b;
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = { &b, 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        ssize_t n = recvmsg(ctl, &m, MSG_CMSG_CLOEXEC);
        if (n <= 0)
                return n == 0 ? -EPIPE : -errno;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        if (!cm || cm->cmsg_type != SCM_RIGHTS)
                return -EBADMSG;
        int fd;
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        return fd;
}

int pd_relay_gate_run(int nfq, int ctl)
{
        struct ctx c = { .nfq = nfq, .chan = -1 };
        int one = 1;
        /* a full socket drops SYNs (ENOBUFS) instead of stalling the queue */
        (void)setsockopt(nfq, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
        for (;;) {
                struct pollfd pf[3] = { { .fd = nfq, .events = POLLIN }, { .fd = ctl, .events = POLLIN },
                                        { .fd = c.chan, .events = POLLIN } };
                int n = poll(pf, c.chan >= 0 ? 3 : 2, 1000);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0 && pf[1].revents) {
                        int fd = recv_fd(ctl);
                        if (fd == -EPIPE)
                                return 0;       /* the supervisor is gone */
                        if (fd >= 0) {
                                if (c.chan >= 0)
                                        close(c.chan);
                                drop_pending(&c);
                                c.chan = fd;
                                continue;
                        }
                }
                if (n > 0 && c.chan >= 0 && pf[2].revents) {
                        struct pd_relay_res res;
                        ssize_t got = recv(c.chan, &res, sizeof res, MSG_DONTWAIT);
                        if (got == sizeof res) {
                                on_result(&c, &res);
                        } else if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
                                close(c.chan);
                                c.chan = -1;
                                drop_pending(&c);
                        }
                }
                if (n > 0 && pf[0].revents)
                        read_queue(&c);
                expire(&c);
        }
}
