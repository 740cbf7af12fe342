"""Teardown of `paddock run` leaves nothing (DESIGN §5, §7): after many runs,
with two state dirs side by side, and after paddock itself is SIGKILLed."""
import concurrent.futures
import glob
import os
import select
import signal
import subprocess
import time

from pdtest import UID_BASE, pid_alive, sandbox_dirs, wait_teardowns


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
    """Mount table lines naming one of needles: this test's own state dir
    and instance (other paddock instances on the host mount and unmount as
    they please while this test runs)."""
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
    before_mounts = _mounts_mentioning(p.state, "/paddock/%s/" % p.instance, "paddock-%s" % p.instance)

    def one(_):
        return p.run(["--", "/bin/true"], timeout=60)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(one, range(200)))
    bad = [(r.returncode, r.stderr) for r in results if r.returncode != 0 or r.stdout or r.stderr]
    assert bad == [], bad[:3]

    wait_teardowns(p.state)     # they go on after each run's result
    after = _procs()
    new = {pid: v for pid, v in after.items() if pid not in before_procs}
    ours = {pid: v for pid, v in new.items() if "paddock-" + p.instance in v[1]}
    assert ours == {}
    assert _cgroup_procs(p.instance) == []
    assert _mounts_mentioning(p.state, "/paddock/%s/" % p.instance, "paddock-%s" % p.instance) == before_mounts
    assert p.leftovers() == {}
    assert sandbox_dirs(p.state) == []
    r = p.gc()
    assert r.returncode == 0 and r.stdout.strip() == "removed 0 sandboxes", (r.stdout, r.stderr)


def _read_line(proc, timeout=20):
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


# Each sandbox blocks on stdin, then (while the other one is blocked too)
# writes its uid_map and every process's cmdline into a volume, then echoes
# stdin until EOF.
LISTER = ('read go; { echo "go=$go"; cat /proc/self/uid_map; '
          'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done; } > /out/list.tmp; '
          'mv /out/list.tmp /out/list; cat; echo "end $0"')


def _wait_for(pred, what, timeout=30):
    """Bounded poll, for states that raise no event (files, cgroup members)."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.02)


def _running_in(instance, marker):
    return any(marker in _cmdline(pid) for pid in set(_cgroup_procs(instance)))


def test_two_state_dirs_side_by_side(paddock, fresh_paddock, tmp_path):
    a, b = paddock, fresh_paddock
    before = a.leftovers()
    assert a.instance != b.instance
    outs = {}
    for name in ("a", "b"):
        outs[name] = tmp_path / name
        outs[name].mkdir()
        # a volume owned by root is never writable from inside (docs/security.md, Volumes)
        os.chown(outs[name], 1000, 1000)
    pa = a.popen(["-u", "root", "-v", "%s:/out" % outs["a"], "--", "bash", "-c", LISTER, "marker-aaa"],
                 stdin=subprocess.PIPE)
    pb = b.popen(["-u", "root", "-v", "%s:/out" % outs["b"], "--", "bash", "-c", LISTER, "marker-bbb"],
                 stdin=subprocess.PIPE)
    try:
        # Both are running at the same time, each blocked on its stdin.
        _wait_for(lambda: _running_in(a.instance, "marker-aaa") and _running_in(b.instance, "marker-bbb"),
                  "both sandboxes to run")
        assert len(sandbox_dirs(a.state)) == 1
        assert len(sandbox_dirs(b.state)) == 1
        for proc, go in ((pa, b"A\n"), (pb, b"B\n")):
            proc.stdin.write(go)
            proc.stdin.flush()
        _wait_for(lambda: (outs["a"] / "list").exists() and (outs["b"] / "list").exists(),
                  "both process listings")
        oa, ea = pa.communicate(b"payload-a\n", timeout=60)
        ob, eb = pb.communicate(b"payload-b\n", timeout=60)
    finally:
        for proc in (pa, pb):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert pa.returncode == 0, ea
    assert pb.returncode == 0, eb
    assert oa == b"payload-a\nend marker-aaa\n"
    assert ob == b"payload-b\nend marker-bbb\n"
    la, lb = (outs["a"] / "list").read_text(), (outs["b"] / "list").read_text()
    assert la.startswith("go=A\n") and lb.startswith("go=B\n")
    assert "marker-aaa" in la and "marker-bbb" not in la
    assert "marker-bbb" in lb and "marker-aaa" not in lb
    map_a, map_b = la.splitlines()[1].split(), lb.splitlines()[1].split()
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
    survivors = [(pid, _cmdline(pid)) for pid in inside if pid_alive(pid)]
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


