/* HTTP through an agent tunnel (tunnel.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/core/stream.h"

/* Relay one buffered HTTP request through tunnel tid, already open on
 * st->cl (pd_client_tunnel_open), and stream the answer back. head: the request line and
 * headers, as sent (NULL, 0 and body NULL, 0: what of them is to go went
 * with pd_client_tunnel_open_with already). all_headers: pass the answer's headers on (else only
 * its Content-Type). what names the service in a 502. Takes st over. */
enum MHD_Result pd_tunnel_http_relay(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, const char *head,
                                     size_t head_len, const char *body, size_t body_len, bool all_headers,
                                     const char *what);
/* The same on a kept connection (a tunnel that served a request before):
 * if it ends before a byte of an answer (the service closed it as the
 * request came), *closed_unanswered is set, nothing is answered and st is
 * still the caller's, to try again on a fresh tunnel. */
enum MHD_Result pd_tunnel_http_relay_kept(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid,
                                          const char *head, size_t head_len, const char *body, size_t body_len,
                                          bool all_headers, const char *what, bool *closed_unanswered);
