"""`paddock serve`: sandbox ports (docs/api.md "Ports") end to end: a service
listening inside a sandbox, reached through the server by path and by Host
header, relayed through the agent's tunnel (nothing published on the host).

    sudo /usr/bin/python3 -m pytest -q tests/server/test_server_ports.py

Standard library only. Needs root (sandboxes), build/src/paddock and the
agent (PADDOCK_BIN / PADDOCK_AGENT as in tests/pdtest/env.py).
"""
import os
import socket
import time

import pytest

from pdtest.server import server_fixture

DOMAIN = "test.local"
SERVER_ARGS = ("--pool", "0", "--domain", DOMAIN)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

srv = server_fixture(*SERVER_ARGS, prefix="pd-srv-ports-")


@pytest.fixture(scope="module")
def web(srv):
    """A sandbox running python3 -m http.server 8000 in /tmp/www."""
    _st, j = srv.api("POST", "/sandboxes", {}, expect=201)
    sid = j["id"]
    st, p = srv.api("POST", "/sandboxes/%s/processes" % sid,
                    {"cmd": "mkdir -p /tmp/www && cd /tmp/www && echo hi > hello-port.txt && "
                            "exec python3 -m http.server 8000 --bind 127.0.0.1"})
    assert st == 201, p
    deadline = time.time() + 30
    while True:
        st, _h, body = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8000/" % sid,
                               headers={"Authorization": "Bearer " + srv.key})
        if st == 200:
            break
        assert st == 502, (st, body)
        assert time.time() < deadline, "http.server not up in 30 s: %s" % body
        time.sleep(0.2)
    return sid


def _token(srv, sid):
    _st, j = srv.api("GET", "/sandboxes/%s/ports" % sid, expect=200)
    # the server's own port is part of the domain: a URL built from it works as is
    assert j["domain"] == "%s:%d" % (DOMAIN, srv.port) and len(j["port_token"]) == 64
    return j["port_token"]


def test_path_form_with_owner_key(srv, web):
    st, h, body = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8000/" % web,
                          headers={"Authorization": "Bearer " + srv.key})
    assert st == 200 and b"hello-port.txt" in body, (st, body[:500])
    assert "text/html" in h.get("Content-type", h.get("Content-Type", ""))
    st, _h, body = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8000/hello-port.txt?x=1" % web,
                           headers={"Authorization": "Bearer " + srv.key})
    assert st == 200 and body == b"hi\n"


def test_path_form_needs_auth(srv, web):
    st, _h, _b = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8000/" % web)
    assert st == 401
    tok = _token(srv, web)
    st, _h, body = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8000/hello-port.txt?paddock_port_token=%s" % (web, tok))
    assert st == 200 and body == b"hi\n"


def test_host_form_token_and_public(srv, web):
    host = "8000-%s.%s:%d" % (web, DOMAIN, srv.port)
    tok = _token(srv, web)
    st, _h, body = srv.raw("GET", "/", headers={"Host": host, "X-Paddock-Port-Token": tok})
    assert st == 200 and b"hello-port.txt" in body, (st, body[:300])
    st, _h, body = srv.raw("GET", "/hello-port.txt", headers={"Host": host, "X-Paddock-Port-Token": "0" * 64})
    assert st == 401, body
    st, _h, body = srv.raw("GET", "/hello-port.txt", headers={"Host": host})
    assert st == 401, body
    # the API key does not open the host form
    st, _h, _b = srv.raw("GET", "/hello-port.txt", headers={"Host": host, "Authorization": "Bearer " + srv.key})
    assert st == 401
    srv.api("POST", "/sandboxes/%s/ports/public" % web, {"public": True}, expect=200)
    try:
        st, _h, body = srv.raw("GET", "/hello-port.txt", headers={"Host": host})
        assert st == 200 and body == b"hi\n"
        # POST with a body reaches the service (http.server answers 501)
        st, _h, _b = srv.raw("POST", "/x", body=b"abc", headers={"Host": "8000-%s.%s" % (web, DOMAIN)})
        assert st == 501
    finally:
        srv.api("POST", "/sandboxes/%s/ports/public" % web, {"public": False}, expect=200)
    st, _h, _b = srv.raw("GET", "/hello-port.txt", headers={"Host": host})
    assert st == 401


def test_nothing_listening_is_502(srv, web):
    tok = _token(srv, web)
    st, _h, body = srv.raw("GET", "/", headers={"Host": "8001-%s.%s" % (web, DOMAIN), "X-Paddock-Port-Token": tok})
    assert st == 502 and b"nothing listens on port 8001" in body, (st, body)
    st, _h, body = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8001/" % web,
                           headers={"Authorization": "Bearer " + srv.key})
    assert st == 502


def test_bad_ports_and_unknown_sandboxes(srv, web):
    auth = {"Authorization": "Bearer " + srv.key}
    for p in ("0", "65536", "99999", "abc"):
        st, _h, _b = srv.raw("GET", "/api/v1/sandboxes/%s/ports/%s/" % (web, p), headers=auth)
        assert st == 400, p
    st, _h, _b = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8000/" % ("z" * 20), headers=auth)
    assert st == 404
    # without a token an unknown id is refused like a live one (no probing)
    st, _h, _b = srv.raw("GET", "/", headers={"Host": "8000-%s.%s" % ("z" * 20, DOMAIN)})
    assert st == 401
    # another domain is not a port host
    st, _h, _b = srv.raw("GET", "/api/v1/health", headers={"Host": "8000-%s.example.com" % web})
    assert st == 200


def test_other_keys_sandbox_is_404(srv, web):
    r = srv.cli("key", "create", "--name", "ports2", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    key2 = r.stdout.strip()
    st, _h, _b = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8000/" % web, headers={"Authorization": "Bearer " + key2})
    assert st == 404
    st, _j = srv.api("POST", "/sandboxes/%s/ports/public" % web, {"public": True}, key=key2)
    assert st == 404
    st, _j = srv.api("GET", "/sandboxes/%s/ports" % web, key=key2)
    assert st == 404


def test_public_toggle_needs_key_and_bool(srv, web):
    st, _h, _b = srv.raw("POST", "/api/v1/sandboxes/%s/ports/public" % web, b'{"public": true}',
                         {"Content-Type": "application/json"})
    assert st == 401
    st, _j = srv.api("POST", "/sandboxes/%s/ports/public" % web, {"public": "yes"})
    assert st == 400


def test_nothing_published_on_the_host(srv, web):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", 8000))
    except OSError:
        return  # nothing listens: as it should be
    try:
        s.sendall(b"GET /hello-port.txt HTTP/1.0\r\n\r\n")
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
    except OSError:
        data = b""
    finally:
        s.close()
    assert not data.endswith(b"\r\n\r\nhi\n"), "the sandbox's server is published on the host"


ECHO = r'''
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Path", self.path)
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/peer":        # which connection this came on
            b = ("%d\n" % self.client_address[1]).encode()
        else:
            b = ("%s %s\n" % (self.path, self.headers.get("Host"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
http.server.ThreadingHTTPServer(("127.0.0.1", 8002), H).serve_forever()
'''


@pytest.fixture(scope="module")
def echo(srv, web):
    """An echo service on port 8002 of the `web` sandbox (POST: the body back)."""
    import shlex
    st, p = srv.api("POST", "/sandboxes/%s/processes" % web, {"cmd": "exec python3 -c %s" % shlex.quote(ECHO)})
    assert st == 201, p
    deadline = time.time() + 30
    while True:
        st, _h, body = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8002/up" % web,
                               headers={"Authorization": "Bearer " + srv.key})
        if st == 200:
            break
        assert st == 502, (st, body)
        assert time.time() < deadline, "echo service not up in 30 s: %s" % body
        time.sleep(0.2)
    return web


def test_request_bodies_small_and_large(srv, echo):
    """The request goes with the tunnel's open when small (head and body in
    one write to the agent) and after it when large: both arrive whole."""
    host = "8002-%s.%s:%d" % (echo, DOMAIN, srv.port)
    tok = _token(srv, echo)
    for n in (0, 1, 1000, 64 << 10, (64 << 10) + 1, 300 << 10):
        body = bytes((i * 7 + n) % 251 for i in range(n))
        st, h, got = srv.raw("POST", "/p?n=%d" % n, body,
                             headers={"Host": host, "X-Paddock-Port-Token": tok,
                                      "Content-Type": "application/octet-stream"})
        assert st == 200 and got == body, (n, st, len(got))
        assert h.get("X-Path") == "/p?n=%d" % n


def test_many_requests_over_one_client_connection(srv, echo):
    """A client that keeps its connection alive gets every answer, each
    through its own tunnel, none mixed with another's."""
    import http.client
    tok = _token(srv, echo)
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        for i in range(40):
            port = 8002 if i % 2 else 8000
            host = "%d-%s.%s:%d" % (port, echo, DOMAIN, srv.port)
            c.request("GET", "/hello-port.txt?i=%d" % i if port == 8000 else "/n%d" % i,
                      headers={"Host": host, "X-Paddock-Port-Token": tok})
            r = c.getresponse()
            body = r.read()
            want = b"hi\n" if port == 8000 else ("/n%d %s\n" % (i, host)).encode()
            assert (r.status, body) == (200, want), (i, r.status, body[:200])
    finally:
        c.close()


RAW = r'''
import socket, threading
held = []
def serve(c):
    req = b""
    while b"\r\n\r\n" not in req:
        b = c.recv(4096)
        if not b:
            return
        req += b
    path = req.split(b" ")[1]
    if path == b"/hold":        # the whole body, then the connection stays open though it says close
        c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nok\n")
        held.append(c)
        return
    if path == b"/short":       # less than announced, then closed
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok\n")
    elif path == b"/more":      # more than announced
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\nEXTRA")
    elif path == b"/twice":     # two lengths: trust neither, read to the close
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nok\nab")
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8003))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


@pytest.fixture(scope="module")
def raw_service(srv, web):
    """A hand-written HTTP service on port 8003 of the `web` sandbox whose
    answers' Content-Length and connection close disagree."""
    import shlex
    st, p = srv.api("POST", "/sandboxes/%s/processes" % web, {"cmd": "exec python3 -c %s" % shlex.quote(RAW)})
    assert st == 201, p
    deadline = time.time() + 30
    while True:
        st, _h, body = srv.raw("GET", "/api/v1/sandboxes/%s/ports/8003/more" % web,
                               headers={"Authorization": "Bearer " + srv.key})
        if st == 200:
            break
        assert st == 502, (st, body)
        assert time.time() < deadline, "raw service not up in 30 s: %s" % body
        time.sleep(0.2)
    return web


def test_answer_ends_at_its_content_length(srv, raw_service):
    """The relayed answer ends with the last byte its Content-Length
    announced, even while the service keeps its connection open (the
    client does not wait for a close that never comes); bytes past it are
    not relayed; a body cut short is not passed off as complete."""
    import http.client
    host = "8003-%s.%s:%d" % (raw_service, DOMAIN, srv.port)
    h = {"Host": host, "X-Paddock-Port-Token": _token(srv, raw_service)}
    st, _h, body = srv.raw("GET", "/hold", headers=h, timeout=20)
    assert (st, body) == (200, b"ok\n")
    st, _h, body = srv.raw("GET", "/more", headers=h)
    assert (st, body) == (200, b"ok\n")
    st, _h, body = srv.raw("GET", "/twice", headers=h)
    assert (st, body) == (200, b"ok\nab")
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        srv.raw("GET", "/short", headers=h)


def test_get_reuses_the_upstream_connection(srv, echo):
    """Back-to-back GETs to a keep-alive service reuse one connection to it
    (its peer port stays the same); a POST does not take a kept one; a
    service that went away is not answered for by a kept connection."""
    import http.client
    import shlex
    host = "8002-%s.%s:%d" % (echo, DOMAIN, srv.port)
    h = {"Host": host, "X-Paddock-Port-Token": _token(srv, echo)}
    peers = []
    for _ in range(10):
        st, _h, body = srv.raw("GET", "/peer", headers=h)
        assert st == 200, body
        peers.append(int(body))
    assert len(set(peers)) < len(peers), peers
    st, _h, body = srv.raw("POST", "/x", b"abc", headers=dict(h, **{"Content-Type": "text/plain"}))
    assert (st, body) == (200, b"abc")
    # the service dies: the kept connection is closed, not used
    srv.raw("GET", "/peer", headers=h)
    r = srv.exec(echo, "pkill -f 'Threading[H]TTPServer.*8002'")
    assert r["exit_code"] == 0, r
    # pkill returns once the signal is sent: until the service is gone a
    # fresh connection may still be accepted and then closed unanswered
    deadline = time.time() + 30
    while True:
        st, _h, body = srv.raw("GET", "/peer", headers=h)
        if st == 502 and b"nothing listens on port 8002" in body:
            break
        assert st in (200, 502) and time.time() < deadline, (st, body)
        time.sleep(0.05)
    # and back: a fresh connection
    st, p = srv.api("POST", "/sandboxes/%s/processes" % echo, {"cmd": "exec python3 -c %s" % shlex.quote(ECHO)})
    assert st == 201, p
    while True:
        st, _h, body = srv.raw("GET", "/peer", headers=h)
        if st == 200:
            break
        assert st == 502 and time.time() < deadline, (st, body)
        time.sleep(0.05)


def test_kept_connection_after_pause_and_resume(srv, echo):
    """A paused sandbox's port is refused even with a connection kept for
    it; after the resume GETs are answered again."""
    host = "8002-%s.%s:%d" % (echo, DOMAIN, srv.port)
    h = {"Host": host, "X-Paddock-Port-Token": _token(srv, echo)}
    st, _h, body = srv.raw("GET", "/peer", headers=h)
    assert st == 200, body
    srv.api("POST", "/sandboxes/%s/pause" % echo, {}, expect=200)
    try:
        st, _h, body = srv.raw("GET", "/peer", headers=h)
        assert st == 502 and b"paused" in body, (st, body)
    finally:
        srv.api("POST", "/sandboxes/%s/resume" % echo, {}, expect=200)
    for _ in range(3):
        st, _h, body = srv.raw("GET", "/peer", headers=h)
        assert st == 200 and int(body) > 0, (st, body)


WATCH = r'''
import os, socket, threading
def serve(c):
    port = c.getpeername()[1]
    f = c.makefile("rb")
    while True:
        line = f.readline()
        if not line:
            break
        if line == b"\r\n":
            b = ("%d\n" % port).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
    # the close, seen by the service: told to whoever reads the fifo
    # (the open waits for a reader)
    with open("/tmp/watch-closed", "w") as f:
        f.write("%d\n" % port)
    c.close()
os.mkfifo("/tmp/watch-closed")
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8005))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


def test_kept_connection_closed_when_paused(srv, web):
    """A connection the port relay keeps for a sandbox is closed when the
    sandbox is paused, not at the next request to the port: after the
    resume the service has seen it closed without any further request."""
    import shlex
    st, p = srv.api("POST", "/sandboxes/%s/processes" % web, {"cmd": "exec python3 -c %s" % shlex.quote(WATCH)})
    assert st == 201, p
    host = "8005-%s.%s:%d" % (web, DOMAIN, srv.port)
    h = {"Host": host, "X-Paddock-Port-Token": _token(srv, web)}
    deadline = time.time() + 30
    while True:
        st, _h, body = srv.raw("GET", "/", headers=h)
        if st == 200:
            break
        assert st == 502 and time.time() < deadline, (st, body)
        time.sleep(0.2)
    # the connection of the answer just given is the one kept
    peer = int(body)
    srv.api("POST", "/sandboxes/%s/pause" % web, {}, expect=200)
    srv.api("POST", "/sandboxes/%s/resume" % web, {}, expect=200)
    # no request to the port since: the close came from the pause; the
    # service tells the fifo as soon as the sandbox runs (bounded wait)
    r = srv.exec(web, "timeout 20 head -n1 /tmp/watch-closed")
    assert r["exit_code"] == 0, ("the kept connection is still open after the pause", r)
    assert int(r["stdout"]) == peer, (r["stdout"], peer)
