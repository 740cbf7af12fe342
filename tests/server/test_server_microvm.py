"""The microvm tier through `paddock serve` (issue 7): every API call works the
same on a QEMU guest as on the container tier (exec, streams with offsets,
stdin, PTY, files, watch, metrics, ports through the agent's tunnel), pause
to disk releases the guest's memory and resumes after a kill -9 of the server,
fork copies a running guest, and the warm pool holds microvm clones.

QEMU runs under TCG here (2 shared cores): one server, a handful of guests."""
import glob
import hashlib
import json
import os
import shutil
import signal
import time
import urllib.parse

import pytest

from pdtest import instance_of, pid_alive, wait_until
from pdtest.server import Server, tmproot  # noqa: F401 (fixture)

GUEST_DIR = os.environ.get("PADDOCK_GUEST_DIR", "/var/cache/paddock/guest")
SLOW = 240      # the first create builds the guest's assets and boots the template once

if not glob.glob(os.path.join(GUEST_DIR, "boot", "vmlinuz-*")) or not os.path.exists(
        "/usr/bin/qemu-system-x86_64"):
    # Not a hardware gap: scripts/setup.sh installs both, so their absence is a failure.
    raise RuntimeError("no guest kernel or QEMU: run scripts/setup.sh")

VM = {"isolation": "microvm"}


def req(srv, method, path, body=None, query=None, timeout=SLOW):
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


def create(srv, **body):
    st, _h, data = srv.request("POST", "/api/v1/sandboxes", dict(VM, **body), timeout=SLOW)
    assert st == 201, data
    return json.loads(data)["id"]


def qemu_pid(srv, sid):
    """The sandbox's QEMU (its record's agent_pid in microvm); 0 if the
    record names none."""
    try:
        return srv.agent_pid(sid)
    except AssertionError:
        return 0


def wait_for(pred, limit=60, step=0.2):
    return wait_until(pred, limit, step)    # the pool filler is not observable as an event from here


CONSOLE_MAX = 65536     # the console log's cap for this module's server (the default is 1 MiB)


@pytest.fixture(scope="module")
def srv(tmproot):
    os.environ["PADDOCK_VM_CONSOLE_MAX"] = str(CONSOLE_MAX)
    try:
        s = Server(os.path.join(tmproot, "microvm"), "--pool", "0").start()
    finally:
        del os.environ["PADDOCK_VM_CONSOLE_MAX"]
    try:
        yield s
    finally:
        s.finish()
        # the saved guests of deleted sandboxes go with them
        assert glob.glob(os.path.join(s.state, "vm", "paused", "*")) == []


@pytest.fixture(scope="module")
def vm(srv):
    st, _h, data = srv.request("POST", "/api/v1/sandboxes", VM, timeout=SLOW)
    assert st == 201, data
    return json.loads(data)


def test_create_reports_tier_accel_and_pause_mode(srv, vm):
    assert vm["isolation"] == "microvm" and vm["state"] == "running"
    with open("/proc/cpuinfo") as f:
        hw = any(w in f.read().split() for w in ("vmx", "svm"))
    assert vm["accel"] == ("kvm" if hw and os.access("/dev/kvm", os.W_OK) else "tcg")
    assert vm["pause_mode"] == "disk"
    # a fresh clone lists no process (the template's own warm-up is not the user's)
    assert jreq(srv, "GET", vm["id"] + "/processes")["processes"] == []
    j = jreq(srv, "GET", vm["id"])
    assert j["isolation"] == "microvm" and j["accel"] == vm["accel"]
    # the guest runs its own kernel, the one of the guest package
    guest = {os.path.basename(k)[len("vmlinuz-"):] for k in glob.glob(os.path.join(GUEST_DIR, "boot", "vmlinuz-*"))}
    assert sh(srv, vm["id"], "uname -r").strip() in guest


def test_console_log_is_capped(srv, vm):
    """Root in the guest floods its serial console (the guest's kernel and
    anything with /dev/console write there): the host's console.log, on the
    runtime dir's tmpfs, stays under its cap and says it was truncated."""
    log = os.path.join(srv.rundir, "sandboxes", vm["id"], "vm", "console.log")
    assert os.path.exists(log)
    sh(srv, vm["id"], "head -c 400000 /dev/zero | tr '\\0' x > /dev/console; "
                      "echo done > /dev/console; echo done > /dev/console", user="root")
    biggest = [0]

    def drained():
        # QEMU may still be writing what the guest's tty buffered
        biggest[0] = max(biggest[0], os.path.getsize(log))
        with open(log, errors="replace") as f:
            return "done" in f.read()[-4096:]
    wait_for(drained, limit=60)
    assert biggest[0] <= 2 * CONSOLE_MAX, biggest[0]
    with open(log, errors="replace") as f:
        text = f.read()
    assert "[paddock: console log over %d bytes, truncated" % CONSOLE_MAX in text, text[:300]


def test_exec_exit_code_and_env(srv, vm):
    j = jreq(srv, "POST", vm["id"] + "/exec", {"cmd": "echo out; echo err >&2; exit 7", "env": {"A": "b"}})
    assert (j["exit_code"], j["stdout"], j["stderr"]) == (7, "out\n", "err\n"), j
    j = jreq(srv, "POST", vm["id"] + "/exec", {"cmd": ["sh", "-c", "echo $A; id -un"], "env": {"A": "b"}})
    assert j["stdout"] == "b\nuser\n", j
    assert sh(srv, vm["id"], "id -u", user="root") == "0\n"


def test_output_offsets_resume_without_loss(srv, vm):
    p = jreq(srv, "POST", vm["id"] + "/processes",
             {"cmd": "for i in $(seq 1 200); do echo line$i; done; echo bye >&2"}, expect=201)
    pid = p["pid"]
    st, _h, full = req(srv, "GET", "%s/processes/%d/output" % (vm["id"], pid), query={"follow": 1})
    assert st == 200
    want = "".join("line%d\n" % i for i in range(1, 201)).encode()
    assert full == want
    # from an offset in the middle: exactly the rest
    st, _h, rest = req(srv, "GET", "%s/processes/%d/output" % (vm["id"], pid), query={"from": 1000})
    assert st == 200 and rest == want[1000:]
    st, _h, err = req(srv, "GET", "%s/processes/%d/output" % (vm["id"], pid), query={"stream": "stderr"})
    assert err == b"bye\n"
    j = jreq(srv, "GET", "%s/processes/%d" % (vm["id"], pid))
    assert j["state"] == "exited" and j["exit_code"] == 0 and j["stdout_bytes"] == len(want)


def test_stdin_round_trip(srv, vm):
    p = jreq(srv, "POST", vm["id"] + "/processes", {"cmd": ["cat"], "stdin": True}, expect=201)
    data = os.urandom(100000)
    st, _h, _b = req(srv, "POST", "%s/processes/%d/stdin" % (vm["id"], p["pid"]), data)
    assert st == 204
    assert req(srv, "POST", "%s/processes/%d/stdin/close" % (vm["id"], p["pid"]))[0] == 204
    st, _h, out = req(srv, "GET", "%s/processes/%d/output" % (vm["id"], p["pid"]), query={"follow": 1})
    assert st == 200 and out == data


def test_pty(srv, vm):
    p = jreq(srv, "POST", vm["id"] + "/processes",
             {"cmd": "read line; test -t 0 && echo isatty; stty size; echo got=$line",
              "pty": {"rows": 24, "cols": 80}}, expect=201)
    path = "%s/processes/%d" % (vm["id"], p["pid"])
    assert req(srv, "POST", path + "/resize", {"rows": 40, "cols": 120})[0] == 204
    assert req(srv, "POST", path + "/stdin", b"typed\r")[0] == 204
    st, _h, out = req(srv, "GET", path + "/output", query={"follow": 1})
    assert b"isatty" in out and b"40 120" in out and b"got=typed" in out, out
    assert req(srv, "POST", path + "/resize", {"rows": 0, "cols": 1})[0] == 400


def test_files_up_down_and_ops(srv, vm):
    sid = vm["id"]
    data = os.urandom(3 << 20)
    st, _h, body = req(srv, "PUT", sid + "/files", data, query={"path": "/home/user/blob", "mode": "0600"})
    assert st == 200, body
    assert json.loads(body)["size"] == len(data)
    st, _h, got = req(srv, "GET", sid + "/files", query={"path": "/home/user/blob"})
    assert st == 200 and hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    assert sh(srv, sid, "sha256sum /home/user/blob | cut -d' ' -f1").strip() == hashlib.sha256(data).hexdigest()
    jreq(srv, "POST", sid + "/files/mkdir", {"path": "/home/user/d/e", "parents": True}, expect=201)
    jreq(srv, "POST", sid + "/files/move", {"from": "/home/user/blob", "to": "/home/user/d/e/b"})
    names = [e["name"] for e in jreq(srv, "GET", sid + "/files/list", query={"path": "/home/user/d/e"})["entries"]]
    assert names == ["b"]
    assert jreq(srv, "GET", sid + "/files/stat", query={"path": "/home/user/d/e/b"})["mode"] == 0o600
    assert req(srv, "DELETE", sid + "/files", query={"path": "/home/user/d/e/b"})[0] == 204
    assert req(srv, "GET", sid + "/files", query={"path": "/home/user/d/e/b"})[0] == 404
    # hostile paths stay inside the guest's tree, or are refused
    for bad in ("a\x00b", "/tmp/" + "x" * 256, ""):
        assert req(srv, "GET", sid + "/files", query={"path": bad})[0] == 400
        assert req(srv, "PUT", sid + "/files", b"data", query={"path": bad})[0] == 400
    st, _h, _b = req(srv, "GET", sid + "/files", query={"path": "/home/user/../../etc/hostname"})
    assert st in (200, 404)


def test_watch(srv, vm):
    sid, d = vm["id"], "/home/user/watched"
    jreq(srv, "POST", sid + "/files/mkdir", {"path": d}, expect=201)
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    try:
        c.request("GET", "/api/v1/sandboxes/%s/files/watch?%s" % (sid, urllib.parse.urlencode({"path": d})),
                  headers={"Authorization": "Bearer " + srv.key})
        r = c.getresponse()
        assert r.status == 200
        assert req(srv, "PUT", sid + "/files", b"x", query={"path": d + "/new.txt"})[0] == 200
        seen = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "new.txt" not in seen:
            line = r.readline()
            if not line:
                break
            seen.add(json.loads(line)["name"])
        assert "new.txt" in seen, seen
    finally:
        c.close()


def test_metrics(srv, vm):
    m = jreq(srv, "GET", vm["id"] + "/metrics")
    assert m["memory_limit_bytes"] == vm["memory_mb"] << 20 and m["pids_limit"] == vm["pids"]
    assert m["memory_bytes"] > 0, m          # the guest's memory, as QEMU holds it
    assert m["cpu_seconds"] > 0, m


def test_ports_through_the_agent_tunnel(srv, vm):
    sid = vm["id"]
    jreq(srv, "POST", sid + "/processes",
         {"cmd": "mkdir -p /tmp/www && cd /tmp/www && echo from-the-guest > hello.txt && "
                 "exec python3 -m http.server 8000 --bind 127.0.0.1"}, expect=201)
    auth = {"Authorization": "Bearer " + srv.key}

    def get():
        st, _h, body = srv.request("GET", "/api/v1/sandboxes/%s/ports/8000/hello.txt" % sid, headers=auth)
        assert st in (200, 502), (st, body)
        return body if st == 200 else None
    assert wait_for(get, limit=120) == b"from-the-guest\n"


def test_bad_pause_requests(srv, vm):
    for body in ({"mode": "bogus"}, {"mode": 1}, {"mode": "disk", "x": 1}, "[1]", "{no json"):
        st, _h, data = req(srv, "POST", vm["id"] + "/pause", body)
        assert st == 400, (body, data)
    assert jreq(srv, "GET", vm["id"])["state"] == "running"
    # the container tier cannot pause to disk: a clear 400, and it stays running
    c = json.loads(srv.request("POST", "/api/v1/sandboxes", {})[2])
    st, _h, data = req(srv, "POST", c["id"] + "/pause", {"mode": "disk"})
    assert st == 400 and b"cannot pause to disk" in data, data
    assert jreq(srv, "GET", c["id"])["state"] == "running"
    assert srv.delete(c["id"]) == 204


def test_pause_in_memory_and_paused_time_not_counted(srv):
    sid = create(srv, timeout=4)
    sh(srv, sid, "echo kept > /home/user/k")
    pid = qemu_pid(srv, sid)
    j = jreq(srv, "POST", sid + "/pause", {"mode": "memory"})
    assert j["state"] == "paused" and j["paused_to"] == "memory" and j["expires_at"] is None
    assert 0 < j["timeout_remaining_ms"] <= 4000
    assert pid_alive(pid)                     # stopped, still resident
    # paused longer than its timeout: still there
    assert not wait_for(lambda: srv.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404, limit=6)
    st, _h, _b = req(srv, "POST", sid + "/exec", {"cmd": "true"})
    assert st == 409
    j = jreq(srv, "POST", sid + "/resume")
    assert j["state"] == "running" and j["timeout"] == 4 and "paused_to" not in j
    assert sh(srv, sid, "cat /home/user/k") == "kept\n"
    # the rest of its time runs out after the resume
    assert wait_for(lambda: srv.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404, limit=60)
    assert not pid_alive(pid)


def test_fork_copies_memory_and_files(srv):
    src = create(srv, timeout=600)
    sh(srv, src, "echo base > /home/user/f")
    # a process whose memory holds state: it survives into the copies
    p = jreq(srv, "POST", src + "/processes",
             {"cmd": "python3 -c 'import time\nn=0\nwhile True:\n  n+=1; print(n, flush=True); time.sleep(0.2)'"},
             expect=201)
    assert wait_for(lambda: req(srv, "GET", "%s/processes/%d/output" % (src, p["pid"]))[2].count(b"\n") >= 2, 60)
    j = jreq(srv, "POST", src + "/fork", {"count": 2}, expect=201)
    kids = [x["id"] for x in j["sandboxes"]]
    assert len(set(kids)) == 2 and src not in kids
    assert all(x["isolation"] == "microvm" and x["timeout"] == 600 for x in j["sandboxes"])
    assert "tier" in [e.get("how") for e in srv.audit_events(src) if e["event"] == "sandbox.fork"]
    for i, k in enumerate(kids):
        assert sh(srv, k, "cat /home/user/f") == "base\n"
        # the copied process goes on counting in the copy
        procs = jreq(srv, "GET", k + "/processes")["processes"]
        assert any(x["pid"] == p["pid"] and x["state"] == "running" for x in procs), procs
        sh(srv, k, "echo kid%d > /home/user/f" % i)
    sh(srv, src, "echo src-after > /home/user/f")
    for i, k in enumerate(kids):
        assert sh(srv, k, "cat /home/user/f") == "kid%d\n" % i
    assert sh(srv, src, "cat /home/user/f") == "src-after\n"
    # no two copies share their RNG
    r = {sh(srv, x, "head -c16 /dev/urandom | od -An -tx1") for x in kids + [src]}
    assert len(r) == 3
    for x in kids + [src]:
        assert srv.delete(x) == 204


def test_pause_to_disk_survives_server_kill9(srv, vm):
    sid = create(srv, timeout=600)
    sh(srv, sid, "echo on-disk > /home/user/kept")
    p = jreq(srv, "POST", sid + "/processes",
             {"cmd": "for i in $(seq 1 100000); do echo tick$i; sleep 0.1; done"}, expect=201)
    assert wait_for(lambda: len(req(srv, "GET", "%s/processes/%d/output" % (sid, p["pid"]))[2]) >= 12, 60)
    qemu = qemu_pid(srv, sid)
    j = jreq(srv, "POST", sid + "/pause", {"mode": "disk"})
    assert j["state"] == "paused" and j["paused_to"] == "disk"
    remaining = j["timeout_remaining_ms"]
    # the guest's memory is released: its QEMU is gone
    assert wait_for(lambda: not pid_alive(qemu), limit=30)
    st, _h, before = req(srv, "GET", "%s/processes/%d/output" % (sid, p["pid"]))
    assert st == 409        # paused: nothing answers
    # the server dies; a new one on the same state dir finds it paused
    srv.stop(signal.SIGKILL)
    srv.start()
    j = jreq(srv, "GET", sid)
    assert j["state"] == "paused" and j["paused_to"] == "disk" and j["timeout_remaining_ms"] == remaining
    # a running guest was adopted too: same QEMU, same files
    assert jreq(srv, "GET", vm["id"])["state"] == "running"
    assert sh(srv, vm["id"], "echo still") == "still\n"
    j = jreq(srv, "POST", sid + "/resume")
    assert j["state"] == "running" and j["timeout"] == 600
    assert qemu_pid(srv, sid) != qemu
    assert sh(srv, sid, "cat /home/user/kept") == "on-disk\n"
    # the process is the same one, its output continuous from offset 0
    procs = {x["pid"]: x for x in jreq(srv, "GET", sid + "/processes")["processes"]}
    assert procs[p["pid"]]["state"] == "running", procs
    n = procs[p["pid"]]["stdout_bytes"]
    st, _h, out = req(srv, "GET", "%s/processes/%d/output" % (sid, p["pid"]), query={"from": 0})
    lines = out.decode().splitlines()
    assert lines[:len(lines) - 1] == ["tick%d" % i for i in range(1, len(lines))], lines[:20]
    assert len(out) >= n
    # and it goes on counting after the resume
    assert wait_for(lambda: len(req(srv, "GET", "%s/processes/%d/output" % (sid, p["pid"]))[2]) > len(out) + 20, 60)
    # a second pause to disk and a delete while paused leave nothing
    jreq(srv, "POST", sid + "/pause", {"mode": "disk"})
    assert srv.delete(sid) == 204
    assert not glob.glob(os.path.join(srv.state, "vm", "paused", sid))


def test_create_with_a_network_gets_a_configured_nic(srv):
    """A guest with a network: virtio-net bridged to the router's veth in
    QEMU's own netns (tests/network/test_microvm_net.py has the policy
    matrix). This server has no uplink: the guest reaches only its router."""
    sid = create(srv, network={"mode": "open"})
    j = jreq(srv, "GET", sid)
    assert j["network"]["mode"] == "open", j
    out = sh(srv, sid, "cat /sys/class/net/eth0/address; cat /etc/resolv.conf; ls /sys/class/net")
    lines = out.split()
    assert lines[0].startswith("02:70:") and lines[0] != "02:70:00:00:00:01", out
    assert "nameserver" in lines and any(x.startswith("10.201.") for x in lines), out
    # saves of a guest with a NIC are refused clearly and change nothing
    for path, body in [(sid + "/pause", {"mode": "disk"}), (sid + "/fork", {"count": 1}),
                       (sid + "/snapshots", {"name": "vmnet-snap"})]:
        st, _h, data = req(srv, "POST", path, body)
        assert 400 <= st < 500 and b"with a network" in data, (path, st, data)
    assert jreq(srv, "GET", sid)["state"] == "running"
    assert sh(srv, sid, "echo alive") == "alive\n"
    net = os.path.join(srv.rundir, "net")
    assert os.path.exists(os.path.join(net, "sb", sid))
    assert srv.delete(sid) == 204
    assert not os.path.exists(os.path.join(net, "sb", sid))
    assert not os.listdir(os.path.join(net, "slots"))


def test_warm_pool_serves_microvm(srv):
    # restart the server with a warm pool (SIGTERM keeps the sandboxes)
    srv.stop()
    srv.extra = ["--pool", "1"]
    srv.start()
    first = create(srv)

    def ready():
        st, _h, body = srv.request("GET", "/metrics", key=None)
        return b'paddock_pool_ready_isolation{template="base",isolation="microvm"} 1' in body
    assert wait_for(ready, limit=180), "no microvm clone became ready in the pool"
    second = jreq(srv, "GET", create(srv))
    assert second["isolation"] == "microvm"
    pooled = [e.get("pooled") for e in srv.audit_events(second["id"]) if e["event"] == "sandbox.create"]
    assert pooled == [True], pooled
    # the pool's warm-up command ran, and is not listed as the user's
    assert jreq(srv, "GET", second["id"] + "/processes")["processes"] == []
    assert sh(srv, second["id"], "echo warm") == "warm\n"
    assert [p["cmd"] for p in jreq(srv, "GET", second["id"] + "/processes")["processes"]] == \
        [["/bin/bash", "-l", "-c", "echo warm"]]
    first_pooled = [e.get("pooled") for e in srv.audit_events(first) if e["event"] == "sandbox.create"]
    assert first_pooled == [False]
    for x in (first, second["id"]):
        assert srv.delete(x) == 204


def qmp_status(srv, sid):
    """QEMU's own run state, asked on the sandbox's QMP socket."""
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(os.path.join(srv.rundir, "sandboxes", sid, "vm", "qmp.sock"))
    f = s.makefile("rwb")
    try:
        json.loads(f.readline())                    # greeting
        for cmd in ("qmp_capabilities", "query-status"):
            f.write(json.dumps({"execute": cmd}).encode() + b"\n")
            f.flush()
            while True:
                m = json.loads(f.readline())
                if "return" in m or "error" in m:
                    break
        return m["return"]["status"]
    finally:
        f.close()
        s.close()


def test_fork_of_a_paused_source_leaves_it_paused(srv):
    src = create(srv, timeout=600)
    jreq(srv, "POST", src + "/processes", {"cmd": "sleep 1000"}, expect=201)
    jreq(srv, "POST", src + "/pause", {"mode": "memory"})
    j = jreq(srv, "POST", src + "/fork", {"count": 1}, expect=201)
    kid = j["sandboxes"][0]["id"]
    assert jreq(srv, "GET", src)["state"] == "paused"
    # the source's guest is really stopped, as QEMU itself says
    assert qmp_status(srv, src) in ("paused", "postmigrate")      # stopped, saved or not
    assert qmp_status(srv, kid) == "running"
    jreq(srv, "POST", src + "/resume")
    assert qmp_status(srv, src) == "running"
    assert sh(srv, src, "echo back") == "back\n"
    assert any(p["state"] == "running" for p in jreq(srv, "GET", kid + "/processes")["processes"])
    for x in (src, kid):
        assert srv.delete(x) == 204


def test_paused_to_disk_refuses_snapshot_and_fork_and_bad_state_is_an_error(srv):
    sid = create(srv, timeout=600)
    sh(srv, sid, "echo x > /home/user/x")
    jreq(srv, "POST", sid + "/pause", {"mode": "disk"})
    st, _h, data = req(srv, "POST", sid + "/fork", {"count": 1})
    assert st == 409 and b"paused to disk" in data, data
    st, _h, data = req(srv, "POST", sid + "/snapshots", {"name": "from-disk"})
    assert st == 409 and b"paused to disk" in data, data
    st, _h, data = req(srv, "POST", sid + "/pause", {"mode": "disk"})
    assert st == 409, data
    # a damaged save: resume fails with a clear error, changes nothing, and can be retried
    state = os.path.join(srv.state, "vm", "paused", sid, "state")
    with open(state, "r+b") as f:
        good = f.read()
        f.seek(0)
        f.write(b"\0" * 4096)
    st, _h, data = req(srv, "POST", sid + "/resume")
    assert st >= 400 and b"resume" in data, (st, data)
    j = jreq(srv, "GET", sid)
    assert j["state"] == "paused" and j["paused_to"] == "disk"
    with open(state, "wb") as f:
        f.write(good)
    jreq(srv, "POST", sid + "/resume")
    assert sh(srv, sid, "cat /home/user/x") == "x\n"
    assert srv.delete(sid) == 204


def test_auto_pause_goes_to_disk(srv):
    sid = create(srv, timeout=3, auto_pause=True)
    sh(srv, sid, "echo auto > /home/user/a")
    assert wait_for(lambda: jreq(srv, "GET", sid)["state"] == "paused", limit=60), "not paused at its deadline"
    j = jreq(srv, "GET", sid)
    assert j["paused_to"] == "disk" and j["timeout_remaining_ms"] == 3000
    assert "sandbox.auto_pause" in [e["event"] for e in srv.audit_events(sid)]
    jreq(srv, "POST", sid + "/resume")
    assert sh(srv, sid, "cat /home/user/a") == "auto\n"
    assert srv.delete(sid) == 204


def test_cli_pause_to_disk_and_memory(srv):
    """`paddock pause --disk|--memory ID` against the server (docs/cli.md)."""
    def cli(*args):
        return srv.cli(*args, remote=True, timeout=SLOW)
    sid = create(srv, timeout=600)
    r = cli("pause", "--disk", "--memory", sid)
    assert r.returncode == 2 and "exclude" in r.stderr, r
    assert jreq(srv, "GET", sid)["state"] == "running"
    for mode in ("disk", "memory"):
        r = cli("pause", "--" + mode, sid)
        assert (r.returncode, r.stdout) == (0, "%s paused\n" % sid), r
        assert jreq(srv, "GET", sid)["paused_to"] == mode
        r = cli("resume", sid)
        assert (r.returncode, r.stdout) == (0, "%s running\n" % sid), r
    assert srv.delete(sid) == 204


def test_snapshot_of_a_guest_starts_new_sandboxes(srv):
    src = create(srv, timeout=600)
    sh(srv, src, "echo one > /home/user/f")
    p = jreq(srv, "POST", src + "/processes", {"cmd": "sleep 1000"}, expect=201)
    j = jreq(srv, "POST", src + "/snapshots", {"name": "vm-snap"}, expect=201)
    assert j["isolation"] == "microvm" and j["source"] == src
    assert jreq(srv, "GET", src)["state"] == "running"
    sh(srv, src, "echo two > /home/user/f; echo late > /home/user/late")   # not in the snapshot
    # started from it: the guest as it was (files and processes); isolation follows the snapshot
    kids = [create(srv, template="vm-snap") for _ in range(2)]
    for i, k in enumerate(kids):
        j = jreq(srv, "GET", k)
        assert j["isolation"] == "microvm" and j["template"] == "vm-snap"
        assert sh(srv, k, "cat /home/user/f; test -e /home/user/late || echo absent") == "one\nabsent\n"
        assert any(x["pid"] == p["pid"] and x["state"] == "running"
                   for x in jreq(srv, "GET", k + "/processes")["processes"])
        sh(srv, k, "echo kid%d > /home/user/f" % i)
    assert [sh(srv, k, "cat /home/user/f") for k in kids] == ["kid0\n", "kid1\n"]
    assert len({sh(srv, x, "head -c16 /dev/urandom | od -An -tx1") for x in kids}) == 2
    # a third from it still sees the snapshot, not what the others wrote
    third = create(srv, template="vm-snap")
    assert sh(srv, third, "cat /home/user/f") == "one\n"
    # on another tier, or with other memory: refused, nothing made
    for body in ({"template": "vm-snap", "isolation": "container"}, {"template": "vm-snap", "memory_mb": 256}):
        st, _h, data = srv.request("POST", "/api/v1/sandboxes", body, timeout=SLOW)
        assert st == 400, (body, st, data)
    # in use: not deletable; once unused it goes
    st, _h, data = srv.request("DELETE", "/api/v1/snapshots/vm-snap")
    assert st == 409 and b"in use" in data, data
    for x in kids + [third, src]:
        assert srv.delete(x) == 204
    assert srv.request("DELETE", "/api/v1/snapshots/vm-snap")[0] == 204
    assert not os.path.exists(os.path.join(srv.state, "templates", "vm-snap"))
    assert not [d for d in os.listdir(os.path.join(srv.state, "templates")) if d.startswith(".snap-")]


def simulate_reboot(srv, sid):
    """What a host reboot takes from a sandbox paused to disk (its QEMU is
    already gone): the runtime dir (tmpfs), its cgroups, its uid range slot;
    the server then sees another boot id. The state dir stays."""
    shutil.rmtree(os.path.join(srv.rundir, "sandboxes", sid))
    inst = instance_of(srv.state)
    # v1 memory: <id>.agent and <id>.work, no <id> level (docs/architecture.md)
    for cg in (glob.glob("/sys/fs/cgroup/*/paddock-%s/%s" % (inst, sid)) +
               glob.glob("/sys/fs/cgroup/*/paddock-%s/%s.*" % (inst, sid))):
        for d, _subs, _files in os.walk(cg, topdown=False):
            os.rmdir(d)
    owner = "%s:%s" % (instance_of(srv.state), sid)
    for slot in glob.glob("/run/paddock/uids/*"):
        try:
            with open(slot) as f:
                mine = f.read() == owner
        except OSError:
            continue
        if mine:
            os.unlink(slot)


def test_paused_to_disk_resumes_after_a_host_reboot(tmproot):
    s = Server(os.path.join(tmproot, "reboot"), "--pool", "0").start()
    try:
        sid = create(s, timeout=600)
        keep = create(s, timeout=600)                  # running: a reboot loses it
        sh(s, sid, "echo before-reboot > /home/user/r")
        p = jreq(s, "POST", sid + "/processes",
                 {"cmd": "for i in $(seq 1 100000); do echo n$i; sleep 0.1; done"}, expect=201)
        assert wait_for(lambda: len(req(s, "GET", "%s/processes/%d/output" % (sid, p["pid"]))[2]) >= 9, 60)
        jreq(s, "POST", sid + "/pause", {"mode": "disk"})
        keep_qemu = qemu_pid(s, keep)
        s.stop(signal.SIGKILL)
        os.kill(keep_qemu, signal.SIGKILL)              # a reboot ends every process
        simulate_reboot(s, sid)
        os.environ["PADDOCK_TEST_BOOT_ID"] = "00000000-0000-4000-8000-000000000001"
        try:
            s.start()
        finally:
            del os.environ["PADDOCK_TEST_BOOT_ID"]
        j = jreq(s, "GET", keep)
        assert j["state"] == "failed" and "rebooted" in " ".join(j["notes"]), j
        j = jreq(s, "GET", sid)
        assert j["state"] == "paused" and j["paused_to"] == "disk", j
        # a second restart before the resume still finds it (its record says this boot now)
        s.stop(signal.SIGKILL)
        s.start()
        assert jreq(s, "GET", sid)["state"] == "paused"
        j = jreq(s, "POST", sid + "/resume")
        assert j["state"] == "running"
        assert sh(s, sid, "cat /home/user/r") == "before-reboot\n"
        procs = {x["pid"]: x for x in jreq(s, "GET", sid + "/processes")["processes"]}
        assert procs[p["pid"]]["state"] == "running", procs
        out = req(s, "GET", "%s/processes/%d/output" % (sid, p["pid"]), query={"from": 0})[2].decode().split()
        assert out[:len(out) - 1] == ["n%d" % i for i in range(1, len(out))], out[:20]
        for x in (sid, keep):
            assert s.delete(x) == 204
    finally:
        s.finish()


def test_fork_beyond_the_limits_builds_nothing(tmproot):
    s = Server(os.path.join(tmproot, "forklimit"), "--pool", "0", "--max-per-key", "2").start()
    try:
        src = create(s)
        before = sorted(os.listdir(os.path.join(s.rundir, "sandboxes")))
        st, _h, data = req(s, "POST", src + "/fork", {"count": 2})
        assert st == 429 and b"room for 1" in data, (st, data)
        assert sorted(os.listdir(os.path.join(s.rundir, "sandboxes"))) == before
        assert [x["id"] for x in json.loads(s.request("GET", "/api/v1/sandboxes")[2])["sandboxes"]] == [src]
        j = jreq(s, "POST", src + "/fork", {"count": 1}, expect=201)
        assert len(j["sandboxes"]) == 1
    finally:
        s.finish()
