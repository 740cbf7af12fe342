"""HTTP, TLS and UDP echo servers for the fake internet (tests only).

    python3 _fakeweb.py --cert C --key K --ready FILE ADDR [ADDR...]

On every ADDR: HTTP on 80 and 8080 (GET /bytes/N sends N bytes), TLS (HTTP inside) on 443, a UDP echo on
443 (stands in for QUIC) and 5353. Each HTTP answer is "hello from ADDR
host=HOST" so a test sees which server it reached and with which Host.
"""
import argparse
import http.server
import socket
import socketserver
import ssl
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"    # keep-alive, as real servers do

    def do_GET(self):
        if self.path.startswith("/bytes/"):      # bulk download (benchmarks)
            n = int(self.path[7:])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                k = min(n, len(chunk))
                self.wfile.write(chunk[:k])
                n -= k
            return
        body = ("hello from %s host=%s\n" % (self.server.server_address[0],
                                             self.headers.get("Host", ""))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # a real server's backlog, not socketserver's 5: bursts of connects
    # (the rate-limit test's 40) are not lost to an overflowing accept
    # queue (which pasta 2023-03 handles badly: docs/network.md)
    request_queue_size = 128


def udp_echo(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(b"echo:" + data, peer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("addrs", nargs="+")
    a = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    for addr in a.addrs:
        for port in (80, 8080):
            srv = Server((addr, port), Handler)
            threading.Thread(target=srv.serve_forever, daemon=True).start()
        tls = Server((addr, 443), Handler)
        tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
        threading.Thread(target=tls.serve_forever, daemon=True).start()
        for port in (443, 5353):
            threading.Thread(target=udp_echo, args=(addr, port), daemon=True).start()
    open(a.ready, "w").close()
    threading.Event().wait()


if __name__ == "__main__":
    main()
