"""The `process` tier's Landlock audit (docs/security.md, "`process` tier",
"Audit"): the kernel's Landlock denial records of a sandbox become
`landlock.deny` lines of its audit log, <state>/audit/<id>.jsonl, written by
the host-side reader paddock-lsm-audit, which lives only as long as the
sandbox.

    /usr/bin/python3 -m pytest -q tests/integration/test_process_audit.py

Needs root (the reader joins the kernel's audit multicast group:
CAP_AUDIT_READ), Landlock ABI >= 7 and a kernel built with CONFIG_AUDIT.

Landlock logs nothing while the kernel's audit is disabled (AUDIT_GET
enabled=0: no audit daemon enabled it and audit=1 is not on the kernel
command line — the case on the development VM). The tests that need
records therefore turn the kernel's audit on for their duration (AUDIT_SET
enabled=1, needs CAP_AUDIT_CONTROL) and restore the host's setting after;
they never turn it off. Where it cannot be turned on they fail, naming the
missing kernel facility.
"""
import errno
import glob
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest

from pdtest import Paddock, child_env, runtime_dir

ISO = ["--isolation", "process"]

NETLINK_AUDIT = 9
AUDIT_GET = 1000
AUDIT_SET = 1001
AUDIT_STATUS_ENABLED = 1
NLMSG_ERROR = 2


def audit_request(msg_type, payload=b""):
    """One request on a unicast NETLINK_AUDIT socket; the AUDIT_GET status
    as a tuple of u32 (mask, enabled, failure, pid, ...) or None for a set."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_AUDIT)
    try:
        s.settimeout(2)
        hdr = struct.pack("=IHHII", 16 + len(payload), msg_type, 0x1 | 0x4, 1, 0)  # REQUEST | ACK
        s.sendto(hdr + payload, (0, 0))
        while True:
            data = s.recv(8192)
            length, typ = struct.unpack_from("=IH", data)
            body = data[16:length]
            if typ == NLMSG_ERROR:
                (err,) = struct.unpack_from("=i", body)
                if err:
                    raise OSError(-err, os.strerror(-err))
                if msg_type != AUDIT_GET:
                    return None
                continue
            if typ == AUDIT_GET:
                return struct.unpack_from("=8I", body)
    finally:
        s.close()


def audit_enabled():
    return audit_request(AUDIT_GET)[1]


def set_audit_enabled(value):
    audit_request(AUDIT_SET, struct.pack("=10I", AUDIT_STATUS_ENABLED, value, 0, 0, 0, 0, 0, 0, 0, 0))


def landlock_abi():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION


@pytest.fixture(scope="module")
def host():
    assert os.geteuid() == 0, "the process tier's audit needs root (CAP_AUDIT_READ for the reader)"
    abi = landlock_abi()
    assert abi >= 7, "Landlock ABI %d: denial logging to audit needs ABI >= 7 (Linux 6.15)" % abi
    try:
        original = audit_enabled()
    except PermissionError as e:
        # The kernel answers AUDIT_GET/SET only in the initial pid namespace
        # (audit_receive): inside a container (fresh-debian's root, a pod)
        # paddock cannot know or change audit, and the tests check that it
        # degrades cleanly instead (see degraded()).
        yield {"original": None, "unreachable": str(e)}
        return
    except OSError as e:
        pytest.fail("the kernel's audit subsystem does not answer AUDIT_GET (%s): a kernel without "
                    "CONFIG_AUDIT cannot log Landlock denials" % e)
    yield {"original": original, "unreachable": None}
    if original == 0 and audit_enabled() == 1:
        set_audit_enabled(0)


@pytest.fixture
def audit_on(host):
    """The kernel's audit enabled for this test (restored by `host`); False
    where this process cannot reach the kernel's audit at all."""
    if host["unreachable"]:
        yield False
        return
    if audit_enabled() == 0:
        try:
            set_audit_enabled(1)
        except OSError as e:
            pytest.fail("the kernel's audit is disabled and cannot be enabled (AUDIT_SET: %s); Landlock "
                        "logs no denial while it is off (boot with audit=1 or run auditd)" % e)
    assert audit_enabled() != 0
    yield True


@pytest.fixture(scope="module")
def pd(host):
    # The sandbox's uid must be able to search every parent of the state
    # dir (docs/security.md): a 0711 parent, not mkdtemp's 0700.
    top = tempfile.mkdtemp(prefix="paddock-lsmaudit-", dir="/tmp")
    os.chmod(top, 0o711)
    p = Paddock(os.path.join(top, "state"))
    os.makedirs(p.state)
    p.top = top
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "removed 0 sandboxes", r.stdout
    assert p.leftovers() == {}
    assert readers() == {}, "paddock-lsm-audit processes left over"
    shutil.rmtree(top, ignore_errors=True)


def secret(pd, name):
    """A file every uid may read by its modes (0644 in a 0711 directory),
    outside everything the process tier's Landlock ruleset allows: only
    Landlock denies it (a path under /root would be denied by the modes
    first, and Landlock never sees that)."""
    path = os.path.join(pd.top, name)
    with open(path, "w") as f:
        f.write("secret\n")
    os.chmod(path, 0o644)
    return path


def run(pd, args, **kw):
    return subprocess.run(pd.argv(ISO + list(args)), capture_output=True, text=True, timeout=60,
                          env=child_env(), stdin=subprocess.DEVNULL, **kw)


def audit_files(pd):
    d = os.path.join(pd.state, "audit")
    return {os.path.basename(f)[:-len(".jsonl")]: f for f in glob.glob(os.path.join(d, "*.jsonl"))}


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def readers():
    """Running paddock-lsm-audit processes: {pid: sandbox id}."""
    out = {}
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(d, "cmdline"), "rb") as f:
                argv = f.read().split(b"\0")
            with open(os.path.join(d, "stat")) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"paddock-lsm-audit" and state != "Z" and b"--sandbox" in argv:
            out[int(os.path.basename(d))] = argv[argv.index(b"--sandbox") + 1].decode()
    return out


def new_audit_file(pd, before):
    new = {k: v for k, v in audit_files(pd).items() if k not in before}
    assert len(new) == 1, "expected one new audit file, got %r" % sorted(new)
    return next(iter(new.items()))


def process_record(pd, timeout=10):
    """The live sandbox's process-tier record (key=value lines) once it
    names the audit reader's state."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        # runtime_dir() looks for the directory: ask again each round
        pattern = os.path.join(runtime_dir(pd.state), "sandboxes", "*", "process")
        for f in glob.glob(pattern):
            try:
                with open(f) as fh:
                    rec = dict(l.split("=", 1) for l in fh.read().splitlines() if "=" in l)
            except OSError:
                continue
            if "lsm_audit" in rec:
                return rec
        time.sleep(0.02)
    raise AssertionError("no process record naming lsm_audit under %s" % pattern)


def degraded(pd):
    """Where the kernel's audit cannot be reached (not the initial pid
    namespace): Landlock still denies, the sandbox's record says that the
    audit status is unknown or why nothing is logged, no reader is left.
    (Whether lines appear then depends on the host's audit setting, which
    this process cannot see.)"""
    path = secret(pd, "denied-degraded.txt")
    before = audit_files(pd)
    p = subprocess.Popen(pd.argv(ISO + ["--", "sh", "-c", "cat %s; sleep 1" % path]), env=child_env(),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        rec = process_record(pd)
        assert "AUDIT_GET" in rec["lsm_audit"] or rec["lsm_audit"].startswith("no ("), rec
    finally:
        out, err = p.communicate(timeout=60)
    assert b"Permission denied" in err, err
    assert readers() == {}


def test_denial_is_logged_and_reader_ends_with_the_sandbox(pd, audit_on):
    """A file the sandbox may not read: the denial is one landlock.deny line
    naming the path, the blocker, the program; allowed reads are not
    logged; the reader is gone once `paddock run` returns."""
    if not audit_on:
        return degraded(pd)
    path = secret(pd, "denied.txt")
    before = audit_files(pd)
    r = run(pd, ["--", "sh", "-c", "cat /etc/hostname >/dev/null && cat %s" % path])
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Permission denied" in r.stderr
    sid, f = new_audit_file(pd, before)
    got = lines(f)
    deny = [l for l in got if l.get("event") == "landlock.deny" and l.get("path") == path]
    assert len(deny) == 1, got
    d = deny[0]
    assert d["sandbox"] == sid and d["key"] == "landlock"
    assert d["blockers"] == ["fs.read_file"], d
    assert d["comm"] == "cat" and d["exe"].endswith("/cat"), d
    assert isinstance(d["pid"], int) and d["pid"] > 1, d
    assert d["uid"] >= 1000000000, d     # the sandbox's own host uid
    assert d["ts"].endswith("Z") and d["domain"]
    assert not [l for l in got if l.get("path") == "/etc/hostname"], got
    assert sid not in readers().values(), readers()


def test_only_this_sandboxs_denials(pd, audit_on):
    """Two sandboxes at once, each denied its own file: each log names its
    own denial only (the reader matches the sandbox's Landlock domain)."""
    if not audit_on:
        return degraded(pd)
    a, b = secret(pd, "a.txt"), secret(pd, "b.txt")
    before = audit_files(pd)
    pa = subprocess.Popen(pd.argv(ISO + ["--", "sh", "-c", "sleep 0.3; cat %s; rc=$?; sleep 0.3; exit $rc" % a]),
                          env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pb = subprocess.Popen(pd.argv(ISO + ["--", "sh", "-c", "sleep 0.3; cat %s; rc=$?; sleep 0.3; exit $rc" % b]),
                          env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert pa.wait(60) == 1 and pb.wait(60) == 1
    new = {k: lines(v) for k, v in audit_files(pd).items() if k not in before}
    assert len(new) == 2, new
    paths = sorted(tuple(sorted(l["path"] for l in ls if l.get("event") == "landlock.deny" and l.get("path") in (a, b)))
                   for ls in new.values())
    assert paths == [(a,), (b,)], new


def test_scope_denial_is_logged(pd, audit_on):
    """Not only files: a signal to a host process running as the sandbox's
    own uid (outside its Landlock domain, so only the scope refuses it) is a
    scope.signal line. (The abstract unix socket scope is not reached any
    more: the tier's seccomp policy leaves no AF_UNIX socket to connect
    with, docs/security.md.)"""
    if not audit_on:
        return degraded(pd)
    before = audit_files(pd)
    code = ("import os, sys\n"
            "print(os.getuid(), flush=True)\n"
            "pid = int(sys.stdin.readline())\n"
            "try:\n"
            "    os.kill(pid, 0)\n"
            "except OSError as e:\n"
            "    print(e.errno)\n")
    p = subprocess.Popen(pd.argv(ISO + ["--", "python3", "-c", code]), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    victim = None
    try:
        uid = int(p.stdout.readline())
        # Popen returns once the child has exec'd: it runs as uid by then.
        victim = subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[])
        out, err = p.communicate("%d\n" % victim.pid, timeout=60)
        assert out.strip() == str(errno.EPERM), (out, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if victim:
            victim.kill()
            victim.wait()
    _, f = new_audit_file(pd, before)
    got = [l for l in lines(f) if l.get("event") == "landlock.deny"]
    scope = [l for l in got if l["blockers"] == ["scope.signal"]]
    assert len(scope) == 1 and scope[0]["comm"] == "python3", got
    assert str(scope[0].get("opid")) == str(victim.pid), scope


def test_record_names_the_reader_and_gc_stops_it(pd, audit_on):
    """The tier's record says lsm_audit=yes with the reader's pid and start
    time; a `paddock run` killed with SIGKILL leaves nothing that `paddock
    gc` does not end, the reader included."""
    if not audit_on:
        return degraded(pd)
    p = subprocess.Popen(pd.argv(ISO + ["--", "sleep", "30"]), env=child_env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        rec = process_record(pd)
        assert rec["lsm_audit"] == "yes", rec
        pid = int(rec["lsm_audit_pid"])
        with open("/proc/%d/stat" % pid) as f:
            assert f.read().rsplit(")", 1)[1].split()[19] == rec["lsm_audit_start"]
        assert pid in readers()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    r = pd.gc()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "removed 1 sandbox", r.stdout
    assert readers() == {}


def test_record_says_why_when_audit_is_off(pd, host):
    """Runs with the host's own audit setting (never turned off here): when
    the kernel's audit is disabled no reader is started and the record says
    why; when enabled, the record says yes."""
    if host["unreachable"]:
        return degraded(pd)
    if host["original"] == 0 and audit_enabled() == 1:
        set_audit_enabled(0)        # back to this host's own setting
    p = subprocess.Popen(pd.argv(ISO + ["--", "sleep", "2"]), env=child_env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        rec = process_record(pd)
        if audit_enabled() == 0:
            assert rec["lsm_audit"].startswith("no (the kernel's audit is disabled"), rec
            assert "lsm_audit_pid" not in rec
            assert readers() == {}
        else:
            assert rec["lsm_audit"] == "yes", rec
            assert int(rec["lsm_audit_pid"]) in readers()
    finally:
        assert p.wait(30) == 0, p.stderr.read()
    assert readers() == {}
