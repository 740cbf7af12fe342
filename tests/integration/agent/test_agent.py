"""Integration tests for paddock-agent, run as an ordinary process.

    /usr/bin/python3 -m pytest -q tests/integration/agent
PADDOCK_AGENT=path/to/paddock-agent overrides the binary (default build/src/agent/).
"""
import errno
import hashlib
import os
import signal
import socket
import stat
import struct
import subprocess
import threading

import pytest

from pdtest.pdproto import (Agent, Conn, T, F_END, STDOUT, STDERR, PTY, enc, one, HDR, agent_path)


@pytest.fixture
def agent():
    a = Agent()
    yield a
    a.stop()


@pytest.fixture
def c(agent):
    conn = agent.conn()
    yield conn
    conn.close()


@pytest.fixture
def tmp(tmp_path):
    return str(tmp_path)


# --- handshake and framing ---------------------------------------------------

def test_hello(agent):
    conn = Conn(agent.path)
    f = conn.hello()
    assert f.type == T["HELLO"]
    assert one(f.attrs, "VERSION") == 1
    assert one(f.attrs, "AGENT").startswith("paddock-agent ")


def test_version_mismatch_closes(agent):
    conn = Conn(agent.path)
    f = conn.hello(version=99)
    assert f.type == T["ERROR"] and f.aux == errno.EPROTONOSUPPORT
    msg = one(f.attrs, "MESSAGE")
    assert "99" in msg and "1" in msg
    with pytest.raises(EOFError):
        conn.recv()


def test_request_before_hello(agent):
    conn = Conn(agent.path)
    f = conn.call("PING")
    assert f.type == T["ERROR"] and f.aux == errno.EPROTO
    with pytest.raises(EOFError):
        conn.recv()


def test_oversized_frame_closes_only_that_connection(agent):
    good = agent.conn()
    bad = Conn(agent.path)
    bad.s.sendall(HDR.pack(5000, T["HELLO"], 0, 1, 0))   # > 4096 before HELLO
    with pytest.raises((EOFError, ConnectionResetError)):
        bad.recv()
    bad2 = agent.conn()
    bad2.s.sendall(HDR.pack((1 << 20) + 1, T["PING"], 0, 1, 0))
    with pytest.raises((EOFError, ConnectionResetError)):
        bad2.recv()
    assert good.call("PING").type == T["REPLY"]


def test_pipelined_requests(agent):
    conn = Conn(agent.path)
    blob = conn.frame_bytes("HELLO", 1, [("VERSION", 1), ("CLIENT", "t")])
    blob += conn.frame_bytes("SPAWN", 2, [("ARG", "sh"), ("ARG", "-c"), ("ARG", "read x; echo got$x"),
                                          ("ENV", "PATH=/usr/bin:/bin"), ("STDIN", 1)])
    blob += conn.frame_bytes("PING", 3)
    conn.s.sendall(blob)
    assert conn.reply(1).type == T["HELLO"]
    sp = conn.reply(2)
    assert sp.type == T["REPLY"]
    pid = one(sp.attrs, "PID")
    assert conn.reply(3).type == T["REPLY"]
    blob = conn.frame_bytes("ATTACH", 4, [("PID", pid), ("STREAM", STDOUT), ("OFFSET", 0), ("FOLLOW", 1)])
    blob += conn.frame_bytes("STDIN", pid, raw=b"42\n")
    blob += conn.frame_bytes("STDIN_CLOSE", 5, [("PID", pid)])
    conn.s.sendall(blob)
    assert one(conn.reply(4).attrs, "OFFSET") == 0
    out = b""
    while True:
        f = conn.recv(lambda f: f.id == pid and f.type in (T["OUTPUT"], T["EXIT"]))
        if f.type == T["EXIT"]:
            break
        out += f.payload[8:]
    assert out == b"got42\n"


def test_unknown_option_exits_125():
    r = subprocess.run([agent_path(), "--bogus"], capture_output=True)
    assert r.returncode == 125 and r.stderr


def test_malformed_requests_keep_connection(c):
    f = c.call("SPAWN", [("ENV", "A=1")])
    assert f.type == T["ERROR"] and f.aux == errno.EINVAL and "ARG" in one(f.attrs, "MESSAGE")
    f = c.call("SIGNAL", raw=struct.pack(">HHI", 21, 0, 2) + b"\0\0\0\0")   # PID of 2 bytes
    assert f.type == T["ERROR"] and f.aux == errno.EINVAL
    f = c.call("LIST", raw=struct.pack(">HHI", 21, 0, 100))                 # length past end
    assert f.type == T["ERROR"] and f.aux == errno.EPROTO
    c.s.sendall(HDR.pack(0, 999, 0, 77, 0))
    f = c.reply(77)
    assert f.type == T["ERROR"]
    f = c.call("OUTPUT")      # an agent->host type is not a request
    assert f.type == T["ERROR"] and f.aux == errno.EINVAL
    f = c.call("ATTACH", [("PID", 999999), ("STREAM", 1)])
    assert f.type == T["ERROR"] and f.aux == errno.ESRCH
    assert c.call("PING").type == T["REPLY"]


# --- processes -----------------------------------------------------------------

def test_spawn_missing_command(c):
    f = c.spawn(["definitely-not-a-command-xyz"])
    assert f.type == T["ERROR"] and f.aux == errno.ENOENT
    assert "cannot execute 'definitely-not-a-command-xyz'" in one(f.attrs, "MESSAGE")
    f = c.spawn(["/etc/passwd"])
    assert f.type == T["ERROR"] and f.aux == errno.EACCES
    procs = c.ok("LIST").get("PROC", [])
    assert procs == []


def test_exit_code_and_env(c):
    pid = c.spawn_ok(["sh", "-c", "echo $FOO; pwd; exit 7"], env=["PATH=/usr/bin:/bin", "FOO=bar"],
                     CWD="/tmp")
    out, ex = c.collect(pid)
    assert out[STDOUT] == b"bar\n/tmp\n"
    assert one(ex, "EXIT_CODE") == 7 and one(ex, "REASON") == "exit"
    assert one(ex, "END_OUT") == len(out[STDOUT])
    procs = c.ok("LIST")["PROC"]
    p = [p for p in procs if one(p, "PID") == pid][0]
    assert one(p, "STATE") == "exited" and one(p, "EXIT_CODE") == 7
    assert p["ARG"] == ["sh", "-c", "echo $FOO; pwd; exit 7"]


def test_signal(c):
    pid = c.spawn_ok(["sleep", "100"], TAG="sl")
    p = [p for p in c.ok("LIST")["PROC"] if one(p, "PID") == pid][0]
    assert one(p, "STATE") == "running" and one(p, "TAG") == "sl"
    c.ok("SIGNAL", [("PID", pid), ("SIGNO", 15)])
    _, ex = c.collect(pid)
    assert one(ex, "SIGNO") == 15 and one(ex, "REASON") == "signal" and "EXIT_CODE" not in ex
    f = c.call("SIGNAL", [("PID", 4000000), ("SIGNO", 9)])
    assert f.type == T["ERROR"] and f.aux == errno.ESRCH and "no process" in one(f.attrs, "MESSAGE")


def test_timeout(c):
    pid = c.spawn_ok(["sleep", "30"], TIMEOUT_MS=200)
    _, ex = c.collect(pid)
    assert one(ex, "REASON") == "timeout" and one(ex, "SIGNO") == 9


def test_stdout_stderr_order(c):
    n = 10000
    pid = c.spawn_ok(["sh", "-c", f'i=0; while [ $i -lt {n} ]; do echo out$i; echo err$i >&2; i=$((i+1)); done'])
    out, ex = c.collect(pid)
    assert out[STDOUT] == "".join(f"out{i}\n" for i in range(n)).encode()
    assert out[STDERR] == "".join(f"err{i}\n" for i in range(n)).encode()
    assert one(ex, "END_ERR") == len(out[STDERR])


def test_stdin_roundtrip(c):
    data = os.urandom(3 << 20)
    pid = c.spawn_ok(["cat"], STDIN=1)
    c.ok("ATTACH", [("PID", pid), ("STREAM", STDOUT), ("OFFSET", 0), ("FOLLOW", 1)])
    got = bytearray()

    def reader():
        while True:
            f = c.recv(lambda f: f.id == pid and f.type in (T["OUTPUT"], T["EXIT"]))
            if f.type == T["EXIT"]:
                return
            got.extend(f.payload[8:])
    t = threading.Thread(target=reader)
    t.start()
    for i in range(0, len(data), 200000):
        c.s.sendall(c.frame_bytes("STDIN", pid, raw=data[i:i + 200000]))
    c.s.sendall(c.frame_bytes("STDIN_CLOSE", 999, [("PID", pid)]))
    t.join(30)
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()


def test_pty(c):
    pid = c.spawn_ok(["sh", "-c", "tty; stty size; read x; stty size"], PTY_ROWS=24, PTY_COLS=80)
    c.ok("ATTACH", [("PID", pid), ("STREAM", PTY), ("OFFSET", 0), ("FOLLOW", 1)])
    out = b""
    while b"24 80" not in out:
        f = c.recv(lambda f: f.id == pid and f.type == T["OUTPUT"])
        assert f.aux == PTY
        out += f.payload[8:]
    assert b"/dev/pts/" in out
    c.ok("RESIZE", [("PID", pid), ("PTY_ROWS", 30), ("PTY_COLS", 100)])
    c.s.sendall(c.frame_bytes("STDIN", pid, raw=b"go\n"))
    while True:
        f = c.recv(lambda f: f.id == pid and f.type in (T["OUTPUT"], T["EXIT"]))
        if f.type == T["EXIT"]:
            break
        out += f.payload[8:]
    assert b"30 100" in out
    f = c.call("ATTACH", [("PID", pid), ("STREAM", STDOUT)])
    assert f.type == T["ERROR"] and f.aux == errno.EINVAL


def test_connection_end_keeps_processes(agent):
    c1 = agent.conn()
    pid = c1.spawn_ok(["sleep", "100"])
    c1.close()
    c2 = agent.conn()
    p = [p for p in c2.ok("LIST")["PROC"] if one(p, "PID") == pid][0]
    assert one(p, "STATE") == "running"
    c2.ok("SIGNAL", [("PID", pid), ("SIGNO", 9)])


def test_reconnect_resume(agent):
    n = 400000
    expected = "".join(f"{i}\n" for i in range(1, n + 1)).encode()
    c1 = agent.conn()
    pid = c1.spawn_ok(["seq", str(n)])
    c1.ok("ATTACH", [("PID", pid), ("STREAM", STDOUT), ("OFFSET", 0), ("FOLLOW", 1)])
    got = b""
    while len(got) < 100000:
        f = c1.recv(lambda f: f.id == pid and f.type == T["OUTPUT"])
        assert struct.unpack_from(">Q", f.payload)[0] == len(got)
        got += f.payload[8:]
    c1.close()     # mid-output
    c2 = agent.conn()
    procs = c2.ok("LIST")["PROC"]
    p = [p for p in procs if one(p, "PID") == pid][0]
    assert one(p, "START_OUT") == 0
    r = c2.ok("ATTACH", [("PID", pid), ("STREAM", STDOUT), ("OFFSET", len(got)), ("FOLLOW", 1)])
    assert one(r, "OFFSET") == len(got)
    while True:
        f = c2.recv(lambda f: f.id == pid and f.type in (T["OUTPUT"], T["EXIT"], T["GAP"]))
        assert f.type != T["GAP"]
        if f.type == T["EXIT"]:
            break
        assert struct.unpack_from(">Q", f.payload)[0] == len(got)
        got += f.payload[8:]
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(expected).hexdigest()


def test_gap_when_evicted():
    a = Agent("--ring-size", "65536")
    try:
        c1 = a.conn()
        n = 100000
        expected = "".join(f"{i}\n" for i in range(1, n + 1)).encode()
        # FOLLOW on SPAWN: attached before the first byte, so the ring's
        # eviction cannot race a separate ATTACH.
        pid = c1.spawn_ok(["seq", str(n)], FOLLOW=1)
        out, ex = c1.collect(pid, streams=(STDOUT,), attach=False)
        assert out[STDOUT] == expected           # a FOLLOW reader loses nothing
        c2 = a.conn()
        p = [p for p in c2.ok("LIST")["PROC"] if one(p, "PID") == pid][0]
        start = one(p, "START_OUT")
        assert start == len(expected) - 65536
        r = c2.ok("ATTACH", [("PID", pid), ("STREAM", STDOUT), ("OFFSET", 10), ("FOLLOW", 0)])
        assert one(r, "OFFSET") == start
        f = c2.recv(lambda f: f.id == pid)
        assert f.type == T["GAP"] and struct.unpack(">QQ", f.payload) == (10, start)
        got = b""
        while True:
            f = c2.recv(lambda f: f.id == pid)
            if f.type == T["EXIT"]:
                break
            got += f.payload[8:]
        assert got == expected[start:]
    finally:
        a.stop()


def test_backpressure_slow_reader():
    """A FOLLOW reader that does not read holds the writer: nothing is lost."""
    a = Agent("--ring-size", "65536")
    try:
        c1 = a.conn()
        c1.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        pid = c1.spawn_ok(["seq", "300000"])
        c1.ok("ATTACH", [("PID", pid), ("STREAM", STDOUT), ("OFFSET", 0), ("FOLLOW", 1)])
        c2 = a.conn()
        # the writer is held: the process cannot have finished while c1 lags
        p = [p for p in c2.ok("LIST")["PROC"] if one(p, "PID") == pid][0]
        assert one(p, "END_OUT") - 0 <= 65536 + (1 << 20)
        got = b""
        while True:
            f = c1.recv(lambda f: f.id == pid)
            assert f.type != T["GAP"]
            if f.type == T["EXIT"]:
                break
            got += f.payload[8:]
        assert got == "".join(f"{i}\n" for i in range(1, 300001)).encode()
    finally:
        a.stop()


# --- files -----------------------------------------------------------------------

def write_file(c, path, data, chunk=200000, **kw):
    fid = c.req("FILE_WRITE", [("PATH", path)] + list(kw.items()))
    for i in range(0, max(len(data), 1), chunk):
        part = data[i:i + chunk]
        last = i + chunk >= len(data)
        c.s.sendall(HDR.pack(len(part), T["DATA"], F_END if last else 0, fid, 0) + part)
    return c.reply(fid)


def read_file(c, path, **kw):
    fid = c.req("FILE_READ", [("PATH", path)] + list(kw.items()))
    data = b""
    while True:
        f = c.recv(lambda f: f.id == fid)
        if f.type == T["ERROR"]:
            return f, None
        if f.type == T["DATA"]:
            data += f.payload
            if f.flags & F_END:
                r = c.recv(lambda f: f.id == fid)
                return r, data
        else:
            return f, data


def test_file_write_read_roundtrip(c, tmp):
    data = os.urandom(5 << 20)
    p = os.path.join(tmp, "big.bin")
    f = write_file(c, p, data, MODE=0o600)
    assert f.type == T["REPLY"], f.attrs
    e = one(f.attrs, "ENTRY")
    assert one(e, "SIZE") == len(data) and one(e, "MODE") == 0o600 and one(e, "PATH") == p
    with open(p, "rb") as fh:
        assert fh.read() == data
    assert [n for n in os.listdir(tmp) if n != "big.bin"] == []     # no temp file left
    r, got = read_file(c, p)
    assert r.type == T["REPLY"] and one(r.attrs, "SIZE") == len(data)
    assert got == data
    r, got = read_file(c, p, OFFSET=100, LENGTH=50)
    assert got == data[100:150]
    f = write_file(c, p, b"tail", APPEND=1)
    assert f.type == T["REPLY"]
    assert os.path.getsize(p) == len(data) + 4


def test_file_write_failure_changes_nothing(c, tmp):
    p = os.path.join(tmp, "nodir", "x")
    f = write_file(c, p, b"x" * 300000, chunk=100000)
    assert f.type == T["ERROR"] and f.aux == errno.ENOENT
    assert c.call("PING").type == T["REPLY"]     # the trailing DATA was discarded


def test_stat_list_mkdir_move_remove(c, tmp):
    d = os.path.join(tmp, "a", "b", "c")
    f = c.call("FILE_MKDIR", [("PATH", d)])
    assert f.type == T["ERROR"] and f.aux == errno.ENOENT
    e = one(c.ok("FILE_MKDIR", [("PATH", d), ("PARENTS", 1)]), "ENTRY")
    assert one(e, "FTYPE") == 2
    f = c.call("FILE_MKDIR", [("PATH", d)])
    assert f.type == T["ERROR"] and f.aux == errno.EEXIST
    with open(os.path.join(d, "f.txt"), "w") as fh:
        fh.write("hello")
    os.symlink("/", os.path.join(tmp, "a", "root-link"))
    e = one(c.ok("FILE_STAT", [("PATH", os.path.join(d, "f.txt"))]), "ENTRY")
    assert one(e, "SIZE") == 5 and one(e, "FTYPE") == 1 and one(e, "NAME") == "f.txt"
    e = one(c.ok("FILE_STAT", [("PATH", os.path.join(tmp, "a", "root-link"))]), "ENTRY")
    assert one(e, "FTYPE") == 3 and one(e, "LINK") == "/"
    ents = c.ok("FILE_LIST", [("PATH", os.path.join(tmp, "a"))])["ENTRY"]
    assert sorted(one(x, "NAME") for x in ents) == ["b", "root-link"]
    ents = c.ok("FILE_LIST", [("PATH", os.path.join(tmp, "a")), ("DEPTH", 5)])["ENTRY"]
    paths = sorted(one(x, "PATH") for x in ents)
    assert paths == sorted([os.path.join(tmp, "a", x) for x in
                            ["b", "b/c", "b/c/f.txt", "root-link"]])      # not through the link
    e = one(c.ok("FILE_MOVE", [("PATH", os.path.join(d, "f.txt")), ("PATH2", os.path.join(tmp, "g.txt"))]), "ENTRY")
    assert one(e, "PATH") == os.path.join(tmp, "g.txt")
    assert open(os.path.join(tmp, "g.txt")).read() == "hello"
    c.ok("FILE_REMOVE", [("PATH", os.path.join(tmp, "a"))])
    assert sorted(os.listdir(tmp)) == ["g.txt"]
    assert os.path.isdir("/") and os.path.exists("/etc")         # the link was not followed
    f = c.call("FILE_STAT", [("PATH", os.path.join(tmp, "a"))])
    assert f.type == T["ERROR"] and f.aux == errno.ENOENT


def test_relative_path_is_under_home(c):
    e = one(c.ok("FILE_STAT", [("PATH", ".")]) if False else c.ok("FILE_LIST", [("PATH", "/")]), "ENTRY")
    assert e is not None
    import pwd
    home = pwd.getpwuid(os.geteuid()).pw_dir
    if os.path.isdir(home):
        f = c.call("FILE_LIST", [("PATH", "nonexistent-dir-xyz")])
        assert f.type == T["ERROR"] and home in one(f.attrs, "MESSAGE")


def test_hostile_paths(c, tmp):
    f = c.call("FILE_STAT", [("PATH", tmp.encode() + b"/a\0b")])
    assert f.type == T["ERROR"] and f.aux == errno.EINVAL
    f = c.call("FILE_STAT", [("PATH", tmp + "/" + "x" * 300)])
    assert f.type == T["ERROR"] and f.aux == errno.ENAMETOOLONG
    f = c.call("FILE_STAT", [("PATH", "/a" * 3000)])
    assert f.type == T["ERROR"] and f.aux == errno.ENAMETOOLONG
    f = c.call("FILE_STAT", [("PATH", "")])
    assert f.type == T["ERROR"] and f.aux == errno.EINVAL
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    r, _ = read_file(c, fifo)
    assert r.type == T["ERROR"] and r.aux == errno.EINVAL and "not a regular file" in one(r.attrs, "MESSAGE")
    f = write_file(c, fifo, b"x")
    assert f.type == T["ERROR"] and f.aux == errno.EINVAL
    r, _ = read_file(c, "/dev/null")
    assert r.type == T["ERROR"] and r.aux == errno.EINVAL
    # a planted symlink to / resolves inside the root
    os.symlink("/", os.path.join(tmp, "up"))
    r, data = read_file(c, os.path.join(tmp, "up", "etc", "passwd"))
    assert r.type == T["REPLY"] and data == open("/etc/passwd", "rb").read()
    os.symlink("../../../../../../../../../etc/passwd", os.path.join(tmp, "dots"))
    r, data = read_file(c, os.path.join(tmp, "dots"))
    assert r.type == T["REPLY"] and data == open("/etc/passwd", "rb").read()
    # magic links (/proc/self/root, /proc/self/fd) are refused
    r, _ = read_file(c, "/proc/self/root/etc/passwd")
    assert r.type == T["ERROR"] and r.aux == errno.ELOOP
    f = c.call("FILE_MOVE", [("PATH", tmp + "/..")])
    assert f.type == T["ERROR"] and f.aux == errno.EINVAL


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch fsuid")
def test_file_ops_use_caller_credentials(c):
    import tempfile
    tmp = tempfile.mkdtemp(dir="/tmp")      # pytest's tmp_path parents are 0700
    os.chmod(tmp, 0o755)
    p = os.path.join(tmp, "secret")
    with open(p, "w") as fh:
        fh.write("s")
    os.chmod(p, 0o600)
    os.chmod(tmp, 0o755)
    r, _ = read_file(c, p, UID=1000, GID=1000)
    assert r.type == T["ERROR"] and r.aux == errno.EACCES
    r, data = read_file(c, p)
    assert data == b"s"
    d = os.path.join(tmp, "udir")
    os.mkdir(d)
    os.chown(d, 1000, 1000)
    f = write_file(c, os.path.join(d, "new"), b"abc", UID=1000, GID=1000)
    assert f.type == T["REPLY"], f.attrs
    st = os.stat(os.path.join(d, "new"))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1000, 1000, 0o644)
    subprocess.run(["rm", "-rf", tmp])


def test_watch(c, tmp):
    wid = c.req("WATCH", [("PATH", tmp), ("RECURSIVE", 1)])
    assert c.reply(wid).type == T["REPLY"]

    def expect(name, event):
        while True:
            f = c.recv(lambda f: f.type == T["WATCH_EVENT"] and f.id == wid)
            if one(f.attrs, "NAME") == name and one(f.attrs, "EVENT") == event:
                return
    with open(os.path.join(tmp, "f"), "w") as fh:
        fh.write("x")
    expect("f", 1)
    expect("f", 2)
    os.mkdir(os.path.join(tmp, "sub"))
    expect("sub", 1)
    c.call("PING")       # the agent has handled the mkdir event (and added the watch)
    with open(os.path.join(tmp, "sub", "g"), "w") as fh:
        fh.write("y")
    expect("sub/g", 1)
    os.rename(os.path.join(tmp, "f"), os.path.join(tmp, "h"))
    expect("f", 4)
    expect("h", 4)
    os.chmod(os.path.join(tmp, "h"), 0o600)
    expect("h", 5)
    os.unlink(os.path.join(tmp, "h"))
    expect("h", 3)
    f = c.call("UNWATCH", fid=None) if False else c.reply(c.req("UNWATCH", fid=wid))
    assert f.type == T["REPLY"]


# --- tunnel -----------------------------------------------------------------------

def test_tunnel_echo(c):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def echo():
        s, _ = srv.accept()
        while True:
            d = s.recv(65536)
            if not d:
                break
            s.sendall(d)
        s.close()
    t = threading.Thread(target=echo)
    t.start()
    tid = c.req("TUNNEL_OPEN", [("PORT", port)])
    assert c.reply(tid).type == T["REPLY"]
    data = os.urandom(2 << 20)
    got = bytearray()

    def reader():
        while True:
            f = c.recv(lambda f: f.id == tid and f.type in (T["DATA"], T["TUNNEL_CLOSE"]))
            if f.type == T["TUNNEL_CLOSE"]:
                return
            got.extend(f.payload)
    rt = threading.Thread(target=reader)
    rt.start()
    for i in range(0, len(data), 100000):
        c.s.sendall(HDR.pack(len(data[i:i + 100000]), T["DATA"], 0, tid, 0) + data[i:i + 100000])
    c.s.sendall(HDR.pack(0, T["TUNNEL_CLOSE"], 0, tid, 0))
    rt.join(30)
    t.join(5)
    assert bytes(got) == data
    srv.close()


def test_tunnel_refused(c):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    f = c.call("TUNNEL_OPEN", [("PORT", port)])
    assert f.type == T["ERROR"] and f.aux == errno.ECONNREFUSED


# --- sudo and shutdown -------------------------------------------------------------

def test_sudo(tmp):
    sock = os.path.join(tmp, "run", "sudo.sock")
    a = Agent("--sudo-socket", sock)
    try:
        a.conn().call("PING")     # the agent is up
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o666
        sudo = os.path.join(tmp, "sudo")
        os.symlink(agent_path(), sudo)
        env = dict(os.environ, PADDOCK_SUDO_SOCKET=sock, FOO="kept")
        r = subprocess.run([sudo, "sh", "-c", "id -u; echo ${FOO:-unset}; echo e >&2; exit 3"],
                           capture_output=True, env=env, cwd=tmp)
        assert r.returncode == 3
        assert r.stdout == b"0\nunset\n" and r.stderr == b"e\n"
        r = subprocess.run([sudo, "-E", "-n", "sh", "-c", "echo $FOO; pwd"], capture_output=True, env=env, cwd=tmp)
        assert r.stdout == f"kept\n{tmp}\n".encode()
        r = subprocess.run([sudo, "-u", "nobody", "true"], capture_output=True, env=env)
        assert r.returncode == 1
        r = subprocess.run([sudo, "no-such-cmd-xyz"], capture_output=True, env=env)
        assert r.returncode == 127
        r = subprocess.run([sudo, "sh", "-c", "kill -9 $$"], capture_output=True, env=env)
        assert r.returncode == 137
        assert a.conn().ok("LIST").get("PROC", []) == []
    finally:
        a.stop()


def test_shutdown(agent):
    c = agent.conn()
    pid = c.spawn_ok(["sleep", "100"])
    assert c.call("SHUTDOWN").type == T["REPLY"]
    assert agent.proc.wait(10) == 0
    with pytest.raises(ProcessLookupError):
        for _ in range(1000):
            os.kill(pid, 0)
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
                raise ProcessLookupError
