/* `sudo` inside the sandbox: the agent binary called as sudo is a client of
 * the agent's sudo socket. It sends its argv, an environment, its cwd and
 * its fds 0-2 (SCM_RIGHTS); the agent runs the command as root and sends
 * back the exit status, which becomes ours. See docs/protocol.md. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"

#define SUDO_DEFAULT_SOCKET "/run/paddock/sudo.sock"

extern char **environ;

static _Noreturn void usage(void)
{
        fprintf(stderr, "usage: sudo [-u root] [-E] [-n] [-H] [-S] [--] COMMAND [ARG...]\n");
        exit(1);
}

static int put_env(struct pd_msg *m, bool keep)
{
        if (keep) {
                for (char **e = environ; e && *e; e++)
                        pd_msg_put_str(m, PD_A_ENV, *e);
                return 0;
        }
        const char *path = getenv("PATH");
        const char *term = getenv("TERM");
        char buf[8192];
        snprintf(buf, sizeof buf, "PATH=%s",
                 path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        pd_msg_put_str(m, PD_A_ENV, buf);
        if (term) {
                snprintf(buf, sizeof buf, "TERM=%s", term);
                pd_msg_put_str(m, PD_A_ENV, buf);
        }
        pd_msg_put_str(m, PD_A_ENV, "HOME=/root");
        pd_msg_put_str(m, PD_A_ENV, "USER=root");
        pd_msg_put_str(m, PD_A_ENV, "LOGNAME=root");
        return 0;
}

static int send_request(int fd, const struct pd_msg *m)
{
        struct pd_frame_hdr h = { .len = (uint32_t)m->len, .type = PD_T_SPAWN };
        uint8_t hb[PD_FRAME_HDR_LEN];
        pd_frame_hdr_encode(&h, hb);
        int fds[3] = { 0, 1, 2 };
        union {
                char buf[CMSG_SPACE(sizeof fds)];
                struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof u);
        struct iovec iov = { .iov_base = hb, .iov_len = sizeof hb };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                              .msg_controllen = sizeof u.buf };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof fds);
        memcpy(CMSG_DATA(cm), fds, sizeof fds);
        ssize_t n;
        do
                n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (n < (ssize_t)sizeof hb && pd_write_all(fd, hb + n, sizeof hb - (size_t)n) < 0)
                return -EIO;
        return pd_write_all(fd, m->buf, m->len);
}

int ag_sudo_main(int argc, char **argv)
{
        bool keep_env = false;
        int i = 1;
        for (; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--") == 0) {
                        i++;
                        break;
                }
                if (a[0] != '-' || !a[1])
                        break;
                if (strcmp(a, "--preserve-env") == 0) {
                        keep_env = true;
                        continue;
                }
                if (strncmp(a, "--user=", 7) == 0 || strcmp(a, "--user") == 0) {
                        const char *u = a[6] == '=' ? a + 7 : (++i < argc ? argv[i] : NULL);
                        if (!u)
                                usage();
                        if (strcmp(u, "root") && strcmp(u, "#0") && strcmp(u, "0")) {
                                fprintf(stderr, "sudo: only root is available in this sandbox, not '%s'\n", u);
                                return 1;
                        }
                        continue;
                }
                if (strcmp(a, "--non-interactive") == 0 || strcmp(a, "--set-home") == 0 ||
                    strcmp(a, "--stdin") == 0)
                        continue;
                for (const char *f = a + 1; *f; f++) {
                        if (*f == 'E') {
                                keep_env = true;
                        } else if (*f == 'n' || *f == 'H' || *f == 'S') {
                        } else if (*f == 'u') {
                                const char *u = f[1] ? f + 1 : (++i < argc ? argv[i] : NULL);
                                if (!u)
                                        usage();
                                if (strcmp(u, "root") && strcmp(u, "#0") && strcmp(u, "0")) {
                                        fprintf(stderr, "sudo: only root is available in this sandbox, not '%s'\n", u);
                                        return 1;
                                }
                                break;
                        } else {
                                fprintf(stderr, "sudo: unknown option -%c\n", *f);
                                usage();
                        }
                }
        }
        if (i >= argc)
                usage();

        struct pd_msg m;
        pd_msg_init(&m);
        for (int j = i; j < argc; j++)
                pd_msg_put_str(&m, PD_A_ARG, argv[j]);
        put_env(&m, keep_env);
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd))
                pd_msg_put_str(&m, PD_A_CWD, cwd);
        if (m.failed) {
                fprintf(stderr, "sudo: command line and environment too large\n");
                return 1;
        }
        const char *path = getenv("PADDOCK_SUDO_SOCKET");
        if (!path || !*path)
                path = SUDO_DEFAULT_SOCKET;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof sa.sun_path) {
                fprintf(stderr, "sudo: socket path too long\n");
                return 1;
        }
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                fprintf(stderr, "sudo: cannot reach the paddock agent at %s: %s\n", path, strerror(errno));
                return 1;
        }
        if (send_request(fd, &m) < 0) {
                fprintf(stderr, "sudo: cannot send the request: %s\n", strerror(errno));
                return 1;
        }
        pd_msg_free(&m);

        uint8_t hb[PD_FRAME_HDR_LEN], payload[PD_FRAME_PREHELLO_MAX];
        struct pd_frame_hdr h;
        if (pd_read_all(fd, hb, sizeof hb) != (ssize_t)sizeof hb) {
                fprintf(stderr, "sudo: lost the connection to the paddock agent\n");
                return 1;
        }
        pd_frame_hdr_decode(hb, &h);
        if (h.len > sizeof payload || pd_read_all(fd, payload, h.len) != (ssize_t)h.len) {
                fprintf(stderr, "sudo: bad answer from the paddock agent\n");
                return 1;
        }
        struct pd_attr a;
        uint32_t v;
        if (h.type == PD_T_ERROR) {
                char msg[PD_FRAME_PREHELLO_MAX] = "error";
                if (pd_msg_find(payload, h.len, PD_A_MESSAGE, &a))
                        pd_attr_str(&a, msg, sizeof msg);
                fprintf(stderr, "sudo: %s\n", msg);
                return h.aux == ENOENT ? 127 : (h.aux == EACCES || h.aux == ENOEXEC) ? 126 : 1;
        }
        if (h.type != PD_T_EXIT)
                return 1;
        if (pd_msg_find(payload, h.len, PD_A_SIGNO, &a) && pd_attr_u32(&a, &v))
                return 128 + (int)v;
        if (pd_msg_find(payload, h.len, PD_A_EXIT_CODE, &a) && pd_attr_u32(&a, &v))
                return (int)v;
        return 1;
}
