"""Teardown of `paddock run` leaves nothing (DESIGN §5, §7): after many runs,
with two state dirs side by side, and after paddock itself is SIGKILLed."""
import concurrent.futures
import glob
import os
import select
import signal
import subprocess
import time

from conftest import UID_BASE, sandbox_dirs, runtime_dir


def _procs():
    """{pid: (uid, cgroup text)} for every process with a uid >= UID_BASE."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = os.stat("/proc/" + d)
            if st.st_uid < UID_BASE:
                continue
            with open("/proc/%s/cgroup" % d) as f:
                cg = f.read()
        except OSError:
            continue
        out[int(d)] = (st.st_uid, cg)
    return out


def _mounts_mentioning(*needles):
    with open("/proc/self/mountinfo") as f:
        return sorted(l for l in f if any(n in l for n in needles))


def _cgroup_procs(instance):
    pids = []
    for path in glob.glob("/sys/fs/cgroup/*/paddock-%s/**/cgroup.procs" % instance, recursive=True):
        try:
            with open(path) as f:
                pids += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return pids


def test_200_runs_leave_nothing(fresh_paddock):
    p = fresh_paddock
    before_procs = _procs()
    before_mounts = _mounts_mentioning(p.state, "paddock")

    def one(_):
        return p.run(["--", "/bin/true"], timeout=60)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(one, range(200)))
    bad = [(r.returncode, r.stderr) for r in results if r.returncode != 0 or r.stdout or r.stderr]
    assert bad == [], bad[:3]

    after = _procs()
    new = {pid: v for pid, v in after.items() if pid not in before_procs}
    ours = {pid: v for pid, v in new.items() if "paddock-" + p.instance in v[1]}
    assert ours == {}
    assert _cgroup_procs(p.instance) == []
    assert _mounts_mentioning(p.state, "paddock") == before_mounts
    assert p.leftovers() == {}
    assert sandbox_dirs(p.state) == []
    r = p.gc()
    assert r.returncode == 0 and r.stdout.strip() == "removed 0 sandboxes", (r.stdout, r.stderr)


def _read_line(proc, timeout=60):
    """One line from proc.stdout, waiting on the pipe (bounded)."""
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0, "no line from %r within %ss (got %r)" % (proc.args, timeout, buf)
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            c = os.read(fd, 1)
            assert c, "EOF before a full line (got %r); stderr: %r" % (buf, proc.stderr.read())
            buf += c
    return buf.decode()


LISTER = ('echo ready; read go; echo "go=$go"; cat /proc/self/uid_map; '
          'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done; '
          'cat; echo "end $0"')


def test_two_state_dirs_side_by_side(paddock, fresh_paddock):
    a, b = paddock, fresh_paddock
    before = a.leftovers()
    assert a.instance != b.instance
    pa = a.popen(["--", "bash", "-c", LISTER, "marker-aaa"], stdin=subprocess.PIPE)
    pb = b.popen(["--", "bash", "-c", LISTER, "marker-bbb"], stdin=subprocess.PIPE)
    try:
        # Both are running at the same time before either gets input.
        assert _read_line(pa) == "ready\n"
        assert _read_line(pb) == "ready\n"
        assert len(sandbox_dirs(a.state)) == 1
        assert len(sandbox_dirs(b.state)) == 1
        oa, ea = pa.communicate(b"A\npayload-a\n", timeout=60)
        ob, eb = pb.communicate(b"B\npayload-b\n", timeout=60)
    finally:
        for proc in (pa, pb):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert pa.returncode == 0, ea
    assert pb.returncode == 0, eb
    oa, ob = oa.decode(), ob.decode()
    assert oa.startswith("go=A\n") and ob.startswith("go=B\n")
    assert oa.endswith("payload-a\nend marker-aaa\n") and ob.endswith("payload-b\nend marker-bbb\n")
    assert "marker-aaa" in oa and "marker-bbb" not in oa
    assert "marker-bbb" in ob and "marker-aaa" not in ob
    map_a, map_b = oa.splitlines()[1].split(), ob.splitlines()[1].split()
    assert map_a[0] == map_b[0] == "0"
    assert map_a[1] != map_b[1]
    assert abs(int(map_a[1]) - int(map_b[1])) >= 65536
    assert a.new_leftovers(before) == {}
    assert b.leftovers() == {}


def _record(state):
    recs = [os.path.join(d, "record") for d in sandbox_dirs(state) if os.path.exists(os.path.join(d, "record"))]
    assert len(recs) == 1, recs
    fields = {}
    with open(recs[0]) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            fields[k] = v
    return fields


def test_sigkill_paddock_run(fresh_paddock):
    p = fresh_paddock
    proc = p.popen(["--", "bash", "-c", "sleep 1000 & echo started; wait"])
    try:
        assert _read_line(proc) == "started\n"
        rec = _record(p.state)
        agent_pid = int(rec["agent_pid"])
        inside = sorted(set(_cgroup_procs(p.instance)))
        assert agent_pid in inside, (agent_pid, inside)
        workload = [pid for pid in inside if pid != agent_pid]
        assert workload, inside     # the command's bash (and its sleep)
        pidfd = os.pidfd_open(agent_pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        ready, _, _ = select.select([pidfd], [], [], 10)
        assert ready, "the agent (pid %d) outlived paddock run by 10 s" % agent_pid
    finally:
        os.close(pidfd)
    # Every process of the sandbox is gone (the pid namespace died with its init).
    deadline = time.monotonic() + 20
    while _cgroup_procs(p.instance) and time.monotonic() < deadline:
        time.sleep(0.05)   # no event for cgroup.procs emptying on v1; bounded poll
    assert _cgroup_procs(p.instance) == []
    survivors = [(pid, _cmdline(pid)) for pid in inside if _alive(pid)]
    assert survivors == []
    # gc removes the rest
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "removed 1 sandbox"
    assert p.leftovers() == {}
    assert sandbox_dirs(p.state) == []
    r = p.gc()
    assert r.stdout.strip() == "removed 0 sandboxes"


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
