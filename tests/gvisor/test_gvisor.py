"""The gvisor tier through `paddock run` (issue 17): a runsc sandbox whose
init is the agent, the template bound read-only under a writable overlay in
the Sentry's memory, limits with gVisor's headroom, nothing left behind."""
import os
import signal
import subprocess

import pytest

from pdtest import Paddock, parse_json_result, wait_until

GV = ["--isolation", "gvisor"]
T = 180


@pytest.fixture(scope="module")
def gv(state_root):
    p = Paddock(os.path.join(state_root, "gvisor"))
    os.makedirs(p.state, exist_ok=True)
    try:
        yield p
    finally:
        r = p.gc(timeout=120)
        assert r.returncode == 0, r.stderr
    assert p.leftovers() == {}
    assert not [l for l in open("/proc/self/mountinfo") if "paddock-gvisor" in l and p.instance in l]


def grun(gv, args, **kw):
    kw.setdefault("timeout", T)
    return gv.run(GV + list(args), **kw)


def test_exit_status_and_streams(gv):
    r = grun(gv, ["--", "sh", "-c", "echo out; echo err >&2; exit 7"])
    assert r.returncode == 7, r.stderr
    assert r.stdout == "out\n"
    assert "err\n" in r.stderr


def test_runs_on_gvisor_kernel(gv):
    # the Sentry answers uname, not the host kernel
    r = grun(gv, ["--", "uname", "-r"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() != os.uname().release


def test_stdin(gv):
    r = grun(gv, ["--", "sh", "-c", "tr a-z A-Z"], input="hello gvisor\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "HELLO GVISOR\n"


def test_not_found_and_signal(gv):
    assert grun(gv, ["--", "no-such-command"]).returncode == 127
    assert grun(gv, ["--", "sh", "-c", "kill -9 $$"]).returncode == 137


def test_root_overlay_writes_never_reach_template(gv):
    r = grun(gv, ["-u", "root", "--", "sh", "-c",
                  "echo x > /usr/pd-gvisor-probe && cat /usr/pd-gvisor-probe && echo y > /etc/pd-probe && cat /etc/pd-probe"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "x\ny\n"
    assert not os.path.exists("/usr/pd-gvisor-probe")
    tpl = os.path.join(gv.state, "templates", "base", "rootfs")
    assert not os.path.exists(os.path.join(tpl, "etc", "pd-probe"))
    # runsc makes mount points in the root tree: never in the template's
    assert not os.path.exists(os.path.join(tpl, ".paddock"))


def test_each_sandbox_starts_from_the_template(gv):
    assert grun(gv, ["-u", "root", "--", "sh", "-c", "echo 1 > /tmp/mark"]).returncode == 0
    r = grun(gv, ["--", "sh", "-c", "test -e /tmp/mark && echo kept || echo fresh"])
    assert r.stdout == "fresh\n"


def test_memory_overrun_is_an_oom(gv):
    r = grun(gv, ["--memory", "64M", "--json", "--", "python3", "-c", "b = bytearray(400 << 20); print('alloc')"])
    assert r.returncode == 137, r.stderr
    assert "alloc" not in r.stdout
    assert parse_json_result(r.stderr)["reason"] == "oom"


def test_pids_limit_refuses_forks_sandbox_survives(gv):
    r = grun(gv, ["--pids", "8", "--", "python3", "-c", """
import os, time
n = 0
try:
    for i in range(40):
        if os.fork() == 0:
            time.sleep(1); os._exit(0)
        n += 1
except OSError as e:
    print('refused', e.errno)
print('forked', n)
"""])
    assert r.returncode == 0, r.stderr
    assert "refused 11" in r.stdout
    assert int(r.stdout.split("forked ")[1]) <= 8


def test_cpus_limit_applies_to_the_sentry(gv):
    """The Sentry (and so the workload) is in the sandbox's cpu cgroup with
    --cpus's quota, and in its memory and pids cgroups."""
    p = gv.popen(GV + ["--cpus", "0.25", "--", "sh", "-c", "echo started; sleep 600"])
    try:
        assert p.stdout.readline() == b"started\n"
        sentry = _sentry_of(gv)
        cg = dict(l.strip().split(":", 2)[1:] for l in open("/proc/%d/cgroup" % sentry))
        base = "/paddock-%s/" % gv.instance
        for ctrl in ("cpu,cpuacct", "memory", "pids", "freezer"):
            key = [k for k in cg if ctrl in k.split(",") or k == ctrl]
            if not key:
                continue        # not mounted on this host
            assert cg[key[0]].startswith(base), (ctrl, cg)
        cpu = [v for k, v in cg.items() if "cpu" in k.split(",")][0]
        roots = [r for r in ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu") if os.path.isdir(r + cpu)]
        assert roots, cpu
        assert open(roots[0] + cpu + "/cpu.cfs_quota_us").read().strip() == "25000"
    finally:
        p.kill()
        p.wait()
        gv.gc()         # the killed CLI left its sandbox (docs/gvisor.md, "Not done")


def test_volumes_refused(gv, tmp_path):
    r = grun(gv, ["-v", "%s:/data" % tmp_path, "--", "true"])
    assert r.returncode == 125
    assert "gvisor tier refuses volumes" in r.stderr
    assert "host root" in r.stderr


def test_runsc_missing_is_a_clear_error(gv):
    base = gv.leftovers()
    r = grun(gv, ["--", "true"], env={"PADDOCK_RUNSC": "/nonexistent/runsc"})
    assert r.returncode == 125
    assert "install the Debian package 'runsc'" in r.stderr
    assert gv.new_leftovers(base) == {}
    # other tiers unaffected
    r = gv.run(["--isolation", "container", "--", "true"], env={"PADDOCK_RUNSC": "/nonexistent/runsc"})
    assert r.returncode == 0, r.stderr


def _runsc_has(platform):
    """Whether the runsc present carries the platform (its Go package)."""
    from conftest import RUNSC
    with open(RUNSC, "rb") as f:
        return ("gvisor.dev/gvisor/pkg/sentry/platform/" + platform).encode() in f.read()


def test_platform_forced_or_refused_with_the_reason(gv):
    """PADDOCK_GVISOR_PLATFORM: a platform this runsc or host lacks is
    refused naming what is missing (never silently replaced), a bad name
    too, and nothing is left."""
    base = gv.leftovers()
    r = grun(gv, ["--", "true"], env={"PADDOCK_GVISOR_PLATFORM": "nosuch"})
    assert r.returncode == 125 and "not a gVisor platform (ptrace, systrap, kvm)" in r.stderr, r.stderr
    if not _runsc_has("systrap"):
        r = grun(gv, ["--", "true"], env={"PADDOCK_GVISOR_PLATFORM": "systrap"})
        assert r.returncode == 125 and "this runsc has no systrap platform" in r.stderr, r.stderr
    hw = any(f in open("/proc/cpuinfo").read().split() for f in ("vmx", "svm")) and os.path.exists("/dev/kvm")
    if not hw:
        r = grun(gv, ["--", "true"], env={"PADDOCK_GVISOR_PLATFORM": "kvm"})
        assert r.returncode == 125 and "kvm" in r.stderr, r.stderr
    assert gv.new_leftovers(base) == {}


def test_gc_removes_checkpoint_images_a_crash_left(gv):
    """A fork's or a pause's image whose sandbox is gone (a server killed
    mid-fork): `paddock gc` removes it; snapshots (templates) stay."""
    left = [os.path.join(gv.state, "gvisor", "fork-x0"), os.path.join(gv.state, "gvisor", "paused", "x1")]
    for d in left:
        os.makedirs(d)
        open(os.path.join(d, "checkpoint.img"), "w").close()
    r = gv.gc(timeout=120)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(os.path.join(gv.state, "gvisor"))


def _sentry_of(gv):
    """The pid of this state dir's running Sentry (the record's agent_pid)."""
    for root in ("/run/paddock", "/dev/shm/paddock"):
        d = os.path.join(root, gv.instance, "sandboxes")
        if not os.path.isdir(d):
            continue
        for sid in os.listdir(d):
            try:
                rec = dict(l.strip().split("=", 1) for l in open(os.path.join(d, sid, "record")) if "=" in l)
            except OSError:
                continue
            if rec.get("tier") == "gvisor" and int(rec.get("agent_pid", "0")) > 0:
                return int(rec["agent_pid"])
    return 0


def test_sentry_killed_mid_command_fails_and_cleans_up(gv):
    base = gv.leftovers()
    p = gv.popen(GV + ["--", "sh", "-c", "echo started; sleep 600"])
    try:
        assert p.stdout.readline() == b"started\n"
        pid = _sentry_of(gv)
        assert pid > 0
        os.kill(pid, signal.SIGKILL)
        _out, err = p.communicate(timeout=T)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 125, err
    assert b"agent" in err
    assert gv.new_leftovers(base) == {}


def test_escape_host_files_unreachable(gv):
    # a host file outside the template, and the state dir: not there inside
    secret = os.path.join(gv.state, "host-secret")
    with open(secret, "w") as f:
        f.write("TOPSECRET")
    try:
        r = grun(gv, ["-u", "root", "--", "sh", "-c",
                      "cat %s /root/.ssh/id_rsa /proc/1/root%s 2>&1; grep -rl TOPSECRET /tmp /etc /root 2>/dev/null; "
                      "echo end" % (secret, secret)])
        assert "TOPSECRET" not in r.stdout
        assert r.stdout.rstrip().endswith("end")
    finally:
        os.unlink(secret)


def test_escape_host_proc_is_the_sentrys(gv):
    # /proc inside is the Sentry's: no host process is listed
    r = grun(gv, ["--", "sh", "-c", "ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline | tr '\\0' ' '"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert int(lines[0]) < 10
    assert "paddock-agent" in lines[1] or ".paddock/agent" in lines[1]


def test_escape_no_host_network(gv):
    # network none: loopback only; a host port on 127.0.0.1 is not reachable
    import socket
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        r = grun(gv, ["--", "python3", "-c", """
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect(('127.0.0.1', %d)); print('CONNECTED')
except OSError as e:
    print('refused', e)
try:
    socket.create_connection(('10.0.2.2', 80), timeout=3); print('CONNECTED')
except OSError as e:
    print('refused', e)
""" % port])
        assert r.returncode == 0, r.stderr
        assert "CONNECTED" not in r.stdout
    finally:
        srv.close()


def test_escape_agent_socket_dir_is_tiny(gv):
    # the only host directory the sandbox can write is the agent's socket
    # dir: a 64 KiB tmpfs, noexec
    r = grun(gv, ["-u", "root", "--", "sh", "-c",
                  "dd if=/dev/zero of=/.paddock/sock/fill bs=64k count=64 2>&1; echo rc=$?"])
    assert "rc=0" not in r.stdout, r.stdout


def test_tiers_lists_gvisor(gv):
    r = gv.run(["--state-dir", gv.state], verb="tiers", state=False)
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: l.split()[1] for l in r.stdout.splitlines()[1:] if l[:1].strip()}
    assert set(rows) == {"process", "container", "supervised", "gvisor", "microvm"}
    assert rows["gvisor"] == "yes"
    r = gv.run(["--isolation", "gvisor"], verb="tiers", state=False, env={"PADDOCK_RUNSC": "/nonexistent/runsc"})
    assert r.returncode == 0
    assert r.stdout.splitlines()[1].split()[:2] == ["gvisor", "no"]
    assert "install the Debian package 'runsc'" in r.stdout


def test_tiers_measures_gvisor(gv):
    r = gv.run(["--measure", "--isolation", "gvisor"], verb="tiers", timeout=T)
    assert r.returncode == 0, r.stderr
    line = r.stdout.splitlines()[1].split()
    assert line[:2] == ["gvisor", "yes"] and line[3] == "ms" and int(line[2]) > 0, r.stdout
    assert gv.run(["--isolation", "bogus"], verb="tiers", state=False).returncode == 125


def test_gc_removes_a_sandbox_whose_cli_was_killed(gv):
    """paddock run killed with SIGKILL leaves its gVisor sandbox running (the
    Sentry is not its child); paddock gc removes all of it: Sentry, gofer,
    cgroup, the socket tmpfs, the runtime dir with runsc's state."""
    p = gv.popen(GV + ["--", "sh", "-c", "echo started; sleep 600"])
    try:
        assert p.stdout.readline() == b"started\n"
        sentry = _sentry_of(gv)
        assert sentry > 0
        p.kill()
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = gv.gc(timeout=120)
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: not os.path.exists("/proc/%d" % sentry), 30)
    assert gv.leftovers() == {}
    assert not [l for l in open("/proc/self/mountinfo") if "paddock-gvisor" in l and gv.instance in l]
