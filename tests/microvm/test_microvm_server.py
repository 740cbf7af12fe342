"""The microvm tier through the server (issue 7): pause to disk releases the
guest's memory (QEMU exits) and resume brings back its processes, their
output offsets and its files, also after a server restart; fork makes
independent copies of a running guest's memory."""
import glob
import json
import os
import shutil
import subprocess
import time

import pytest

from pdtest import instance_of
from pdtest.server import Server, tmproot  # noqa: F401 (fixture)

GUEST_DIR = os.environ.get("PADDOCK_GUEST_DIR", "/var/cache/paddock/guest")
if not glob.glob(os.path.join(GUEST_DIR, "boot", "vmlinuz-*")) or not os.path.exists(
        "/usr/bin/qemu-system-x86_64"):
    # Not a hardware gap: scripts/setup.sh installs both, so their absence is a failure.
    raise RuntimeError("no guest kernel or QEMU: run scripts/setup.sh")


@pytest.fixture(scope="module")
def srv(tmproot):
    s = Server(os.path.join(tmproot, "microvm"), "--pool", "0").start()
    yield s
    s.finish()


def create(srv):
    # the module's first create builds the boot assets and boots the
    # template under TCG: minutes on a loaded 2-CPU host
    st, _h, data = srv.request("POST", "/api/v1/sandboxes", {"isolation": "microvm", "memory_mb": 256},
                               timeout=600)
    assert st == 201, (st, data)
    return json.loads(data)["id"]


def sh(srv, sid, cmd):
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": cmd, "user": "root"})
    assert st == 200, (st, j)
    assert j["exit_code"] == 0, j
    return j["stdout"]


def qemu_pid(srv, sid):
    """The sandbox's QEMU (its record's agent_pid in microvm); 0 if none."""
    try:
        return srv.agent_pid(sid)
    except (AssertionError, OSError):
        return 0


def alive(pid):
    return pid > 0 and os.path.exists("/proc/%d" % pid)


def test_pause_to_disk_and_resume_across_restart(srv):
    sid = create(srv)
    sh(srv, sid, "echo kept > /root/f")
    # a process that keeps running and counting across the pause
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid,
                     {"cmd": "for i in $(seq 1 100000); do echo tick $i; read -t 0.2 x; done", "user": "root"})
    assert st in (200, 201), (st, j)
    pid_in_guest = j["pid"]
    q = qemu_pid(srv, sid)
    assert alive(q)
    t0 = time.monotonic()
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "disk"})
    pause_s = time.monotonic() - t0
    assert st == 200, (st, j)
    deadline = time.monotonic() + 10
    while alive(q) and time.monotonic() < deadline:     # QEMU is reaped by the server's process
        time.sleep(0.05)
    assert not alive(q), "QEMU still runs: memory not released"
    saved = glob.glob(os.path.join(srv.state, "vm", "paused", sid, "state"))
    assert saved and os.path.getsize(saved[0]) > 1 << 20
    # the server goes away and comes back while it is on disk
    srv.stop()
    srv.start()
    t0 = time.monotonic()
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/resume" % sid)
    resume_s = time.monotonic() - t0
    assert st == 200, (st, j)
    assert sh(srv, sid, "cat /root/f") == "kept\n"
    st, j = srv.json("GET", "/api/v1/sandboxes/%s/processes" % sid)
    assert st == 200, (st, j)
    procs = j.get("processes", j)
    mine = [p for p in procs if p["pid"] == pid_in_guest]
    assert mine and mine[0].get("exit_code") is None, mine or procs
    assert not glob.glob(os.path.join(srv.state, "vm", "paused", sid))
    print("pause-to-disk %.3f s, resume %.3f s" % (pause_s, resume_s))
    assert srv.delete(sid) == 204


def test_fork_copies_are_independent(srv):
    sid = create(srv)
    sh(srv, sid, "echo source > /root/f")
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/fork" % sid, {"count": 2})
    assert st == 201, (st, j)
    kids = [x["id"] for x in j["sandboxes"]]
    assert len(kids) == 2
    for i, k in enumerate(kids):
        assert sh(srv, k, "cat /root/f") == "source\n"
        sh(srv, k, "echo kid%d > /root/f" % i)
    assert sh(srv, sid, "cat /root/f") == "source\n"
    assert [sh(srv, k, "cat /root/f") for k in kids] == ["kid0\n", "kid1\n"]
    rng = {sh(srv, x, "head -c 16 /dev/urandom | od -An -tx1") for x in [sid] + kids}
    assert len(rng) == 3
    for x in [sid] + kids:
        assert srv.delete(x) == 204


def test_agent_survives_kill_all(srv):
    """Root in the guest may kill every process but PID 1 (the agent),
    the serial-port demux included: the agent starts a new one, the host's
    relay is told (RESET), and the sandbox answers again."""
    sid = create(srv)
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": "kill -9 -1; sleep 5", "user": "root"})
    assert st != 200 or j.get("exit_code") != 0, (st, j)
    deadline = time.monotonic() + 60
    while True:     # the server reconnects through the relay; the new demux answers
        st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": "echo back", "user": "root"})
        if st == 200 and j.get("stdout") == "back\n":
            break
        assert time.monotonic() < deadline, (st, j)
        time.sleep(0.2)
    assert srv.delete(sid) == 204


def qemu_memcg(state, sid, name):
    """A file of the memory cgroup QEMU runs in (cgroup v1 or v2), or None."""
    inst = instance_of(state)
    # v1: the memory hierarchy has no per-sandbox level (<id>.agent beside
    # <id>.work: docs/architecture.md); v2: <id>/agent
    for d in ("/sys/fs/cgroup/memory/paddock-%s/%s.agent" % (inst, sid),
              "/sys/fs/cgroup/paddock-%s/%s/agent" % (inst, sid)):
        if os.path.exists(os.path.join(d, name)):
            with open(os.path.join(d, name)) as f:
                return f.read()
    return None


def qemu_memcg_usage(state, sid):
    v = qemu_memcg(state, sid, "memory.usage_in_bytes") or qemu_memcg(state, sid, "memory.current")
    return int(v)


def qemu_memcg_shmem(state, sid):
    return dict(l.split() for l in qemu_memcg(state, sid, "memory.stat").splitlines()).get("shmem")


@pytest.fixture
def tmpfs_srv(srv, tmproot):
    """A server whose whole state dir is on a tmpfs the test mounts (as under
    /tmp on a fresh Debian 13, where /tmp is a tmpfs): a file written there
    is memory that cannot be reclaimed. Its boot assets (kernel, initramfs,
    root image: caches named by their content hash) are copied from the
    module's server, built once; the template is booted anew on the tmpfs."""
    vm = os.path.join(srv.state, "vm")
    assets = [p for pat in ("vmlinux-*", "initrd-*.cpio", "rootfs-*.erofs") for p in glob.glob(os.path.join(vm, pat))]
    if len(assets) < 3:     # this test alone: let the module's server build them
        assert srv.delete(create(srv)) == 204
        assets = [p for pat in ("vmlinux-*", "initrd-*.cpio", "rootfs-*.erofs")
                  for p in glob.glob(os.path.join(vm, pat))]
    mnt = os.path.join(tmproot, "tmpfs")
    os.makedirs(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3g,mode=0755", "paddock-test", mnt], check=True)
    s = None
    try:
        state = os.path.join(mnt, "state")
        os.makedirs(os.path.join(state, "vm"), mode=0o700)
        for a in assets:
            shutil.copy2(a, os.path.join(state, "vm"))
        s = Server(state, "--pool", "0").start()
        yield s
    finally:
        try:
            if s is not None:
                s.finish()
        finally:
            if subprocess.run(["umount", mnt]).returncode != 0:
                subprocess.run(["umount", "-l", mnt])
            os.rmdir(mnt)


def test_pause_to_disk_on_tmpfs(tmpfs_srv):
    """The guest fills most of its memory (a process holding 80 MiB, 60 MiB
    of files in its writable layer), is paused to disk and resumed: the
    template's RAM file and the saved state, both on the tmpfs, are never
    charged to QEMU's cgroup (whose limit is the guest's memory + 384 MiB),
    so neither the save nor the resume is OOM-killed."""
    srv = tmpfs_srv
    sid = create(srv)       # the template boots first (TCG)
    # the template's RAM file (256 MiB, most of it touched by the boot) is
    # not this sandbox's memory, although its QEMU wrote it
    assert int(qemu_memcg_shmem(srv.state, sid)) < 32 << 20, qemu_memcg(srv.state, sid, "memory.stat")
    sh(srv, sid, "head -c 60M /dev/urandom > /root/big && echo kept > /root/f")
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid,
                     {"cmd": "python3 -c 'import os, time; b = os.urandom(80 << 20); "
                             "open(\"/root/ready\", \"w\").close(); time.sleep(1e6)'", "user": "root"})
    assert st in (200, 201), (st, j)
    pid_in_guest = j["pid"]
    # python holds its 80 MiB once /root/ready exists
    sh(srv, sid, "timeout 120 sh -c 'until [ -e /root/ready ]; do sleep 0.1; done'")
    q = qemu_pid(srv, sid)
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "disk"})
    assert st == 200, (st, j)
    deadline = time.monotonic() + 10
    while alive(q) and time.monotonic() < deadline:     # QEMU is reaped by the server's process
        time.sleep(0.05)
    assert not alive(q), "QEMU still runs"
    saved = os.path.join(srv.state, "vm", "paused", sid, "state")
    assert os.path.getsize(saved) > 140 << 20
    # QEMU is gone and its cgroup holds nothing of the save
    assert qemu_memcg_usage(srv.state, sid) < 32 << 20, qemu_memcg(srv.state, sid, "memory.stat")
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/resume" % sid)
    assert st == 200, (st, j)
    assert sh(srv, sid, "cat /root/f; wc -c < /root/big") == "kept\n62914560\n"
    st, j = srv.json("GET", "/api/v1/sandboxes/%s/processes" % sid)
    assert st == 200, (st, j)
    procs = j.get("processes", j)
    mine = [p for p in procs if p["pid"] == pid_in_guest]
    assert mine and mine[0].get("exit_code") is None, mine or procs
    assert not os.path.exists(os.path.dirname(saved))
    assert srv.delete(sid) == 204
