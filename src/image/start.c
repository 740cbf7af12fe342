/* A template's start command (start.h, docs/templates.md "Start and
 * ready commands"): started in the background in a new sandbox, then its
 * ready command is run until it exits 0.
 *
 * E2B runs the start command once, at build time, and snapshots the
 * running machine; the container tier has no memory snapshot, so paddock
 * runs it at each create instead (and once at build time, so a broken one
 * fails the build rather than every create).
 *
 * Two agent connections: the start command's (spawned with follow, so its
 * whole output stays queued for this connection: the tail of a failure is
 * read after the fact) and the ready command's. Closing the first leaves the
 * process running (the agent keeps processes across connections). */
#include "image/start.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/sandbox.h"
#include "lib/template.h"
#include "lib/util.h"
#include "proto/client.h"

#define TAIL 1500

struct tail {
        char buf[TAIL + 1];
        size_t n;
};

static void tail_add(struct tail *t, const uint8_t *p, size_t n)
{
        if (n >= TAIL) {
                p += n - TAIL;
                n = TAIL;
        }
        if (t->n + n > TAIL) {
                size_t cut = t->n + n - TAIL;
                memmove(t->buf, t->buf + cut, t->n - cut);
                t->n -= cut;
        }
        memcpy(t->buf + t->n, p, n);
        t->n += n;
        t->buf[t->n] = '\0';
}

static void on_out(void *ctx, uint32_t stream, uint64_t offset, const uint8_t *data, size_t n)
{
        (void)stream;
        (void)offset;
        tail_add(ctx, data, n);
}

/* The start command's output (and how it ended, if it did) from c, whose
 * follow reader gets everything from offset 0; waits at most ms. */
static void drain(struct pd_client *c, struct tail *t, bool *exited, struct pd_exit *x, int ms)
{
        uint64_t end = pd_now_ms() + (uint64_t)ms;
        while (!*exited) {
                uint64_t now = pd_now_ms();
                if (now >= end)
                        return;
                struct pd_frame_hdr h;
                const uint8_t *p;
                int r = pd_client_next(c, &h, &p, (int)(end - now));
                if (r <= 0)
                        return;
                uint64_t off;
                const uint8_t *data;
                size_t n;
                if (h.type == PD_T_OUTPUT && pd_output_decode(&h, p, &off, &data, &n)) {
                        tail_add(t, data, n);
                } else if (h.type == PD_T_EXIT) {
                        pd_exit_decode(p, h.len, x);
                        *exited = true;
                }
        }
}

/* What is already queued on c (no wait). */
static void drain_nowait(struct pd_client *c, struct tail *t, bool *exited, struct pd_exit *x)
{
        struct pd_frame_hdr h;
        const uint8_t *p;
        while (!*exited && pd_client_next_nowait(c, &h, &p) == 1) {
                uint64_t off;
                const uint8_t *data;
                size_t n;
                if (h.type == PD_T_OUTPUT && pd_output_decode(&h, p, &off, &data, &n)) {
                        tail_add(t, data, n);
                } else if (h.type == PD_T_EXIT) {
                        pd_exit_decode(p, h.len, x);
                        *exited = true;
                }
        }
}

/* The last 240 bytes, trailing blanks cut (an error message is 512). */
static const char *trimmed(struct tail *t)
{
        while (t->n && (t->buf[t->n - 1] == '\n' || t->buf[t->n - 1] == ' '))
                t->buf[--t->n] = '\0';
        return !t->n ? "(no output)" : t->n > 240 ? t->buf + t->n - 240 : t->buf;
}

int pd_template_start(struct pd_sandbox *sb, const struct pd_template_start *s, uint32_t *pid_out,
                      struct pd_error *err)
{
        const char *shell[] = { "/bin/sh", "-c", s->start };
        struct pd_spawn_opts o = { .argv = shell, .argc = 3, .env = s->env, .envc = s->n_env,
                                   .cwd = s->cwd, .uid = s->uid, .gid = s->gid, .groups = &s->gid,
                                   .n_groups = 1, .tag = "start-cmd", .follow = true };
        struct pd_client sc, rc;
        pd_client_init(&sc);
        pd_client_init(&rc);
        uint32_t pid = 0;
        int fd = pd_sandbox_connect(sb, err);
        int r = fd < 0 ? fd : pd_client_connect(&sc, fd, "paddock-start", err);
        if (r == 0 && (r = pd_client_spawn(&sc, &o, &pid, err)) < 0)
                pd_error_prefix(err, "start command");
        if (r < 0)
                goto out;
        if (pid_out)
                *pid_out = pid;
        if (!s->ready || !*s->ready)
                goto out;
        fd = pd_sandbox_connect(sb, err);
        if (fd < 0 || (r = pd_client_connect(&rc, fd, "paddock-ready", err)) < 0) {
                r = fd < 0 ? fd : r;
                goto out;
        }
        /* the ready command: polled until it exits 0, backing off from
         * 50 ms to 1 s, within the total timeout (a try may take the rest of
         * it: E2B's waitForTimeout is a `sleep`) */
        const char *rshell[] = { "/bin/sh", "-c", s->ready };
        struct pd_spawn_opts ro = o;
        ro.argv = rshell;
        ro.tag = "ready-cmd";
        uint64_t deadline = pd_now_ms() + (uint64_t)(s->timeout_ms > 0 ? s->timeout_ms : 60000);
        unsigned delay = 50;
        struct tail rt = { 0 }, st = { 0 };
        bool ready = false, exited = false;
        struct pd_exit sx = { 0 };
        int last = -1;
        for (;;) {
                uint64_t now = pd_now_ms();
                if (now >= deadline)
                        break;
                /* a start command that failed will not get ready: say so
                 * now (one that exits 0 may have left a daemon behind) */
                drain_nowait(&sc, &st, &exited, &sx);
                if (exited && !(sx.has_code && sx.code == 0))
                        break;
                rt.n = 0;
                rt.buf[0] = '\0';
                ro.timeout_ms = deadline - now;
                const struct pd_run_io io = { .on_output = on_out, .ctx = &rt,
                                              .timeout_ms = (int)(deadline - now) + 1000 };
                struct pd_exit x;
                uint32_t rpid = 0;
                if ((r = pd_client_run(&rc, &ro, &io, &rpid, &x, err)) < 0) {
                        pd_error_prefix(err, "ready command");
                        goto out;
                }
                last = x.has_code ? (int)x.code : -1;
                if (x.has_code && x.code == 0) {
                        ready = true;
                        break;
                }
                now = pd_now_ms();
                if (now + delay >= deadline)
                        break;
                struct timespec ts = { .tv_sec = delay / 1000, .tv_nsec = (long)(delay % 1000) * 1000000L };
                nanosleep(&ts, NULL);
                delay = delay * 2 > 1000 ? 1000 : delay * 2;
        }
        /* a start command that has failed (also if the ready command
         * passed meanwhile): its status and output */
        drain_nowait(&sc, &st, &exited, &sx);
        if (exited && !(sx.has_code && sx.code == 0)) {
                r = sx.has_code ? pd_error_setx(err, PD_E_START_FAILED, "the start command '%.80s' exited with status %u; its last "
                                                "output:\n%s", s->start, sx.code, trimmed(&st))
                                : pd_error_setx(err, PD_E_START_FAILED, "the start command '%.80s' was killed by signal %u; its "
                                                "last output:\n%s", s->start, sx.signo, trimmed(&st));
                goto out;
        }
        if (!ready) {
                /* its output so far: the start command is killed, then its
                 * queued output read up to its EXIT */
                bool was_running = !exited;
                if (was_running)
                        (void)pd_client_signal(&sc, pid, SIGKILL, true, NULL);
                drain(&sc, &st, &exited, &sx, 3000);
                r = pd_error_setx(err, ETIMEDOUT,
                                  "the ready command '%.80s' did not succeed within %d s (last exit status %d); "
                                  "the start command '%.80s' (%s) printed:\n%s",
                                  s->ready, (s->timeout_ms > 0 ? s->timeout_ms : 60000) / 1000, last, s->start,
                                  was_running ? "killed" : "it had exited", trimmed(&st));
        }
out:
        pd_client_close(&rc);
        pd_client_close(&sc);
        return r;
}
