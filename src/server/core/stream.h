/* A streaming HTTP response fed by one agent connection (stream.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/client.h"
#include "server/core/server.h"

struct pd_agent_stream;
typedef void (*pd_agent_stream_fn)(struct pd_agent_stream *st, const struct pd_frame_hdr *h, const uint8_t *p);
struct pd_agent_stream {
        struct pd_server *srv;
        struct pd_srv_sandbox *s;       /* referenced; dropped at free */
        struct pd_client cl;            /* watched (pd_route_watch) by the response's reader */
        struct MHD_Connection *mc;
        char *buf;                      /* bytes ready for the client */
        size_t len, pos, cap;
        bool done;                      /* nothing more after buf */
        bool failed;                    /* with done: the body is incomplete, abort the connection */
        uint64_t size;                  /* Content-Length; MHD_SIZE_UNKNOWN (default): chunked */
        uint64_t sent;                  /* body bytes taken in (downloads) */
        /* tunnel.c: the service answered with keep-alive (HTTP/1.1 without
         * "Connection: close", or HTTP/1.0 with "Connection: keep-alive"):
         * with the whole body taken in, its connection may serve again */
        bool keep;
        int idle_ms;                    /* on_idle after this long without a frame */
        pd_agent_stream_fn on_frame;
        void (*on_idle)(struct pd_agent_stream *st);
        /* the agent connection is lost, the sandbox deleted, the server
         * stopping: what to end the body with (NULL: abort it) */
        void (*on_fail)(struct pd_agent_stream *st, int neg_errno);
        void (*on_free)(struct pd_agent_stream *st);
        uint32_t id;
        int kind;
        bool pty;
        void *priv;
        char *resp_headers;             /* "Name: value\n" lines added to the response */
        size_t resp_headers_len;
};
/* Allocate with the client closed; takes over the reference to s. */
struct pd_agent_stream *pd_agent_stream_new(struct pd_req *r, struct pd_srv_sandbox *s);
void pd_agent_stream_free(struct pd_agent_stream *st);
/* Add one "Name: value" header line (n bytes) to the response to come. */
int pd_agent_stream_put_header(struct pd_agent_stream *st, const char *line, size_t n);
/* Bytes for the client. */
int pd_agent_stream_put(struct pd_agent_stream *st, const void *p, size_t n);
/* Queue the response (takes st over); content_type NULL: none added. */
enum MHD_Result pd_agent_stream_reply(struct pd_req *r, struct pd_agent_stream *st, unsigned status, const char *content_type);
