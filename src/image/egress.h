/* Where a server-made pull may connect (docs/templates.md, "Redirects").
 *
 * skopeo (containers/image, Go's net/http) follows a registry's redirects
 * to any host, and has no option to refuse them: a registry the operator
 * allowed could send the server's pull to a metadata, loopback or LAN
 * address. So a pull with an egress guard runs skopeo in a network
 * namespace of its own that has only a loopback interface; the way out is
 * paddock's, in this process, on the host's network:
 *   - an HTTP proxy (HTTP_PROXY/HTTPS_PROXY point skopeo at it) that
 *     takes CONNECT host:port and absolute-URI requests only to the
 *     allowed registries (by name, as the operator wrote them), one
 *     request per plain-HTTP connection; anything else is 403;
 *   - Go never proxies loopback targets (localhost, 127/8, ::1): for each
 *     allowed registry on loopback, a forwarder listens on its address
 *     and port inside the namespace and connects to the host's. Any other
 *     loopback address or port inside the namespace has nobody listening.
 * A redirect to a host that is not allowed fails the pull with the proxy's
 * 403 (or a refused connection), and nothing of it is fetched. */
#pragma once
#include "lib/error.h"

struct pd_egress;

/* Start the guard for registries allow[0..n) ("host[:port]"). */
int pd_egress_start(const char *const *allow, unsigned n, struct pd_egress **out, struct pd_error *err);
/* Enter (1) or leave (0) the guard's namespace on the calling thread:
 * a process spawned between the two runs inside it. */
int pd_egress_enter(struct pd_egress *g, int enter, struct pd_error *err);
/* The proxy's URL ("http://127.0.0.1:PORT"), for HTTP_PROXY. */
const char *pd_egress_proxy_url(const struct pd_egress *g);
/* Stop the listeners (connections under way end with skopeo). */
void pd_egress_stop(struct pd_egress *g);
