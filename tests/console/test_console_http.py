"""The web console at the HTTP level (docs/console.md): its pages and their
headers, sign-in with an API key into a session cookie, the cookie's
cross-origin (CSRF) rules, the key's scoping through the cookie, and the
terminal's WebSocket (GET .../processes/{pid}/pty).

    sudo /usr/bin/python3 -m pytest -q tests/console/test_console_http.py

Standard library only. The browser tests are console.test.mjs (run.sh).
"""
import base64
import json
import os
import socket
import struct

import pytest

from pdtest.server import run_paddock, server_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

srv = server_fixture("--pool", "0")


def origin(srv):
    return "http://127.0.0.1:%d" % srv.port


def console_headers(srv, cookie=None, **extra):
    h = {"Origin": origin(srv), "X-Paddock-Console": "1", "Host": "127.0.0.1:%d" % srv.port}
    if cookie:
        h["Cookie"] = "pd_session=" + cookie
    h.update(extra)
    return h


def sign_in(srv, key=None):
    """The session token the sign-in's Set-Cookie carries."""
    st, h, data = srv.request("POST", "/api/v1/console/session", {"key": key or srv.key}, key=None,
                              headers=console_headers(srv))
    assert st == 200, data
    cookie = h["Set-Cookie"]
    assert cookie.startswith("pd_session=")
    return cookie.split(";")[0].split("=", 1)[1]


def second_key(srv):
    r = run_paddock("key", "create", "--name", "console2", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


# ---- pages ----

@pytest.mark.parametrize("path", ["/", "/console", "/console/", "/console/index.html"])
def test_index_served_with_strict_headers(srv, path):
    st, h, data = srv.request("GET", path, key=None)
    assert st == 200, data
    assert h["Content-Type"].startswith("text/html")
    assert b"<script src=\"/console/app.js\">" in data
    csp = h["Content-Security-Policy"]
    directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in csp.split(";"))
    assert directives["script-src"] == "'self'", csp      # no inline script, no eval
    assert directives["default-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert h["X-Content-Type-Options"] == "nosniff"
    assert h["Cache-Control"] == "no-cache"
    assert "ETag" in h


def test_no_inline_script_in_pages(srv):
    st, _, data = srv.request("GET", "/console/index.html", key=None)
    assert st == 200
    text = data.decode()
    # every <script> has a src and an empty body; no on* handler attributes
    import re
    for m in re.finditer(r"<script([^>]*)>(.*?)</script>", text, re.S):
        assert "src=" in m.group(1) and not m.group(2).strip(), m.group(0)
    assert not re.search(r"\son[a-z]+=", text)


def test_assets_and_vendor(srv):
    st, h, data = srv.request("GET", "/console/app.js", key=None)
    assert st == 200 and h["Content-Type"].startswith("text/javascript")
    etag = h["ETag"]
    st, h, data = srv.request("GET", "/console/app.js", key=None, headers={"If-None-Match": etag})
    assert st == 304 and data == b""
    st, h, data = srv.request("GET", "/console/vendor/xterm.js", key=None)
    assert st == 200, data[:200]
    assert b"Terminal" in data
    assert "max-age" in h["Cache-Control"]
    st, h, _ = srv.request("GET", "/console/vendor/xterm.css", key=None)
    assert st == 200 and h["Content-Type"].startswith("text/css")


@pytest.mark.parametrize("path", ["/console/../paddock.db", "/console/%2e%2e%2fapi-key", "/console/api-key",
                                  "/console/package.json", "/console/vendor/..%2fpackage.json",
                                  "/console/node_modules"])
def test_only_listed_files(srv, path):
    st, _, data = srv.request("GET", path, key=None)
    assert st == 404, (path, data)


# ---- sign-in ----

def test_sign_in_cookie_flags_and_session(srv):
    st, h, data = srv.request("POST", "/api/v1/console/session", {"key": srv.key}, key=None,
                              headers=console_headers(srv))
    assert st == 200, data
    cookie = h["Set-Cookie"]
    flags = [f.strip().lower() for f in cookie.split(";")]
    assert "httponly" in flags and "samesite=strict" in flags and "path=/" in flags
    token = cookie.split(";")[0].split("=", 1)[1]
    assert len(token) == 64 and srv.key not in cookie
    assert srv.key.encode() not in data
    me = json.loads(data)
    st, _, data = srv.request("GET", "/api/v1/console/session", key=None, headers=console_headers(srv, token))
    assert st == 200 and json.loads(data)["key_id"] == me["key_id"]
    # the cookie is auth for the native API
    st, _, data = srv.request("GET", "/api/v1/sandboxes", key=None, headers=console_headers(srv, token))
    assert st == 200, data
    # sign-out ends the session and clears the cookie
    st, h, _ = srv.request("DELETE", "/api/v1/console/session", key=None, headers=console_headers(srv, token))
    assert st == 204 and "Max-Age=0" in h["Set-Cookie"]
    st, _, _ = srv.request("GET", "/api/v1/sandboxes", key=None, headers=console_headers(srv, token))
    assert st == 401


@pytest.mark.parametrize("body", [{"key": "pdk_wrong"}, {"key": ""}, {"key": 1}, {}, {"key": "x" * 200}])
def test_wrong_key_refused(srv, body):
    st, h, data = srv.request("POST", "/api/v1/console/session", body, key=None, headers=console_headers(srv))
    assert st in (400, 401), data
    assert "Set-Cookie" not in h


def test_sign_in_needs_console_origin(srv):
    # login CSRF: another site posting its own key into this browser
    for h in ({"Origin": "http://evil.example", "X-Paddock-Console": "1"}, {"X-Paddock-Console": "1"},
              {"Origin": origin(srv)}):
        st, hdr, data = srv.request("POST", "/api/v1/console/session", {"key": srv.key}, key=None,
                                    headers=dict(h, Host="127.0.0.1:%d" % srv.port))
        assert st == 403, (h, data)
        assert "Set-Cookie" not in hdr


def test_forged_and_stale_tokens_refused(srv):
    real = sign_in(srv)
    # the real token with its last digit changed (to another digit: one
    # time in 16 it already ended in "0", and the "forgery" was the token)
    forged = real[:-1] + ("1" if real[-1] == "0" else "0")
    for tok in ("0" * 64, "x", "", forged):
        st, _, _ = srv.request("GET", "/api/v1/sandboxes", key=None, headers=console_headers(srv, tok))
        assert st == 401, tok


# ---- CSRF ----

def test_csrf_refused(srv):
    tok = sign_in(srv)
    before = srv.json("GET", "/api/v1/sandboxes", expect=200)[1]["sandboxes"]
    cases = [
        # a form post from another site: no custom header, a foreign Origin
        {"Origin": "http://evil.example", "Cookie": "pd_session=" + tok},
        # the custom header but a foreign Origin
        {"Origin": "http://evil.example", "X-Paddock-Console": "1", "Cookie": "pd_session=" + tok},
        # a same-site page (another port or subdomain) says so in fetch metadata
        {"Origin": origin(srv), "X-Paddock-Console": "1", "Sec-Fetch-Site": "same-site",
         "Cookie": "pd_session=" + tok},
        # no Origin at all on a state-changing call
        {"X-Paddock-Console": "1", "Cookie": "pd_session=" + tok},
        # the Origin but no custom header: the header is what shows our
        # script sent it (a page cannot add it cross-origin without a CORS
        # preflight, which is never granted)
        {"Origin": origin(srv), "Cookie": "pd_session=" + tok},
    ]
    for h in cases:
        h["Host"] = "127.0.0.1:%d" % srv.port
        st, _, data = srv.request("POST", "/api/v1/sandboxes", {}, key=None, headers=h)
        assert st == 403, (h, data)
    assert srv.json("GET", "/api/v1/sandboxes", expect=200)[1]["sandboxes"] == before   # nothing created
    # a cross-origin read is refused too (a GET with a foreign Origin)
    st, _, _ = srv.request("GET", "/api/v1/sandboxes", key=None,
                           headers={"Origin": "http://evil.example", "Cookie": "pd_session=" + tok,
                                    "Host": "127.0.0.1:%d" % srv.port})
    assert st == 403


def test_cookie_only_for_native_api(srv):
    tok = sign_in(srv)
    st, _, _ = srv.request("GET", "/sandboxes", key=None, headers=console_headers(srv, tok))
    assert st == 401        # E2B's control plane takes its own key only


# ---- scoping ----

def test_cookie_of_one_key_cannot_see_anothers_sandboxes(srv):
    key2 = second_key(srv)
    sid = srv.create()["id"]
    try:
        tok2 = sign_in(srv, key2)
        st, _, data = srv.request("GET", "/api/v1/sandboxes", key=None, headers=console_headers(srv, tok2))
        assert st == 200 and sid not in [s["id"] for s in json.loads(data)["sandboxes"]]
        for method, suffix in (("GET", ""), ("GET", "/metrics"), ("GET", "/processes"), ("POST", "/pause"),
                               ("DELETE", "")):
            st, _, _ = srv.request(method, "/api/v1/sandboxes/" + sid + suffix, key=None,
                                   headers=console_headers(srv, tok2))
            assert st == 404, (method, suffix)
        st, _, _ = srv.request("GET", "/api/v1/sandboxes/%s/processes/1/pty" % sid, key=None,
                               headers=dict(console_headers(srv, tok2), **ws_headers()))
        assert st == 404
        assert srv.json("GET", "/api/v1/sandboxes/" + sid, expect=200)[1]["state"] == "running"
    finally:
        srv.delete(sid)


def test_revoked_key_ends_its_sessions(srv):
    key3 = second_key(srv)
    tok = sign_in(srv, key3)
    st, _, data = srv.request("GET", "/api/v1/console/session", key=None, headers=console_headers(srv, tok))
    assert st == 200
    kid = json.loads(data)["key_id"]
    r = run_paddock("key", "revoke", kid, "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    st, _, _ = srv.request("GET", "/api/v1/sandboxes", key=None, headers=console_headers(srv, tok))
    assert st == 401


# ---- the terminal's WebSocket ----

def ws_headers():
    return {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()}


class WS:
    """A minimal RFC 6455 client over a plain socket."""

    def __init__(self, srv, path, headers):
        self.s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        req = "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (path, srv.port)
        req += "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
        self.s.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = self.s.recv(1)
            if not b:
                break
            head += b
        self.status = int(head.split(b" ", 2)[1]) if head else 0
        self.head = head
        self.buf = b""

    def send(self, data, opcode=2):
        mask = os.urandom(4)
        n = len(data)
        h = bytes([0x80 | opcode])
        h += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n)
        self.s.sendall(h + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _need(self, n):
        while len(self.buf) < n:
            b = self.s.recv(65536)
            if not b:
                raise EOFError
            self.buf += b

    def recv(self):
        """(opcode, payload)"""
        self._need(2)
        op, n = self.buf[0] & 15, self.buf[1] & 127
        hl = 2
        if n == 126:
            self._need(4)
            n, hl = struct.unpack(">H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, hl = struct.unpack(">Q", self.buf[2:10])[0], 10
        self._need(hl + n)
        data, self.buf = self.buf[hl:hl + n], self.buf[hl + n:]
        return op, data

    def read_until(self, needle):
        got = b""
        while needle not in got:
            op, data = self.recv()
            assert op in (1, 2), (op, data, got)
            if op == 2:
                got += data
        return got

    def close(self):
        self.s.close()


def test_pty_websocket(srv):
    tok = sign_in(srv)
    sid = srv.create()["id"]
    try:
        _, p = srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid,
                        {"cmd": ["/bin/bash", "--norc", "-i"], "pty": {"rows": 24, "cols": 80}, "stdin": True},
                        expect=201)
        pid = p["pid"]
        path = "/api/v1/sandboxes/%s/processes/%d/pty" % (sid, pid)
        # another origin's page cannot open it with the cookie (CSWSH)
        bad = WS(srv, path, dict(ws_headers(), Origin="http://evil.example", Cookie="pd_session=" + tok))
        assert bad.status == 403
        bad.close()
        nohdr = WS(srv, path, dict(ws_headers(), Cookie="pd_session=" + tok))
        assert nohdr.status == 403
        nohdr.close()
        ws = WS(srv, path, dict(ws_headers(), Origin=origin(srv), Cookie="pd_session=" + tok))
        assert ws.status == 101, ws.head
        ws.send(json.dumps({"resize": {"rows": 40, "cols": 120}}).encode(), opcode=1)
        ws.send(b"stty size; echo hi-$((6*7))\n")
        got = ws.read_until(b"hi-42")
        assert b"40 120" in got or b"40 120" in ws.read_until(b"40 120")
        ws.close()
        # the process lives on; a new socket from offset 0 replays the output
        ws2 = WS(srv, path + "?from=0", dict(ws_headers(), Authorization="Bearer " + srv.key))
        assert ws2.status == 101
        assert b"hi-42" in ws2.read_until(b"hi-42")
        ws2.send(b"exit 3\n")
        while True:
            op, data = ws2.recv()
            if op == 1:
                assert json.loads(data) == {"exit": 3, "signal": None}
                break
        op, _ = ws2.recv()
        assert op == 8
        ws2.close()
    finally:
        srv.delete(sid)


@pytest.mark.parametrize("case", ["no-upgrade", "bad-version", "no-pty", "unknown-pid", "bad-pid", "bad-from"])
def test_pty_websocket_bad_requests(srv, case):
    sid = srv.create()["id"]
    try:
        _, p = srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid, {"cmd": ["sleep", "60"]}, expect=201)
        pid = str(p["pid"])
        h = ws_headers()
        q = ""
        want = 400
        if case == "no-upgrade":
            h = {}
            want = 426
        elif case == "bad-version":
            h["Sec-WebSocket-Version"] = "8"
        elif case == "unknown-pid":
            pid, want = "99999", 404
        elif case == "bad-pid":
            pid = "abc"
        elif case == "bad-from":
            q = "?from=-1x"
        st, _, data = srv.request("GET", "/api/v1/sandboxes/%s/processes/%s/pty%s" % (sid, pid, q), headers=h)
        assert st == want, (case, data)
        _, procs = srv.json("GET", "/api/v1/sandboxes/%s/processes" % sid, expect=200)
        assert [x["state"] for x in procs["processes"]] == ["running"]
    finally:
        srv.delete(sid)


# ---- the port relay's path form is on the console's origin ----

ECHO_HEADERS = """
import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(s):
        b = str(s.headers).encode()
        s.send_response(200)
        s.send_header('Content-Type', 'text/html')
        s.send_header('Content-Length', str(len(b)))
        s.end_headers()
        s.wfile.write(b)
h.HTTPServer(('127.0.0.1', 8000), H).serve_forever()
"""


def test_path_form_port_never_sees_the_session_and_is_sandboxed(srv):
    """A page a sandbox serves through /api/v1/sandboxes/{id}/ports/... is on
    the console's origin: the browser sends it the session cookie, and its
    scripts could call the API with it. The relay removes the cookie and
    answers with a CSP sandbox (an opaque origin, whose requests the
    cookie check refuses)."""
    import time
    tok = sign_in(srv)
    sid = srv.create()["id"]
    try:
        srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid, {"cmd": ["python3", "-c", ECHO_HEADERS]},
                 expect=201)
        path = "/api/v1/sandboxes/%s/ports/8000/" % sid
        hdrs = {"Authorization": "Bearer " + srv.key, "Cookie": "a=1; pd_session=%s; b=2" % tok}
        deadline = time.time() + 30
        while True:
            st, h, body = srv.raw("GET", path, headers=hdrs)
            if st != 502:
                break
            assert time.time() < deadline, body
            time.sleep(0.2)
        assert st == 200, body
        assert tok.encode() not in body and b"pd_session" not in body, body
        assert b"a=1; b=2" in body, body
        assert "sandbox" in h["Content-Security-Policy"] and "allow-same-origin" not in h["Content-Security-Policy"]
        # only the session cookie: no Cookie header at all
        st, h, body = srv.raw("GET", path, headers={"Authorization": "Bearer " + srv.key,
                                                     "Cookie": "pd_session=" + tok})
        assert st == 200 and b"Cookie" not in body and b"pd_session" not in body, body
        # what such a sandboxed page's fetch looks like: refused
        st, _, _ = srv.request("POST", "/api/v1/sandboxes", {}, key=None,
                               headers=console_headers(srv, tok, Origin="null"))
        assert st == 403
    finally:
        srv.delete(sid)


def _pty(srv, sid):
    _, p = srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid,
                    {"cmd": ["/bin/bash", "--norc", "-i"], "pty": True, "stdin": True}, expect=201)
    return "/api/v1/sandboxes/%s/processes/%d/pty" % (sid, p["pid"]), p["pid"]


def _close_code(ws):
    """The code of the server's close frame (skipping output), None at EOF."""
    try:
        while True:
            op, data = ws.recv()
            if op == 8:
                return struct.unpack(">H", data[:2])[0] if len(data) >= 2 else 1005
    except (EOFError, ConnectionResetError):
        return None


@pytest.mark.parametrize("frame,code", [
    ("unmasked", 1002), ("too-large", 1009), ("bad-control", 1003), ("unknown-opcode", 1002)])
def test_pty_websocket_bad_frames_close_it_and_keep_the_process(srv, frame, code):
    sid = srv.create()["id"]
    try:
        path, pid = _pty(srv, sid)
        ws = WS(srv, path, dict(ws_headers(), Authorization="Bearer " + srv.key))
        assert ws.status == 101
        if frame == "unmasked":
            ws.s.sendall(b"\x82\x01a")
        elif frame == "too-large":
            n = 65 * 1024
            ws.s.sendall(b"\x82\xff" + struct.pack(">Q", n) + os.urandom(4))
        elif frame == "bad-control":
            ws.send(b'{"resize": {"rows": 0, "cols": 80}}', opcode=1)
        else:
            ws.send(b"x", opcode=3)
        assert _close_code(ws) == code
        ws.close()
        _, p = srv.json("GET", "/api/v1/sandboxes/%s/processes/%d" % (sid, pid), expect=200)
        assert p["state"] == "running"
    finally:
        srv.delete(sid)


def test_pty_websocket_ends_when_the_sandbox_is_deleted(srv):
    sid = srv.create()["id"]
    deleted = False
    try:
        path, _ = _pty(srv, sid)
        ws = WS(srv, path, dict(ws_headers(), Authorization="Bearer " + srv.key))
        assert ws.status == 101
        ws.send(b"echo up\n")
        ws.read_until(b"up")
        assert srv.delete(sid) == 204
        deleted = True
        assert _close_code(ws) in (1001, 1011, None)
        ws.close()
    finally:
        if not deleted:
            srv.delete(sid)
