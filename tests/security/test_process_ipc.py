"""The `process` tier shares the host's ipc and network namespaces: what it
promises about them (docs/security.md, "`process` tier"; docs/seccomp.md,
"The process tier"), attacked from inside a sandbox.

    /usr/bin/python3 -m pytest -q tests/security/test_process_ipc.py

- SysV IPC and POSIX message queues are absent (ENOSYS): a host object with
  an open mode stays unreadable, and nothing the sandbox could create
  outlives it.
- No named unix socket: socket(AF_UNIX) and bind() are refused (EPERM), so a
  sandbox cannot squat an abstract name a host client then connects to, nor
  reach a host daemon's pathname socket; stream and seqpacket socketpairs,
  which programs need for their own pipes, keep working.

Needs root (one uid per sandbox) and Landlock ABI >= 6, like
tests/integration/test_process_tier.py.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "escape"))
from pdtest import Paddock, child_env  # noqa: E402
import hostipc  # noqa: E402

ISO = ["--isolation", "process"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process tier's tests run as root")


@pytest.fixture(scope="module")
def pd():
    # The sandbox's uid must search every parent of the state dir.
    top = tempfile.mkdtemp(prefix="paddock-procipc-", dir="/tmp")
    os.chmod(top, 0o711)
    p = Paddock(os.path.join(top, "state"))
    os.makedirs(p.state)
    p.top = top
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "removed 0 sandboxes", r.stdout
    assert p.leftovers() == {}
    shutil.rmtree(top, ignore_errors=True)


def env():
    e = child_env()
    e.pop("PADDOCK_LANDLOCK_ABI_MAX", None)
    return e


def py(pd, code, *args, **kw):
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(pd.argv(ISO + ["--", "python3", "-c", PRELUDE + code] + [str(a) for a in args]),
                          capture_output=True, text=True, timeout=60, env=env(), **kw)


# Runs inside the sandbox: t(f) prints OK (or what f returned) or the errno's name.
PRELUDE = """
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def t(f):
    try:
        r = f()
        print("OK" if r is None else r, flush=True)
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno), flush=True)
def c(r):
    if r is None or r == ctypes.c_void_p(-1).value or (isinstance(r, int) and r < 0):
        raise OSError(ctypes.get_errno(), "")
    return r
"""


def new_key():
    """A SysV key no object has yet (the kernel prints keys signed)."""
    while True:
        k = int.from_bytes(os.urandom(4), "little") & 0x7fffffff
        if k and not any(hostipc.find(kind, key=k) for kind in ("shm", "msg", "sem")):
            return k


# ---- SysV IPC and POSIX message queues -------------------------------------------


def test_host_sysv_objects_unreachable(pd):
    """A host segment, queue and semaphore set of mode 0666 and a known key:
    the sandbox can open none of them; the segment is never attached and the
    message never received."""
    key = new_key()
    canary = b"paddock host shm canary " + uuid.uuid4().hex.encode()
    made = []
    try:
        sid = hostipc.shm_create(key, canary)
        made.append(("shm", sid))
        qid = hostipc.msg_create(key, b"host message")
        made.append(("msg", qid))
        made.append(("sem", hostipc.sem_create(key)))
        r = py(pd, """
key = int(sys.argv[1])
def shm():
    sid = c(libc.shmget(key, 0, 0))
    return ctypes.string_at(c(libc.shmat(sid, None, 0o10000)), 64)
def msg():
    qid = c(libc.msgget(key, 0))
    buf = ctypes.create_string_buffer(256)
    c(libc.msgrcv(qid, buf, 200, 0, 0o4000))
    return buf.raw[8:40]
t(shm)
t(msg)
t(lambda: c(libc.semget(key, 0, 0)))
""", key)
        assert r.stdout.split() == ["ENOSYS"] * 3, (r.stdout, r.stderr)
        shm = hostipc.find("shm", key=key)[0]
        assert shm["lpid"] == os.getpid() and shm["nattch"] == 0, shm      # nobody but us attached
        assert hostipc.shm_read(sid, len(canary)) == canary
        q = hostipc.find("msg", key=key)[0]
        assert (q["qnum"], q["lrpid"]) == (1, 0), q                          # never received
    finally:
        for kind, ident in made:
            hostipc.remove(kind, ident)


def test_ipc_creation_refused_and_nothing_left(pd):
    """Creating SysV objects (keyed and IPC_PRIVATE) and a POSIX queue from
    inside fails with ENOSYS; after teardown the host holds nothing with the
    sandbox's key or uid (/proc/sysvipc) and no such queue."""
    key = new_key()
    mq = "/paddock-test-" + uuid.uuid4().hex
    uid = None
    try:
        r = py(pd, """
key, mq = int(sys.argv[1]), sys.argv[2].encode()
print(os.getuid(), flush=True)
t(lambda: c(libc.shmget(key, 4096, 0o1666)))
t(lambda: c(libc.shmget(0, 4096, 0o1600)))
t(lambda: c(libc.msgget(key, 0o1666)))
t(lambda: c(libc.msgget(0, 0o1600)))
t(lambda: c(libc.semget(key, 1, 0o1666)))
t(lambda: c(libc.semget(0, 1, 0o1600)))
t(lambda: c(libc.mq_open(mq, os.O_CREAT | os.O_RDWR, 0o666, None)))
""", key, mq)
        out = r.stdout.split()
        assert out, r.stderr
        uid = int(out[0])
        assert uid >= 1000000000
        assert out[1:] == ["ENOSYS"] * 7, (r.stdout, r.stderr)
        for kind in ("shm", "msg", "sem"):
            assert hostipc.find(kind, key=key, uid=uid) == [], kind
        assert not hostipc.mq_exists(mq)
    finally:
        # What the old code left behind, removed so the test leaves nothing.
        hostipc.sweep(key=key, uid=uid)
        hostipc.mq_unlink(mq)


def test_host_mqueue_unreachable(pd):
    """A host POSIX queue (mode 0666): mq_open and mq_unlink from inside
    fail with ENOSYS (Landlock alone answers mq_open with EACCES, and does not
    see mq_unlink); the queue keeps its message."""
    name = "/paddock-test-" + uuid.uuid4().hex
    fd = hostipc.mq_create(name, b"host message")
    try:
        r = py(pd, """
name = sys.argv[1].encode()
def unlink():
    c(libc.mq_unlink(name))
t(lambda: c(libc.mq_open(name, os.O_RDONLY, 0, None)))
t(unlink)
""", name)
        assert r.stdout.split() == ["ENOSYS", "ENOSYS"], (r.stdout, r.stderr)
        assert hostipc.mq_exists(name) and hostipc.mq_messages(fd) == 1
    finally:
        os.close(fd)
        hostipc.mq_unlink(name)


# ---- unix sockets -------------------------------------------------------------------

SQUAT = """
names = sys.argv[1:4]
listeners, receivers, hold = [], [], []
def stream():
    s = socket.socket(socket.AF_UNIX)
    s.bind("\\0" + names[0])
    s.listen(8)
    listeners.append(s)
def pair():
    a, b = socket.socketpair()
    receivers.append(a)
    hold.append(b)
    a.bind("\\0" + names[1])
def dgram():
    # a datagram pair, disconnected (AF_UNSPEC), then named: it would
    # receive what host clients send to the name
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    receivers.append(a)
    hold.append(b)
    unspec = (ctypes.c_ushort * 8)(0)
    c(libc.connect(a.fileno(), unspec, 16))
    a.bind("\\0" + names[2])
t(stream)
t(pair)
t(dgram)
print("ready", flush=True)
sys.stdin.readline()
got = []
for s in listeners + receivers:
    s.setblocking(False)
    try:
        got.append(s.accept() if s in listeners else s.recv(64))
    except OSError:
        pass
print("received %r" % got if any(got) else "nothing", flush=True)
"""


def test_abstract_name_squatting_refused(pd):
    """The sandbox tries to bind abstract names (a listening socket, a
    socketpair end, a disconnected datagram pair) while it runs; host clients
    then connecting or sending to those names reach nothing, and the names
    stay free for the host."""
    names = ["paddock-test-%s-%d" % (uuid.uuid4().hex, i) for i in range(3)]
    p = subprocess.Popen(pd.argv(ISO + ["--", "python3", "-c", PRELUDE + SQUAT] + names), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        res = [p.stdout.readline().strip() for _ in range(4)]
        assert res == ["EPERM", "EPERM", "EPERM", "ready"], (res, p.stderr.read() if p.poll() is not None else "")
        host = socket.socket(socket.AF_UNIX)
        with pytest.raises(ConnectionRefusedError):
            host.connect("\0" + names[0])
        host.close()
        d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        for n in names:
            with pytest.raises(ConnectionRefusedError):
                d.sendto(b"host datagram", "\0" + n)
        d.close()
        for n in names:                      # no name is held: the host can take each
            s = socket.socket(socket.AF_UNIX)
            s.bind("\0" + n)
            s.close()
        out, err = p.communicate("\n", timeout=30)
        assert out.strip() == "nothing", (out, err)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_host_pathname_sockets_unreachable(pd):
    """World-writable host unix sockets (stream and datagram, in a 0755
    directory) outside the workspace: Landlock ABI 7 does not govern their
    connect(); the seccomp policy leaves the sandbox no socket to connect or
    send with."""
    d = tempfile.mkdtemp(prefix="host-", dir=pd.top)
    os.chmod(d, 0o755)
    stream = socket.socket(socket.AF_UNIX)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sp, dp = os.path.join(d, "stream.sock"), os.path.join(d, "dgram.sock")
        stream.bind(sp)
        stream.listen(4)
        stream.setblocking(False)
        dgram.bind(dp)
        dgram.setblocking(False)
        os.chmod(sp, 0o777)
        os.chmod(dp, 0o777)
        r = py(pd, """
t(lambda: socket.socket(socket.AF_UNIX).connect(sys.argv[1]))
def send():
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", sys.argv[2])
t(send)
def via_pair():
    a, b = socket.socketpair()
    a.connect(sys.argv[1])
t(via_pair)
""", sp, dp)
        assert r.stdout.split() == ["EPERM", "EPERM", "EISCONN"], (r.stdout, r.stderr)
        with pytest.raises(BlockingIOError):
            stream.accept()
        with pytest.raises(BlockingIOError):
            dgram.recv(64)
    finally:
        stream.close()
        dgram.close()
        shutil.rmtree(d, ignore_errors=True)


def test_what_the_tier_needs_still_works(pd):
    """Stream and seqpacket socketpairs (asyncio, subprocess, multiprocessing
    pipes) work; a pathname socket cannot be made even in the workspace, and
    datagram pairs are refused. The run itself goes through the agent's
    socket (made by the host before the filter)."""
    r = py(pd, """
import asyncio, multiprocessing, subprocess
async def sub():
    p = await asyncio.create_subprocess_exec("echo", "asyncio", stdout=asyncio.subprocess.PIPE)
    return (await p.communicate())[0].decode().strip()
print(asyncio.run(sub()), flush=True)
print(subprocess.run(["echo", "subprocess"], capture_output=True, text=True).stdout.strip(), flush=True)
a, b = multiprocessing.Pipe()
a.send("mp-pipe")
print(b.recv(), flush=True)
def seqpacket():
    x, y = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    x.send(b"seqpacket")
    return y.recv(16).decode()
t(seqpacket)
t(lambda: socket.socket(socket.AF_UNIX).bind("workspace.sock"))
t(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
print(os.path.exists("workspace.sock"), flush=True)
""")
    assert r.stdout.split() == ["asyncio", "subprocess", "mp-pipe", "seqpacket", "EPERM", "EPERM", "False"], \
        (r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
