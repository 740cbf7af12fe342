/* The epoll loop and the byte queue every connection uses. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "agent/agent.h"

int ag_ev_add(struct agent *ag, struct ag_handler *h, int fd, uint32_t events, ag_cb fn)
{
        struct epoll_event ev = { .events = events, .data.ptr = h };
        h->fn = fn;
        h->fd = fd;
        h->events = events;
        if (epoll_ctl(ag->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
                return -errno;
        return 0;
}

void ag_ev_mod(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        if (h->fd < 0 || h->events == events)
                return;
        struct epoll_event ev = { .events = events, .data.ptr = h };
        if (epoll_ctl(ag->epfd, EPOLL_CTL_MOD, h->fd, &ev) == 0)
                h->events = events;
}

void ag_ev_close(struct agent *ag, struct ag_handler *h)
{
        if (h->fd < 0)
                return;
        epoll_ctl(ag->epfd, EPOLL_CTL_DEL, h->fd, NULL);
        close(h->fd);
        h->fd = -1;
        h->events = 0;
}

int ag_buf_append(struct ag_buf *b, const void *p, size_t n)
{
        if (b->head && b->head == b->len)
                b->head = b->len = 0;
        if (b->len + n > b->cap) {
                /* compact first; grow only if still short */
                if (b->head) {
                        memmove(b->data, b->data + b->head, b->len - b->head);
                        b->len -= b->head;
                        b->head = 0;
                }
                if (b->len + n > b->cap) {
                        size_t cap = b->cap ? b->cap : 4096;
                        while (cap < b->len + n)
                                cap *= 2;
                        uint8_t *d = realloc(b->data, cap);
                        if (!d)
                                return -ENOMEM;
                        b->data = d;
                        b->cap = cap;
                }
        }
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        return 0;
}

void ag_buf_consume(struct ag_buf *b, size_t n)
{
        b->head += n;
        if (b->head >= b->len) {
                b->head = b->len = 0;
                /* give back big buffers once idle */
                if (b->cap > (1u << 20)) {
                        free(b->data);
                        b->data = NULL;
                        b->cap = 0;
                }
        }
}

void ag_buf_free(struct ag_buf *b)
{
        free(b->data);
        memset(b, 0, sizeof *b);
}

void ag_defer_free(struct agent *ag, void *p)
{
        if (ag->ngrave == ag->capgrave) {
                size_t cap = ag->capgrave ? ag->capgrave * 2 : 16;
                void **g = realloc(ag->grave, cap * sizeof *g);
                if (!g)
                        return;         /* leak rather than risk a use after free */
                ag->grave = g;
                ag->capgrave = cap;
        }
        ag->grave[ag->ngrave++] = p;
}

void ag_grave_flush(struct agent *ag)
{
        for (size_t i = 0; i < ag->ngrave; i++)
                free(ag->grave[i]);
        ag->ngrave = 0;
}
