"""The `process` tier: what docs/security.md ("`process` tier") promises, and
nothing more. Each test names the promise it checks.

    /usr/bin/python3 -m pytest -q tests/integration/test_process_tier.py

Needs root (one uid per sandbox, cgroups) and a kernel with Landlock ABI >= 6.
"""
import errno
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

from pdtest import UID_BASE, Paddock, child_env, parse_json_result, pdproto, procs_with, runtime_dir

ISO = ["--isolation", "process"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process tier's tests run as root")


@pytest.fixture(scope="module")
def pd():
    # The sandbox's uid must be able to search every parent of the state
    # dir (docs/security.md): a 0711 parent, not mkdtemp's 0700.
    top = tempfile.mkdtemp(prefix="paddock-proc-", dir="/tmp")
    os.chmod(top, 0o711)
    p = Paddock(os.path.join(top, "state"))
    os.makedirs(p.state)
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "removed 0 sandboxes", r.stdout
    assert p.leftovers() == {}
    ws = os.path.join(p.state, "workspaces")
    assert not os.path.isdir(ws) or os.listdir(ws) == []
    shutil.rmtree(top, ignore_errors=True)


def env_strict():
    """No downgrade accepted: this kernel (ABI 7) must do without."""
    e = child_env()
    e.pop("PADDOCK_LANDLOCK_ABI_MAX", None)
    return e


def run(pd, args, **kw):
    kw.setdefault("env", None)
    if "stdin" not in kw and "input" not in kw:
        kw["stdin"] = subprocess.DEVNULL
    env = kw.pop("env") or env_strict()
    return subprocess.run(pd.argv(ISO + list(args)), capture_output=True, text=True, timeout=60, env=env, **kw)


def py(pd, code, *args, opts=(), **kw):
    return run(pd, list(opts) + ["--", "python3", "-c", code] + [str(a) for a in args], **kw)


# A python snippet that runs `f` and prints OK or the errno name.
TRY = """
import errno, os, socket, sys
def t(f):
    try:
        f()
        print("OK")
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
"""


def test_echo(pd):
    r = run(pd, ["--", "echo", "hello"])
    assert (r.returncode, r.stdout) == (0, "hello\n"), r.stderr


def test_exit_codes(pd):
    assert run(pd, ["--", "bash", "-c", "exit 7"]).returncode == 7
    assert run(pd, ["--", "bash", "-c", "kill -9 $$"]).returncode == 137
    assert run(pd, ["--", "no-such-command-xyz"]).returncode == 127


def test_workspace_is_home_cwd_and_tmp(pd):
    r = run(pd, ["--", "bash", "-c",
                 'pwd; echo "$HOME"; echo "$TMPDIR"; echo data > f && cat f; '
                 't=$(mktemp) && echo "$t"; echo x > /dev/null && echo devnull-ok'])
    assert r.returncode == 0, r.stderr
    cwd, home, tmpdir, data, tmpfile, devnull = r.stdout.splitlines()
    assert cwd.startswith(os.path.join(os.path.realpath(pd.state), "workspaces") + "/")
    assert home == cwd and tmpdir == cwd + "/.tmp"
    assert data == "data" and tmpfile.startswith(tmpdir + "/") and devnull == "devnull-ok"
    # -w /home/user/... and -u root name the same workspace
    r = run(pd, ["-u", "root", "-w", "/home/user", "--", "bash", "-c", 'pwd; echo "$HOME"'])
    assert r.returncode == 0, r.stderr
    a, b = r.stdout.splitlines()
    assert a == b and "/workspaces/" in a


def test_workspace_removed_after_run(pd):
    r = run(pd, ["--", "pwd"])
    assert r.returncode == 0
    assert not os.path.exists(r.stdout.strip())


def test_own_uid(pd):
    r = run(pd, ["--", "bash", "-c", "id -u; id -g"])
    uid, gid = map(int, r.stdout.split())
    assert uid >= UID_BASE and gid == uid
    r2 = run(pd, ["-u", "root", "--", "id", "-u"])
    assert int(r2.stdout) >= UID_BASE


@pytest.mark.parametrize("path", ["/root/.ssh", "/root", "/work", "/var/lib/paddock", "/var/lib", "/home",
                                  "/run", "/sys", "/dev/shm", "/tmp"])
def test_reads_outside_denied(pd, path):
    if not os.path.exists(path):
        path = os.path.dirname(path)
    r = py(pd, TRY + "t(lambda: os.listdir(sys.argv[1]))", path)
    assert r.stdout.strip() == "EACCES", (path, r.stdout, r.stderr)


def test_other_workspaces_denied(pd):
    r = py(pd, TRY + "t(lambda: os.listdir(os.path.dirname(os.getcwd())))")
    assert r.stdout.strip() == "EACCES", r.stderr


@pytest.mark.parametrize("path", ["/etc/", "/usr/", "/tmp/", "/usr/bin/python3"])
def test_writes_outside_denied(pd, path):
    # A name no host file has (a directory left at /tmp/x by anyone would
    # answer EISDIR before Landlock is asked).
    if path.endswith("/"):
        path += "paddock-test-%d-%s" % (os.getpid(), os.urandom(4).hex())
    r = py(pd, TRY + "t(lambda: open(sys.argv[1], 'a'))", path)
    assert r.stdout.strip() == "EACCES", (path, r.stdout, r.stderr)


def test_etc_shadow_unreadable(pd):
    r = py(pd, TRY + "t(lambda: open('/etc/shadow').read())")
    assert r.stdout.strip() == "EACCES"


def test_system_paths_readable_and_executable(pd):
    r = run(pd, ["--", "bash", "-c", "head -c0 /etc/passwd && ls /usr/bin >/dev/null && python3 -c 'print(1)'"])
    assert (r.returncode, r.stdout) == (0, "1\n"), r.stderr


@pytest.fixture
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.settimeout(0.5)
    yield s
    s.close()


def assert_no_connection(listener):
    with pytest.raises(socket.timeout):
        c, _ = listener.accept()
        c.close()


def test_tcp_connect_denied(pd, listener):
    port = listener.getsockname()[1]
    r = py(pd, TRY + """
t(lambda: socket.create_connection(("127.0.0.1", int(sys.argv[1]))))
t(lambda: socket.socket(socket.AF_INET6).connect(("::1", int(sys.argv[1]))))
""", port)
    # Under network none the tier refuses inet sockets outright (seccomp):
    # Landlock alone would still let listen() on an unbound socket expose a
    # port on the host's network.
    assert r.stdout.split() == ["EPERM", "EPERM"], r.stderr
    assert_no_connection(listener)


def test_tcp_bind_and_listen_denied(pd):
    r = py(pd, TRY + """
t(lambda: socket.socket().bind(('127.0.0.1', 0)))
t(lambda: socket.socket().listen(1))
""")
    assert r.stdout.split() == ["EPERM", "EPERM"], r.stderr


def test_mptcp_and_fast_open_denied(pd, listener):
    port = listener.getsockname()[1]
    r = py(pd, TRY + """
p = int(sys.argv[1])
t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).connect(("127.0.0.1", p)))
t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))
t(lambda: socket.socket().sendto(b"x", 0x20000000, ("127.0.0.1", p)))
""", port)
    assert r.stdout.split() == ["EPERM"] * 3, r.stderr
    assert_no_connection(listener)


def test_udp_and_raw_denied(pd):
    r = py(pd, TRY + """
t(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
t(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
t(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
t(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
""")
    assert r.stdout.split() == ["EPERM"] * 4, r.stderr


def test_unshare_denied(pd):
    r = py(pd, TRY + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def f():
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
t(f)
""")
    # EOPNOTSUPP (== ENOTSUP on Linux, which Python names first): paddock's own errno
    assert errno.errorcode[errno.EOPNOTSUPP] == r.stdout.strip(), r.stderr


def test_signals_scoped(pd):
    """kill() of a host process running as the sandbox's own uid is refused:
    Landlock's signal scope, not the uid, stops it."""
    p = subprocess.Popen(pd.argv(ISO + ["--", "python3", "-c", TRY + """
print(os.getuid(), flush=True)
pid = int(sys.stdin.readline())
t(lambda: os.kill(pid, 0))
t(lambda: os.kill(1, 0))
"""]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_strict())
    victim = None
    try:
        uid = int(p.stdout.readline())
        victim = subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                                   "sleep", "60"])
        time.sleep(0.1)
        out, err = p.communicate("%d\n" % victim.pid, timeout=30)
        assert out.split() == ["EPERM", "EPERM"], err
        assert victim.poll() is None
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if victim:
            victim.kill()
            victim.wait()


VICTIM = """
import signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGIO, signal.SIGUSR1})
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
print("SIGIO pending" if signal.SIGIO in signal.sigpending() else "no SIGIO", flush=True)
"""


def test_sigio_scoped(pd):
    """A SIGIO aimed with F_SETOWN at a host process of the sandbox's own uid
    is not sent (Landlock's signal scope covers file-owner signals too). The
    victim blocks SIGIO, so a sent one stays pending where the test sees it."""
    p = subprocess.Popen(pd.argv(ISO + ["--", "python3", "-c", TRY + """
import fcntl
print(os.getuid(), flush=True)
pid = int(sys.stdin.readline())
r, w = os.pipe()
fcntl.fcntl(r, fcntl.F_SETOWN, pid)
fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)
t(lambda: os.write(w, b"x") and None)
"""]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_strict())
    victim = None
    try:
        uid = int(p.stdout.readline())
        victim = subprocess.Popen(["/usr/bin/python3", "-c", VICTIM], user=uid, group=uid, extra_groups=[],
                                  stdout=subprocess.PIPE, text=True)
        assert victim.stdout.readline().strip() == "ready"
        out, err = p.communicate("%d\n" % victim.pid, timeout=30)
        assert out.strip() == "OK", err          # the write itself works
        victim.send_signal(signal.SIGUSR1)
        assert victim.stdout.readline().strip() == "no SIGIO"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if victim:
            victim.kill()
            victim.wait()


def test_abstract_unix_scoped(pd):
    """Refused twice over: seccomp leaves the tier no socket(AF_UNIX) (EPERM),
    and Landlock's ABSTRACT_UNIX_SOCKET scope would refuse the connect (also
    EPERM). Binding abstract names: tests/security/test_process_ipc.py."""
    name = "\0paddock-test-" + uuid.uuid4().hex
    s = socket.socket(socket.AF_UNIX)
    s.bind(name)
    s.listen(1)
    try:
        r = py(pd, TRY + "t(lambda: socket.socket(socket.AF_UNIX).connect('\\0' + sys.argv[1]))", name[1:])
        assert r.stdout.strip() == "EPERM", r.stderr
    finally:
        s.close()


def test_no_named_unix_socket_even_in_workspace(pd):
    """No socket(AF_UNIX), no bind() in this tier (docs/security.md: a named
    socket could squat a host abstract name); socketpairs work."""
    r = py(pd, TRY + """
t(lambda: socket.socket(socket.AF_UNIX).bind("sock"))
a, b = socket.socketpair()
t(lambda: a.bind("sock2"))
a.send(b"ok")
print(b.recv(2).decode(), os.path.exists("sock"), os.path.exists("sock2"))
""")
    assert r.stdout.split() == ["EPERM", "EPERM", "ok", "False", "False"], (r.stdout, r.stderr)


def test_double_forked_daemon_dies_at_teardown(pd):
    marker = "pd-daemon-" + uuid.uuid4().hex
    r = run(pd, ["--", "bash", "-c",
                 '(setsid bash -c "exec -a %s sleep 1000" </dev/null >/dev/null 2>&1 &); sleep 0.3; '
                 # -q: a match counts even when another process vanished mid-glob (grep's exit 2)
                 'grep -qs %s /proc/[0-9]*/cmdline && echo started' % (marker, marker)])
    assert r.stdout.strip() == "started", r.stderr
    deadline = time.time() + 5
    while procs_with(marker) and time.time() < deadline:
        time.sleep(0.05)
    assert procs_with(marker) == []


def test_oom_reported(pd):
    r = run(pd, ["--memory", "64M", "--json", "--", "python3", "-c", "x = bytearray(256 << 20)"])
    res = parse_json_result(r.stderr)
    assert (r.returncode, res["reason"]) == (137, "oom"), r.stderr


def test_pids_limit(pd):
    r = run(pd, ["--pids", "8", "--", "bash", "-c", "for i in $(seq 20); do sleep 2 & done; wait"])
    assert "pids limit" in r.stderr, r.stderr


def test_strict_on_abi7_and_refusal_on_older(pd):
    # This kernel has ABI 7: no downgrade needed, none accepted.
    assert run(pd, ["--", "true"]).returncode == 0
    # An older ABI (the test hook lowers what paddock sees) is refused,
    # naming what is missing ...
    e = env_strict()
    e["PADDOCK_LANDLOCK_ABI_MAX"] = "5"
    r = run(pd, ["--", "true"], env=e)
    assert r.returncode == 125
    assert "LANDLOCK_SCOPE_SIGNAL" in r.stderr and "LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET" in r.stderr
    # ... unless the downgrade is accepted, and then it is recorded.
    pattern = os.path.join(runtime_dir(pd.state), "sandboxes", "*", "process")
    before = set(glob.glob(pattern))
    p = subprocess.Popen(pd.argv(ISO + ["--allow-weaker", "--", "cat"]), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e)
    try:
        recs = []
        deadline = time.time() + 10
        while not recs and time.time() < deadline:
            recs = sorted(set(glob.glob(pattern)) - before)
            time.sleep(0.05)
        assert recs
        with open(recs[0]) as f:
            rec = dict(l.split("=", 1) for l in f.read().splitlines())
        assert rec["landlock_abi"] == "5"
        assert "LANDLOCK_SCOPE_SIGNAL" in rec["landlock_weaker"]
    finally:
        p.stdin.close()
        p.wait(timeout=30)


def test_file_api_maps_home(pd):
    """The agent's file API and spawn map /home/user and /root onto the
    workspace and stay inside Landlock's rules."""
    p = subprocess.Popen(pd.argv(ISO + ["--", "bash", "-c", "echo content > f; cat"]), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_strict())
    try:
        socks = []
        deadline = time.time() + 10
        while not socks and time.time() < deadline:
            socks = glob.glob(os.path.join(runtime_dir(pd.state), "sandboxes", "*", "agent.sock"))
            time.sleep(0.05)
        time.sleep(0.2)
        c = pdproto.Conn(socks[0])
        assert c.hello().type == pdproto.T["HELLO"]
        deadline = time.time() + 10
        while c.call("FILE_STAT", [("PATH", "f")]).type != pdproto.T["REPLY"] and time.time() < deadline:
            time.sleep(0.05)        # bash has not written it yet
        for path in ("/home/user/f", "/root/f", "f"):
            f = c.call("FILE_STAT", [("PATH", path), ("UID", 1000)])
            assert f.type == pdproto.T["REPLY"], (path, f.attrs)
            assert "/workspaces/" in pdproto.one(f.attrs, "ENTRY")["PATH"][0]
        for op, path in (("FILE_READ", "/etc/shadow"), ("FILE_READ", "/root/../../../../../../etc/shadow"),
                         ("FILE_LIST", "/root/.."), ("FILE_WRITE", "/etc/paddock-test"),
                         ("FILE_MKDIR", "/home/user/../escape")):
            f = c.call(op, [("PATH", path)])
            assert (f.type, f.aux) == (pdproto.T["ERROR"], errno.EACCES), (op, path, f.attrs)
        pid = c.spawn_ok(["pwd"], CWD="/home/user", UID=0, GID=0)
        out, ex = c.collect(pid)
        assert b"/workspaces/" in out[pdproto.STDOUT]
        c.close()
    finally:
        p.stdin.close()
        p.wait(timeout=30)


def test_many_inherited_fds_never_reach_the_sandbox(pd):
    """Started by a process holding ~300 inheritable fds, the run works and
    the command sees only 0, 1, 2 (and python's own listing fd)."""
    held = []
    try:
        for _ in range(150):
            r, w = os.pipe()
            os.set_inheritable(r, True)
            os.set_inheritable(w, True)
            held += [r, w]
        r = py(pd, "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))", close_fds=False)
    finally:
        for fd in held:
            os.close(fd)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0, 1, 2, 3]", r.stdout
