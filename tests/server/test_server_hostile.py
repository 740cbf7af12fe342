"""`paddock serve` against hostile HTTP clients (issue 12, items 6, 7, 11, 12):
query-argument floods, request framing tricks, stalled bodies, NUL escapes,
sandbox-existence probes without a key or token, and error messages that
quote the request.

    sudo /usr/bin/python3 -m pytest -q tests/server/test_server_hostile.py

Standard library only. Needs root (sandboxes), build/src/paddock and the
agent (PADDOCK_BIN / PADDOCK_AGENT as in tests/pdtest/env.py). The server
listens on 127.0.0.1 only, on its own state directory, and `paddock gc`
runs on it at the end.
"""
import http.client
import json
import os
import socket

import pytest

from pdtest.server import server_fixture

DOMAIN = "hostile.test"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

srv = server_fixture("--pool", "0", "--domain", DOMAIN, prefix="pd-hostile-")


def raw_exchange(port, data, timeout=30):
    """Send raw bytes, read until the server closes; (status, whole answer).
    status is None when the server closed without a word."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        got = b""
        while True:
            try:
                c = s.recv(65536)
            except ConnectionResetError:
                break
            if not c:
                break
            got += c
    finally:
        s.close()
    if not got.startswith(b"HTTP/1."):
        return None, got
    return int(got.split(b" ", 2)[1]), got


def body_of(answer):
    return answer.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in answer else b""


# ---- item 6: a flood of query arguments ----

def test_too_many_query_arguments_is_414(srv):
    q = "&".join(["a=b"] * 200)
    st, _h, body = srv.request("GET", "/api/v1/health?" + q, key=None)
    assert st == 414, (st, body)
    assert json.loads(body)["error"]["code"] == "too_many_arguments"
    # a reasonable query still works
    st, _h, _b = srv.request("GET", "/api/v1/health?" + "&".join(["a=b"] * 20), key=None)
    assert st == 200


def test_query_argument_flood_does_not_grow_the_server(srv):
    """5,000 arguments overflow libmicrohttpd's per-connection memory: it
    closes the connection by itself, skipping the request-completed
    callback; the request context allocated for it must still be freed."""
    q = ("GET /api/v1/health?%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
         % "&".join(["a=b"] * 5000)).encode()

    def burst(n):
        for _ in range(n):
            raw_exchange(srv.port, q)

    burst(200)          # thread stacks, malloc arenas, the pool's pages: once
    before = srv.rss_kb()
    burst(1000)
    grown = srv.rss_kb() - before
    print("RSS %d KB -> %d KB over 1,000 flooding requests" % (before, before + grown))
    # the leak was ~21 KB a request (+20 MB over 1,000); noise here is
    # well under 1 MB
    assert grown < 8 * 1024, "RSS grew by %d KB over 1,000 flooding requests" % grown
    assert srv.request("GET", "/api/v1/health", key=None)[0] == 200


# ---- item 7: an error message quoting the request body ----

def test_e2b_create_errors_quote_the_body(srv):
    h = {"X-API-Key": srv.key, "Content-Type": "application/json"}
    name = "no-such-template-0123456789abcdef"
    st, _h, body = srv.request("POST", "/v2/sandboxes", {"templateID": name}, key=None, headers=h)
    assert st == 404, (st, body)
    assert json.loads(body)["message"] == "template '%s' not found" % name
    st, _h, body = srv.request("POST", "/v2/sandboxes", {"envVars": {"BAD=NAME_0123456789abcdef": "x"}},
                               key=None, headers=h)
    assert st == 400, (st, body)
    assert json.loads(body)["message"] == "envVars: invalid name 'BAD=NAME_0123456789abcdef'"


# ---- item 12: request framing, NUL escapes, stalled bodies ----

def test_nul_escape_in_the_path_is_404(srv):
    for path in ("/api/v1/sandboxes/%00", "/api/v1/sandboxes%00", "/api/v1/sandboxes/%00/files"):
        st, _h, body = srv.request("GET", path)
        assert st == 404, (path, st, body)
        assert "sandboxes" not in json.loads(body), body
    st, _h, body = srv.request("GET", "/api/v1/sandboxes?state=running%00x")
    assert st == 400, (st, body)


def test_content_length_and_transfer_encoding_refused(srv):
    req = ("POST /api/v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
           "2\r\n{}\r\n0\r\n\r\n" % srv.key).encode()
    st, ans = raw_exchange(srv.port, req)
    assert st == 400, ans[:300]
    assert b"Content-Length and Transfer-Encoding" in body_of(ans)
    # nothing was created
    st, _h, body = srv.request("GET", "/api/v1/sandboxes")
    assert st == 200 and json.loads(body)["sandboxes"] == [], body


def test_unknown_transfer_encoding_refused(srv):
    req = ("POST /api/v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Transfer-Encoding: gzip\r\n\r\n" % srv.key).encode()
    st, ans = raw_exchange(srv.port, req)
    assert st == 501, ans[:300]


def test_short_body_does_not_hold_the_connection(srv):
    """Content-Length 100, 10 bytes sent, then silence: the server gives up
    on the request well before the old 60 s (it closes the connection)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=45)
    try:
        s.sendall(("POST /api/v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\": 1, " % srv.key).encode())
        try:
            got = s.recv(65536)
        except ConnectionResetError:
            got = b""
        assert got == b"", got[:200]    # closed, nothing created from half a body
    finally:
        s.close()
    st, _h, body = srv.request("GET", "/api/v1/sandboxes")
    assert st == 200 and json.loads(body)["sandboxes"] == [], body


# ---- items 10 and 11: who may use a sandbox id, and what the others learn ----

@pytest.fixture(scope="module")
def live(srv):
    """A running sandbox of the server's key, another key, and an id nobody
    has (same length and alphabet as a real one)."""
    r = srv.cli("key", "create", "--name", "other", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    other = r.stdout.strip()
    st, _h, body = srv.request("POST", "/v2/sandboxes", {"templateID": "base"}, key=None,
                               headers={"X-API-Key": srv.key, "Content-Type": "application/json"})
    assert st == 201, (st, body)
    sb = json.loads(body)
    sid = sb["sandboxID"]
    unknown = "z" * len(sid)
    assert srv.request("GET", "/api/v1/sandboxes/" + unknown)[0] == 404
    yield {"id": sid, "unknown": unknown, "other": other, "envd": sb["envdAccessToken"],
           "traffic": sb.get("trafficAccessToken")}
    srv.request("DELETE", "/api/v1/sandboxes/" + sid)


def same_answer(srv, live, method, path_fmt, headers_fmt=None, body=None, key=None, host_fmt=None):
    """The answer for the live sandbox (with the credentials given) and for
    the unknown id: status, content type and body, the id itself masked."""
    out = []
    for sid in (live["id"], live["unknown"]):
        h = {k: v.format(id=sid) for k, v in (headers_fmt or {}).items()}
        if host_fmt:
            h["Host"] = host_fmt.format(id=sid)
        st, hd, b = srv.request(method, path_fmt.format(id=sid), body=body, key=key, headers=h)
        out.append((st, hd.get("content-type"), b.replace(sid.encode(), b"<id>")))
    assert out[0] == out[1], "%s %s: foreign %r, unknown %r" % (method, path_fmt, out[0], out[1])
    return out[0]


def test_native_routes_foreign_equals_unknown(srv, live):
    for method, suffix, body in (("GET", "", None), ("DELETE", "", None), ("GET", "/metrics", None),
                                 ("POST", "/pause", None), ("POST", "/resume", None), ("GET", "/audit", None),
                                 ("POST", "/timeout", {"timeout": 5}), ("GET", "/processes", None),
                                 ("POST", "/processes", {"cmd": ["true"]}), ("POST", "/exec", {"cmd": ["true"]}),
                                 ("GET", "/files?path=/etc/hostname", None), ("GET", "/ports", None),
                                 ("POST", "/ports/public", {"public": True}), ("POST", "/snapshots", {"name": "x"})):
        st, _ct, _b = same_answer(srv, live, method, "/api/v1/sandboxes/{id}" + suffix, body=body,
                                  key=live["other"])
        assert st == 404, (method, suffix, st)
    # the E2B control plane, with the other key
    for method, suffix, body in (("GET", "", None), ("GET", "/metrics", None), ("DELETE", "", None),
                                 ("POST", "/pause", None), ("POST", "/connect", {}),
                                 ("POST", "/timeout", {"timeout": 30})):
        st, _ct, _b = same_answer(srv, live, method, "/sandboxes/{id}" + suffix, body=body,
                                  headers_fmt={"X-API-Key": live["other"], "Content-Type": "application/json"})
        assert st == 404, (method, suffix, st)


def test_ports_foreign_equals_unknown(srv, live):
    # path form: no key, the other key, a port token made for another id
    st, _ct, _b = same_answer(srv, live, "GET", "/api/v1/sandboxes/{id}/ports/8000/")
    assert st == 401
    st, _ct, _b = same_answer(srv, live, "GET", "/api/v1/sandboxes/{id}/ports/8000/", key=live["other"])
    assert st == 404
    st, _ct, _b = same_answer(srv, live, "GET", "/api/v1/sandboxes/{id}/ports/8000/",
                              headers_fmt={"X-Paddock-Port-Token": "0" * 64})
    assert st == 401
    # host form: no token, a wrong token, the API key (which does not open it)
    host = "8000-{id}.%s" % DOMAIN
    for h in ({}, {"X-Paddock-Port-Token": "0" * 64}, {"E2B-Traffic-Access-Token": "0" * 64},
              {"Authorization": "Bearer " + srv.key}):
        st, _ct, _b = same_answer(srv, live, "GET", "/", headers_fmt=h, host_fmt=host)
        assert st == 401, h
    # the right token for the live id opens it (nothing listens: 502);
    # E2B's traffic token is the same token
    tok = json.loads(srv.request("GET", "/api/v1/sandboxes/%s/ports" % live["id"])[2])["port_token"]
    assert tok == live["traffic"]
    for name in ("X-Paddock-Port-Token", "E2B-Traffic-Access-Token"):
        st, _h, body = srv.request("GET", "/", key=None,
                                   headers={"Host": host.format(id=live["id"]), name: tok})
        assert st == 502, (name, st, body)


ENVD = {"E2b-Sandbox-Id": "{id}", "E2b-Sandbox-Port": "49983", "Content-Type": "application/json"}


def test_envd_foreign_equals_unknown(srv, live):
    for path, method, body in (("/health", "GET", None), ("/process.Process/List", "POST", "{}"),
                               ("/filesystem.Filesystem/Stat", "POST", '{"path": "/"}'),
                               ("/files?path=/etc/hostname", "GET", None)):
        for extra in ({}, {"X-Access-Token": "0" * 64}, {"X-Access-Token": live["envd"]}):
            if extra.get("X-Access-Token") == live["envd"]:
                continue        # the live sandbox's own token: not a probe
            st, _ct, _b = same_answer(srv, live, method, path, headers_fmt=dict(ENVD, **extra), body=body)
            assert st == 401, (path, extra, st)
    # with its token: 204 for the live sandbox; an id whose token one holds
    # but which is gone: 502 (the SDK's isRunning() false)
    h = {k: v.format(id=live["id"]) for k, v in ENVD.items()}
    st, _h, _b = srv.request("GET", "/health", key=None, headers=dict(h, **{"X-Access-Token": live["envd"]}))
    assert st == 204


CI = {"E2b-Sandbox-Id": "{id}", "E2b-Sandbox-Port": "49999", "Content-Type": "application/json"}


def test_code_interpreter_needs_a_credential(srv, live):
    """/execute with only the sandbox id ran code in anyone's sandbox."""
    code = json.dumps({"code": "open('/tmp/pwned', 'w').write('x')"})
    for extra, key in (({}, None), ({"X-Access-Token": "0" * 64}, None),
                       ({"E2B-Traffic-Access-Token": "0" * 64}, None), ({}, live["other"]),
                       ({"X-API-Key": live["other"]}, None)):
        for path, method, body in (("/execute", "POST", code), ("/contexts", "GET", None),
                                   ("/contexts", "POST", "{}")):
            st, ct, b = same_answer(srv, live, method, path, headers_fmt=dict(CI, **extra), body=body, key=key)
            assert st == 401, (path, extra, key, st, b)
    # nothing ran: no kernel bridge was started, no file written
    st, _h, body = srv.request("POST", "/api/v1/sandboxes/%s/exec" % live["id"],
                               {"cmd": ["bash", "-c", "test -e /tmp/pwned && echo yes || echo no; "
                                                      "pgrep -f 'kernel_bridge[.]py' >/dev/null && echo bridge || true"]})
    assert st == 200, body
    assert json.loads(body)["stdout"] == "no\n", body


# ---- item 12: downloads are a consistent snapshot or a clean error ----

SIZES = {b"a": 256 << 10, b"b": 512 << 10}


def download(srv, sid, path, e2b_token=None):
    """('ok', body, content-length or None) for a complete answer, ('aborted',)
    when the server cut the transfer, ('status', n, body) for an error."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    try:
        if e2b_token:
            conn.request("GET", "/files?path=%s" % path, headers={"E2b-Sandbox-Id": sid,
                                                                   "X-Access-Token": e2b_token})
        else:
            conn.request("GET", "/api/v1/sandboxes/%s/files?path=%s" % (sid, path),
                         headers={"Authorization": "Bearer " + srv.key})
        r = conn.getresponse()
        try:
            body = r.read()
        except (http.client.IncompleteRead, ConnectionError):
            return ("aborted",)
        if r.status != 200:
            return ("status", r.status, body)
        cl = r.getheader("Content-Length")
        return ("ok", body, int(cl) if cl is not None else None)
    except (http.client.RemoteDisconnected, ConnectionError):
        return ("aborted",)
    finally:
        conn.close()


def consistent(res):
    if res[0] != "ok":
        return False
    body, cl = res[1], res[2]
    letter = body[:1]
    return letter in SIZES and len(body) == SIZES[letter] and body.count(letter) == len(body) and \
        (cl is None or cl == len(body))


def test_downloads_of_a_file_being_replaced(srv, live):
    """Downloads race a loop inside the sandbox that replaces the file by
    rename, 256 KiB of 'a' and 512 KiB of 'b' in turn: each answer is one
    of the two whole files, under its own Content-Length."""
    sid = live["id"]
    prep = ("cd /tmp && head -c %d /dev/zero | tr '\\0' a > A && head -c %d /dev/zero | tr '\\0' b > B && cp A f"
            % (SIZES[b"a"], SIZES[b"b"]))
    st, _h, body = srv.request("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": prep})
    assert st == 200 and json.loads(body)["exit_code"] == 0, body
    loop = "cd /tmp && while :; do cp A .n && mv .n f; cp B .n && mv .n f; done"
    st, _h, body = srv.request("POST", "/api/v1/sandboxes/%s/processes" % sid, {"cmd": loop})
    assert st == 201, body
    pid = json.loads(body)["pid"]
    try:
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(12) as ex:
            native = list(ex.map(lambda _i: download(srv, sid, "/tmp/f"), range(300)))
            e2b = list(ex.map(lambda _i: download(srv, sid, "/tmp/f", live["envd"]), range(60)))
    finally:
        srv.request("POST", "/api/v1/sandboxes/%s/processes/%d/signal" % (sid, pid), {"signal": "KILL"})
    for name, results in (("native", native), ("e2b", e2b)):
        bad = [r[:2] if r[0] == "status" else (r[0], len(r[1]) if len(r) > 1 else 0, r[2] if len(r) > 2 else None)
               for r in results if not consistent(r)]
        assert not bad, "%s: %d of %d downloads not a whole file: %r" % (name, len(bad), len(results), bad[:5])
    assert all(r[2] is not None for r in native + e2b), "a regular file's download has a Content-Length"


def test_download_of_a_proc_file(srv, live):
    """procfs reports size 0 for files that have content: they come chunked,
    read to their end, not as an empty 200."""
    for token in (None, live["envd"]):
        res = download(srv, live["id"], "/proc/meminfo", token)
        assert res[0] == "ok" and b"MemTotal:" in res[1], res[:2]
        assert res[2] is None, "no Content-Length for a file of unknown length"
    res = download(srv, live["id"], "/proc/self/status")
    assert res[0] == "ok" and b"Pid:" in res[1], res[:2]


# ---- issue 13: E2B's Start checks its input as the native API does ----

def test_e2b_start_refuses_bad_input(srv, live):
    """envd's Start used to drop what it could not use (an env name with '=',
    a value with a NUL byte, a cwd with one, a tag over 255 bytes) and start
    the command anyway, without it. Now it is invalid_argument, and nothing
    runs; proto3's empty values (cwd "", tag "") still mean "not set"."""
    h = {k: v.format(id=live["id"]) for k, v in ENVD.items()}
    h["X-Access-Token"] = live["envd"]
    marker = "bad-input-%d" % os.getpid()
    for why, proc, extra in (("env name with '='", {"envs": {"A=B": "1"}}, {}),
                             ("empty env name", {"envs": {"": "1"}}, {}),
                             ("env value with NUL", {"envs": {"A": "x\u0000y"}}, {}),
                             ("envs not an object", {"envs": ["A=1"]}, {}),
                             ("cwd with NUL", {"cwd": "/tmp\u0000/etc"}, {}),
                             ("cwd too long", {"cwd": "/" + "d" * 5000}, {}),
                             ("tag over 255 bytes", {}, {"tag": "t" * 300})):
        body = dict({"process": dict({"cmd": "/bin/echo", "args": [marker]}, **proc)}, **extra)
        st, hd, b = srv.request("POST", "/process.Process/Start", body, key=None, headers=h)
        assert st == 400, (why, st, b)
        assert json.loads(b)["code"] == "invalid_argument", (why, b)
    # nothing was started
    st, _h, body = srv.request("GET", "/api/v1/sandboxes/%s/processes" % live["id"])
    assert st == 200, body
    assert not [p for p in json.loads(body)["processes"] if marker in p["cmd"]], body
    # empty cwd and tag: not set (home, no tag); the command runs
    body = {"process": {"cmd": "/bin/sh", "args": ["-c", "pwd"], "cwd": ""}, "tag": ""}
    st, hd, b = srv.request("POST", "/process.Process/Start", body, key=None, headers=h)
    assert st == 200 and b'"end"' in b and b"/home/user" in base64_events(b), (st, b)


def base64_events(stream):
    """The stdout bytes of a Connect stream of process events (JSON lines in
    5-byte-header envelopes)."""
    import base64
    out, i = b"", 0
    while i + 5 <= len(stream):
        n = int.from_bytes(stream[i + 1:i + 5], "big")
        msg = json.loads(stream[i + 5:i + 5 + n] or b"{}")
        data = msg.get("event", {}).get("data", {})
        if "stdout" in data:
            out += base64.b64decode(data["stdout"])
        i += 5 + n
    return out
