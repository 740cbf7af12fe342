#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/nlsock.h"

int pd_nlsock_open(int netns_fd, int bus, const char *what, struct mnl_socket **out, struct pd_error *err)
{
        int self = -1, r = 0;
        /* setns() affects only the calling thread, which is why a threaded
         * server may do this. */
        if (netns_fd >= 0) {
                self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
                if (self < 0)
                        return pd_error_set(err, errno, "open own network namespace");
                if (setns(netns_fd, CLONE_NEWNET) < 0) {
                        r = pd_error_set(err, errno, "enter network namespace");
                        close(self);
                        return r;
                }
        }
        struct mnl_socket *nl = mnl_socket_open2(bus, SOCK_CLOEXEC);
        if (!nl)
                r = pd_error_set(err, errno, "%s socket", what);
        else if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
                r = pd_error_set(err, errno, "bind %s socket", what);
        if (self >= 0) {
                /* Going back cannot fail for a namespace we came from; if it
                 * did, this thread would act in the wrong netns: abort. */
                if (setns(self, CLONE_NEWNET) < 0)
                        abort();
                close(self);
        }
        if (r < 0) {
                if (nl)
                        mnl_socket_close(nl);
                return r;
        }
        *out = nl;
        return 0;
}

/* a sysctl of the netns nsfd: this thread enters it, writes, comes back
 * (/proc/sys/net follows the opening thread's netns) */
int pd_netns_sysctl(int nsfd, const char *path, const char *value, struct pd_error *err)
{
        int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self < 0)
                return pd_error_set(err, errno, "open own network namespace");
        int rc = 0;
        if (setns(nsfd, CLONE_NEWNET) < 0) {
                rc = pd_error_set(err, errno, "enter a network namespace");
                close(self);
                return rc;
        }
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, value, strlen(value)) != (ssize_t)strlen(value))
                rc = pd_error_set(err, errno, "set '%s'", path);
        if (fd >= 0)
                close(fd);
        if (setns(self, CLONE_NEWNET) < 0)
                abort();        /* this thread would act in the wrong netns */
        close(self);
        return rc;
}
