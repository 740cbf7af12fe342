/* Host side of one agent connection: a non-blocking socket with a bounded
 * receive buffer (frames are length-checked before buffering) and a send
 * queue, for callers that poll. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "proto/msg.h"
#include "proto/proto.h"

struct pd_conn {
        int fd;
        uint8_t *rbuf;
        size_t rlen, rcap, rpos;        /* bytes buffered; start of unconsumed */
        uint8_t *wbuf;
        size_t wlen, wcap, wpos;
        uint32_t next_id;
        bool eof;
};

int pd_conn_init(struct pd_conn *c, int fd);   /* takes ownership of fd; sets O_NONBLOCK */
void pd_conn_close(struct pd_conn *c);
uint32_t pd_conn_new_id(struct pd_conn *c);
/* Queue a frame. The queue grows as needed; callers bound it themselves
 * with pd_conn_pending(). */
int pd_conn_queue(struct pd_conn *c, uint16_t type, uint16_t flags, uint32_t id, uint32_t aux,
                  const void *payload, size_t len);
int pd_conn_queue_msg(struct pd_conn *c, uint16_t type, uint32_t id, const struct pd_msg *m);
/* Move what is readable on fd to process pid's stdin; at end of input (or a
 * read error) queue STDIN_CLOSE and return 1 (stop watching fd), else 0. */
int pd_conn_forward_stdin(struct pd_conn *c, int fd, uint32_t pid);
size_t pd_conn_pending(const struct pd_conn *c);
/* Write what the socket takes now. 0, or -errno (EPIPE when closed). */
int pd_conn_flush(struct pd_conn *c);
/* Block (poll) until everything queued is written. */
int pd_conn_flush_all(struct pd_conn *c, int timeout_ms);
/* Read what is available. 0, or -errno; sets c->eof at end of stream. */
int pd_conn_fill(struct pd_conn *c);
/* 1 and a frame if one is complete, 0 if more bytes are needed, -EMSGSIZE
 * or -EPROTO for a bad header. The payload stays valid until the next call. */
int pd_conn_next(struct pd_conn *c, struct pd_frame_hdr *h, const uint8_t **payload);
/* Block until a frame arrives (or timeout_ms passes: -ETIMEDOUT). */
int pd_conn_wait(struct pd_conn *c, struct pd_frame_hdr *h, const uint8_t **payload, int timeout_ms);
/* HELLO exchange; fills agent version text. */
int pd_conn_hello(struct pd_conn *c, const char *client, char *agent, size_t agent_size, struct pd_error *err);
/* The same in two halves, for a client that pipelines its first request
 * behind the HELLO: queue it; then judge the agent's first frame. */
int pd_conn_queue_hello(struct pd_conn *c, const char *client);
int pd_conn_hello_answer(const struct pd_frame_hdr *h, const uint8_t *p, char *agent, size_t agent_size,
                         struct pd_error *err);
/* Error text of an ERROR frame payload. */
void pd_conn_error_text(const uint8_t *payload, size_t len, char *buf, size_t size);
/* The errno an ERROR frame carries in aux, or dflt when it is none (0) or
 * not an errno at all: a hostile peer's 0x80000000 must not become
 * -INT_MIN on the way up. */
int pd_conn_error_errno(uint32_t aux, int dflt);
