"""Snapshots, forks and TTL semantics (issue 7): a snapshot is an immutable
template made from a sandbox's filesystem; fork N makes N independent
copies; paused time does not count; autoPause pauses at the deadline."""
import os
import signal

import pytest

from pdtest import wait_until
from pdtest.server import Server, tmproot  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def srv(tmproot):
    s = Server(os.path.join(tmproot, "snap"), "--pool", "0").start()
    yield s
    s.finish()
    # nothing of a snapshot outlives its deletion; the server's own are gone
    tdir = os.path.join(s.state, "templates")
    left = [d for d in os.listdir(tdir) if d.startswith(".snap-") or d.startswith(".deleted-")] \
        if os.path.isdir(tdir) else []
    assert left == [], left


def sh(srv, sid, cmd, expect_exit=0):
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": cmd, "user": "root"})
    assert st == 200, (st, j)
    assert j["exit_code"] == expect_exit, j
    return j["stdout"]


def snap(srv, sid, name, expect=201):
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/snapshots" % sid, {"name": name})
    assert st == expect, (st, j)
    return j


def test_snapshot_immutable(srv):
    src = srv.create()["id"]
    sh(srv, src, "echo one > /home/user/f && mkdir -p /opt/d && echo x > /opt/d/y && rm /etc/hostname "
                 "&& echo usr > /usr/local/share/paddock-snap-test")
    j = snap(srv, src, "snap-a")
    assert j["name"] == "snap-a" and j["source"] == src and j["template"] == "base"
    # writes in the source after the snapshot are not in it
    sh(srv, src, "echo two > /home/user/f; echo late > /home/user/late")
    a = srv.create({"template": "snap-a"})["id"]
    assert sh(srv, a, "cat /home/user/f /opt/d/y /usr/local/share/paddock-snap-test") == "one\nx\nusr\n"
    assert sh(srv, a, "test -e /home/user/late || echo absent") == "absent\n"
    assert sh(srv, a, "test -e /etc/hostname || echo deleted") == "deleted\n"  # whiteout carried
    # ownership is the sandbox's own view of it
    assert sh(srv, a, "stat -c %U:%G /home/user/f") == sh(srv, src, "stat -c %U:%G /home/user/f")
    # writes in a sandbox started from it do not change the snapshot
    sh(srv, a, "echo changed > /home/user/f; rm /opt/d/y")
    b = srv.create({"template": "snap-a"})["id"]
    assert sh(srv, b, "cat /home/user/f /opt/d/y") == "one\nx\n"
    assert not os.path.exists("/usr/local/share/paddock-snap-test"), "a sandbox wrote to the host's /usr"
    # a snapshot of a sandbox started from a snapshot stacks on it
    snap(srv, a, "snap-b")
    c = srv.create({"template": "snap-b"})["id"]
    assert sh(srv, c, "cat /home/user/f; test -e /opt/d/y || echo gone") == "changed\ngone\n"
    names = [x["name"] for x in srv.json("GET", "/api/v1/snapshots", expect=200)[1]["snapshots"]]
    assert names == ["snap-a", "snap-b"], names
    # in use: refused with the user named; deletable once unused
    st, j = srv.json("DELETE", "/api/v1/snapshots/snap-a")
    assert st == 409 and "in use" in j["error"]["message"], (st, j)
    for sid in (a, b, c):
        assert srv.delete(sid) == 204
    st, j = srv.json("DELETE", "/api/v1/snapshots/snap-a")
    assert st == 409 and "snap-b" in j["error"]["message"], (st, j)   # snap-b stacks on it
    assert srv.request("DELETE", "/api/v1/snapshots/snap-b")[0] == 204
    assert srv.request("DELETE", "/api/v1/snapshots/snap-a")[0] == 204
    assert srv.request("DELETE", "/api/v1/snapshots/snap-a")[0] == 404
    assert not os.path.exists(os.path.join(srv.state, "templates", "snap-a"))
    assert srv.json("POST", "/api/v1/sandboxes", {"template": "snap-a"})[0] == 400
    assert srv.delete(src) == 204


@pytest.mark.parametrize("name,why", [
    ("../etc", "invalid character"), ("a/b", "invalid character"), ("x" * 65, "too long"),
    ("", "empty"), ("Upper", "invalid character"), ("base", "built-in"), ("fork-x", "reserved"),
    ("a b", "invalid character"), ("dot.name", "invalid character"),
])
def test_hostile_snapshot_names(srv, name, why):
    sid = srv.create()["id"]
    try:
        before = sorted(os.listdir(os.path.join(srv.state, "templates")))
        st, j = srv.json("POST", "/api/v1/sandboxes/%s/snapshots" % sid, {"name": name})
        assert st == 400 and why in j["error"]["message"], (st, j)
        assert sorted(os.listdir(os.path.join(srv.state, "templates"))) == before
    finally:
        assert srv.delete(sid) == 204


def test_snapshot_bad_requests(srv):
    sid = srv.create()["id"]
    try:
        assert srv.json("POST", "/api/v1/sandboxes/%s/snapshots" % sid, {"name": 5})[0] == 400
        assert srv.json("POST", "/api/v1/sandboxes/%s/snapshots" % sid, {"name": "a", "x": 1})[0] == 400
        assert srv.json("POST", "/api/v1/sandboxes/%s/snapshots" % sid, "{not json")[0] == 400
        assert srv.json("POST", "/api/v1/sandboxes/nosuchsandbox/snapshots", {"name": "a"})[0] == 404
        snap(srv, sid, "taken")
        st, j = srv.json("POST", "/api/v1/sandboxes/%s/snapshots" % sid, {"name": "taken"})
        assert st == 409 and "exists" in j["error"]["message"], (st, j)
        assert srv.request("DELETE", "/api/v1/snapshots/..")[0] in (400, 404)
        assert srv.request("DELETE", "/api/v1/snapshots/taken")[0] == 204
        # a paused sandbox can be snapshotted and stays paused
        srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid, expect=200)
        snap(srv, sid, "from-paused")
        assert srv.json("GET", "/api/v1/sandboxes/" + sid, expect=200)[1]["state"] == "paused"
        srv.json("POST", "/api/v1/sandboxes/%s/resume" % sid, expect=200)
        assert srv.request("DELETE", "/api/v1/snapshots/from-paused")[0] == 204
    finally:
        assert srv.delete(sid) == 204


def test_fork_independent(srv):
    src = srv.create({"env": {"FORKVAR": "v1"}, "timeout": 900})["id"]
    sh(srv, src, "echo base > /home/user/f")
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/fork" % src, {"count": 3})
    assert st == 201, (st, j)
    kids = [x["id"] for x in j["sandboxes"]]
    assert len(set(kids)) == 3 and src not in kids
    assert all(x["timeout"] == 900 and x["state"] == "running" for x in j["sandboxes"])
    for i, k in enumerate(kids):
        assert sh(srv, k, "cat /home/user/f; echo $FORKVAR") == "base\nv1\n"
        sh(srv, k, "echo kid%d > /home/user/f" % i)
    sh(srv, src, "echo src-after > /home/user/f")
    for i, k in enumerate(kids):
        assert sh(srv, k, "cat /home/user/f") == "kid%d\n" % i
    assert sh(srv, src, "cat /home/user/f") == "src-after\n"
    # forks are not listed as snapshots; their layer goes with the last fork
    assert srv.json("GET", "/api/v1/snapshots", expect=200)[1]["snapshots"] == []
    tdir = os.path.join(srv.state, "templates")
    forks = [d for d in os.listdir(tdir) if d.startswith("fork-")]
    assert len(forks) == 1, forks
    for k in kids:
        assert srv.delete(k) == 204
    assert [d for d in os.listdir(tdir) if d.startswith("fork-")] == []
    for bad in ({"count": 0}, {"count": 65}, {"count": "2"}, {"n": 1}):
        assert srv.json("POST", "/api/v1/sandboxes/%s/fork" % src, bad)[0] == 400, bad
    assert srv.delete(src) == 204


def test_paused_time_not_counted_and_resume_keeps_timeout(srv):
    sid = srv.create({"timeout": 3})["id"]
    srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid, expect=200)
    _, j = srv.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
    assert j["state"] == "paused" and j["expires_at"] is None and 0 < j["timeout_remaining_ms"] <= 3000
    assert j["pause_mode"] == "memory"     # container tier: the freezer keeps memory resident
    # paused for longer than the timeout: still there
    assert not wait_until(lambda: srv.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404, limit=5)
    _, j = srv.json("POST", "/api/v1/sandboxes/%s/resume" % sid, expect=200)
    assert j["state"] == "running" and j["timeout"] == 3
    assert sh(srv, sid, "echo up") == "up\n"
    # and the remaining time runs out after resume
    assert wait_until(lambda: srv.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404, limit=30)


def test_auto_pause_at_deadline(srv):
    sid = srv.create({"timeout": 2, "auto_pause": True})["id"]
    sh(srv, sid, "echo kept > /home/user/k")
    got = wait_until(lambda: srv.json("GET", "/api/v1/sandboxes/" + sid)[1]["state"] == "paused", limit=30)
    assert got, "not paused at its deadline"
    _, j = srv.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
    assert j["auto_pause"] is True and j["timeout_remaining_ms"] == 2000   # the configured timeout, whole
    assert "sandbox.auto_pause" in [e["event"] for e in srv.audit_events(sid)]
    srv.json("POST", "/api/v1/sandboxes/%s/resume" % sid, expect=200)
    assert sh(srv, sid, "cat /home/user/k") == "kept\n"
    assert srv.delete(sid) == 204
    assert srv.json("POST", "/api/v1/sandboxes", {"auto_pause": "yes"})[0] == 400


def test_restart_with_paused_sandbox(tmproot):
    s = Server(os.path.join(tmproot, "restart"), "--pool", "0").start()
    try:
        sid = s.create({"timeout": 600})["id"]
        st, p = s.json("POST", "/api/v1/sandboxes/%s/processes" % sid,
                       {"cmd": "for i in 1 2 3; do echo line$i; done; sleep 3600"})
        assert st == 201, p
        pid = p["pid"]
        sh(s, sid, "echo file > /home/user/r")

        def first_lines():
            st, _, data = s.request("GET", "/api/v1/sandboxes/%s/processes/%d/output?stream=stdout" % (sid, pid))
            return data if st == 200 and b"line3" in data else None
        assert wait_until(first_lines, limit=20)
        s.json("POST", "/api/v1/sandboxes/%s/pause" % sid, expect=200)
        s.stop(signal.SIGKILL)
        s.start()
        _, j = s.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
        assert j["state"] == "paused"
        s.json("POST", "/api/v1/sandboxes/%s/resume" % sid, expect=200)
        assert sh(s, sid, "cat /home/user/r") == "file\n"
        st, _, data = s.request("GET", "/api/v1/sandboxes/%s/processes/%d/output?stream=stdout&from=6" % (sid, pid))
        assert st == 200 and data.startswith(b"line2\nline3\n"), (st, data[:200])
        # a snapshot still works after the restart (the writable layer is still attached)
        snap(s, sid, "after-restart")
        n = s.create({"template": "after-restart"})["id"]
        assert sh(s, n, "cat /home/user/r") == "file\n"
        assert s.delete(n) == 204 and s.delete(sid) == 204
        assert s.request("DELETE", "/api/v1/snapshots/after-restart")[0] == 204
    finally:
        s.finish()


def test_restart_with_files_paused_sandbox(tmproot):
    """A filesystem-only pause is kept across a server restart (kill -9):
    the new server finds the sandbox paused that way, resume boots it on
    its files with the network policy in force at the pause, and delete
    takes everything (its snapshot included)."""
    s = Server(os.path.join(tmproot, "restart-files"), "--pool", "0").start()
    try:
        sid = s.create({"timeout": 600, "network": {"mode": "policy", "allow": ["203.0.113.1"]}})["id"]
        sh(s, sid, "echo kept > /home/user/f")
        _, before = s.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
        _, j = s.json("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "files"}, expect=200)
        assert j["state"] == "paused" and j["paused_to"] == "files", j
        tdir = os.path.join(s.state, "templates")
        assert [d for d in os.listdir(tdir) if d.startswith("fork-" + sid[:20])], os.listdir(tdir)
        s.stop(signal.SIGKILL)
        s.start()
        _, j = s.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
        assert j["state"] == "paused" and j["paused_to"] == "files", j
        assert j["notes"] == before["notes"], j
        _, j = s.json("POST", "/api/v1/sandboxes/%s/resume" % sid, expect=200)
        assert j["state"] == "running", j
        assert sh(s, sid, "cat /home/user/f") == "kept\n"
        assert j["network"] == before["network"], (j["network"], before["network"])
        # a second round after the restart, and a restart while running
        s.json("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "files"}, expect=200)
        s.json("POST", "/api/v1/sandboxes/%s/resume" % sid, expect=200)
        assert sh(s, sid, "cat /home/user/f") == "kept\n"
        s.json("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "files"}, expect=200)
        s.stop(signal.SIGKILL)
        s.start()
        # deleted while paused that way after a restart: nothing of it stays
        assert s.delete(sid) == 204
        assert [d for d in os.listdir(tdir) if d.startswith("fork-" + sid[:20])] == [], os.listdir(tdir)
        assert not os.path.exists(os.path.join(s.rundir, "sandboxes", sid))
    finally:
        s.finish()


def test_gc_removes_a_files_paused_sandbox(tmproot):
    """A sandbox paused keeping its files, its server stopped: `paddock gc`
    removes it (its runtime record) and the snapshot its files were in."""
    s = Server(os.path.join(tmproot, "gc-files"), "--pool", "0").start()
    try:
        sid = s.create({"timeout": 600})["id"]
        s.json("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "files"}, expect=200)
        tdir = os.path.join(s.state, "templates")
        assert [d for d in os.listdir(tdir) if d.startswith("fork-" + sid[:20])], os.listdir(tdir)
        s.stop()
        g = s.gc()
        assert g.returncode == 0 and g.stdout == "removed 1 sandbox\n", (g.stdout, g.stderr)
        assert [d for d in os.listdir(tdir) if d.startswith("fork-" + sid[:20])] == [], os.listdir(tdir)
        assert not os.path.exists(os.path.join(s.rundir, "sandboxes", sid))
    finally:
        s.finish()


def test_cli_snapshot_and_fork(srv):
    def cli(*args):
        return srv.cli(*args, remote=True, timeout=120)
    sid = srv.create()["id"]
    sh(srv, sid, "echo cli > /home/user/c")
    r = cli("snapshot", sid, "cli-snap")
    assert r.returncode == 0 and r.stdout == "cli-snap\n", (r.returncode, r.stdout, r.stderr)
    r = cli("snapshot", sid, "../bad")
    assert r.returncode != 0 and "invalid character" in r.stderr, (r.returncode, r.stderr)
    r = cli("fork", sid, "2")
    assert r.returncode == 0, r.stderr
    kids = r.stdout.split()
    assert len(kids) == 2 and all(sh(srv, k, "cat /home/user/c") == "cli\n" for k in kids)
    assert cli("fork", sid, "0").returncode != 0
    for k in kids + [sid]:
        assert srv.delete(k) == 204
    assert srv.request("DELETE", "/api/v1/snapshots/cli-snap")[0] == 204


def test_cli_snapshot_ls_and_rm(srv):
    """paddock snapshot ls [--json] | rm NAME... (issue 20): the key's
    snapshots, and their removal; a bad name or an unknown one is a clear
    error that changes nothing; one in use is refused, naming the user."""
    import json

    def cli(*args):
        return srv.cli(*args, remote=True, timeout=120)
    sid = srv.create()["id"]
    try:
        assert cli("snapshot", sid, "ls-one").returncode == 0
        assert cli("snapshot", sid, "ls-two").returncode == 0
        r = cli("snapshot", "ls")
        assert r.returncode == 0, r.stderr
        rows = r.stdout.splitlines()
        assert rows[0].split()[:4] == ["NAME", "SOURCE", "TEMPLATE", "TIER"], rows
        assert [l.split()[:3] for l in rows[1:] if l.startswith("ls-")] == [
            ["ls-one", sid, "base"], ["ls-two", sid, "base"]], rows
        r = cli("snapshot", "ls", "--json")
        assert r.returncode == 0 and {"ls-one", "ls-two"} <= {s["name"] for s in json.loads(r.stdout)}, r.stdout
        user = srv.create({"template": "ls-two"})["id"]
        r = cli("snapshot", "rm", "ls-two")
        assert r.returncode == 1 and user in r.stderr, (r.returncode, r.stderr)
        assert srv.delete(user) == 204
        for bad, want in (("../x", "invalid snapshot name"), ("Up", "invalid snapshot name")):
            r = cli("snapshot", "rm", bad)
            assert r.returncode == 2 and want in r.stderr, (bad, r.returncode, r.stderr)
        r = cli("snapshot", "rm", "no-such-snap")
        assert r.returncode == 1 and "no-such-snap" in r.stderr, (r.returncode, r.stderr)
        assert cli("snapshot", "ls", "extra").returncode == 2
        names = {s["name"] for s in srv.json("GET", "/api/v1/snapshots", expect=200)[1]["snapshots"]}
        assert {"ls-one", "ls-two"} <= names
        r = cli("snapshot", "rm", "ls-one", "ls-two")
        assert r.returncode == 0 and r.stdout == "removed ls-one\nremoved ls-two\n", (r.stdout, r.stderr)
        r = cli("snapshot", "ls")
        assert r.returncode == 0 and "ls-one" not in r.stdout and "ls-two" not in r.stdout
        assert cli("snapshot", "--help").stdout.count("snapshot") >= 3
    finally:
        srv.delete(sid)
