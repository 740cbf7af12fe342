"""`paddock serve`: the process and file routes (docs/api.md "Processes",
"Files") end to end, against a real server and real sandboxes.

    sudo /usr/bin/python3 -m pytest -q tests/server/test_server_procs_files.py

Standard library only. Needs root (sandboxes), build/src/paddock and the
agent (PADDOCK_BIN / PADDOCK_AGENT as in tests/pdtest/env.py).
"""
import base64
import hashlib
import json
import os
import socket
import threading
import time

import pytest

from pdtest.server import server_fixture

TIMEOUT = 60

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

server = server_fixture("--pool", "0", prefix="pd-srv-pf-")


@pytest.fixture(scope="module")
def api(server):
    return server.v1


@pytest.fixture(scope="module")
def sb(api):
    """One sandbox shared by most tests."""
    _st, j = api.json("POST", "/sandboxes", {}, expect=201)
    return j["id"]


def new_sandbox(api, **body):
    _st, j = api.json("POST", "/sandboxes", body, expect=201)
    return j["id"]


# --- processes -----------------------------------------------------------------

def test_start_follow_gets_everything_and_exit_code(api, sb):
    j = api.start(sb, {"cmd": "echo hello; echo oops >&2; sleep 0.3; echo bye; exit 3", "tag": "t1"})
    pid = j["pid"]
    assert j["tag"] == "t1"
    h, out = api.output(sb, pid, follow=1)
    assert out == b"hello\nbye\n"
    assert h.get("X-Paddock-Offset") == "0"
    _h, err = api.output(sb, pid, stream="stderr", follow=1)
    assert err == b"oops\n"
    _st, p = api.json("GET", "/sandboxes/%s/processes/%d" % (sb, pid), expect=200)
    assert p["state"] == "exited" and p["exit_code"] == 3 and p["signal"] is None
    assert p["stdout_bytes"] == len(out) and p["stderr_bytes"] == 5
    assert p["cmd"] == ["/bin/bash", "-l", "-c", "echo hello; echo oops >&2; sleep 0.3; echo bye; exit 3"]
    _st, lst = api.json("GET", "/sandboxes/%s/processes" % sb, expect=200)
    assert any(x["pid"] == pid for x in lst["processes"])


def test_interleaved_lines_separated_per_stream(api, sb):
    n = 5000
    pid = api.start(sb, {"cmd": ["bash", "-c", "for i in $(seq %d); do echo out$i; echo err$i >&2; done" % n]})["pid"]
    want_out = "".join("out%d\n" % i for i in range(1, n + 1)).encode()
    want_err = "".join("err%d\n" % i for i in range(1, n + 1)).encode()
    # the multiplexed JSON-line stream, as the SDKs read it
    _h, body = api.output(sb, pid, format="frames", follow=1)
    got = {"stdout": bytearray(), "stderr": bytearray()}
    lines = [json.loads(l) for l in body.splitlines()]
    for l in lines[:-1]:
        assert "stream" in l, l
        assert l["offset"] == len(got[l["stream"]])
        got[l["stream"]] += base64.b64decode(l["data_b64"])
    assert lines[-1] == {"exit": {"exit_code": 0, "signal": None, "reason": "exit"}}
    assert bytes(got["stdout"]) == want_out and bytes(got["stderr"]) == want_err
    # and raw, per stream
    assert api.output(sb, pid, follow=1)[1] == want_out
    assert api.output(sb, pid, stream="stderr")[1] == want_err


def test_resume_from_offset_loses_nothing(api, sb):
    """Read part of a follow stream, drop it, reconnect from the count
    received: the concatenation is the whole 20 MB output. The command waits
    for a flag after its first ~2 MB, so nothing is evicted from the 4 MiB
    ring while no reader holds it back."""
    flag = "/tmp/resume-go-%d" % os.getpid()
    n1, n2 = 300000, 2700000
    cmd = "seq 1 %d; while [ ! -e %s ]; do sleep 0.05; done; seq %d %d" % (n1, flag, n1 + 1, n2)
    want = "".join("%d\n" % i for i in range(1, n2 + 1)).encode()
    assert len(want) > 20 * 10**6
    pid = api.start(sb, {"cmd": cmd})["pid"]
    c, r = api.open_stream("/sandboxes/%s/processes/%d/output" % (sb, pid), {"follow": 1})
    assert r.status == 200 and r.getheader("X-Paddock-Offset") == "0"
    first = r.read(1000003)
    assert len(first) == 1000003
    c.close()           # drop the connection mid-stream
    c, r = api.open_stream("/sandboxes/%s/processes/%d/output" % (sb, pid), {"follow": 1, "from": len(first)})
    assert r.status == 200
    assert r.getheader("X-Paddock-Offset") == str(len(first))
    assert r.getheader("X-Paddock-Gap") is None
    api.exec(sb, {"cmd": ["touch", flag]})
    rest = r.read()
    c.close()
    assert hashlib.sha256(first + rest).hexdigest() == hashlib.sha256(want).hexdigest()


def test_nonfollow_read_of_finished_process(api, sb):
    pid = api.start(sb, {"cmd": ["seq", "1", "10000"]})["pid"]
    api.wait(sb, pid)
    want = "".join("%d\n" % i for i in range(1, 10001)).encode()
    h, data = api.output(sb, pid)
    assert data == want and h["X-Paddock-Offset"] == "0"
    h, data = api.output(sb, pid, **{"from": 100})
    assert data == want[100:] and h["X-Paddock-Offset"] == "100"
    h, data = api.output(sb, pid, **{"from": 10**9})       # past the end: empty
    assert data == b""
    # a running process without follow: what exists now, then the end
    pid = api.start(sb, {"cmd": "echo early; sleep 30"})["pid"]
    time.sleep(0.5)
    t0 = time.time()
    _h, data = api.output(sb, pid)
    assert data == b"early\n" and time.time() - t0 < 5
    api.json("POST", "/sandboxes/%s/processes/%d/signal" % (sb, pid), {"signal": "KILL"})


def read_chunked_raw(port, key, path):
    """GET path over a raw socket; -> (status, body, sizes of the chunks)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    with s, s.makefile("rb") as f:
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                   "Connection: close\r\n\r\n" % (path, key)).encode())
        status = int(f.readline().split()[1])
        headers = {}
        while True:
            line = f.readline().rstrip(b"\r\n")
            if not line:
                break
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        assert headers.get("transfer-encoding") == "chunked", headers
        body, sizes = [], []
        while True:
            n = int(f.readline().split(b";")[0], 16)
            if n == 0:
                break
            body.append(f.read(n))
            assert f.read(2) == b"\r\n"
            sizes.append(n)
        return status, b"".join(body), sizes


def test_output_stream_comes_in_big_chunks(api, sb):
    """3 MB of output that is all there already goes out in chunks of more
    than 64 KiB (libmicrohttpd's default per-connection memory cut it into
    ~29 KiB chunks, a send each), byte for byte."""
    pid = api.start(sb, {"cmd": "head -c 3000000 /dev/urandom | tee /tmp/big-chunks | sha256sum"})["pid"]
    api.wait(sb, pid)
    st, body, sizes = read_chunked_raw(api.port, api.key,
                                       "/api/v1/sandboxes/%s/processes/%d/output?stream=stdout" % (sb, pid))
    assert st == 200
    # the output is the sha256sum line; the 3 MB are in /tmp/big-chunks
    assert body.endswith(b"  -\n")
    pid = api.start(sb, {"cmd": ["cat", "/tmp/big-chunks"]})["pid"]
    api.wait(sb, pid)
    st, data, sizes = read_chunked_raw(api.port, api.key,
                                       "/api/v1/sandboxes/%s/processes/%d/output" % (sb, pid))
    assert st == 200 and len(data) == 3000000
    assert hashlib.sha256(data).hexdigest() == body.split()[0].decode()
    assert max(sizes) > 64 * 1024, sizes[:20]


def test_evicted_output_reports_a_gap(api, sb):
    """10 MB with nobody reading: the 4 MiB ring keeps the tail only, and a
    read from 0 says where it really starts."""
    n = 10 * 1000 * 1000
    pid = api.start(sb, {"cmd": "head -c %d /dev/zero | tr '\\0' a" % n})["pid"]
    for _ in range(200):
        _st, p = api.json("GET", "/sandboxes/%s/processes/%d" % (sb, pid), expect=200)
        if p["state"] == "exited":
            break
        time.sleep(0.05)
    assert p["stdout_bytes"] == n
    h, data = api.output(sb, pid)
    start = int(h["X-Paddock-Offset"])
    assert 0 < start < n and h["X-Paddock-Gap"] == "0-%d" % start
    assert data == b"a" * (n - start)
    _h, body = api.output(sb, pid, format="frames")
    lines = [json.loads(l) for l in body.splitlines()]
    assert lines[0] == {"gap": {"stream": "stdout", "from": 0, "to": start}}
    assert lines[-1]["exit"]["exit_code"] == 0


def test_timeout_kills_the_process(api, sb):
    t0 = time.time()
    j = api.exec(sb, {"cmd": ["sleep", "30"], "timeout": 0.5})
    assert time.time() - t0 < 10
    assert j["reason"] == "timeout" and j["signal"] == 9, j


def test_paused_sandbox_is_409(api):
    sid = new_sandbox(api)
    try:
        st, j = api.json("POST", "/sandboxes/%s/pause" % sid, {})
        assert st == 200, j
        st, j = api.json("POST", "/sandboxes/%s/exec" % sid, {"cmd": ["true"]})
        assert st == 409 and j["error"]["code"] == "conflict", j
        st, _h, _b = get(api, sid, "/etc/passwd")
        assert st == 409
        st, j = api.json("POST", "/sandboxes/%s/resume" % sid, {})
        assert st == 200, j
        assert api.exec(sid, {"cmd": ["echo", "back"]})["stdout"] == "back\n"
    finally:
        api.request("DELETE", "/sandboxes/%s" % sid)


def test_stdin_round_trip_with_cat(api, sb):
    pid = api.start(sb, {"cmd": ["cat"], "stdin": True})["pid"]
    st, _h, _b = api.request("POST", "/sandboxes/%s/processes/%d/stdin" % (sb, pid), b"hello\n",
                             headers={"Content-Type": "application/octet-stream"})
    assert st == 204
    big = os.urandom(2 * 1024 * 1024 + 17)
    st, _h, _b = api.request("POST", "/sandboxes/%s/processes/%d/stdin" % (sb, pid), big,
                             headers={"Content-Type": "application/octet-stream"})
    assert st == 204
    st, _h, _b = api.request("POST", "/sandboxes/%s/processes/%d/stdin/close" % (sb, pid))
    assert st == 204
    _h, out = api.output(sb, pid, follow=1)
    assert out == b"hello\n" + big
    st, _h, _b = api.request("POST", "/sandboxes/%s/processes/%d/stdin" % (sb, 999999), b"x")
    assert st == 404


def test_signal(api, sb):
    for sig, num in (("SIGTERM", 15), ("TERM", 15), (9, 9), ("sigint", 2)):
        pid = api.start(sb, {"cmd": ["sleep", "100"]})["pid"]
        st, _ = api.json("POST", "/sandboxes/%s/processes/%d/signal" % (sb, pid), {"signal": sig})
        assert st == 204
        p = api.wait(sb, pid)
        assert p["signal"] == num and p["exit_code"] is None and p["reason"] == "signal", p
    st, j = api.json("POST", "/sandboxes/%s/processes/%d/signal" % (sb, pid), {"signal": "SIGNOPE"})
    assert st == 400, j
    st, j = api.json("POST", "/sandboxes/%s/processes/%d/signal" % (sb, 999999), {"signal": "TERM"})
    assert st == 404, j


def test_pty_process_sees_a_tty(api, sb):
    j = api.start(sb, {"cmd": "test -t 0 && test -t 1 && echo isatty; tty; stty size",
                       "pty": {"rows": 33, "cols": 101}})
    _h, out = api.output(sb, j["pid"], follow=1)
    assert b"isatty" in out and b"/dev/pts/" in out and b"33 101" in out, out
    _st, p = api.json("GET", "/sandboxes/%s/processes/%d" % (sb, j["pid"]), expect=200)
    assert p["pty"] == {"rows": 33, "cols": 101} and p["exit_code"] == 0
    st, _h, _b = api.request("GET", "/sandboxes/%s/processes/%d/output" % (sb, j["pid"]), query={"stream": "stdout"})
    assert st == 400
    # resize, and stdin through the pty
    j = api.start(sb, {"cmd": "read line; stty size; echo got=$line", "pty": {"rows": 24, "cols": 80}})
    st, _ = api.json("POST", "/sandboxes/%s/processes/%d/resize" % (sb, j["pid"]), {"rows": 40, "cols": 120})
    assert st == 204
    st, _h, _b = api.request("POST", "/sandboxes/%s/processes/%d/stdin" % (sb, j["pid"]), b"typed\r")
    assert st == 204
    _h, out = api.output(sb, j["pid"], follow=1)
    assert b"40 120" in out and b"got=typed" in out, out
    st, _ = api.json("POST", "/sandboxes/%s/processes/%d/resize" % (sb, j["pid"]), {"rows": 0, "cols": 1})
    assert st == 400


def test_exec_returns_output_and_exit_code(api, sb):
    j = api.exec(sb, {"cmd": ["echo", "hi"]})
    assert j["stdout"] == "hi\n" and j["stderr"] == "" and j["exit_code"] == 0 and j["signal"] is None
    assert j["pid"] > 0
    j = api.exec(sb, {"cmd": "echo to-err >&2; exit 7"})
    assert j["exit_code"] == 7 and j["stderr"] == "to-err\n" and j["stdout"] == ""
    j = api.exec(sb, {"cmd": "id -u; pwd; echo $FOO", "env": {"FOO": "bar"}})
    assert j["stdout"] == "1000\n/home/user\nbar\n"
    j = api.exec(sb, {"cmd": "id -u; pwd", "user": "root", "cwd": "/tmp"})
    assert j["stdout"] == "0\n/tmp\n"
    j = api.exec(sb, {"cmd": ["cat"], "stdin_data": base64.b64encode(b"piped in").decode()})
    assert j["stdout"] == "piped in"
    j = api.exec(sb, {"cmd": "kill -TERM $$"})
    assert j["signal"] == 15 and j["exit_code"] is None
    j = api.exec(sb, {"cmd": "head -c 3000000 /dev/zero"})
    assert j["stdout_truncated"] and j["stdout_bytes"] == 3000000 and len(j["stdout"]) == 1 << 20
    st, j = api.json("POST", "/sandboxes/%s/exec" % sb, {"cmd": ["true"], "bogus": 1})
    assert st == 400, j


def test_missing_command_is_400(api, sb):
    st, j = api.json("POST", "/sandboxes/%s/exec" % sb, {"cmd": ["no-such-command-xyz"]})
    assert st == 400 and "command not found" in j["error"]["message"], j
    st, j = api.json("POST", "/sandboxes/%s/processes" % sb, {"cmd": ["no-such-command-xyz"]})
    assert st == 400 and "command not found" in j["error"]["message"], j


def test_unknown_sandbox_and_bad_ids(api, sb):
    st, _ = api.json("GET", "/sandboxes/%s/processes" % ("z" * 20))
    assert st == 404
    st, _ = api.json("POST", "/sandboxes/%s/exec" % ("z" * 20), {"cmd": ["true"]})
    assert st == 404
    st, _ = api.json("GET", "/sandboxes/%s/processes/abc" % sb)
    assert st == 400
    st, _ = api.json("GET", "/sandboxes/%s/processes/999999" % sb)
    assert st == 404


def test_concurrent_exec(api, sb):
    n = 100
    results = [None] * n

    def one(i):
        try:
            results[i] = api.exec(sb, {"cmd": ["echo", "n%d" % i]}, timeout=120)
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    bad = [(i, r) for i, r in enumerate(results) if not isinstance(r, dict) or r["stdout"] != "n%d\n" % i
           or r["exit_code"] != 0]
    assert not bad, bad[:5]


# --- files -------------------------------------------------------------------

def put(api, sid, path, data, **q):
    q["path"] = path
    return api.request("PUT", "/sandboxes/%s/files" % sid, data, query=q,
                       headers={"Content-Type": "application/octet-stream"}, timeout=300)


def get(api, sid, path, **q):
    q["path"] = path
    return api.request("GET", "/sandboxes/%s/files" % sid, query=q, timeout=300)


def test_upload_download_round_trip_50mb(api, sb):
    data = os.urandom(50 * 1024 * 1024)
    st, _h, body = put(api, sb, "big.bin", data)
    assert st == 200, body
    e = json.loads(body)
    assert e["path"] == "/home/user/big.bin" and e["size"] == len(data) and e["type"] == "file"
    assert e["uid"] == 1000
    st, h, got = get(api, sb, "/home/user/big.bin")
    assert st == 200 and int(h["Content-Length"]) == len(data)
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    j = api.exec(sb, {"cmd": "sha256sum big.bin"})
    assert j["stdout"].split()[0] == hashlib.sha256(data).hexdigest()
    st, _h, _b = api.request("DELETE", "/sandboxes/%s/files" % sb, query={"path": "big.bin"})
    assert st == 204


def test_upload_bigger_than_writable_layer_is_507(api):
    sid = new_sandbox(api, disk_mb=16)
    try:
        st, _h, body = put(api, sid, "keep.txt", b"old contents\n")
        assert st == 200, body
        chunk = os.urandom(1 << 20)

        class Big:
            """40 MiB, streamed (http.client reads file-likes in blocks)."""
            def __init__(self):
                self.left = 40

            def read(self, n=-1):
                if not self.left:
                    return b""
                self.left -= 1
                return chunk

        st, _h, body = api.request("PUT", "/sandboxes/%s/files" % sid, Big(), query={"path": "keep.txt"},
                                   headers={"Content-Length": str(40 << 20),
                                            "Content-Type": "application/octet-stream"}, timeout=300)
        assert st == 507, body
        assert json.loads(body)["error"]["code"] == "no_space"
        st, _h, got = get(api, sid, "keep.txt")
        assert st == 200 and got == b"old contents\n"
        j = api.exec(sid, {"cmd": ["echo", "alive"]})
        assert j["stdout"] == "alive\n"
        st, _h, body = put(api, sid, "after.txt", b"x" * 1000)      # the space came back
        assert st == 200, body
    finally:
        api.request("DELETE", "/sandboxes/%s" % sid)


def test_download_missing_is_404(api, sb):
    st, _h, body = get(api, sb, "/no/such/file")
    assert st == 404, body
    assert json.loads(body)["error"]["code"] == "not_found"


def test_dotdot_stays_inside(api, sb):
    st, _h, body = get(api, sb, "../../etc/passwd")
    assert st == 200, body
    assert b"user:x:1000" in body
    with open("/etc/passwd", "rb") as f:
        host = f.read()
    assert body != host
    st, _h, body = get(api, sb, "/../../../../etc/passwd")
    assert st == 200 and b"user:x:1000" in body, (st, body[:300])


def test_bad_paths_are_400(api, sb):
    for path in ("a\x00b", "/tmp/" + "x" * 256, "/" + "a/" * 2100, ""):
        st, _h, body = get(api, sb, path)
        assert st == 400, (path[:20], st, body)
        st, _h, body = put(api, sb, path, b"data")
        assert st == 400, (path[:20], st, body)
    st, _h, body = api.request("GET", "/sandboxes/%s/files/stat" % sb, query={"path": "a\x00b"})
    assert st == 400
    st, j = api.json("POST", "/sandboxes/%s/files/mkdir" % sb, {"path": "a\u0000b"})
    assert st == 400


def test_symlink_planted_inside_is_resolved_inside(api, sb):
    api.exec(sb, {"cmd": "ln -sf /etc/shadow /home/user/shadow-link; ln -sf ../../../../etc/hostname up-link"})
    with open("/etc/shadow", "rb") as f:
        host_shadow = f.read()
    for user in ("user", "root"):
        st, _h, body = get(api, sb, "/home/user/shadow-link", user=user)
        assert st in (200, 403, 404), (st, body)
        assert body != host_shadow
    st, _h, body = api.request("GET", "/sandboxes/%s/files/stat" % sb, query={"path": "shadow-link"})
    e = json.loads(body)
    assert st == 200 and e["type"] == "symlink" and e["link_target"] == "/etc/shadow"


def test_fifo_refused(api, sb):
    api.exec(sb, {"cmd": "rm -f /home/user/fifo; mkfifo /home/user/fifo"})
    st, _h, body = get(api, sb, "fifo")
    assert st == 400, body
    st, _h, body = put(api, sb, "fifo", b"data")
    assert st == 400, body


def test_mkdir_list_stat_move_remove(api, sb):
    base = "/home/user/tree"
    api.request("DELETE", "/sandboxes/%s/files" % sb, query={"path": base})
    st, e = api.json("POST", "/sandboxes/%s/files/mkdir" % sb, {"path": base + "/a/b"})
    assert st == 201 and e["type"] == "dir" and e["path"] == base + "/a/b", e
    st, e = api.json("POST", "/sandboxes/%s/files/mkdir" % sb, {"path": base + "/a/b"})
    assert st == 409, e
    st, _h, _b = put(api, sb, base + "/a/f.txt", b"12345", mode="0600")
    assert st == 200
    st, e = api.json("GET", "/sandboxes/%s/files/stat" % sb, query={"path": base + "/a/f.txt"})
    assert st == 200 and e["size"] == 5 and e["mode"] == 0o600 and e["type"] == "file"
    assert e["name"] == "f.txt" and e["modified_at"].endswith("Z") and e["uid"] == 1000
    st, j = api.json("GET", "/sandboxes/%s/files/list" % sb, query={"path": base + "/a"})
    assert st == 200
    assert sorted((x["name"], x["type"]) for x in j["entries"]) == [("b", "dir"), ("f.txt", "file")]
    st, j = api.json("GET", "/sandboxes/%s/files/list" % sb, query={"path": base, "depth": 3})
    assert {x["path"] for x in j["entries"]} == {base + "/a", base + "/a/b", base + "/a/f.txt"}
    st, e = api.json("POST", "/sandboxes/%s/files/move" % sb, {"from": base + "/a/f.txt", "to": base + "/g.txt"})
    assert st == 200 and e["path"] == base + "/g.txt" and e["size"] == 5, e
    st, _e = api.json("GET", "/sandboxes/%s/files/stat" % sb, query={"path": base + "/a/f.txt"})
    assert st == 404
    st, _h, _b = api.request("DELETE", "/sandboxes/%s/files" % sb, query={"path": base})
    assert st == 204
    st, _e = api.json("GET", "/sandboxes/%s/files/stat" % sb, query={"path": base})
    assert st == 404
    # root-only places stay root-only for the default user
    st, _h, _b = put(api, sb, "/root/x", b"no")
    assert st == 403
    st, _h, _b = put(api, sb, "/root/x", b"yes", user="root")
    assert st == 200


def test_watch_sees_api_writes(api, sb):
    d = "/home/user/watched"
    api.json("POST", "/sandboxes/%s/files/mkdir" % sb, {"path": d})
    c, r = api.open_stream("/sandboxes/%s/files/watch" % sb, {"path": d, "recursive": 1}, timeout=20)
    assert r.status == 200
    assert put(api, sb, d + "/new.txt", b"hello")[0] == 200
    assert api.request("DELETE", "/sandboxes/%s/files" % sb, query={"path": d + "/new.txt"})[0] == 204
    seen = set()
    deadline = time.time() + 15
    while time.time() < deadline and not {"create", "write", "remove"} <= seen:
        line = r.readline()
        if not line:
            break
        ev = json.loads(line)
        if ev["name"] in ("new.txt",) or ev["name"].startswith(".paddock-upload"):
            seen.add(ev["event"])
    c.close()
    # the upload lands as a temporary file renamed over new.txt
    assert {"create", "write", "remove"} <= seen, seen


def test_audit_has_exec_and_file_calls(api, sb):
    api.exec(sb, {"cmd": ["echo", "audited"]})
    put(api, sb, "audited.txt", b"abc")
    st, _h, body = api.request("GET", "/sandboxes/%s/audit" % sb)
    assert st == 200
    events = [json.loads(l) for l in body.splitlines() if l.strip()]
    starts = [e for e in events if e["event"] == "process.start" and e.get("argv") == ["echo", "audited"]]
    assert starts and starts[0]["user"] == "user" and starts[0]["cwd"] == "/home/user" and starts[0]["pid"] > 0
    writes = [e for e in events if e["event"] == "file.write" and e.get("path") == "audited.txt"]
    assert writes and writes[0]["bytes"] == 3


def test_delete_sandbox_ends_follow_stream(api):
    sid = new_sandbox(api)
    pid = api.start(sid, {"cmd": "while :; do echo tick; sleep 0.1; done"})["pid"]
    c, r = api.open_stream("/sandboxes/%s/processes/%d/output" % (sid, pid), {"follow": 1}, timeout=30)
    assert r.status == 200
    assert r.read(5) == b"tick\n"
    done = {}

    def reader():
        try:
            done["rest"] = r.read()
        except Exception as e:  # noqa: BLE001
            done["error"] = e

    t = threading.Thread(target=reader)
    t.start()
    st, _h, _b = api.request("DELETE", "/sandboxes/%s" % sid)
    assert st == 204
    t.join(20)
    assert not t.is_alive(), "follow stream still open 20 s after the sandbox was deleted"
    c.close()
    assert "error" not in done, done
    st, _ = api.json("GET", "/sandboxes/%s/processes" % sid)
    assert st == 404


def test_aborted_upload_leaves_nothing(api, sb):
    s = socket.create_connection(("127.0.0.1", api.port), timeout=TIMEOUT)
    s.sendall(("PUT /api/v1/sandboxes/%s/files?path=/tmp/aborted.bin HTTP/1.1\r\nHost: x\r\n"
               "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n" % (sb, api.key, 50 << 20)).encode())
    s.sendall(b"\0" * (5 << 20))
    s.close()
    deadline = time.time() + 10
    while time.time() < deadline:
        j = api.exec(sb, {"cmd": "ls -a /tmp | grep -c paddock-upload || true"})
        if j["stdout"].strip() == "0":
            break
        time.sleep(0.2)
    assert j["stdout"].strip() == "0", "the temporary file of an aborted upload is still there"


def test_stdin_without_a_reader_is_an_error(api, sb):
    """Bytes for a process that cannot read them are refused (409), not
    dropped: one started without stdin, one whose stdin was closed, one that
    has exited; signalling an exited process is a 409 too."""
    st, p = api.json("POST", "/sandboxes/%s/processes" % sb, {"cmd": ["sleep", "30"]})
    assert st == 201, p
    st, _, data = api.request("POST", "/sandboxes/%s/processes/%d/stdin" % (sb, p["pid"]), b"x",
                              headers={"Content-Type": "application/octet-stream"})
    assert st == 409 and b"no stdin" in data, (st, data)
    st, q = api.json("POST", "/sandboxes/%s/processes" % sb, {"cmd": ["cat"], "stdin": True})
    assert st == 201, q
    st, _, data = api.request("POST", "/sandboxes/%s/processes/%d/stdin/close" % (sb, q["pid"]))
    assert st == 204, data
    st, _, data = api.request("POST", "/sandboxes/%s/processes/%d/stdin" % (sb, q["pid"]), b"late",
                              headers={"Content-Type": "application/octet-stream"})
    assert st in (409,), (st, data)
    st, j = api.json("POST", "/sandboxes/%s/exec" % sb, {"cmd": ["true"]})
    assert st == 200, j
    st, _, data = api.request("POST", "/sandboxes/%s/processes/%d/signal" % (sb, j["pid"]),
                              json.dumps({"signal": "TERM"}).encode())
    assert st == 409 and b"exited" in data, (st, data)
    api.request("POST", "/sandboxes/%s/processes/%d/signal" % (sb, p["pid"]), json.dumps({"signal": "KILL"}).encode())
