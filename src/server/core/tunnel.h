/* HTTP through an agent tunnel (tunnel.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/core/stream.h"

/* TUNNEL_OPEN port on c and wait for its REPLY (-ECONNREFUSED: nobody
 * listens); *tid is the tunnel's id. */
int pd_tunnel_open(struct pd_server *srv, struct pd_srv_sandbox *s, struct pd_conn *c, unsigned port, uint32_t *tid,
                   struct pd_error *err);
/* Relay one buffered HTTP request through tunnel tid, already open on
 * st->conn, and stream the answer back. head: the request line and
 * headers, as sent. all_headers: pass the answer's headers on (else only
 * its Content-Type). what names the service in a 502. Takes st over. */
enum MHD_Result pd_tunnel_http_relay(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, const char *head,
                                     size_t head_len, const char *body, size_t body_len, bool all_headers,
                                     const char *what);
