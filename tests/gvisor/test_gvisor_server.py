"""The gvisor tier through `paddock serve` (issue 17): create with
isolation "gvisor", exec with offsets, stdin, PTY, files, watch, pause and
resume (runsc pause), pause to disk, snapshots and fork (runsc checkpoint
and restore), adoption after a server kill -9, and what the tier cannot do
refused with a reason."""
import hashlib
import json
import os
import signal
import urllib.parse

import pytest

from pdtest import pid_alive, wait_until
from pdtest.server import Server, tmproot  # noqa: F401 (fixture)

GV = {"isolation": "gvisor"}
T = 180


def req(srv, method, path, body=None, query=None, timeout=T):
    if query:
        path += "?" + urllib.parse.urlencode(query)
    return srv.request(method, "/api/v1/sandboxes/" + path, body, timeout=timeout)


def jreq(srv, method, path, body=None, expect=200, **kw):
    st, _h, data = req(srv, method, path, body, **kw)
    assert st == expect, (method, path, st, data[:1000])
    return json.loads(data) if data.strip() else None


def sh(srv, sid, cmd, user="user"):
    j = jreq(srv, "POST", sid + "/exec", {"cmd": cmd, "user": user})
    assert j["exit_code"] == 0, j
    return j["stdout"]


@pytest.fixture(scope="module")
def srv(tmproot):
    s = Server(os.path.join(tmproot, "gvisor"), "--pool", "0").start()
    try:
        yield s
    finally:
        s.finish()
    assert not [l for l in open("/proc/self/mountinfo") if "paddock-gvisor" in l and s.instance in l]


@pytest.fixture(scope="module")
def gv(srv):
    st, _h, data = srv.request("POST", "/api/v1/sandboxes", GV, timeout=T)
    assert st == 201, data
    return json.loads(data)


def chosen_platform():
    """What the tier picks on this host (gvisor_platform.c): systrap if this
    runsc has it, kvm if it has that and the host has vmx/svm and /dev/kvm,
    else ptrace."""
    from conftest import RUNSC
    blob = open(RUNSC, "rb").read()
    has = lambda p: ("gvisor.dev/gvisor/pkg/sentry/platform/" + p).encode() in blob  # noqa: E731
    hw = any(f in open("/proc/cpuinfo").read().split() for f in ("vmx", "svm")) and os.path.exists("/dev/kvm")
    return "systrap" if has("systrap") else "kvm" if has("kvm") and hw else "ptrace"


def test_create_reports_tier_and_platform(srv, gv):
    assert gv["isolation"] == "gvisor" and gv["state"] == "running"
    want = chosen_platform()
    assert gv.get("accel") == want, gv
    # the record keeps it (restores and adoption run the same), GET /tiers says the same
    rec = open(os.path.join(srv.rundir, "sandboxes", gv["id"], "record")).read()
    assert "gv_platform=%s\n" % want in rec, rec
    st, _h, data = srv.request("GET", "/api/v1/tiers")
    t = {x["name"]: x for x in json.loads(data)["tiers"]}["gvisor"]
    assert t["available"] and t["why"].endswith("--platform=" + want), t
    j = jreq(srv, "GET", gv["id"])
    assert j["isolation"] == "gvisor"
    assert sh(srv, gv["id"], "uname -r").strip() != os.uname().release


def test_exec_exit_code_env_user(srv, gv):
    j = jreq(srv, "POST", gv["id"] + "/exec", {"cmd": "echo out; echo err >&2; exit 7", "env": {"A": "b"}})
    assert (j["exit_code"], j["stdout"], j["stderr"]) == (7, "out\n", "err\n"), j
    j = jreq(srv, "POST", gv["id"] + "/exec", {"cmd": ["sh", "-c", "echo $A; id -un"], "env": {"A": "b"}})
    assert j["stdout"] == "b\nuser\n", j
    assert sh(srv, gv["id"], "id -u", user="root") == "0\n"


def test_output_offsets(srv, gv):
    p = jreq(srv, "POST", gv["id"] + "/processes",
             {"cmd": "for i in $(seq 1 200); do echo line$i; done; echo bye >&2"}, expect=201)
    path = "%s/processes/%d/output" % (gv["id"], p["pid"])
    st, _h, full = req(srv, "GET", path, query={"follow": 1})
    want = "".join("line%d\n" % i for i in range(1, 201)).encode()
    assert st == 200 and full == want
    st, _h, rest = req(srv, "GET", path, query={"from": 1000})
    assert st == 200 and rest == want[1000:]
    assert req(srv, "GET", path, query={"stream": "stderr"})[2] == b"bye\n"


def test_stdin_round_trip(srv, gv):
    p = jreq(srv, "POST", gv["id"] + "/processes", {"cmd": ["cat"], "stdin": True}, expect=201)
    data = os.urandom(100000)
    assert req(srv, "POST", "%s/processes/%d/stdin" % (gv["id"], p["pid"]), data)[0] == 204
    assert req(srv, "POST", "%s/processes/%d/stdin/close" % (gv["id"], p["pid"]))[0] == 204
    st, _h, out = req(srv, "GET", "%s/processes/%d/output" % (gv["id"], p["pid"]), query={"follow": 1})
    assert st == 200 and out == data


def test_pty(srv, gv):
    p = jreq(srv, "POST", gv["id"] + "/processes",
             {"cmd": "read line; test -t 0 && echo isatty; stty size; echo got=$line",
              "pty": {"rows": 24, "cols": 80}}, expect=201)
    path = "%s/processes/%d" % (gv["id"], p["pid"])
    assert req(srv, "POST", path + "/resize", {"rows": 40, "cols": 120})[0] == 204
    assert req(srv, "POST", path + "/stdin", b"typed\r")[0] == 204
    st, _h, out = req(srv, "GET", path + "/output", query={"follow": 1})
    assert b"isatty" in out and b"40 120" in out and b"got=typed" in out, out


def test_files(srv, gv):
    sid = gv["id"]
    data = os.urandom(1 << 20)
    st, _h, body = req(srv, "PUT", sid + "/files", data, query={"path": "/home/user/blob", "mode": "0600"})
    assert st == 200, body
    st, _h, got = req(srv, "GET", sid + "/files", query={"path": "/home/user/blob"})
    assert st == 200 and got == data
    assert sh(srv, sid, "sha256sum /home/user/blob | cut -d' ' -f1").strip() == hashlib.sha256(data).hexdigest()
    jreq(srv, "POST", sid + "/files/mkdir", {"path": "/home/user/d/e", "parents": True}, expect=201)
    names = [e["name"] for e in jreq(srv, "GET", sid + "/files/list", query={"path": "/home/user/d"})["entries"]]
    assert names == ["e"]
    assert req(srv, "DELETE", sid + "/files", query={"path": "/home/user/blob"})[0] == 204
    for bad in ("a\x00b", "/tmp/" + "x" * 256, ""):
        assert req(srv, "GET", sid + "/files", query={"path": bad})[0] == 400


def test_pause_resume(srv, gv):
    """In memory (runsc pause); a snapshot of it is refused until resumed
    (a checkpoint needs the agent awake)."""
    sid = gv["id"]
    sh(srv, sid, "echo kept > /home/user/kp")
    j = jreq(srv, "POST", sid + "/pause", {"mode": "memory"})
    try:
        assert j["state"] == "paused"
        assert req(srv, "POST", sid + "/exec", {"cmd": "true"})[0] == 409
        st, _h, data = req(srv, "POST", sid + "/snapshots", {"name": "gv-paused"})
        assert st >= 400 and b"resume it first" in data, (st, data)
        assert not os.path.exists(os.path.join(srv.state, "templates", "gv-paused"))
    finally:
        j = jreq(srv, "POST", sid + "/resume")
    assert j["state"] == "running"
    assert sh(srv, sid, "cat /home/user/kp") == "kept\n"


def counter(srv, sid):
    """A loop in the background that counts in /home/user/c; its value."""
    sh(srv, sid, "echo kept > /home/user/k; sh -c 'i=0; while true; do i=$((i+1)); echo $i > /home/user/c.t; "
                 "mv /home/user/c.t /home/user/c; sleep 0.05; done' >/dev/null 2>&1 &")
    wait_until(lambda: sh(srv, sid, "cat /home/user/c 2>/dev/null || echo 0").strip() != "0", 60)
    return int(sh(srv, sid, "cat /home/user/c"))


def counts_on(srv, sid, since):
    """The counter of sid went past since: its process survived."""
    return wait_until(lambda: int(sh(srv, sid, "cat /home/user/c")) > since, 60)


def test_pause_to_disk_and_resume(srv):
    """runsc checkpoint into the state dir: the Sentry ends, its memory goes
    back to the host; a new server (after a kill -9) finds it paused; resume
    restores it with the processes running."""
    sid = json.loads(srv.request("POST", "/api/v1/sandboxes", dict(GV, timeout=600), timeout=T)[2])["id"]
    try:
        n = counter(srv, sid)
        sentry = srv.agent_pid(sid)
        j = jreq(srv, "POST", sid + "/pause", {"mode": "disk"})
        assert j["state"] == "paused"
        assert wait_until(lambda: not pid_alive(sentry), 30)
        image = os.path.join(srv.state, "gvisor", "paused", sid, "checkpoint.img")
        assert os.path.getsize(image) > 0
        assert req(srv, "POST", sid + "/exec", {"cmd": "true"})[0] == 409
        st, _h, data = req(srv, "POST", sid + "/pause", {"mode": "disk"})
        assert st == 409, (st, data)
        srv.stop(signal.SIGKILL)
        srv.start()
        assert jreq(srv, "GET", sid)["state"] == "paused"
        assert jreq(srv, "POST", sid + "/resume")["state"] == "running"
        assert srv.agent_pid(sid) != sentry
        assert not os.path.exists(os.path.dirname(image))
        assert sh(srv, sid, "cat /home/user/k") == "kept\n"
        assert counts_on(srv, sid, n)
    finally:
        assert srv.delete(sid) == 204
    assert not os.path.exists(os.path.join(srv.state, "gvisor", "paused", sid))


def test_snapshot_and_fork_carry_memory(srv):
    """A snapshot and the copies of a fork are the Sentry's checkpoint: the
    counting process runs on in each, with the files; each is its own (a
    file written in the copy is in neither the source nor the sandbox from
    the snapshot); the source runs on."""
    sid = json.loads(srv.request("POST", "/api/v1/sandboxes", GV, timeout=T)[2])["id"]
    made = []
    try:
        n = counter(srv, sid)
        j = jreq(srv, "POST", sid + "/snapshots", {"name": "gv-snap"}, expect=201)
        assert j["isolation"] == "gvisor", j
        assert counts_on(srv, sid, n)
        st, _h, data = srv.request("POST", "/api/v1/sandboxes", {"template": "gv-snap"}, timeout=T)
        assert st == 201, data
        made.append(json.loads(data)["id"])
        assert json.loads(data)["isolation"] == "gvisor"
        assert sh(srv, made[0], "cat /home/user/k") == "kept\n"
        assert counts_on(srv, made[0], n)
        # a memory snapshot starts on its own tier only
        st, _h, data = srv.request("POST", "/api/v1/sandboxes", {"template": "gv-snap", "isolation": "container"},
                                   timeout=T)
        assert st == 400 and b"gvisor" in data, (st, data)
        j = jreq(srv, "POST", sid + "/fork", {"count": 1}, expect=201)
        copies = [c["id"] for c in j["sandboxes"]]
        made += copies
        assert len(set(copies + [sid])) == 2
        assert counts_on(srv, copies[0], n)
        sh(srv, copies[0], "echo mine > /home/user/only0")
        assert sh(srv, made[0], "test -e /home/user/only0 && echo yes || echo no") == "no\n"
        assert sh(srv, sid, "test -e /home/user/only0 && echo yes || echo no") == "no\n"
        assert counts_on(srv, sid, n)
        assert not os.path.exists(os.path.join(srv.state, "gvisor", "fork-" + sid))
    finally:
        for c in made:
            assert srv.delete(c) == 204
        assert srv.delete(sid) == 204
    assert srv.request("DELETE", "/api/v1/snapshots/gv-snap")[0] == 204


def test_workload_cannot_cut_the_agent_off(srv, gv):
    """The agent lets go of its host sockets on SIGUSR1 from the host (runsc
    kill) only: root inside sending it changes nothing, and a marker the
    workload leaves is not taken for the agent's."""
    sid = gv["id"]
    sh(srv, sid, "kill -USR1 1; kill -USR2 1; kill -USR1 1; touch /.paddock/sock/agent.sock.quiet", user="root")
    for _ in range(3):
        assert sh(srv, sid, "echo still") == "still\n"
    assert os.path.exists(os.path.join(srv.rundir, "sandboxes", sid, "sock", "agent.sock"))


def test_adopted_after_server_kill9(srv):
    sid = json.loads(srv.request("POST", "/api/v1/sandboxes", dict(GV, timeout=600), timeout=T)[2])["id"]
    sh(srv, sid, "echo survive > /home/user/s")
    sentry = srv.agent_pid(sid)
    srv.stop(signal.SIGKILL)
    srv.start()
    assert jreq(srv, "GET", sid)["state"] == "running"
    assert sh(srv, sid, "cat /home/user/s") == "survive\n"
    assert srv.agent_pid(sid) == sentry
    assert srv.delete(sid) == 204
    assert wait_until(lambda: not pid_alive(sentry), 30)


def test_file_api_refuses_symlinks_without_openat2(srv, gv):
    """This Sentry has no openat2: the agent walks request paths with
    O_NOFOLLOW and refuses a symlink anywhere in them (docs/gvisor.md)."""
    sid = gv["id"]
    sh(srv, sid, "mkdir -p /home/user/real && echo in > /home/user/real/f && ln -sfn /home/user/real /home/user/link")
    assert req(srv, "GET", sid + "/files", query={"path": "/home/user/real/f"})[2] == b"in\n"
    st, _h, body = req(srv, "GET", sid + "/files", query={"path": "/home/user/link/f"})
    assert 400 <= st < 500, (st, body)
    st, _h, body = req(srv, "PUT", sid + "/files", b"x", query={"path": "/home/user/link/g"})
    assert 400 <= st < 500, (st, body)
    assert sh(srv, sid, "test -e /home/user/real/g && echo made || echo none") == "none\n"


def test_runsc_missing_refuses_create_with_the_package_name(tmproot):
    os.environ["PADDOCK_RUNSC"] = "/nonexistent/runsc"
    try:
        s = Server(os.path.join(tmproot, "gvisor-norunsc"), "--pool", "0").start()
    finally:
        del os.environ["PADDOCK_RUNSC"]
    try:
        st, _h, data = s.request("POST", "/api/v1/sandboxes", GV, timeout=T)
        assert 400 <= st < 600 and st != 201, (st, data)
        assert b"install the Debian package 'runsc'" in data, data
        assert json.loads(s.request("GET", "/api/v1/sandboxes")[2]).get("sandboxes", []) == []
        st, _h, data = s.request("POST", "/api/v1/sandboxes", {}, timeout=T)      # other tiers unaffected
        assert st == 201, data
        assert s.delete(json.loads(data)["id"]) == 204
    finally:
        s.finish()
