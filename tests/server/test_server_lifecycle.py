"""Server lifecycle beyond the basics: an agent that dies while the server
runs, two servers side by side, and kill -9 of the server while a command
streams output, resumed from the client's offset without a lost byte."""
import hashlib
import http.client
import os
import signal

from pdtest import pid_alive, wait_until
from pdtest.server import Server, tmproot  # noqa: F401 (fixture)


def test_agent_killed_marks_failed_and_cleans_up(tmproot):
    s = Server(os.path.join(tmproot, "agentdies"), "--pool", "0").start()
    try:
        sid = s.create()["id"]
        pid = s.agent_pid(sid)
        os.kill(pid, signal.SIGKILL)
        got = wait_until(lambda: s.json("GET", "/api/v1/sandboxes/" + sid)[1]["state"] == "failed")
        assert got, "the sandbox was not reported failed within 30 s"
        _, body = s.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
        assert any("agent died" in n for n in body.get("notes", [])), body
        assert any(e["event"] == "sandbox.failed" for e in s.audit_events(sid))
        # cleaned up at once: no sandbox dir, no cgroup, no uid range left
        assert wait_until(lambda: s.leftovers() == {}, limit=10), s.leftovers()
        # asking it to run something is a clear error, not a hang
        st, body = s.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": "true"})
        assert st == 409 and "failed" in body["error"]["message"], (st, body)
        st, body = s.json("GET", "/api/v1/sandboxes/%s/metrics" % sid)
        assert st == 409 and "failed" in body["error"]["message"], (st, body)
        assert s.delete(sid) == 204
    finally:
        s.finish()


def test_two_servers_side_by_side(tmproot):
    a = Server(os.path.join(tmproot, "side-a"), "--pool", "0").start()
    b = Server(os.path.join(tmproot, "side-b"), "--pool", "0").start()
    try:
        sa, sb = a.create()["id"], b.create()["id"]
        # each sees only its own, and each one's key is refused by the other
        assert [x["id"] for x in a.json("GET", "/api/v1/sandboxes", expect=200)[1]["sandboxes"]] == [sa]
        assert [x["id"] for x in b.json("GET", "/api/v1/sandboxes", expect=200)[1]["sandboxes"]] == [sb]
        assert a.request("GET", "/api/v1/sandboxes", key=b.key)[0] == 401
        for srv, sid in ((a, sa), (b, sb)):
            st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": "cat /proc/self/uid_map"})
            assert st == 200, j
        ua = a.json("POST", "/api/v1/sandboxes/%s/exec" % sa, {"cmd": "cat /proc/self/uid_map"})[1]["stdout"].split()
        ub = b.json("POST", "/api/v1/sandboxes/%s/exec" % sb, {"cmd": "cat /proc/self/uid_map"})[1]["stdout"].split()
        assert ua[1] != ub[1]
        # stopping one with --destroy-on-exit semantics off leaves the other alone
        pb = b.agent_pid(sb)
        a.finish()
        assert pid_alive(pb)
        assert b.json("POST", "/api/v1/sandboxes/%s/exec" % sb, {"cmd": "echo alive"})[1]["stdout"] == "alive\n"
    finally:
        if a.proc:
            a.finish()
        b.finish()


def read_some(port, key, sid, pid, offset, limit):
    """Read up to `limit` bytes of stdout from `offset` (follow), then drop
    the connection; returns the bytes."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/api/v1/sandboxes/%s/processes/%d/output?stream=stdout&follow=1&from=%d" % (sid, pid, offset),
              headers={"Authorization": "Bearer " + key})
    r = c.getresponse()
    assert r.status == 200, r.read()[:300]
    got = b""
    while not limit or len(got) < limit:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
        if not chunk:
            break
        got += chunk
    c.close()
    return got[:limit] if limit else got


def test_kill9_during_stream_resumes_without_loss(tmproot):
    s = Server(os.path.join(tmproot, "stream9"), "--pool", "0").start()
    try:
        sid = s.create({"timeout": 600})["id"]
        # 4 MB of numbered lines, written slowly enough to outlive a restart
        cmd = "for i in $(seq 1 200); do seq $((i*1000)) $((i*1000+2000)); sleep 0.02; done"
        st, p = s.json("POST", "/api/v1/sandboxes/%s/processes" % sid, {"cmd": cmd})
        assert st == 201, p
        pid = p["pid"]
        first = read_some(s.port, s.key, sid, pid, 0, 200000)
        assert len(first) == 200000
        s.stop(signal.SIGKILL)           # the server dies mid-stream
        s.start()
        rest = read_some(s.port, s.key, sid, pid, len(first), 0)
        whole = first + rest
        expect = "".join("%d\n" % n for i in range(1, 201) for n in range(i * 1000, i * 1000 + 2001)).encode()
        assert hashlib.sha256(whole).hexdigest() == hashlib.sha256(expect).hexdigest(), (len(whole), len(expect))
        assert s.delete(sid) == 204
    finally:
        s.finish()
