"""The Python SDK (sdk/python/paddock) against a real `paddock serve`.

    /usr/bin/python3 -m pytest -q tests/sdk/test_sdk.py

Needs root (the container tier) and a build (build/src/paddock,
build/src/agent/paddock-agent)."""
import hashlib
import io
import os
import sys
import threading
import time

import pytest

from pdtest import REPO
from pdtest.server import server_fixture

sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
import paddock  # noqa: E402
from paddock import (AuthenticationError, CommandExitException, ConnectionError, InvalidArgumentError,  # noqa: E402
                     NoSpaceError, NotFoundError, PaddockError, Sandbox, SandboxError, TimeoutError)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")


server = server_fixture("--pool", "1", prefix="pd-sdk-")


@pytest.fixture(scope="module")
def sbx(server):
    s = Sandbox.create(api_key=server.key, url=server.url, metadata={"suite": "sdk"}, envs={"GREETING": "hello"})
    yield s
    s.kill()


def new(server, **kw):
    return Sandbox.create(api_key=server.key, url=server.url, **kw)


# ---- sandboxes ----

def test_create_info_list_connect(server):
    s = new(server, template="base", timeout=120, metadata={"owner": "t1"}, memory_mb=256, cpus=0.5,
            envs={"A": "1"})
    try:
        assert len(s.id) == 20 and s.id == s.sandbox_id
        info = s.get_info()
        assert (info.sandbox_id, info.template, info.state) == (s.id, "base", "running")
        assert info.memory_mb == 256 and info.cpus == 0.5 and info.timeout == 120
        assert info.metadata == {"owner": "t1"} and info.envs == {"A": "1"}
        assert info.end_at is not None and info.started_at is not None
        assert 100 <= (info.end_at - info.started_at).total_seconds() <= 121
        ids = [i.sandbox_id for i in Sandbox.list(api_key=server.key, url=server.url, metadata={"owner": "t1"})]
        assert ids == [s.id]
        assert Sandbox.list(api_key=server.key, url=server.url, metadata={"owner": "nobody"}) == []
        assert s.id in [i.id for i in Sandbox.list(api_key=server.key, url=server.url, state="running")]
        assert s.id not in [i.id for i in Sandbox.list(api_key=server.key, url=server.url, state=["paused"])]
        c = Sandbox.connect(s.id, api_key=server.key, url=server.url)
        assert c.id == s.id
        assert c.commands.run("echo $A").stdout == "1\n"
        assert c.is_running()
    finally:
        assert s.kill() is True
    assert s.kill() is False
    assert not s.is_running()


def test_env_vars_from_environment(server, monkeypatch):
    monkeypatch.setenv("PADDOCK_URL", server.url)
    monkeypatch.setenv("PADDOCK_API_KEY", server.key)
    with Sandbox.create() as s:
        assert s.commands.run("true").exit_code == 0
        assert Sandbox.kill(s.id) is True       # class-level kill, as E2B has it


def test_context_manager_kills(server):
    with new(server) as s:
        sid = s.id
        assert s.get_info().state == "running"
    with pytest.raises(NotFoundError):
        Sandbox.connect(sid, api_key=server.key, url=server.url)


def test_set_timeout_metrics_pause_resume(server, sbx):
    before = sbx.get_info().end_at
    info = sbx.set_timeout(600)
    assert (info.end_at - before).total_seconds() > 200
    m = sbx.get_metrics()
    assert m.memory_limit_bytes > 0 and m.pids_limit == 512 and m.cpu_seconds >= 0
    assert sbx.pause().state == "paused"
    with pytest.raises(SandboxError) as e:
        sbx.commands.run("true")
    assert e.value.status == 409 and "paused" in str(e.value)
    assert sbx.resume().state == "running"
    assert sbx.commands.run("echo back").stdout == "back\n"


def test_connect_resumes_paused(server):
    with new(server) as s:
        s.pause()
        c = Sandbox.connect(s.id, api_key=server.key, url=server.url)
        assert c.get_info().state == "running"


# ---- errors ----

def test_typed_errors(server, sbx):
    with pytest.raises(AuthenticationError) as e:
        Sandbox.list(api_key="pdk_wrong", url=server.url)
    assert e.value.status == 401 and "key" in e.value.message
    with pytest.raises(NotFoundError) as e:
        Sandbox.connect("a" * 20, api_key=server.key, url=server.url)
    assert "no sandbox" in str(e.value)
    with pytest.raises(InvalidArgumentError) as e:
        new(server, template="../etc")
    assert "template" in str(e.value)
    with pytest.raises(InvalidArgumentError):
        new(server, template="no-such-template")
    with pytest.raises(InvalidArgumentError):
        new(server, memory_mb=1)
    with pytest.raises(NotFoundError):
        sbx.files.read("/no/such/file")
    with pytest.raises(InvalidArgumentError):
        sbx.commands.run(["no-such-command-xyz"])
    with pytest.raises(ConnectionError):
        Sandbox.list(api_key=server.key, url="http://127.0.0.1:1")
    assert issubclass(NoSpaceError, PaddockError) and issubclass(TimeoutError, PaddockError)


def test_no_space(server):
    with new(server, disk_mb=4) as s:
        s.files.write("/home/user/keep", b"old")
        with pytest.raises(NoSpaceError) as e:
            s.files.write("/home/user/keep", io.BytesIO(os.urandom(8 << 20)))
        assert e.value.status == 507
        assert s.files.read("/home/user/keep") == "old"


# ---- commands ----

def test_run_foreground_streams_in_order(sbx):
    outs, errs = [], []
    script = "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; sleep 0.05; done"
    r = sbx.commands.run(script, on_stdout=outs.append, on_stderr=errs.append)
    want_out = "".join("out%d\n" % i for i in range(1, 6))
    want_err = "".join("err%d\n" % i for i in range(1, 6))
    assert (r.stdout, r.stderr, r.exit_code, r.error) == (want_out, want_err, 0, None)
    assert "".join(outs) == want_out and "".join(errs) == want_err
    assert len(outs) > 1            # streamed, not one lump at the end


def test_run_env_cwd_user(sbx):
    assert sbx.commands.run("echo $GREETING").stdout == "hello\n"          # sandbox env
    assert sbx.commands.run("echo $X-$Y", envs={"X": "a", "Y": "b"}).stdout == "a-b\n"
    assert sbx.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sbx.commands.run("id -u").stdout == "1000\n"
    assert sbx.commands.run("id -u", user="root").stdout == "0\n"
    assert sbx.commands.run(["printf", "%s|", "a b", "c"]).stdout == "a b|c|"


def test_run_nonzero_raises(sbx):
    with pytest.raises(CommandExitException) as e:
        sbx.commands.run("echo partial; echo bad >&2; exit 3")
    assert e.value.exit_code == 3 and e.value.stdout == "partial\n" and e.value.stderr == "bad\n"
    with pytest.raises(CommandExitException) as e:
        sbx.commands.run("kill -9 $$")
    assert e.value.exit_code == 137 and e.value.signal == 9 and "signal 9" in e.value.error


def test_run_timeout(sbx):
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        sbx.commands.run("sleep 30", timeout=1)
    assert time.monotonic() - t < 15


def test_background_stdin_wait(sbx):
    got = []
    h = sbx.commands.run("cat; echo done >&2", background=True, stdin=True, on_stdout=got.append)
    assert h.pid > 0
    h.send_stdin("line1\n")
    h.send_stdin(b"line2\n")
    deadline = time.monotonic() + 10
    while "".join(got) != "line1\nline2\n" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "".join(got) == "line1\nline2\n"       # live, before the process ends
    assert h.exit_code is None
    assert h.pid in [p.pid for p in sbx.commands.list() if p.state == "running"]
    h.close_stdin()
    r = h.wait(timeout=20)
    assert (r.stdout, r.stderr, r.exit_code) == ("line1\nline2\n", "done\n", 0)
    info = [p for p in sbx.commands.list() if p.pid == h.pid][0]
    assert info.state == "exited" and info.exit_code == 0 and info.cmd == "/bin/bash"


def test_background_kill(sbx):
    h = sbx.commands.run("sleep 60", background=True)
    assert sbx.commands.kill(h.pid) is True
    with pytest.raises(CommandExitException) as e:
        h.wait(timeout=20)
    assert e.value.exit_code == 137 and e.value.signal == 9
    assert sbx.commands.kill(999999) is False
    h2 = sbx.commands.run("sleep 60", background=True)
    assert h2.kill() is True
    with pytest.raises(CommandExitException):
        h2.wait(timeout=20)


def test_output_lossless_across_reconnect(sbx):
    """Drop the output connection mid-stream: the reader resumes from its
    offsets and the result has every byte exactly once."""
    seen = []
    h = sbx.commands.run("for i in $(seq 1 40); do echo line$i; echo e$i >&2; sleep 0.03; done",
                         background=True, on_stdout=seen.append)
    drops = 0
    deadline = time.monotonic() + 20
    while h.exit_code is None and drops < 3 and time.monotonic() < deadline:
        time.sleep(0.25)
        c = h._conn
        if c is not None and c.sock is not None:
            c.sock.shutdown(2)  # what a network failure looks like to the reader
            drops += 1
    r = h.wait(timeout=30)
    assert drops >= 1
    want = "".join("line%d\n" % i for i in range(1, 41))
    assert r.stdout == want and "".join(seen) == want
    assert r.stderr == "".join("e%d\n" % i for i in range(1, 41))


def test_connect_to_process(sbx):
    h = sbx.commands.run("echo early; sleep 0.5; echo late", background=True)
    h2 = sbx.commands.connect(h.pid)
    assert h2.wait(timeout=20).stdout == "early\nlate\n"
    assert h.wait(timeout=20).stdout == "early\nlate\n"
    with pytest.raises(NotFoundError):
        sbx.commands.connect(999999)


# ---- files ----

def test_files_basic(sbx):
    e = sbx.files.write("/tmp/f/a.txt", "héllo\n")      # parents are created
    assert (e.name, e.path, e.type, e.size) == ("a.txt", "/tmp/f/a.txt", "file", 7)
    assert sbx.files.read("/tmp/f/a.txt") == "héllo\n"
    assert sbx.files.read("/tmp/f/a.txt", format="bytes") == "héllo\n".encode()
    assert b"".join(sbx.files.read("/tmp/f/a.txt", format="stream")) == "héllo\n".encode()
    sbx.files.write("rel.bin", bytes(range(256)))            # relative: the user's home
    assert sbx.files.read("/home/user/rel.bin", format="bytes") == bytes(range(256))
    assert sbx.commands.run("cat /tmp/f/a.txt").stdout == "héllo\n"
    assert sbx.files.exists("/tmp/f/a.txt") and not sbx.files.exists("/tmp/f/nope")
    info = sbx.files.get_info("/tmp/f")
    assert info.type == "dir" and info.is_dir and info.name == "f"
    assert sbx.files.make_dir("/tmp/f/sub/deeper") is True
    assert sbx.files.make_dir("/tmp/f/sub/deeper") is False
    sbx.files.write("/tmp/f/sub/deeper/x", b"x")
    names = sorted(e.name for e in sbx.files.list("/tmp/f"))
    assert names == ["a.txt", "sub"]
    deep = sorted(e.path for e in sbx.files.list("/tmp/f", depth=3))
    assert deep == ["/tmp/f/a.txt", "/tmp/f/sub", "/tmp/f/sub/deeper", "/tmp/f/sub/deeper/x"]
    moved = sbx.files.rename("/tmp/f/a.txt", "/tmp/f/b.txt")
    assert moved.path == "/tmp/f/b.txt" and not sbx.files.exists("/tmp/f/a.txt")
    sbx.files.remove("/tmp/f/b.txt")
    assert not sbx.files.exists("/tmp/f/b.txt")
    sbx.files.remove("/tmp/f")
    assert not sbx.files.exists("/tmp/f")
    with pytest.raises(NotFoundError):
        sbx.files.remove("/tmp/f")
    with pytest.raises(InvalidArgumentError):
        sbx.files.read("/tmp/a\x00b")


def test_files_20mb_round_trip(sbx):
    data = os.urandom(20 * 1000 * 1000)
    want = hashlib.sha256(data).hexdigest()
    e = sbx.files.write("/tmp/big.bin", io.BytesIO(data))          # streamed (chunked) upload
    assert e.size == len(data)
    h = hashlib.sha256()
    n = 0
    for chunk in sbx.files.read("/tmp/big.bin", format="stream"):
        h.update(chunk)
        n += len(chunk)
    assert n == len(data) and h.hexdigest() == want
    assert sbx.commands.run("sha256sum /tmp/big.bin").stdout.split()[0] == want
    sbx.files.remove("/tmp/big.bin")


def test_write_unseekable_stream(sbx):
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as f:
            for i in range(100):
                f.write(b"%05d\n" % i)

    t = threading.Thread(target=feed)
    t.start()
    with os.fdopen(r, "rb") as f:
        sbx.files.write("/tmp/pipe/out.txt", f)
    t.join()
    assert sbx.files.read("/tmp/pipe/out.txt") == "".join("%05d\n" % i for i in range(100))


def test_e2b_names(sbx):
    # code written for E2B keeps working
    assert paddock.SandboxException is SandboxError and paddock.NotFoundException is NotFoundError
    assert paddock.TimeoutException is TimeoutError
    r = sbx.commands.run("echo e2b")
    assert isinstance(r, paddock.CommandResult) and r.exit_code == 0


def test_audit_records(sbx):
    sbx.commands.run("echo audited")
    events = [e["event"] for e in sbx.audit()]
    assert "sandbox.create" in events and "process.start" in events
