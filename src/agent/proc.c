/* The process table: output capture into rings, backpressure, reaping,
 * exit bookkeeping, and the small per-process requests. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"

static uint8_t read_buf[64u << 10];     /* reads while the ring is small */
/* One read takes at most this, straight into the ring; a busy stream's pipe
 * is grown to it (AG_PIPE_BUSY), so a fast writer is read in big slices
 * and wakes the agent less often. */
#define AG_READ_MAX (1u << 20)
/* Straight into the ring only once it holds this much: a reservation grows
 * the ring before the read, and a process with a few bytes of output must
 * keep its 16 KiB ring (an idle sandbox keeps up to AG_MAX_EXITED of them). */
#define AG_DIRECT_MIN (256u << 10)
/* Coalescing. A process writing fast wakes the agent on every write (4 KiB
 * at a time for head, 128 KiB for cat), and every wake-up became a frame, a
 * wake-up of the server, an HTTP chunk and a wake-up of the client: ~20 KiB
 * per hop, three context switches each, which is where a stream's time went
 * (bench/reports/streams.md). Once a stream delivered AG_BATCH_ENTER bytes
 * within AG_BATCH_WINDOW_NS, and its pipe could be grown to AG_READ_MAX so
 * the writer keeps going meanwhile, it is read every AG_BATCH_NS instead of
 * on EPOLLIN: at most AG_BATCH_NS more latency on a stream that is busy
 * anyway. A round that finds less than AG_BATCH_LEAVE bytes puts it back on
 * EPOLLIN. A pty is never batched (its buffer is a few KiB: the writer
 * would wait out every period), nor is interactive output, far below the
 * threshold. Offsets, gaps and backpressure are untouched: the same reads
 * into the same ring, only later and bigger. */
#define AG_BATCH_NS (500u * 1000u)
#define AG_BATCH_WINDOW_NS (2u * 1000u * 1000u)
#define AG_BATCH_ENTER (128u << 10)
#define AG_BATCH_LEAVE (64u << 10)

struct ag_proc *ag_proc_find(struct agent *ag, uint32_t pid)
{
        for (struct ag_proc *p = ag->procs; p; p = p->next)
                if ((uint32_t)p->pid == pid && !p->dead && !p->sudo)
                        return p;
        return NULL;
}

/* Bytes we may read now without evicting what a FOLLOW reader still needs. */
static size_t stream_room(struct agent *ag, struct ag_stream *s)
{
        uint64_t min = ag_attach_min_next(ag, s->p, s->idx);
        if (min == UINT64_MAX)
                return AG_READ_MAX;
        uint64_t pending = pd_ring_end(&s->ring) - min;
        if (pending >= ag->ring_size)
                return 0;
        uint64_t room = ag->ring_size - pending;
        return room < AG_READ_MAX ? (size_t)room : AG_READ_MAX;
}

/* A read filled what the pipe holds by default: the writer is fast, give
 * its pipe the size of one read (once; fcntl fails harmlessly on a pty or
 * past the user's pipe quota, and an idle stream never pays for it). */
static void stream_grow_pipe(struct ag_stream *s, size_t got)
{
        if (s->pipe_grown || got < (64u << 10))
                return;
        s->pipe_grown = true;
        s->pipe_big = fcntl(s->h.fd, F_SETPIPE_SZ, (int)AG_READ_MAX) >= (int)AG_READ_MAX;
}

enum { RD_DRAINED, RD_PAUSED, RD_MORE };

/* Read up to max_reads times; *got (if not NULL): bytes read. */
static int stream_read(struct agent *ag, struct ag_stream *s, int max_reads, size_t *got)
{
        for (int i = 0; i < max_reads; i++) {
                if (s->h.fd < 0)
                        return RD_DRAINED;
                size_t room = stream_room(ag, s);
                if (room == 0) {
                        s->paused = true;
                        ag_ev_mod(ag, &s->h, 0);
                        return RD_PAUSED;
                }
                struct iovec iov[2];
                int niov = s->ring.cap >= AG_DIRECT_MIN ? pd_ring_reserve(&s->ring, room, iov) : 0;
                ssize_t n = niov ? readv(s->h.fd, iov, niov)
                                 : read(s->h.fd, read_buf, room < sizeof read_buf ? room : sizeof read_buf);
                if (n > 0) {
                        if (niov)
                                pd_ring_commit(&s->ring, (size_t)n);
                        else
                                pd_ring_append(&s->ring, read_buf, (size_t)n);
                        stream_grow_pipe(s, (size_t)n);
                        if (got)
                                *got += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return RD_DRAINED;
                /* EOF, or EIO on a pty master once every slave fd closed */
                ag_ev_close(ag, &s->h);
                return RD_DRAINED;
        }
        return RD_MORE;
}

static void proc_close_fds(struct agent *ag, struct ag_proc *p)
{
        ag_ev_close(ag, &p->out[0].h);
        ag_ev_close(ag, &p->out[1].h);
        ag_ev_close(ag, &p->in);
        ag_ev_close(ag, &p->timer);
}

/* Drop the oldest exited processes beyond AG_MAX_EXITED. */
static void enforce_exited_limit(struct agent *ag)
{
        for (;;) {
                size_t n = 0;
                struct ag_proc *oldest = NULL;
                for (struct ag_proc *p = ag->procs; p; p = p->next) {
                        if (p->dead || !p->exited || p->sudo)
                                continue;
                        n++;
                        if (!oldest || p->exit_seq < oldest->exit_seq)
                                oldest = p;
                }
                if (n <= AG_MAX_EXITED)
                        return;
                oldest->dead = true;
                ag_attach_drop_proc(ag, oldest);
                proc_close_fds(ag, oldest);
        }
}

/* After waitpid: once the pipes hold nothing more from before the exit,
 * the end offsets are final and EXIT may go out. */
static void proc_finish(struct agent *ag, struct ag_proc *p)
{
        if (!p->reaped || p->exited)
                return;
        for (int i = 0; i < 2; i++) {
                int k;
                int guard = 0;
                while ((k = stream_read(ag, &p->out[i], 64, NULL)) == RD_MORE && ++guard < 16)
                        ;
                if (k == RD_PAUSED)
                        return;     /* a reader must catch up first */
        }
        p->exited = true;
        p->end_at_exit[0] = pd_ring_end(&p->out[0].ring);
        p->end_at_exit[1] = pd_ring_end(&p->out[1].ring);
        p->exit_seq = ++ag->exit_seq;
        ag_ev_close(ag, &p->timer);
        if (p->sudo) {
                ag_sudod_proc_exited(ag, p);
                p->dead = true;
                proc_close_fds(ag, p);
                return;
        }
        ag_attach_notify(ag, p);
        enforce_exited_limit(ag);
}

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Immediate mode: has this stream become busy enough to batch? */
static void batch_consider(struct agent *ag, struct ag_stream *s, size_t got)
{
        if (s->batching || s->h.fd < 0 || s->paused || !got)
                return;
        uint64_t now = now_ns();
        if (now - s->win_start_ns > AG_BATCH_WINDOW_NS) {
                s->win_start_ns = now;
                s->win_bytes = 0;
        }
        s->win_bytes += got;
        if (s->win_bytes < AG_BATCH_ENTER)
                return;
        if (!s->pipe_grown) {
                s->pipe_grown = true;
                s->pipe_big = fcntl(s->h.fd, F_SETPIPE_SZ, (int)AG_READ_MAX) >= (int)AG_READ_MAX;
        }
        if (!s->pipe_big)
                return;         /* a pty, or past the pipe quota: stay on EPOLLIN */
        s->batching = true;
        s->batch_due_ns = now + AG_BATCH_NS;
        ag_ev_mod(ag, &s->h, 0);
}

static void batch_leave(struct agent *ag, struct ag_stream *s)
{
        s->batching = false;
        s->win_start_ns = 0;
        s->win_bytes = 0;
        if (s->h.fd >= 0 && !s->paused)
                ag_ev_mod(ag, &s->h, EPOLLIN);
}

static void on_stream(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        struct ag_stream *s = ag_container_of(h, struct ag_stream, h);
        size_t got = 0;
        stream_read(ag, s, 16, &got);
        if (s->batching) {
                /* a resume re-armed EPOLLIN meanwhile: the period reads it */
                if (s->h.fd >= 0 && !s->paused)
                        ag_ev_mod(ag, &s->h, 0);
        } else {
                batch_consider(ag, s, got);
        }
        ag_attach_notify(ag, s->p);
        proc_finish(ag, s->p);
}

int64_t ag_batch_wait_ns(struct agent *ag)
{
        int64_t wait = -1;
        uint64_t now = 0;
        for (struct ag_proc *p = ag->procs; p; p = p->next) {
                for (int i = 0; i < 2; i++) {
                        const struct ag_stream *s = &p->out[i];
                        if (!s->batching || s->h.fd < 0 || p->dead)
                                continue;
                        if (!now)
                                now = now_ns();
                        int64_t w = s->batch_due_ns > now ? (int64_t)(s->batch_due_ns - now) : 0;
                        if (wait < 0 || w < wait)
                                wait = w;
                }
        }
        return wait;
}

void ag_batch_run(struct agent *ag)
{
        uint64_t now = 0;
        for (struct ag_proc *p = ag->procs; p; p = p->next) {
                for (int i = 0; i < 2; i++) {
                        struct ag_stream *s = &p->out[i];
                        if (!s->batching)
                                continue;
                        if (s->h.fd < 0 || p->dead) {
                                s->batching = false;
                                continue;
                        }
                        if (!now)
                                now = now_ns();
                        if (now < s->batch_due_ns)
                                continue;
                        size_t got = 0;
                        int k = stream_read(ag, s, 16, &got);
                        if (k == RD_PAUSED || s->h.fd < 0 || got < AG_BATCH_LEAVE)
                                batch_leave(ag, s);
                        else
                                s->batch_due_ns = now + AG_BATCH_NS;
                        ag_attach_notify(ag, p);
                        proc_finish(ag, p);
                }
        }
}

void ag_proc_resume_streams(struct agent *ag, struct ag_proc *p)
{
        for (int i = 0; i < 2; i++) {
                struct ag_stream *s = &p->out[i];
                if (s->paused && s->h.fd >= 0 && stream_room(ag, s) > 0) {
                        s->paused = false;
                        ag_ev_mod(ag, &s->h, EPOLLIN);
                }
        }
}

int ag_proc_watch_streams(struct agent *ag, struct ag_proc *p);
int ag_proc_watch_streams(struct agent *ag, struct ag_proc *p)
{
        for (int i = 0; i < 2; i++) {
                p->out[i].p = p;
                p->out[i].idx = i;
                pd_ring_init(&p->out[i].ring, ag->ring_size);
                int fd = p->out[i].h.fd;
                p->out[i].h.fd = -1;
                if (fd >= 0 && ag_ev_add(ag, &p->out[i].h, fd, EPOLLIN, on_stream) < 0) {
                        int e = errno;
                        close(fd);
                        return -e;
                }
        }
        return 0;
}

void ag_proc_reap_all(struct agent *ag)
{
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);
                if (pid <= 0)
                        return;
                for (struct ag_proc *p = ag->procs; p; p = p->next) {
                        if (p->pid == pid && !p->reaped && !p->dead) {
                                p->status = status;
                                p->reaped = true;
                                /* a guest OOM kill: the host sees only QEMU,
                                 * whose cgroup the guest kernel never leaves */
                                p->oom_killed = ag->guest && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
                                                ag_guest_oom_kills() > p->oom_at_start;
                                proc_finish(ag, p);
                                break;
                        }
                }
        }
}

static void proc_free(struct agent *ag, struct ag_proc *p)
{
        proc_close_fds(ag, p);
        pd_ring_free(&p->out[0].ring);
        pd_ring_free(&p->out[1].ring);
        ag_buf_free(&p->inbuf);
        for (char **a = p->argv; a && *a; a++)
                free(*a);
        for (char **e = p->envp; e && *e; e++)
                free(*e);
        free(p->argv);
        free(p->envp);
        free(p->tag);
        free(p->cwd);
        free(p);
}

void ag_procs_collect(struct agent *ag)
{
        for (struct ag_proc **pp = &ag->procs; *pp;) {
                struct ag_proc *p = *pp;
                if (p->dead) {
                        *pp = p->next;
                        proc_free(ag, p);
                } else {
                        pp = &p->next;
                }
        }
}

void ag_proc_kill_all(struct agent *ag)
{
        for (struct ag_proc *p = ag->procs; p; p = p->next) {
                if (!p->reaped) {
                        kill(-p->pid, SIGKILL);
                        kill(p->pid, SIGKILL);
                }
        }
        if (ag->pid1)
                kill(-1, SIGKILL);
}

void ag_proc_put_exit_attrs(const struct ag_proc *p, struct pd_msg *m)
{
        pd_msg_put_u32(m, PD_A_PID, (uint32_t)p->pid);
        if (WIFEXITED(p->status))
                pd_msg_put_u32(m, PD_A_EXIT_CODE, (uint32_t)WEXITSTATUS(p->status));
        if (WIFSIGNALED(p->status))
                pd_msg_put_u32(m, PD_A_SIGNO, (uint32_t)WTERMSIG(p->status));
        pd_msg_put_str(m, PD_A_REASON, p->timed_out ? "timeout" : p->oom_killed ? "oom" :
                       WIFSIGNALED(p->status) ? "signal" : "exit");
        pd_msg_put_u64(m, PD_A_END_OUT, p->end_at_exit[0]);
        pd_msg_put_u64(m, PD_A_END_ERR, p->end_at_exit[1]);
}

int ag_req_list(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        for (struct ag_proc *p = ag->procs; p; p = p->next) {
                if (p->dead || p->sudo)
                        continue;
                struct pd_msg *m = r->reply;
                size_t mark = pd_msg_nest_begin(m, PD_A_PROC);
                pd_msg_put_u32(m, PD_A_PID, (uint32_t)p->pid);
                if (p->tag)
                        pd_msg_put_str(m, PD_A_TAG, p->tag);
                pd_msg_put_str(m, PD_A_STATE, p->exited ? "exited" : "running");
                if (p->exited) {
                        if (WIFEXITED(p->status))
                                pd_msg_put_u32(m, PD_A_EXIT_CODE, (uint32_t)WEXITSTATUS(p->status));
                        if (WIFSIGNALED(p->status))
                                pd_msg_put_u32(m, PD_A_SIGNO, (uint32_t)WTERMSIG(p->status));
                        pd_msg_put_str(m, PD_A_REASON, p->timed_out ? "timeout" : p->oom_killed ? "oom" :
                                       WIFSIGNALED(p->status) ? "signal" : "exit");
                }
                pd_msg_put_u64(m, PD_A_START_OUT, pd_ring_start(&p->out[0].ring));
                pd_msg_put_u64(m, PD_A_END_OUT, pd_ring_end(&p->out[0].ring));
                pd_msg_put_u64(m, PD_A_START_ERR, pd_ring_start(&p->out[1].ring));
                pd_msg_put_u64(m, PD_A_END_ERR, pd_ring_end(&p->out[1].ring));
                for (char **a = p->argv; *a; a++)
                        pd_msg_put_str(m, PD_A_ARG, *a);
                for (char **e = p->envp; *e; e++)
                        pd_msg_put_str(m, PD_A_ENV, *e);
                pd_msg_put_str(m, PD_A_CWD, p->cwd);
                /* 1 while the host may still write the process's stdin */
                pd_msg_put_u32(m, PD_A_STDIN, p->in.fd >= 0 && !p->in_close);
                if (p->pty) {
                        pd_msg_put_u32(m, PD_A_PTY_ROWS, p->rows);
                        pd_msg_put_u32(m, PD_A_PTY_COLS, p->cols);
                }
                pd_msg_nest_end(m, mark);
        }
        return 0;
}

static int get_proc(struct agent *ag, struct ag_req *r, struct ag_proc **out)
{
        uint32_t pid;
        int k = ag_get_u32(r, PD_A_PID, &pid);
        if (k <= 0)
                return k < 0 ? k : ag_missing(r->err, "PID");
        *out = ag_proc_find(ag, pid);
        if (!*out)
                return pd_error_setx(r->err, ESRCH, "no process %" PRIu32, pid);
        return 0;
}

int ag_req_signal(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        struct ag_proc *p;
        uint32_t signo, group = 0;
        int k = get_proc(ag, r, &p);
        if (k < 0)
                return k;
        if ((k = ag_get_u32(r, PD_A_SIGNO, &signo)) <= 0)
                return k < 0 ? k : ag_missing(r->err, "SIGNO");
        if ((k = ag_get_u32(r, PD_A_GROUP, &group)) < 0)
                return k;
        if (signo > 64)
                return pd_error_setx(r->err, EINVAL, "bad signal number %" PRIu32, signo);
        if (p->reaped)
                return pd_error_setx(r->err, EALREADY, "process %d has already exited", p->pid);
        /* the process called setsid(): its group id is its pid */
        if (kill(group ? -p->pid : p->pid, (int)signo) < 0)
                return pd_error_set(r->err, errno, "kill %d", p->pid);
        return 0;
}

static void stdin_flush(struct agent *ag, struct ag_proc *p)
{
        while (ag_buf_used(&p->inbuf) && p->in.fd >= 0) {
                ssize_t n = write(p->in.fd, p->inbuf.data + p->inbuf.head, ag_buf_used(&p->inbuf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0) {
                        /* reader gone: nothing will ever take these bytes */
                        ag_buf_consume(&p->inbuf, ag_buf_used(&p->inbuf));
                        if (!p->pty)
                                ag_ev_close(ag, &p->in);
                        break;
                }
                ag_buf_consume(&p->inbuf, (size_t)n);
        }
        if (p->in.fd < 0)
                return;
        if (!ag_buf_used(&p->inbuf) && p->in_close && !p->pty) {
                ag_ev_close(ag, &p->in);
                return;
        }
        ag_ev_mod(ag, &p->in, ag_buf_used(&p->inbuf) ? EPOLLOUT : 0);
}

static void on_stdin(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        struct ag_proc *p = ag_container_of(h, struct ag_proc, in);
        if (events & (EPOLLHUP | EPOLLERR)) {
                /* The reading side is gone (pipe reader exited, or every pty
                 * slave closed). epoll reports HUP whatever the event mask,
                 * so keep watching it and the loop spins: stop here. */
                ag_buf_consume(&p->inbuf, ag_buf_used(&p->inbuf));
                ag_ev_close(ag, &p->in);
                ag_conns_kick(ag);
                return;
        }
        stdin_flush(ag, p);
        if (ag_buf_used(&p->inbuf) < AG_STDIN_MAX)
                ag_conns_kick(ag);
}

int ag_proc_watch_stdin(struct agent *ag, struct ag_proc *p, int fd);
int ag_proc_watch_stdin(struct agent *ag, struct ag_proc *p, int fd)
{
        p->in.fd = -1;
        if (fd < 0)
                return 0;
        if (ag_ev_add(ag, &p->in, fd, 0, on_stdin) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return 0;
}

int ag_req_stdin(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        struct ag_proc *p = ag_proc_find(ag, r->h->id);
        if (!p || p->in.fd < 0 || p->in_close)
                return 0;       /* nobody to take them: dropped, like a closed pipe */
        if (ag_buf_used(&p->inbuf) >= AG_STDIN_MAX)
                return AG_BLOCKED;
        if (ag_buf_append(&p->inbuf, r->payload, r->h->len) < 0)
                return AG_BLOCKED;
        stdin_flush(ag, p);
        return 0;
}

int ag_req_stdin_close(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        struct ag_proc *p;
        int k = get_proc(ag, r, &p);
        if (k < 0)
                return k;
        if (p->pty) {
                /* a pty has no half-close: send the EOF character */
                static const char eof = 4;
                ag_buf_append(&p->inbuf, &eof, 1);
        }
        p->in_close = true;
        stdin_flush(ag, p);
        return 0;
}

int ag_req_resize(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        struct ag_proc *p;
        uint32_t rows, cols;
        int k = get_proc(ag, r, &p);
        if (k < 0)
                return k;
        if ((k = ag_get_u32(r, PD_A_PTY_ROWS, &rows)) <= 0)
                return k < 0 ? k : ag_missing(r->err, "PTY_ROWS");
        if ((k = ag_get_u32(r, PD_A_PTY_COLS, &cols)) <= 0)
                return k < 0 ? k : ag_missing(r->err, "PTY_COLS");
        if (!p->pty)
                return pd_error_setx(r->err, ENOTTY, "process %d has no pty", p->pid);
        if (rows == 0 || cols == 0 || rows > 65535 || cols > 65535)
                return pd_error_setx(r->err, EINVAL, "bad pty size %" PRIu32 "x%" PRIu32, rows, cols);
        struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
        if (p->in.fd < 0 || ioctl(p->in.fd, TIOCSWINSZ, &ws) < 0)
                return pd_error_set(r->err, p->in.fd < 0 ? EBADF : errno, "resize pty of %d", p->pid);
        p->rows = rows;
        p->cols = cols;
        return 0;
}
