/* The agent side of sudo: a socket any process in the sandbox may use to
 * run a command as root (uid 0 inside the sandbox's user namespace). That
 * is passwordless sudo, which is what sandbox users expect; root here has
 * no privilege on the host. Requests are frames capped like host frames. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"

#define SUDO_MAX_CLIENTS 64

struct ag_sudo_client {
        struct ag_handler h;
        struct ag_sudo_client *next;
        struct ag_buf in;
        int fds[3];
        int nfds;
        struct ag_proc *p;
        bool dead;
};

static size_t nclients;

static void client_close_fds(struct ag_sudo_client *sc)
{
        for (int i = 0; i < sc->nfds; i++)
                close(sc->fds[i]);
        sc->nfds = 0;
}

static void client_end(struct agent *ag, struct ag_sudo_client *sc)
{
        ag_ev_close(ag, &sc->h);
        client_close_fds(sc);
        if (sc->p && !sc->p->reaped)
                kill(-sc->p->pid, SIGHUP);      /* like a terminal hangup */
        /* memory goes when the process exits (it points at us) or now */
        if (!sc->p)
                sc->dead = true;
}

static void client_error(struct agent *ag, struct ag_sudo_client *sc, const struct pd_error *err)
{
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_str(&m, PD_A_MESSAGE, err->msg);
        struct pd_frame_hdr h = { .len = (uint32_t)m.len, .type = PD_T_ERROR, .aux = (uint32_t)err->code };
        uint8_t hb[PD_FRAME_HDR_LEN];
        pd_frame_hdr_encode(&h, hb);
        send(sc->h.fd, hb, sizeof hb, MSG_NOSIGNAL | MSG_DONTWAIT);
        send(sc->h.fd, m.buf, m.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        pd_msg_free(&m);
        client_end(ag, sc);
}

static void client_run(struct agent *ag, struct ag_sudo_client *sc, const struct pd_frame_hdr *fh,
                       const uint8_t *payload)
{
        struct pd_error err = { 0 };
        if (fh->type != PD_T_SPAWN || sc->nfds != 3) {
                pd_error_setx(&err, EPROTO, "bad sudo request");
                client_error(ag, sc, &err);
                return;
        }
        size_t nargs = 0, nenv = 0;
        struct pd_msg_iter it;
        struct pd_attr a;
        pd_msg_iter_init(&it, payload, fh->len);
        while (pd_msg_next(&it, &a)) {
                nargs += a.tag == PD_A_ARG;
                nenv += a.tag == PD_A_ENV;
        }
        char **argv = calloc(nargs + 1, sizeof *argv), **envp = calloc(nenv + 1, sizeof *envp);
        char cwd[PATH_MAX] = "/root";
        size_t ia = 0, ie = 0;
        bool bad = it.error || !argv || !envp || nargs == 0;
        pd_msg_iter_init(&it, payload, fh->len);
        while (!bad && pd_msg_next(&it, &a)) {
                if (a.tag == PD_A_ARG)
                        bad = !(argv[ia++] = pd_attr_strdup(&a));
                else if (a.tag == PD_A_ENV)
                        bad = !(envp[ie++] = pd_attr_strdup(&a));
                else if (a.tag == PD_A_CWD)
                        bad = !pd_attr_str(&a, cwd, sizeof cwd);
        }
        if (bad || !argv[0][0]) {
                pd_error_setx(&err, EINVAL, "malformed sudo request");
        } else {
                uint32_t root_group = 0;
                struct ag_spawn s = { .argv = argv, .envp = envp, .cwd = cwd,
                                      .has_uid = true, .has_gid = true, .uid = 0, .gid = 0,
                                      .groups = &root_group, .ngroups = 1, .has_groups = true,
                                      .stdio = { sc->fds[0], sc->fds[1], sc->fds[2] } };
                struct ag_proc *p;
                if (ag_spawn(ag, &s, &p, &err) == 0) {
                        p->sudo = sc;
                        sc->p = p;
                }
        }
        for (size_t i = 0; argv && i < ia; i++)
                free(argv[i]);
        for (size_t i = 0; envp && i < ie; i++)
                free(envp[i]);
        free(argv);
        free(envp);
        client_close_fds(sc);
        if (!sc->p) {
                client_error(ag, sc, &err);
                return;
        }
        /* from now on only a hangup matters */
        ag_ev_mod(ag, &sc->h, EPOLLRDHUP);
}

static void on_client(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        struct ag_sudo_client *sc = ag_container_of(h, struct ag_sudo_client, h);
        if (sc->p) {
                if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                        client_end(ag, sc);
                return;
        }
        for (;;) {
                size_t used = ag_buf_used(&sc->in), want;
                struct pd_frame_hdr fh;
                if (used >= PD_FRAME_HDR_LEN) {
                        pd_frame_hdr_decode(sc->in.data + sc->in.head, &fh);
                        if (fh.len > PD_FRAME_MAX) {
                                client_end(ag, sc);
                                return;
                        }
                        if (used == PD_FRAME_HDR_LEN + fh.len) {
                                client_run(ag, sc, &fh, sc->in.data + sc->in.head + PD_FRAME_HDR_LEN);
                                return;
                        }
                        want = PD_FRAME_HDR_LEN + fh.len - used;
                } else {
                        want = PD_FRAME_HDR_LEN - used;
                }
                uint8_t buf[65536];
                if (want > sizeof buf)
                        want = sizeof buf;
                union {
                        char b[CMSG_SPACE(8 * sizeof(int))];
                        struct cmsghdr align;
                } u;
                struct iovec iov = { .iov_base = buf, .iov_len = want };
                struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
                                      .msg_controllen = sizeof u.b };
                ssize_t n = recvmsg(sc->h.fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                for (struct cmsghdr *cm = n >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm;
                     cm = CMSG_NXTHDR(&msg, cm)) {
                        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                                continue;
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int fds[8];
                        memcpy(fds, CMSG_DATA(cm), k * sizeof(int));
                        for (size_t i = 0; i < k; i++) {
                                if (sc->nfds < 3)
                                        sc->fds[sc->nfds++] = fds[i];
                                else
                                        close(fds[i]);
                        }
                }
                if (n <= 0 || ag_buf_append(&sc->in, buf, (size_t)n) < 0) {
                        client_end(ag, sc);
                        return;
                }
        }
}

static void on_sudo_listen(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        for (;;) {
                int fd = accept4(h->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct ag_sudo_client *sc = nclients < SUDO_MAX_CLIENTS ? calloc(1, sizeof *sc) : NULL;
                if (!sc || ag_ev_add(ag, &sc->h, fd, EPOLLIN, on_client) < 0) {
                        free(sc);
                        close(fd);
                        continue;
                }
                nclients++;
                sc->next = ag->sudo_clients;
                ag->sudo_clients = sc;
        }
}

int ag_sudod_start(struct agent *ag, const char *path, struct pd_error *err)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof sa.sun_path)
                return pd_error_setx(err, ENAMETOOLONG, "--sudo-socket path too long");
        strcpy(sa.sun_path, path);
        char dir[sizeof sa.sun_path];
        strcpy(dir, path);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                if (pd_mkdir_p(dir, 0755, err) < 0)
                        return -1;
        }
        unlink(path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(err, errno, "sudo socket");
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(path, 0666) < 0 ||
            listen(fd, 64) < 0) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "sudo socket '%s'", path);
        }
        if (ag_ev_add(ag, &ag->sudo_h, fd, EPOLLIN, on_sudo_listen) < 0) {
                close(fd);
                return pd_error_set(err, errno, "epoll");
        }
        return 0;
}

void ag_sudod_proc_exited(struct agent *ag, struct ag_proc *p)
{
        struct ag_sudo_client *sc = p->sudo;
        if (!sc)
                return;
        if (sc->h.fd >= 0) {
                struct pd_msg m;
                pd_msg_init(&m);
                if (WIFEXITED(p->status))
                        pd_msg_put_u32(&m, PD_A_EXIT_CODE, (uint32_t)WEXITSTATUS(p->status));
                if (WIFSIGNALED(p->status))
                        pd_msg_put_u32(&m, PD_A_SIGNO, (uint32_t)WTERMSIG(p->status));
                struct pd_frame_hdr h = { .len = (uint32_t)m.len, .type = PD_T_EXIT,
                                          .id = (uint32_t)p->pid };
                uint8_t hb[PD_FRAME_HDR_LEN];
                pd_frame_hdr_encode(&h, hb);
                send(sc->h.fd, hb, sizeof hb, MSG_NOSIGNAL | MSG_DONTWAIT);
                send(sc->h.fd, m.buf, m.len, MSG_NOSIGNAL | MSG_DONTWAIT);
                pd_msg_free(&m);
        }
        sc->p = NULL;
        client_end(ag, sc);
}

void ag_sudod_reap(struct agent *ag)
{
        for (struct ag_sudo_client **pp = &ag->sudo_clients; *pp;) {
                struct ag_sudo_client *sc = *pp;
                if (!sc->dead) {
                        pp = &sc->next;
                        continue;
                }
                *pp = sc->next;
                nclients--;
                ag_buf_free(&sc->in);
                free(sc);
        }
}
