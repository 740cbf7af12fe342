"""`paddock serve`: WebSocket through the sandbox port proxy (docs/api.md
"Ports"): a WebSocket echo service inside a sandbox (ws_echo_server.py),
reached by Host form and by path form, with the port token rules of plain
HTTP; frames relayed both ways, backpressure, and the end of the relay when
either side closes or the sandbox is deleted or paused.

    sudo /usr/bin/python3 -m pytest -q tests/server/test_server_ports_ws.py

Standard library only.
"""
import base64
import hashlib
import json
import os
import socket
import struct
import threading
import time

import pytest

from pdtest.server import Server, server_fixture
from test_server_ports import DOMAIN, SERVER_ARGS

HERE = os.path.dirname(os.path.abspath(__file__))
WS_PORT = 9000
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


class WSClosed(Exception):
    pass


def _recv_exact(sock, n):
    parts = []
    while n:
        b = sock.recv(min(n, 1 << 20))
        if not b:
            raise WSClosed("connection closed")
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def _mask(data, mask):
    n = len(data)
    out = bytearray(data)
    full = n - n % 8
    if full:
        m8 = int.from_bytes(mask * 2, "little")
        words = memoryview(out)[:full].cast("Q")
        for i in range(len(words)):
            words[i] ^= m8
    for i in range(full, n):
        out[i] ^= mask[i % 4]
    return bytes(out)


class WS:
    """A minimal RFC 6455 client over a raw socket."""

    def __init__(self, srv, sid, path="/echo", token=None, host_form=True, headers=None, key=None,
                 version="13", timeout=60, port=WS_PORT):
        self.sock = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
        self.key = key if key is not None else base64.b64encode(os.urandom(16)).decode()
        if host_form:
            target, host = path, "%d-%s.%s:%d" % (port, sid, DOMAIN, srv.port)
        else:
            target, host = "/api/v1/sandboxes/%s/ports/%d%s" % (sid, port, path), "127.0.0.1:%d" % srv.port
        h = [("Host", host), ("Upgrade", "websocket"), ("Connection", "keep-alive, Upgrade")]
        if self.key:
            h.append(("Sec-WebSocket-Key", self.key))
        if version:
            h.append(("Sec-WebSocket-Version", version))
        if token:
            h.append(("X-Paddock-Port-Token", token))
        h += list((headers or {}).items())
        req = "GET %s HTTP/1.1\r\n" % target + "".join("%s: %s\r\n" % kv for kv in h) + "\r\n"
        self.sock.sendall(req.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = self.sock.recv(65536)
            if not b:
                raise WSClosed("closed during the handshake: %r" % buf)
            buf += b
        head, _, self.rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()

    def body(self):
        """The body of a refused handshake (Content-Length, or to EOF)."""
        n = int(self.headers.get("content-length", "-1"))
        data = self.rest
        while n < 0 or len(data) < n:
            b = self.sock.recv(65536)
            if not b:
                break
            data += b
        return data if n < 0 else data[:n]

    def _read(self, n):
        if self.rest:
            take, self.rest = self.rest[:n], self.rest[n:]
            return take + (_recv_exact(self.sock, n - len(take)) if n > len(take) else b"")
        return _recv_exact(self.sock, n)

    def send(self, payload, opcode=None, fin=True):
        if opcode is None:
            opcode = 1 if isinstance(payload, str) else 2
        if isinstance(payload, str):
            payload = payload.encode()
        n = len(payload)
        b0 = (0x80 if fin else 0) | opcode
        if n < 126:
            head = struct.pack("!BB", b0, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", b0, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", b0, 0x80 | 127, n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + _mask(payload, mask))

    def recv_frame(self):
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        assert not b1 & 0x80, "server frames are never masked"
        return bool(b0 & 0x80), b0 & 0x0F, self._read(n)

    def recv(self):
        """(opcode, payload) of the next message; fragments joined."""
        fin, op, data = self.recv_frame()
        parts = [data]
        while not fin:
            fin, _op, data = self.recv_frame()
            parts.append(data)
        return op, b"".join(parts)

    def wait_eof(self, timeout=30):
        """Read (and drop) until the server closes; True if it did in time."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(1 << 20):
                pass
            return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


srv = server_fixture(*SERVER_ARGS, prefix="pd-srv-ports-")


def _start_echo(srv):
    """A new sandbox running ws_echo_server.py on WS_PORT; its id and token."""
    _st, j = srv.api("POST", "/sandboxes", {}, expect=201)
    sid = j["id"]
    with open(os.path.join(HERE, "ws_echo_server.py"), "rb") as f:
        src = base64.b64encode(f.read()).decode()
    st, p = srv.api("POST", "/sandboxes/%s/processes" % sid,
                    {"cmd": "echo %s | base64 -d > /tmp/ws_echo.py && exec python3 /tmp/ws_echo.py %d"
                            % (src, WS_PORT)})
    assert st == 201, p
    _st, t = srv.api("GET", "/sandboxes/%s/ports" % sid, expect=200)
    token = t["port_token"]
    deadline = time.time() + 30
    while True:
        ws = WS(srv, sid, token=token)
        if ws.status == 101:
            ws.close()
            break
        assert ws.status == 502, (ws.status, ws.body())
        ws.close()
        assert time.time() < deadline, "echo service not up in 30 s"
        time.sleep(0.2)
    return sid, token


@pytest.fixture(scope="module")
def echo(srv):
    sid, token = _start_echo(srv)
    yield sid, token
    srv.api("DELETE", "/sandboxes/%s" % sid)


def _accept(key):
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def _hello(ws):
    op, data = ws.recv()
    assert op == 1
    return json.loads(data)


def _rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_host_form_handshake_headers_and_frames(srv, echo):
    sid, token = echo
    ws = WS(srv, sid, path="/echo?a=1&b=two", token=token,
            headers={"Sec-WebSocket-Protocol": "chat, superchat", "X-Custom": "kept",
                     "Sec-WebSocket-Extensions": "x-none"})
    try:
        assert ws.status == 101, ws.body()
        assert ws.headers["upgrade"].lower() == "websocket"
        assert "upgrade" in ws.headers["connection"].lower()
        assert ws.headers["sec-websocket-accept"] == _accept(ws.key)
        assert ws.headers["sec-websocket-protocol"] == "chat"
        assert ws.headers["x-echo-path"] == "/echo?a=1&b=two"
        hello = _hello(ws)
        assert hello["version"] == "HTTP/1.1" and hello["path"] == "/echo?a=1&b=two"
        seen = {k.lower(): v for k, v in hello["headers"]}
        assert seen["upgrade"] == "websocket"
        assert seen["connection"] == "keep-alive, Upgrade"
        assert seen["sec-websocket-key"] == ws.key
        assert seen["sec-websocket-version"] == "13"
        assert seen["sec-websocket-protocol"] == "chat, superchat"
        assert seen["sec-websocket-extensions"] == "x-none"
        assert seen["x-custom"] == "kept"
        assert seen["host"].startswith("%d-%s." % (WS_PORT, sid))
        assert "x-paddock-port-token" not in seen
        ws.send("hello ünïcode")
        assert ws.recv() == (1, "hello ünïcode".encode())
        blob = bytes(range(256)) * 3
        ws.send(blob)
        assert ws.recv() == (2, blob)
        ws.send(b"")
        assert ws.recv() == (2, b"")
        # a fragmented message is joined by the service and echoed whole
        ws.send("frag-", fin=False)
        ws.send("mented", opcode=0)
        assert ws.recv() == (1, b"frag-mented")
        ws.send(b"ping!", opcode=9)
        assert ws.recv() == (10, b"ping!")
    finally:
        ws.close()


def test_path_form_key_or_token(srv, echo):
    sid, token = echo
    ws = WS(srv, sid, path="/p?x=1", host_form=False, headers={"Authorization": "Bearer " + srv.key})
    try:
        assert ws.status == 101, ws.body()
        hello = _hello(ws)
        assert hello["path"] == "/p?x=1"
        assert "authorization" not in {k.lower() for k, _v in hello["headers"]}
        ws.send("via path form")
        assert ws.recv() == (1, b"via path form")
    finally:
        ws.close()
    # a browser cannot set headers on a WebSocket: the token in the query
    ws = WS(srv, sid, path="/q?paddock_port_token=%s&y=2" % token, host_form=False)
    try:
        assert ws.status == 101, ws.body()
        assert _hello(ws)["path"] == "/q?y=2"
    finally:
        ws.close()


def test_auth_rules(srv, echo):
    sid, token = echo
    for kw in ({}, {"token": "0" * 64}, {"headers": {"Authorization": "Bearer " + srv.key}}):
        ws = WS(srv, sid, **kw)
        try:
            assert ws.status == 401, (kw, ws.status)
            assert b"port token" in ws.body()
        finally:
            ws.close()
    ws = WS(srv, sid, host_form=False)
    assert ws.status == 401
    ws.close()
    ws = WS(srv, sid, host_form=False, headers={"Authorization": "Bearer wrong"})
    assert ws.status == 401
    ws.close()
    srv.api("POST", "/sandboxes/%s/ports/public" % sid, {"public": True}, expect=200)
    try:
        ws = WS(srv, sid)
        try:
            assert ws.status == 101
            _hello(ws)
            ws.send("public")
            assert ws.recv() == (1, b"public")
        finally:
            ws.close()
    finally:
        srv.api("POST", "/sandboxes/%s/ports/public" % sid, {"public": False}, expect=200)
    ws = WS(srv, sid)
    assert ws.status == 401
    ws.close()


def test_unknown_sandbox_and_closed_port(srv, echo):
    sid, token = echo
    # a token made for another id is no token: refused like a live sandbox
    ws = WS(srv, "nosuchsandbox", token=token)
    assert ws.status == 401
    ws.close()
    # nothing listens on 9001
    for host_form in (True, False):
        ws = WS(srv, sid, token=token, port=9001, host_form=host_form)
        try:
            assert ws.status == 502
            assert b"nothing listens on port 9001" in ws.body()
        finally:
            ws.close()
    ws = WS(srv, sid, token=token, port=0)
    assert ws.status == 400
    ws.close()


def test_refused_upgrades_relayed_as_answered(srv, echo):
    sid, token = echo
    ws = WS(srv, sid, token=token, key="")
    try:
        assert ws.status == 400
        assert ws.body() == b"missing Sec-WebSocket-Key"
        assert ws.wait_eof(30), "a refused upgrade ends with its connection"
    finally:
        ws.close()
    ws = WS(srv, sid, token=token, version="8")
    try:
        assert ws.status == 426
        assert ws.headers["sec-websocket-version"] == "13"
        assert ws.body() == b"unsupported version"
    finally:
        ws.close()
    # the service answers in chunks: relayed as one body
    ws = WS(srv, sid, path="/refuse-chunked", token=token)
    try:
        assert ws.status == 403
        assert ws.body() == b"refused in chunks"
    finally:
        ws.close()
    # Upgrade to something the service does not speak
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    try:
        s.sendall(("GET / HTTP/1.1\r\nHost: %d-%s.%s\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"
                   "X-Paddock-Port-Token: %s\r\n\r\n" % (WS_PORT, sid, DOMAIN, token)).encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        assert data.startswith(b"HTTP/1.1 400") and data.endswith(b"not a websocket request"), data[:300]
    finally:
        s.close()


def test_broken_service_answers_are_502(srv, echo):
    sid, token = echo
    for path in ("/garbage", "/huge-head"):
        ws = WS(srv, sid, path=path, token=token)
        try:
            assert ws.status == 502, (path, ws.status)
            assert b"bad_gateway" in ws.body()
        finally:
            ws.close()


def test_client_bytes_before_the_101(srv, echo):
    """Frames the client sends in the same write as its handshake reach the
    service once it has switched protocols."""
    sid, token = echo
    key = base64.b64encode(os.urandom(16)).decode()
    mask = os.urandom(4)
    payload = b"sent with the handshake"
    frame = struct.pack("!BB", 0x81, 0x80 | len(payload)) + mask + _mask(payload, mask)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    try:
        s.sendall(("GET /early HTTP/1.1\r\nHost: %d-%s.%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nX-Paddock-Port-Token: %s\r\n\r\n"
                   % (WS_PORT, sid, DOMAIN, key, token)).encode() + frame)
        ws = WS.__new__(WS)
        ws.sock, ws.rest = s, b""
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = s.recv(65536)
            assert b, buf
            buf += b
        head, _, ws.rest = buf.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        hello = _hello(ws)
        assert hello["early"] == ""     # not glued to the request head
        assert ws.recv() == (1, payload)
    finally:
        s.close()


def test_server_stop_closes_websockets():
    s = Server(None, *SERVER_ARGS, prefix="pd-srv-ports-").start()
    try:
        sid, token = _start_echo(s)
        ws = WS(s, sid, token=token)
        _hello(ws)
        ws.send("still there")
        assert ws.recv() == (1, b"still there")
        t0 = time.time()
        stopper = threading.Thread(target=s.stop)
        stopper.start()
        try:
            assert ws.wait_eof(30), "websocket still open while the server stops"
        finally:
            stopper.join(90)
            ws.close()
        assert s.proc.returncode == 0, "server did not stop by itself in %.1f s" % (time.time() - t0)
    finally:
        s.finish()


def test_large_messages_both_ways(srv, echo):
    sid, token = echo
    ws = WS(srv, sid, token=token)
    try:
        assert ws.status == 101
        _hello(ws)
        big = os.urandom(6 << 20)
        ws.send(big)
        op, back = ws.recv()
        assert op == 2 and len(back) == len(big) and back == big
        ws.send("flood:%d" % (12 << 20))
        got = 0
        while True:
            op, data = ws.recv()
            if op == 1:
                assert data == b"flood-done"
                break
            assert data == b"\x5a" * len(data)
            got += len(data)
        assert got == 12 << 20
    finally:
        ws.close()


def test_many_concurrent_websockets(srv, echo):
    sid, token = echo
    n, errors = 32, []

    def one(i):
        try:
            ws = WS(srv, sid, token=token, path="/c%d" % i)
            try:
                assert ws.status == 101, ws.status
                assert _hello(ws)["path"] == "/c%d" % i
                for j in range(20):
                    msg = ("%d:%d:" % (i, j)).encode() + os.urandom(j * 100)
                    ws.send(msg)
                    assert ws.recv() == (2, msg)
            finally:
                ws.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("%d: %r" % (i, e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]


def _active(srv, sid, token):
    ws = WS(srv, sid, token=token)
    try:
        _hello(ws)
        ws.send("stats")
        return json.loads(ws.recv()[1])["active"] - 1
    finally:
        ws.close()


def _wait_active(srv, sid, token, want, timeout=30):
    deadline = time.time() + timeout
    while True:
        n = _active(srv, sid, token)
        if n == want:
            return
        assert time.time() < deadline, "service still has %d connections, want %d" % (n, want)
        time.sleep(0.1)


def test_service_closes_and_client_closes(srv, echo):
    sid, token = echo
    _wait_active(srv, sid, token, 0)
    ws = WS(srv, sid, token=token)
    try:
        _hello(ws)
        ws.send("close-me")
        op, data = ws.recv()
        assert op == 8 and data == struct.pack("!H", 1000) + b"bye"
        assert ws.wait_eof(30), "the proxy closes once the service did"
    finally:
        ws.close()
    # the client's close handshake, then its socket closed: the service sees it
    ws = WS(srv, sid, token=token)
    _hello(ws)
    ws.send(struct.pack("!H", 1000), opcode=8)
    op, data = ws.recv()
    assert op == 8 and data == struct.pack("!H", 1000)
    assert ws.wait_eof(30)
    ws.close()
    # a client that just drops the TCP connection
    ws = WS(srv, sid, token=token)
    _hello(ws)
    assert _active(srv, sid, token) == 1
    ws.close()
    _wait_active(srv, sid, token, 0)


def test_backpressure_slow_client(srv, echo):
    """The service floods, the client reads nothing: the flood stalls (the
    server does not buffer it), then everything arrives once it reads."""
    sid, token = echo
    total = 96 << 20
    rss0 = _rss_kib(srv.proc.pid)
    ws = WS(srv, sid, token=token)
    try:
        _hello(ws)
        with_stats = WS(srv, sid, token=token)
        _hello(with_stats)

        def sent():
            with_stats.send("stats")
            return json.loads(with_stats.recv()[1])["flood_sent"]

        base = sent()
        ws.send("flood:%d" % total)
        # poll until the flood stops advancing (steady for 1 s)
        deadline = time.time() + 60
        last, since = -1, time.time()
        while time.time() < deadline:
            s = sent()
            if s != last:
                last, since = s, time.time()
            elif time.time() - since > 1.0 and s > 0:
                break
            time.sleep(0.1)
        with_stats.close()
        stalled = last - base
        assert stalled < total // 2, "flood not held back: %d MiB sent" % (stalled >> 20)
        grown = _rss_kib(srv.proc.pid) - rss0
        assert grown < 48 << 10, "server RSS grew by %d KiB" % grown
        got = 0
        while True:
            op, data = ws.recv()
            if op == 1:
                assert data == b"flood-done"
                break
            got += len(data)
        assert got == total
    finally:
        ws.close()


def test_backpressure_slow_service(srv, echo):
    """The service stops reading: the client's sends block instead of the
    server buffering them."""
    sid, token = echo
    rss0 = _rss_kib(srv.proc.pid)
    ws = WS(srv, sid, token=token)
    try:
        _hello(ws)
        ws.send("stall")
        ws.sock.settimeout(3)
        chunk = os.urandom(1 << 20)
        sent = 0
        frame_head = struct.pack("!BBQ", 0x82, 0x80 | 127, 64 << 20) + b"\0\0\0\0"     # mask 0: bytes as is
        ws.sock.sendall(frame_head)
        try:
            while sent < 64 << 20:
                sent += ws.sock.send(chunk)
        except socket.timeout:
            pass
        assert sent < 48 << 20, "client pushed %d MiB into a stalled service" % (sent >> 20)
        grown = _rss_kib(srv.proc.pid) - rss0
        assert grown < 48 << 10, "server RSS grew by %d KiB" % grown
    finally:
        ws.close()


def test_sandbox_deleted_while_connected(srv):
    sid, token = _start_echo(srv)
    ws = WS(srv, sid, token=token)
    try:
        _hello(ws)
        ws.send("before")
        assert ws.recv() == (1, b"before")
        st, _b = srv.api("DELETE", "/sandboxes/%s" % sid)
        assert st in (200, 204)
        assert ws.wait_eof(30), "connection still open after the sandbox was deleted"
    finally:
        ws.close()
        srv.api("DELETE", "/sandboxes/%s" % sid)
    ws = WS(srv, sid, token=token)
    assert ws.status == 404
    ws.close()


def test_sandbox_paused_while_connected(srv):
    sid, token = _start_echo(srv)
    try:
        ws = WS(srv, sid, token=token)
        try:
            _hello(ws)
            st, body = srv.api("POST", "/sandboxes/%s/pause" % sid)
            assert st in (200, 204), body
            assert ws.wait_eof(30), "connection still open after the sandbox was paused"
        finally:
            ws.close()
        ws = WS(srv, sid, token=token)
        assert ws.status == 409
        ws.close()
        srv.api("POST", "/sandboxes/%s/resume" % sid)
        ws = WS(srv, sid, token=token)
        try:
            assert ws.status == 101
            _hello(ws)
            ws.send("after resume")
            assert ws.recv() == (1, b"after resume")
        finally:
            ws.close()
    finally:
        srv.api("DELETE", "/sandboxes/%s" % sid)
