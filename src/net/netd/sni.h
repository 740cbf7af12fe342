/* The name a client asks for: TLS ClientHello SNI, HTTP/1 Host. Input is
 * the first bytes the sandbox sent; hostile. */
#pragma once
#include <stddef.h>
#include <stdint.h>

enum { SNI_NEED_MORE = 0, SNI_FOUND = 1, SNI_NONE = -1, SNI_BAD = -2 };

/* TLS: SNI_FOUND with the host_name, SNI_NONE when the ClientHello has no
 * server_name, SNI_BAD when malformed, fragmented over records, with two
 * names, or with Encrypted Client Hello (its real name is hidden). */
int netd_tls_sni(const uint8_t *b, size_t n, char *out, size_t size, const char **why);
/* HTTP/1.x: SNI_FOUND with the Host (port and brackets removed), SNI_NONE
 * without one, SNI_BAD for two Hosts, a Host that disagrees with an
 * absolute-form target, CONNECT, or a request line that is not HTTP. */
int netd_http_host(const uint8_t *b, size_t n, char *out, size_t size, const char **why);
