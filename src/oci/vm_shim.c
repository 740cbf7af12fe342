/* microvm isolation, the processes' side: a shim on the host for each
 * guest process the engine knows (the container's init, exec'd
 * processes). The shim runs the process through the guest's agent,
 * relays its stdio (stdin to the guest, stdout and stderr back), forwards
 * every signal it receives to it, and exits with its status: a signal's
 * death is re-raised on the shim, so an engine waiting on the pid sees
 * what it would see of a container's init. SIGKILL cannot be forwarded;
 * `paddock-oci kill` therefore signals the guest process through the agent
 * itself, and the shim follows its exit. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/client.h"
#include "lib/util.h"
#include "oci/ocivm.h"

#define STDIN_QUEUE_MAX (1u << 20)      /* stop reading stdin while this much waits for the guest */
#define REPLY_TIMEOUT_MS 60000

struct session {
        struct pd_client c;
        uint32_t pid;
        int stdin_fd, sig_fd;
        bool exited;
        int exit_code, signo;
};

static int connect_sock(const char *path, struct pd_client *c, struct pd_error *err)
{
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof a.sun_path)
                return pd_error_setx(err, ENAMETOOLONG, "socket path '%s' too long", path);
        strcpy(a.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(err, errno, "socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "connect to the guest's agent ('%s')", path);
        }
        if (pd_client_connect(c, fd, "paddock-oci", err) < 0)
                return -1;
        /* a guest under TCG may be slow to answer */
        c->timeout_ms = REPLY_TIMEOUT_MS;
        return 0;
}

static int sock_path(const struct oci_state *st, char *out, size_t size, struct pd_error *err)
{
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/vm.json", st->dir);
        json_t *o = json_load_file(p, 0, NULL);
        const char *top = json_string_value(json_object_get(o, "top"));
        int r = 0;
        if (!top || !*top)
                r = pd_error_setx(err, ENOENT, "container '%s': its VM record is missing", st->id);
        else
                snprintf(out, size, "%s/agent.sock", top);
        json_decref(o);
        return r;
}

int oci_vm_connect(const struct oci_state *st, struct pd_client *c, struct pd_error *err)
{
        char path[PATH_MAX + 16];
        if (sock_path(st, path, sizeof path, err) < 0)
                return -1;
        return connect_sock(path, c, err);
}

static int spawn(struct session *s, const struct oci_process *p, const char *tag, struct pd_error *err)
{
        size_t argc = 0, envc = 0;
        while (p->args && p->args[argc])
                argc++;
        while (p->env && p->env[envc])
                envc++;
        /* stdin: the engine's, relayed; follow: the output comes on this
         * connection from offset 0 */
        const struct pd_spawn_opts o = {
                .argv = (const char *const *)p->args, .argc = argc, .env = (const char *const *)p->env, .envc = envc,
                .cwd = p->cwd && *p->cwd ? p->cwd : "/", .uid = p->uid, .gid = p->gid, .groups = p->gids,
                .n_groups = p->n_gids, .stdin_open = true, .tag = tag, .follow = true,
        };
        if (pd_client_spawn(&s->c, &o, &s->pid, err) < 0)
                return -1;
        return 0;
}

static void send_signal(struct session *s, int signo)
{
        (void)pd_client_signal_nowait(&s->c, s->pid, signo, false);
}

static void on_frame(struct session *s, const struct pd_frame_hdr *h, const uint8_t *p)
{
        uint64_t off;
        const uint8_t *data;
        size_t n;
        if (h->id != s->pid)
                return;
        if (pd_output_decode(h, p, &off, &data, &n)) {
                (void)pd_write_all(h->aux == PD_STREAM_STDERR ? 2 : 1, data, n);
        } else if (h->type == PD_T_EXIT) {
                struct pd_exit x;
                pd_exit_decode(p, h->len, &x);
                if (x.has_code)
                        s->exit_code = (int)x.code;
                if (x.has_signal)
                        s->signo = (int)x.signo;
                s->exited = true;
        }
}

static void forward_stdin(struct session *s)
{
        if (pd_client_stdin_from_fd(&s->c, s->stdin_fd, s->pid))
                s->stdin_fd = -1;
}

/* Until the process exits: 0, or -1 when the agent went away (the VM was
 * killed). */
static int session_loop(struct session *s)
{
        for (;;) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                int r;
                while ((r = pd_conn_next(&s->c.conn, &h, &p)) > 0)
                        on_frame(s, &h, p);
                if (r < 0 || s->exited)
                        return r < 0 ? -1 : 0;
                if (s->c.conn.eof)
                        return -1;
                bool room = pd_conn_pending(&s->c.conn) < STDIN_QUEUE_MAX;
                struct pollfd pf[3] = {
                        { .fd = s->c.conn.fd, .events = POLLIN | (pd_conn_pending(&s->c.conn) ? POLLOUT : 0) },
                        { .fd = s->sig_fd, .events = POLLIN },
                        { .fd = room ? s->stdin_fd : -1, .events = POLLIN },
                };
                if (poll(pf, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -1;
                }
                if (pf[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(s->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
                                send_signal(s, (int)si.ssi_signo);
                }
                if (pf[2].revents & (POLLIN | POLLHUP | POLLERR))
                        forward_stdin(s);
                if (pd_conn_pending(&s->c.conn) && pd_conn_flush(&s->c.conn) < 0 && !s->exited)
                        return -1;
                if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) && pd_conn_fill(&s->c.conn) < 0)
                        return -1;
        }
}

/* Every signal an engine may send is caught (signalfd) and forwarded;
 * SIGPIPE is ours (a closed stdout), SIGCHLD and the terminal-stop ones
 * concern no one in the guest. */
static int block_signals(sigset_t *set)
{
        sigemptyset(set);
        for (int sig = 1; sig <= SIGRTMAX; sig++)
                if (sig != SIGKILL && sig != SIGSTOP && sig != SIGPIPE && sig != SIGCHLD && sig != SIGTTIN &&
                    sig != SIGTTOU)
                        (void)sigaddset(set, sig);
        sigprocmask(SIG_BLOCK, set, NULL);
        return signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* Exit as the guest process did: its code, or death by its signal. */
__attribute__((noreturn)) static void exit_like(const struct session *s, const sigset_t *set)
{
        if (s->signo > 0) {
                struct rlimit no_core = { 0, 0 };
                setrlimit(RLIMIT_CORE, &no_core);
                signal(s->signo, SIG_DFL);
                sigprocmask(SIG_UNBLOCK, set, NULL);
                kill(getpid(), s->signo);
                _exit(128 + s->signo);
        }
        _exit(s->exit_code & 0xff);
}

/* Run p to its end; never returns. fifo: held open (written once before
 * the spawn) until the process runs, as the container init's exec.fifo. */
__attribute__((noreturn)) static void run_process(const char *sock, const char *guest_pid_file, int fifo,
                                                  const struct oci_process *p, const char *tag)
{
        struct pd_error err = { 0 };
        struct session s = { .stdin_fd = 0, .exit_code = 0 };
        sigset_t set;
        signal(SIGPIPE, SIG_IGN);
        s.sig_fd = block_signals(&set);
        if (s.sig_fd < 0 || connect_sock(sock, &s.c, &err) < 0 || spawn(&s, p, tag, &err) < 0) {
                if (!err.msg[0])
                        pd_error_set(&err, errno, "signalfd");
                dprintf(2, "paddock-oci: %s\n", err.msg);
                _exit(err.code == ENOENT ? 127 : err.code == EACCES ? 126 : 1);
        }
        if (guest_pid_file) {
                char buf[32], tmp[PATH_MAX + 8];
                snprintf(tmp, sizeof tmp, "%s.tmp", guest_pid_file);
                snprintf(buf, sizeof buf, "%u", s.pid);
                if (pd_write_file_at(AT_FDCWD, tmp, buf, NULL) == 0)
                        (void)rename(tmp, guest_pid_file);
        }
        if (fifo >= 0)
                close(fifo);    /* `start` returns: the process runs */
        if (session_loop(&s) < 0) {
                /* the agent is gone with its VM: as if the process was killed */
                s.signo = SIGKILL;
        }
        exit_like(&s, &set);
}

void oci_vm_shim_init(const char *dir, const char *sock, const struct oci_process *p)
{
        prctl(PR_SET_NAME, "paddock-vmshim");
        setsid();
        /* nothing of the runtime's but stdio */
        syscall(SYS_close_range, 3, ~0U, 0);
        char fifo[PATH_MAX + 16], gpid[PATH_MAX + 16];
        snprintf(fifo, sizeof fifo, "%s/exec.fifo", dir);
        snprintf(gpid, sizeof gpid, "%s/vm.guest", dir);
        /* blocks until `start` opens it for reading; a signal before that
         * ends the shim (default dispositions): a created container killed */
        int fd = open(fifo, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "1", 1) != 1)
                _exit(1);
        run_process(sock, gpid, fd, p, "oci-init");
}

int oci_vm_exec(const struct oci_state *st, const struct oci_process *p, const char *pid_file, pid_t *out_pid,
                struct pd_error *err)
{
        if (p->terminal)
                return pd_error_setx(err, ENOTSUP, "microvm: exec with a terminal is not supported yet");
        if (oci_vm_paused(st))
                return pd_error_setx(err, EINVAL, "container '%s' is paused: cannot exec", st->id);
        char sock[PATH_MAX + 16];
        if (sock_path(st, sock, sizeof sock, err) < 0)
                return -1;
        pid_t pid = fork();
        if (pid < 0)
                return pd_error_set(err, errno, "fork");
        if (pid == 0) {
                prctl(PR_SET_NAME, "paddock-vmshim");
                run_process(sock, NULL, -1, p, "oci-exec");
        }
        if (pid_file) {
                char tmp[PATH_MAX], buf[32];
                snprintf(tmp, sizeof tmp, "%s.tmp%d", pid_file, (int)getpid());
                snprintf(buf, sizeof buf, "%d", (int)pid);
                if (pd_write_file_at(AT_FDCWD, tmp, buf, err) < 0 || rename(tmp, pid_file) < 0) {
                        kill(pid, SIGKILL);
                        return pd_error_set(err, errno, "pid file '%s'", pid_file);
                }
        }
        *out_pid = pid;
        return 0;
}

/* The guest processes the agent started, running ones only. */
static int list_running(struct pd_client *c, uint32_t *pids, char (*tags)[64], size_t max, size_t *n,
                        struct pd_error *err)
{
        struct pd_proc_list l;
        int r = pd_client_list(c, &l, err);
        *n = 0;
        for (size_t i = 0; r == 0 && i < l.n && *n < max; i++) {
                if (l.v[i].exited)
                        continue;
                pids[*n] = l.v[i].pid;
                if (tags)
                        snprintf(tags[*n], 64, "%s", l.v[i].argc ? l.v[i].argv[0] : "");
                (*n)++;
        }
        pd_proc_list_free(&l);
        return r;
}

int oci_vm_kill(const struct oci_state *st, int sig, bool all, struct pd_error *err)
{
        char p[PATH_MAX + 16], buf[32];
        snprintf(p, sizeof p, "%s/vm.guest", st->dir);
        if (pd_read_file_at(AT_FDCWD, p, buf, sizeof buf) <= 0)
                return 1;       /* not started: the shim itself */
        struct pd_client c;
        if (oci_vm_connect(st, &c, err) < 0)
                return -1;
        uint32_t pids[256];
        size_t n = 1;
        pids[0] = (uint32_t)strtoul(buf, NULL, 10);
        int r = all ? list_running(&c, pids, NULL, PD_ARRAY_SIZE(pids), &n, err) : 0;
        for (size_t i = 0; r == 0 && i < n; i++) {
                r = pd_client_signal(&c, pids[i], sig, all, err);
                if (r < 0 && all && err->code == ESRCH)
                        r = 0;  /* exited meanwhile */
        }
        pd_client_close(&c);
        if (r < 0)
                return pd_error_prefix(err, "kill container '%s' (in the guest)", st->id);
        return 0;
}

int oci_vm_ps(const struct oci_state *st, struct pd_error *err)
{
        struct pd_client c;
        if (oci_vm_connect(st, &c, err) < 0)
                return -1;
        uint32_t pids[256];
        static char args[256][64];
        size_t n = 0;
        int r = list_running(&c, pids, args, PD_ARRAY_SIZE(pids), &n, err);
        pd_client_close(&c);
        if (r < 0)
                return r;
        printf("%-8s %s\n", "PID", "CMD");
        for (size_t i = 0; i < n; i++)
                printf("%-8u %s\n", pids[i], args[i]);
        return 0;
}
