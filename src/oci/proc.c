/* What the container's init and every exec'd process do to themselves
 * before exec: user and groups, capabilities (jail/caps.c), the console. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include "jail/caps.h"
#include "oci/oci.h"
#include "lib/util.h"

/* Capabilities around the uid change: the bounding set first (dropping
 * needs CAP_SETPCAP, which the new user may not have), then the user, then
 * exactly the configured sets (PR_SET_KEEPCAPS kept them across setuid). */
int oci_proc_become(const struct oci_process *p, struct pd_error *err)
{
        int r;
        if (p->has_caps && (r = pd_caps_drop_bounding(p->caps.bounding, err)) < 0)
                return r;
        /* Keep permitted capabilities across the uid change; pd_caps_set
         * then sets exactly the configured sets. */
        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                return pd_error_set(err, errno, "PR_SET_KEEPCAPS");
        if (setgroups(p->n_gids, p->gids) < 0 && !(errno == EPERM && p->n_gids == 0))
                return pd_error_set(err, errno, "setgroups");
        if (syscall(SYS_setresgid, p->gid, p->gid, p->gid) < 0)
                return pd_error_set(err, errno, "setgid %u", (unsigned)p->gid);
        if (syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0)
                return pd_error_set(err, errno, "setuid %u", (unsigned)p->uid);
        if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
                return pd_error_set(err, errno, "PR_SET_KEEPCAPS");
        if (p->has_umask)
                umask(p->umask);
        if (!p->has_caps)
                return 0;
        uint64_t not_raised = 0;
        if ((r = pd_caps_set(&p->caps, &not_raised, err)) < 0)
                return r;
        for (int c = 0; c < 64; c++)
                if (not_raised & (1ull << c))
                        oci_debug("ambient capability %d not raised (not permitted and inheritable)", c);
        return 0;
}

int oci_proc_find_exec(const struct oci_process *p, char *out, size_t size, struct pd_error *err)
{
        const char *a0 = p->args[0];
        if (strchr(a0, '/')) {
                snprintf(out, size, "%s", a0);
                if (access(out, X_OK) < 0)
                        return pd_error_set(err, errno, "exec '%s'", a0);
                return 0;
        }
        const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        for (char **e = p->env; e && *e; e++)
                if (strncmp(*e, "PATH=", 5) == 0)
                        path = *e + 5;
        for (const char *s = path; ; ) {
                const char *colon = strchr(s, ':');
                size_t n = colon ? (size_t)(colon - s) : strlen(s);
                snprintf(out, size, "%.*s/%s", (int)n, n ? s : ".", a0);
                struct stat sb;
                if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode) && access(out, X_OK) == 0)
                        return 0;
                if (!colon)
                        break;
                s = colon + 1;
        }
        return pd_error_setx(err, ENOENT, "exec '%s': executable file not found in $PATH", a0);
}

int oci_console_connect(const char *path, struct pd_error *err)
{
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof a.sun_path)
                return pd_error_setx(err, ENAMETOOLONG, "console socket path too long");
        strcpy(a.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return pd_error_set(err, errno, "socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
                int e = errno;
                close(fd);
                return pd_error_set(err, e, "connect to console socket '%s'", path);
        }
        return fd;
}

int oci_proc_console(int sock, const struct oci_process *p, struct pd_error *err)
{
        int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return pd_error_set(err, errno, "open /dev/ptmx (is /dev/pts mounted?)");
        int unlock = 0;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                return pd_error_set(err, errno, "unlock pty");
        int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY);
        if (slave < 0)
                return pd_error_set(err, errno, "open pty peer");
        unsigned n = 0;
        char name[64] = "/dev/pts/?";
        if (ioctl(master, TIOCGPTN, &n) == 0)
                snprintf(name, sizeof name, "/dev/pts/%u", n);
        if (p->console_h || p->console_w) {
                struct winsize ws = { .ws_row = (unsigned short)p->console_h, .ws_col = (unsigned short)p->console_w };
                ioctl(slave, TIOCSWINSZ, &ws);
        }
        if (fchown(slave, p->uid, p->gid) < 0)
                oci_debug("chown %s: %m", name);
        /* /dev/console is the pty too, as runc does (when /dev is ours). */
        int cfd = open("/dev/console", O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (cfd >= 0) {
                close(cfd);
                mount(name, "/dev/console", NULL, MS_BIND, NULL);
        }
        char cbuf[CMSG_SPACE(sizeof(int))];
        memset(cbuf, 0, sizeof cbuf);
        struct iovec iov = { .iov_base = name, .iov_len = strlen(name) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &master, sizeof(int));
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
                return pd_error_set(err, errno, "send the pty master over the console socket");
        close(master);
        close(sock);
        if (setsid() < 0 && errno != EPERM)
                return pd_error_set(err, errno, "setsid");
        if (ioctl(slave, TIOCSCTTY, 0) < 0)
                return pd_error_set(err, errno, "make the pty the controlling terminal");
        for (int fd = 0; fd < 3; fd++)
                if (dup2(slave, fd) < 0)
                        return pd_error_set(err, errno, "dup2 pty");
        if (slave > 2)
                close(slave);
        return 0;
}
