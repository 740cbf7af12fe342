/* Sandbox ports: private declarations shared by ports.c (routing, auth,
 * plain HTTP) and ports_ws.c (Upgrade requests: WebSocket and friends). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/api/api.h"
#include "server/core/stream.h"
#include "server/core/tokens.h"

/* The relay of one upgraded connection, kept by the port call until the
 * request is over (see ports_ws.c for who frees it when). */
struct pd_ports_ws;

/* true if the request asks for a protocol switch: an Upgrade header and
 * the "upgrade" token in Connection. */
bool pd_ports_is_upgrade(struct MHD_Connection *conn);
/* An HTTP Upgrade request (ports_ws.c): an Upgrade header (protocol, any
 * case; NULL: any) and "upgrade" among the Connection header's tokens.
 * The port relay's WebSocket passthrough and the console's PTY socket. */
bool pd_http_upgrade_asked(struct MHD_Connection *conn, const char *protocol);
/* Send buf[*pos, len) to an upgraded client socket without blocking,
 * moving *pos on: 0 when all went or the socket is full, -1 when the
 * client is gone. Both WebSocket relays' way out. */
int pd_upgraded_send(int sock, const void *buf, size_t len, size_t *pos);

/* Send head (request line and headers, HTTP/1.1, Upgrade and Connection
 * kept) and body through tunnel tid of st, read the service's answer and
 * queue it: a 101 becomes an upgrade response whose socket is then relayed
 * both ways (*ws set: the caller keeps it and frees it with
 * pd_ports_ws_free once the request is over); any other answer is relayed
 * as plain HTTP. Takes st over in every case. */
enum MHD_Result pd_ports_ws_forward(struct pd_req *r, struct pd_agent_stream *st, uint32_t tid, const char *head,
                                    size_t head_len, const char *body, size_t body_len, unsigned port,
                                    struct pd_ports_ws **ws);
void pd_ports_ws_free(struct pd_ports_ws *w);
