/* The agent watcher: one thread polling the pidfd of every live sandbox's
 * agent. An agent that dies while the server runs (killed from outside, a
 * kernel OOM of the host) turns its sandbox "failed" and its leftovers are
 * cleaned up at once, instead of the next request finding a dead socket.
 * The set of pidfds is rebuilt whenever the table changes (an eventfd). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/core/manager.h"

struct watched {
        struct pd_srv_sandbox *s;
        int fd;                 /* our own dup of the agent's pidfd */
};

void *pd_watcher_main(void *arg)
{
        struct pd_server *srv = arg;
        int stop = pd_server_stop_fd(srv), changed = pd_manager_changed_fd(srv);
        for (;;) {
                struct pd_srv_sandbox **v;
                size_t n;
                if (pd_manager_snapshot(srv, NULL, &v, &n) < 0)
                        return NULL;
                struct pollfd *p = calloc(n + 2, sizeof *p);
                struct watched *w = calloc(n + 1, sizeof *w);
                size_t k = 0;
                for (size_t i = 0; p && w && i < n; i++) {
                        /* A dup: the sandbox's own fd may be closed by a
                         * delete while we poll, and its number reused. */
                        pthread_mutex_lock(&v[i]->lock);
                        int fd = v[i]->sb && !v[i]->deleted && v[i]->sb->agent_pidfd >= 0
                                         ? fcntl(v[i]->sb->agent_pidfd, F_DUPFD_CLOEXEC, 3)
                                         : -1;
                        pthread_mutex_unlock(&v[i]->lock);
                        if (fd < 0)
                                continue;
                        w[k] = (struct watched){ v[i], fd };
                        p[k++] = (struct pollfd){ .fd = fd, .events = POLLIN };
                }
                bool stopping = false;
                if (p && w) {
                        p[k] = (struct pollfd){ .fd = stop, .events = POLLIN };
                        p[k + 1] = (struct pollfd){ .fd = changed, .events = POLLIN };
                        int r = poll(p, k + 2, -1);
                        if (r > 0 && p[k].revents)
                                stopping = true;
                        if (r > 0 && p[k + 1].revents) {
                                uint64_t x;
                                (void)!read(changed, &x, sizeof x);
                        }
                        for (size_t i = 0; r > 0 && !stopping && i < k; i++)
                                if (p[i].revents & POLLIN)
                                        pd_manager_agent_died(srv, w[i].s);
                }
                bool no_memory = !p || !w;
                for (size_t i = 0; i < k; i++)
                        close(w[i].fd);
                free(p);
                free(w);
                pd_manager_snapshot_free(srv, v, n);
                if (stopping || no_memory)
                        return NULL;
        }
}
