"""The container tier's invariants (DESIGN §5), tried from inside a sandbox
made by `paddock run`. Each test states what an escape would look like."""
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import uuid

import pytest

from pdtest import UID_BASE, child_env

# x86_64 syscall numbers
SYS = dict(ioctl=16, mount=165, ptrace=101, keyctl=250, bpf=321, io_uring_setup=425, unshare=272)
CLONE_NEWUSER = 0x10000000
TIOCSTI = 0x5412
TIOCLINUX = 0x541C

PRELUDE = r'''
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a) if isinstance(a, int) else a for a in args])
    return r, ctypes.get_errno()
def show(name, res):
    r, e = res
    print(name, "ok" if r >= 0 else errno.errorcode.get(e, str(e)))
'''


def py(paddock, code, *opts, **kw):
    return paddock.run(list(opts) + ["--", "python3", "-c", PRELUDE + code], **kw)


def results(stdout):
    return dict(l.split(None, 1) for l in stdout.splitlines() if l.strip())


# --- host files ------------------------------------------------------------------

def test_host_files_invisible(paddock):
    secret_dir = tempfile.mkdtemp(prefix="pd-secret-")
    try:
        secret = os.path.join(secret_dir, "secret")
        with open(secret, "w") as f:
            f.write("host-secret-%s\n" % uuid.uuid4())
        r = paddock.run(
            ["-u", "root", "--", "bash", "-c",
             'for p in /work /root/.ssh "$1" "$2" "$3"; do '
             '  if [ -e "$p" ]; then echo "visible $p"; else echo "absent $p"; fi; done',
             "bash", secret, paddock.state, os.path.realpath(paddock.bin)])
    finally:
        shutil.rmtree(secret_dir)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 5, r.stdout
    assert all(l.startswith("absent ") for l in lines), r.stdout


def test_host_shadow_not_visible(paddock):
    with open("/etc/shadow") as f:
        host = f.read()
    r = paddock.run(["-u", "root", "--", "bash", "-c", "cat /etc/shadow 2>/dev/null; echo end"])
    assert r.returncode == 0, r.stderr
    inside = r.stdout[:-len("end\n")]
    assert r.stdout.endswith("end\n")
    assert inside != host
    root_hash = [l for l in host.splitlines() if l.startswith("root:")]
    for l in root_hash:
        assert l not in inside


def test_pid1_is_the_agent(paddock):
    r = paddock.run(["--", "bash", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0].endswith("paddock-agent"), r.stdout


def test_pid1_holds_nothing_of_paddock_run(paddock):
    """`paddock run`'s sandbox child runs the agent linked into paddock
    instead of exec'ing paddock-agent (src/jail/agent_inproc.c): its PID 1
    is a copy of the paddock process. An escape: the command line or the
    environment paddock was started with (the caller's secrets) readable
    in the sandbox, or PID 1's memory, maps or fds open to the sandbox's
    root."""
    secret = "pd-secret-" + uuid.uuid4().hex
    code = r'''
import os
out = {}
for name in ("cmdline", "comm", "environ", "maps", "mem", "auxv", "stack"):
    try:
        with open("/proc/1/" + name, "rb") as f:
            data = f.read(1 << 20)
        out[name] = "read:" + data.replace(b"\0", b" ").decode("latin-1").strip()
    except OSError as e:
        out[name] = "denied:" + errno.errorcode.get(e.errno, str(e.errno))
for name in ("fd", "map_files", "cwd", "root", "exe"):
    try:
        out[name] = "read:" + " ".join(os.listdir("/proc/1/" + name))
    except OSError as e:
        out[name] = "denied:" + errno.errorcode.get(e.errno, str(e.errno))
for k, v in out.items():
    print(k, v)
'''
    r = py(paddock, code, "-u", "root", "-e", "PD_ARG=" + secret, env={"PD_TEST_SECRET": secret})
    assert r.returncode == 0, r.stderr
    res = results(r.stdout)
    assert secret not in r.stdout, r.stdout
    assert "--state-dir" not in res["cmdline"], res["cmdline"]
    assert res["comm"] == "read:paddock-agent", res
    assert res["cmdline"].split(":", 1)[1].split()[0].endswith("paddock-agent"), res
    for name in ("environ", "maps", "mem", "auxv", "stack", "fd", "map_files", "cwd", "root", "exe"):
        assert res[name].startswith("denied:"), (name, res[name])


# --- host processes --------------------------------------------------------------

def test_host_processes_invisible(paddock):
    r = paddock.run(["--", "bash", "-c",
                     'ps -e -o pid=; echo ---; for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done'])
    assert r.returncode == 0, r.stderr
    pids, cmdlines = r.stdout.split("---\n")
    pids = [int(x) for x in pids.split()]
    assert 1 in pids
    assert len(pids) <= 6, pids
    assert "pytest" not in cmdlines
    assert "--state-dir" not in cmdlines          # paddock run itself


# --- host network ---------------------------------------------------------------

def test_only_loopback(paddock):
    r = paddock.run(["--", "bash", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1"])
    assert r.returncode == 0, r.stderr
    assert [l.strip() for l in r.stdout.splitlines()] == ["lo"]


def test_host_loopback_unreachable(paddock):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    try:
        r = paddock.py(
            "import socket, errno\n"
            "s = socket.socket()\n"
            "s.settimeout(5)\n"
            "try:\n"
            "    s.connect(('127.0.0.1', %d)); print('connected')\n"
            "except OSError as e:\n"
            "    print('failed', errno.errorcode.get(e.errno, e))\n" % port)
        srv.setblocking(False)
        with pytest.raises(BlockingIOError):
            srv.accept()
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("failed "), r.stdout


# --- file descriptors --------------------------------------------------------------

FD_PROBE = r'''
import os
listed = os.listdir("/proc/self/fd")
still = []
for fd in listed:
    try:
        os.fstat(int(fd))
        still.append(int(fd))
    except OSError:
        pass          # the fd os.listdir used, closed by now
probed = []
for fd in range(0, 4096):
    try:
        os.fstat(fd)
        probed.append(fd)
    except OSError:
        pass
print(sorted(still), probed)
'''


def test_only_std_fds(paddock):
    r = paddock.run(["--", "python3", "-c", FD_PROBE])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[0, 1, 2] [0, 1, 2]\n"


def test_only_std_fds_with_tty(paddock):
    cmd = "stty rows 24 cols 80; " + " ".join(
        shlex.quote(a) for a in paddock.argv(["-t", "--", "python3", "-c", FD_PROBE]))
    r = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, timeout=60,
                       env=child_env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[0, 1, 2] [0, 1, 2]" in r.stdout


# --- credentials, no_new_privs, seccomp ------------------------------------------

def _status(paddock, *opts):
    r = paddock.run(list(opts) + ["--", "cat", "/proc/self/status"])
    assert r.returncode == 0, r.stderr
    return dict(l.split(":\t", 1) for l in r.stdout.splitlines() if ":\t" in l)


def test_user_has_no_caps_nnp_seccomp(paddock):
    st = _status(paddock)
    assert int(st["CapEff"].strip(), 16) == 0
    assert int(st["CapPrm"].strip(), 16) == 0
    assert int(st["CapAmb"].strip(), 16) == 0
    assert st["NoNewPrivs"].strip() == "1"
    assert st["Seccomp"].strip() == "2"


def test_root_nnp_seccomp(paddock):
    st = _status(paddock, "-u", "root")
    assert st["NoNewPrivs"].strip() == "1"
    assert st["Seccomp"].strip() == "2"


def test_uid_map_unprivileged(paddock):
    for user in ("user", "root"):
        r = paddock.run(["-u", user, "--", "cat", "/proc/self/uid_map", "/proc/self/gid_map"])
        assert r.returncode == 0, r.stderr
        lines = [l.split() for l in r.stdout.splitlines()]
        assert len(lines) == 2, r.stdout
        for inside, outside, count in lines:
            assert inside == "0" and count == "65536"
            assert int(outside) >= UID_BASE


@pytest.mark.parametrize("user", ["user", "root"])
def test_namespace_syscalls_denied(paddock, user):
    r = py(paddock, "show('unshare-user', sc(%d, %d))\n"
                    "show('mount', sc(%d, b'none', b'/tmp', b'tmpfs', 0, 0))\n"
                    "show('keyctl', sc(%d, 0, 0, 0, 0, 0))\n"
                    "show('bpf', sc(%d, 0, 0, 0))\n"
                    "show('io_uring_setup', sc(%d, 8, ctypes.create_string_buffer(120)))\n"
           % (SYS["unshare"], CLONE_NEWUSER, SYS["mount"], SYS["keyctl"], SYS["bpf"], SYS["io_uring_setup"]),
           "-u", user)
    assert r.returncode == 0, r.stderr
    res = results(r.stdout)
    assert res["unshare-user"] in ("EOPNOTSUPP", "ENOTSUP")   # the same number (95) on Linux
    assert res["mount"] in ("ENOSYS", "EPERM")
    assert res["keyctl"] == "ENOSYS"
    assert res["bpf"] == "ENOSYS"
    assert res["io_uring_setup"] == "ENOSYS"


def test_unshare_command_fails(paddock):
    r = paddock.run(["-u", "root", "--", "bash", "-c", "unshare -U true; echo rc=$?"])
    assert r.stdout.strip().endswith("rc=1"), (r.stdout, r.stderr)


TIOCSTI_PROBE = (
    "c = ctypes.c_char(b'x')\n"
    "show('tiocsti', sc(%d, 0, %d, ctypes.byref(c)))\n"
    "show('tiocsti-hi', sc(%d, 0, %d, ctypes.byref(c)))\n"
    "show('tioclinux', sc(%d, 0, %d, ctypes.byref(c)))\n"
    "print('isatty', os.isatty(0))\n"
    % (SYS["ioctl"], TIOCSTI, SYS["ioctl"], TIOCSTI | (1 << 32), SYS["ioctl"], TIOCLINUX))


def test_tiocsti_denied_without_tty(paddock):
    r = py(paddock, TIOCSTI_PROBE)
    assert r.returncode == 0, r.stderr
    res = results(r.stdout)
    assert res == {"tiocsti": "EPERM", "tiocsti-hi": "EPERM", "tioclinux": "EPERM", "isatty": "False"}


def test_tiocsti_denied_with_tty(paddock):
    cmd = "stty rows 24 cols 80; " + " ".join(
        shlex.quote(a) for a in paddock.argv(["-t", "--", "python3", "-c", PRELUDE + TIOCSTI_PROBE]))
    r = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, timeout=60,
                       env=child_env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    # the pty echoes control bytes util-linux script sends (e.g. "^@"): drop them
    res = results(r.stdout.replace("\r", "").replace("^@", "").replace("^D", ""))
    assert res.get("isatty") == "True", r.stdout
    assert res.get("tiocsti") == "EPERM", r.stdout
    assert res.get("tiocsti-hi") == "EPERM", r.stdout
    assert res.get("tioclinux") == "EPERM", r.stdout


@pytest.mark.parametrize("user", ["user", "root"])
def test_ptrace_agent_fails(paddock, user):
    r = py(paddock, "PTRACE_ATTACH = 16\nshow('attach', sc(%d, PTRACE_ATTACH, 1, 0, 0))\n"
                    "try:\n    open('/proc/1/mem', 'rb').read(1); print('mem readable')\n"
                    "except OSError as e:\n    print('mem', errno.errorcode[e.errno])\n"
                    "opened = []\n"
                    "for fd in range(64):\n"
                    "    for op in (os.readlink, lambda p: os.close(os.open(p, os.O_RDONLY))):\n"
                    "        try:\n            op('/proc/1/fd/%%d' %% fd); opened.append(fd)\n"
                    "        except OSError:\n            pass\n"
                    "print('fds', 'reachable:%%s' %% opened if opened else 'none')\n"
                    "try:\n    open('/proc/1/environ', 'rb').read(); print('environ readable')\n"
                    "except OSError as e:\n    print('environ', errno.errorcode[e.errno])\n" % SYS["ptrace"],
           "-u", user)
    assert r.returncode == 0, r.stderr
    res = results(r.stdout)
    assert res["attach"] in ("EPERM", "ENOSYS"), r.stdout
    assert res["mem"] in ("EPERM", "EACCES", "EIO"), r.stdout
    assert res["fds"] == "none", r.stdout
    assert res["environ"] in ("EPERM", "EACCES"), r.stdout


def test_ptrace_own_child_works(paddock):
    # ptrace is allowlisted for debuggers: tracing one's own child works.
    r = py(paddock, "import signal, time\n"
                    "pid = os.fork()\n"
                    "if pid == 0:\n    time.sleep(30); os._exit(0)\n"
                    "show('attach', sc(%d, 16, pid, 0, 0))\n"
                    "os.waitpid(pid, 0)\nos.kill(pid, signal.SIGKILL)\nos.waitpid(pid, 0)\n" % SYS["ptrace"])
    assert r.returncode == 0, r.stderr
    assert results(r.stdout)["attach"] == "ok"


# --- ordinary things still work ------------------------------------------------------

def test_threads_work(paddock):
    r = paddock.py("import threading\n"
                   "out = [None] * 8\n"
                   "def w(i):\n    out[i] = sum(range(i * 1000))\n"
                   "ts = [threading.Thread(target=w, args=(i,)) for i in range(8)]\n"
                   "[t.start() for t in ts]\n[t.join() for t in ts]\n"
                   "print(out == [sum(range(i * 1000)) for i in range(8)], threading.active_count())\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "True 1\n"


def test_posix_spawn_works(paddock):
    r = paddock.py("import os\n"
                   "pid = os.posix_spawn('/bin/echo', ['echo', 'spawned'], os.environ)\n"
                   "_, st = os.waitpid(pid, 0)\nprint('status', st)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "spawned\nstatus 0\n"


# --- /proc and /sys ------------------------------------------------------------------

def test_proc_sys_writes_fail(paddock):
    with open("/proc/sys/kernel/hostname") as f:
        host_hostname = f.read()
    r = paddock.py(
        "import errno\n"
        "for p, v in (('/proc/sys/kernel/hostname', 'pwned'), ('/proc/sysrq-trigger', 'h'),\n"
        "             ('/proc/sys/vm/drop_caches', '3')):\n"
        "    try:\n"
        "        with open(p, 'w') as f: f.write(v)\n"
        "        print(p, 'written')\n"
        "    except OSError as e:\n"
        "        print(p, errno.errorcode[e.errno])\n", "-u", "root")
    assert r.returncode == 0, r.stderr
    res = results(r.stdout)
    assert len(res) == 3, r.stdout
    for p, v in res.items():
        assert v != "written", (p, v)
    with open("/proc/sys/kernel/hostname") as f:
        assert f.read() == host_hostname


def test_sys_read_only(paddock):
    r = paddock.run(["-u", "root", "--", "bash", "-c",
                     "awk '$2 == \"/sys\" {print $4}' /proc/self/mounts; "
                     "mkdir /sys/fs/cgroup/pd-escape 2>/dev/null && echo mkdir-ok || echo mkdir-failed; "
                     "echo 1 > /sys/kernel/mm/ksm/run 2>/dev/null && echo write-ok || echo write-failed"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split(",")[0] == "ro", r.stdout
    assert lines[1:] == ["mkdir-failed", "write-failed"]
    assert not os.path.exists("/sys/fs/cgroup/pd-escape")


# --- writes as root stay inside ------------------------------------------------------

def test_root_write_to_usr_stays_inside(paddock):
    name = "pd-escape-%s" % uuid.uuid4().hex[:12]
    r = paddock.run(["-u", "root", "--", "bash", "-c",
                     "touch /usr/bin/%s && echo touched && test -e /usr/bin/%s && echo exists" % (name, name)])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "touched\nexists\n"
    assert not os.path.exists("/usr/bin/" + name)
    r = paddock.run(["-u", "root", "--", "bash", "-c", "test -e /usr/bin/%s && echo leaked || echo fresh" % name])
    assert r.stdout == "fresh\n"


def test_user_cannot_write_usr(paddock):
    r = paddock.run(["--", "bash", "-c", "touch /usr/bin/pd-x 2>/dev/null && echo wrote || echo denied"])
    assert r.stdout == "denied\n"


def test_rm_rf_root_does_not_touch_host(paddock):
    before = paddock.leftovers()
    canary_dir = tempfile.mkdtemp(prefix="pd-canary-")
    os.chmod(canary_dir, 0o755)     # root-owned: inside, only its bits for others apply
    canary = os.path.join(canary_dir, "canary")
    with open(canary, "w") as f:
        f.write("still here\n")
    os.chmod(canary, 0o644)
    try:
        r = paddock.run(["-u", "root", "-v", "%s:/canary:ro" % canary_dir, "--timeout", "150", "--",
                         "bash", "-c", "rm -rf --no-preserve-root / 2>/dev/null; echo rm=$?; "
                                       "read c < /canary/canary; echo \"canary: $c\""], timeout=180)
        assert r.stdout == "rm=1\ncanary: still here\n", (r.stdout, r.stderr)
        with open(canary) as f:
            assert f.read() == "still here\n"
        assert os.access("/usr/bin/true", os.X_OK)
        assert subprocess.run(["/usr/bin/true"], timeout=10).returncode == 0
        assert os.path.exists(paddock.bin) and os.path.exists(paddock.agent)
        assert os.path.isdir(paddock.state)
    finally:
        shutil.rmtree(canary_dir)
    # and the next sandbox is intact
    r = paddock.run(["--", "bash", "-c", "ls /usr/bin/true"])
    assert r.returncode == 0 and r.stdout == "/usr/bin/true\n", r.stderr
    assert paddock.new_leftovers(before) == {}


# --- sudo ------------------------------------------------------------------------

def test_sudo(paddock):
    r = paddock.run(["--", "sudo", "id", "-u"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0\n"
