/* Attachments: a connection reading a process's output stream from an
 * offset. Frames are generated lazily from the ring when the connection
 * has room, so a slow host costs no memory beyond the ring. */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "agent/agent.h"

static uint8_t chunk_buf[8 + PD_DATA_CHUNK];

static int stream_index(const struct ag_proc *p, uint32_t stream)
{
        if (p->pty)
                return stream == PD_STREAM_PTY ? 0 : -1;
        if (stream == PD_STREAM_STDOUT)
                return 0;
        if (stream == PD_STREAM_STDERR)
                return 1;
        return -1;
}

static uint32_t stream_id(const struct ag_proc *p, int idx)
{
        return p->pty ? PD_STREAM_PTY : idx == 0 ? PD_STREAM_STDOUT : PD_STREAM_STDERR;
}

static bool exit_was_sent(const struct ag_conn *c, uint32_t pid)
{
        for (size_t i = 0; i < c->nexit; i++)
                if (c->exit_sent[i] == pid)
                        return true;
        return false;
}

static void send_exit(struct agent *ag, struct ag_conn *c, struct ag_proc *p)
{
        if (exit_was_sent(c, (uint32_t)p->pid))
                return;
        uint32_t *n = realloc(c->exit_sent, (c->nexit + 1) * sizeof *n);
        if (!n)
                return;
        c->exit_sent = n;
        n[c->nexit++] = (uint32_t)p->pid;
        struct pd_msg m;
        pd_msg_init(&m);
        ag_proc_put_exit_attrs(p, &m);
        ag_conn_send(ag, c, PD_T_EXIT, 0, (uint32_t)p->pid, 0, m.buf, m.len);
        pd_msg_free(&m);
}

static struct ag_attach *find_att(struct ag_conn *c, struct ag_proc *p, int idx)
{
        for (size_t i = 0; i < c->natt; i++)
                if (c->att[i].p == p && c->att[i].idx == idx)
                        return &c->att[i];
        return NULL;
}

int ag_req_attach(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t pid, stream, follow = 0;
        uint64_t off = 0;
        int k;
        if ((k = ag_get_u32(r, PD_A_PID, &pid)) <= 0)
                return k < 0 ? k : ag_missing(r->err, "PID");
        if ((k = ag_get_u32(r, PD_A_STREAM, &stream)) <= 0)
                return k < 0 ? k : ag_missing(r->err, "STREAM");
        if ((k = ag_get_u64(r, PD_A_OFFSET, &off)) < 0)
                return k;
        if ((k = ag_get_u32(r, PD_A_FOLLOW, &follow)) < 0)
                return k;
        struct ag_proc *p = ag_proc_find(ag, pid);
        if (!p)
                return pd_error_setx(r->err, ESRCH, "no process %" PRIu32, pid);
        int idx = stream_index(p, stream);
        if (idx < 0)
                return pd_error_setx(r->err, EINVAL, "process %" PRIu32 " has no stream %" PRIu32
                                     "%s", pid, stream, p->pty ? " (it runs on a pty: stream 3)" : "");
        uint64_t first;
        if (ag_attach_add(ag, c, p, idx, off, follow != 0, &first) < 0)
                return pd_error_set(r->err, ENOMEM, "attach");
        pd_msg_put_u64(r->reply, PD_A_OFFSET, first);
        return 0;
}

int ag_attach_add(struct agent *ag, struct ag_conn *c, struct ag_proc *p, int idx, uint64_t off, bool follow,
                  uint64_t *first)
{
        struct pd_ring *ring = &p->out[idx].ring;
        if (off > pd_ring_end(ring))
                off = pd_ring_end(ring);
        struct ag_attach *a = find_att(c, p, idx);
        if (!a) {
                struct ag_attach *n = realloc(c->att, (c->natt + 1) * sizeof *n);
                if (!n)
                        return -ENOMEM;
                c->att = n;
                a = &n[c->natt++];
        }
        *a = (struct ag_attach){ .p = p, .idx = idx, .next = off, .follow = follow };
        if (first)
                *first = off < pd_ring_start(ring) ? pd_ring_start(ring) : off;
        /* a reader from further back may release a paused writer, or a
         * new FOLLOW reader may now hold it */
        ag_proc_resume_streams(ag, p);
        return 0;
}

int ag_req_detach(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t pid;
        int k;
        if ((k = ag_get_u32(r, PD_A_PID, &pid)) <= 0)
                return k < 0 ? k : ag_missing(r->err, "PID");
        struct ag_proc *p = ag_proc_find(ag, pid);
        if (!p)
                return pd_error_setx(r->err, ESRCH, "no process %" PRIu32, pid);
        size_t j = 0;
        for (size_t i = 0; i < c->natt; i++)
                if (c->att[i].p != p)
                        c->att[j++] = c->att[i];
        c->natt = j;
        ag_proc_resume_streams(ag, p);
        return 0;
}

/* Is everything p's FOLLOW readers on c need sent? */
static bool all_sent(const struct ag_conn *c, const struct ag_proc *p)
{
        for (size_t i = 0; i < c->natt; i++) {
                const struct ag_attach *a = &c->att[i];
                if (a->p == p && a->next < p->end_at_exit[a->idx] &&
                    a->next < pd_ring_end(&p->out[a->idx].ring))
                        return false;
        }
        return true;
}

/* One step for attachment a: 1 frame sent, 0 caught up, -1 conn dead. */
static int att_step(struct agent *ag, struct ag_conn *c, struct ag_attach *a)
{
        struct ag_proc *p = a->p;
        const struct pd_ring *ring = &p->out[a->idx].ring;
        uint32_t sid = stream_id(p, a->idx);
        if (a->next < pd_ring_start(ring)) {
                uint64_t be[2] = { htobe64(a->next), htobe64(pd_ring_start(ring)) };
                a->next = pd_ring_start(ring);
                ag_conn_send(ag, c, PD_T_GAP, 0, (uint32_t)p->pid, sid, be, sizeof be);
                return c->dead ? -1 : 1;
        }
        uint64_t limit = pd_ring_end(ring);
        if (p->exited && a->follow && limit > p->end_at_exit[a->idx])
                limit = p->end_at_exit[a->idx];
        if (a->next < limit) {
                size_t n = (size_t)(limit - a->next < PD_DATA_CHUNK ? limit - a->next : PD_DATA_CHUNK);
                uint64_t be = htobe64(a->next);
                if (ag_buf_used(&c->out) == 0) {
                        /* nothing queued ahead: the frame goes from the ring
                         * to the socket, without the two copies below */
                        struct iovec iov[3] = { { .iov_base = &be, .iov_len = 8 } };
                        size_t got;
                        int k = pd_ring_peek(ring, a->next, n, &iov[1], &got);
                        if (k > 0) {
                                a->next += got;
                                ag_conn_send_iov(ag, c, PD_T_OUTPUT, (uint32_t)p->pid, sid, iov, 1 + (size_t)k);
                                return c->dead ? -1 : 1;
                        }
                }
                memcpy(chunk_buf, &be, 8);
                n = pd_ring_read(ring, a->next, chunk_buf + 8, n);
                a->next += n;
                ag_conn_send(ag, c, PD_T_OUTPUT, 0, (uint32_t)p->pid, sid, chunk_buf, 8 + n);
                return c->dead ? -1 : 1;
        }
        return 0;
}

void ag_attach_generate(struct agent *ag, struct ag_conn *c)
{
        bool progress = true;
        while (progress && !c->dead && ag_buf_used(&c->out) < AG_OUT_LOW) {
                progress = false;
                for (size_t i = 0; i < c->natt && ag_buf_used(&c->out) < AG_OUT_LOW; i++) {
                        struct ag_attach *a = &c->att[i];
                        if (!a->p)
                                continue;
                        int k = att_step(ag, c, a);
                        if (k < 0)
                                return;
                        if (k > 0) {
                                progress = true;
                                continue;
                        }
                        struct ag_proc *p = a->p;
                        if (p->exited) {
                                if (all_sent(c, p)) {
                                        send_exit(ag, c, p);
                                        if (c->dead)
                                                return;
                                        for (size_t j = 0; j < c->natt; j++)
                                                if (c->att[j].p == p)
                                                        c->att[j].p = NULL;
                                }
                        } else if (!a->follow) {
                                a->p = NULL;    /* sent what existed */
                        }
                }
        }
        /* compact and let held-back writers go */
        size_t j = 0;
        for (size_t i = 0; i < c->natt; i++)
                if (c->att[i].p)
                        c->att[j++] = c->att[i];
        c->natt = j;
        for (size_t i = 0; i < c->natt; i++)
                if (c->att[i].p->out[c->att[i].idx].paused)
                        ag_proc_resume_streams(ag, c->att[i].p);
}

uint64_t ag_attach_min_next(struct agent *ag, struct ag_proc *p, int idx)
{
        uint64_t min = UINT64_MAX;
        for (struct ag_conn *c = ag->conns; c; c = c->next) {
                if (c->dead)
                        continue;
                for (size_t i = 0; i < c->natt; i++)
                        if (c->att[i].p == p && c->att[i].idx == idx && c->att[i].follow &&
                            c->att[i].next < min)
                                min = c->att[i].next;
        }
        return min;
}

void ag_attach_notify(struct agent *ag, struct ag_proc *p)
{
        for (struct ag_conn *c = ag->conns; c; c = c->next) {
                if (c->dead)
                        continue;
                for (size_t i = 0; i < c->natt; i++)
                        if (c->att[i].p == p) {
                                ag_conn_pump(ag, c);
                                break;
                        }
        }
}

void ag_attach_drop_proc(struct agent *ag, struct ag_proc *p)
{
        for (struct ag_conn *c = ag->conns; c; c = c->next) {
                size_t j = 0;
                for (size_t i = 0; i < c->natt; i++)
                        if (c->att[i].p != p)
                                c->att[j++] = c->att[i];
                c->natt = j;
        }
}

void ag_attach_conn_free(struct agent *ag, struct ag_conn *c)
{
        struct ag_attach *att = c->att;
        size_t n = c->natt;
        c->att = NULL;
        c->natt = 0;
        for (size_t i = 0; i < n; i++)
                if (att[i].p)
                        ag_proc_resume_streams(ag, att[i].p);
        free(att);
}
