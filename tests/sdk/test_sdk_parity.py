"""The Python SDK on par with the native API (issue 20): network mode and
rules at create and live change, pause modes, snapshots and forks, ports
(host, URL, token), PTY, and output resumed from an offset. Against a real
`paddock serve` (templates: tests/templates/test_sdk_templates.py, which
needs the templates suite's local registry).

    /usr/bin/python3 -m pytest -q tests/sdk/test_sdk_parity.py"""
import http.client
import os
import sys
import threading
import urllib.parse

import pytest

from pdtest import REPO
from pdtest.server import server_fixture

sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
import paddock  # noqa: E402
from paddock import InvalidArgumentError, NotFoundError, PtySize, Sandbox, SandboxError  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

# --net-uplink none: sandboxes get a network namespace and a router, and
# nothing leaves the host (no traffic anywhere but loopback)
server = server_fixture("--pool", "0", "--net-uplink", "none", prefix="pd-sdkp-")


def new(server, **kw):
    return Sandbox.create(api_key=server.key, url=server.url, timeout=300, **kw)


# ---- network ----

def test_network_at_create_and_live_change(server):
    with new(server, network={"mode": "policy", "allow": ["203.0.113.7:443/tcp"]}) as s:
        net = s.get_network()
        assert net.mode == "policy" and net.dropped_packets >= 0, net
        assert any("203.0.113.7" in str(r) for r in net.rules), net.rules
        assert s.get_info().raw["network"]["mode"] == "policy"
        now = s.set_network(mode="policy", allow=["198.51.100.9"], deny=["*.ads.example"])
        assert now.mode == "policy"
        assert any("198.51.100.9" in str(r) for r in now.rules) and not any("203.0.113.7" in str(r) for r in now.rules)
        assert s.get_network().rules == now.rules
        # a bad rule: a clear error, and the policy in force stays
        with pytest.raises(InvalidArgumentError) as e:
            s.set_network(mode="policy", allow=["300.1.1.1"])
        assert e.value.status == 400 and "300.1.1.1" in str(e.value)
        with pytest.raises(SandboxError) as e:
            s.set_network(mode="none")
        assert e.value.status == 409
        assert s.get_network().rules == now.rules
    # a mode string is the policy {"mode": ...}; no network: a live change is refused
    with new(server, network="none") as s:
        assert s.get_network().mode == "none"
        with pytest.raises(SandboxError) as e:
            s.set_network("open")
        assert e.value.status == 409
    with pytest.raises(InvalidArgumentError):
        new(server, network=42)
    with pytest.raises(InvalidArgumentError):
        new(server, network={"mode": "bogus"})


# ---- pause ----

def test_pause_modes(server):
    with new(server) as s:
        with pytest.raises(InvalidArgumentError) as e:
            s.pause(mode="disk")            # the container tier pauses in memory only
        assert "disk" in str(e.value)
        assert s.get_info().state == "running"
        with pytest.raises(InvalidArgumentError):
            s.pause(mode="bogus")
        info = s.pause(mode="memory")
        assert info.state == "paused" and info.raw.get("paused_to") == "memory", info.raw
        assert s.resume().state == "running"
        assert s.commands.run("echo ok").stdout == "ok\n"
        assert s.get_info().raw["auto_pause"] is False
    with new(server, auto_pause=True) as s:
        assert s.get_info().raw["auto_pause"] is True


# ---- snapshots and forks ----

def test_snapshot_and_fork(server):
    kw = dict(api_key=server.key, url=server.url)
    src = new(server, metadata={"role": "src"})
    made = [src]
    try:
        src.files.write("/home/user/state.txt", "v1")
        snap = src.create_snapshot("sdk-snap")
        assert snap.name == "sdk-snap" and snap.source == src.id, snap
        assert "sdk-snap" in [x.name for x in Sandbox.list_snapshots(**kw)]
        src.files.write("/home/user/state.txt", "v2")     # later writes never reach the snapshot
        child = new(server, template="sdk-snap")
        made.append(child)
        assert child.files.read("/home/user/state.txt") == "v1"
        with pytest.raises(SandboxError) as e:             # in use: refused, naming the user
            Sandbox.delete_snapshot("sdk-snap", **kw)
        assert e.value.status == 409 and child.id in str(e.value)
        with pytest.raises(InvalidArgumentError):
            src.create_snapshot("../bad")
        with pytest.raises(SandboxError):
            src.create_snapshot("sdk-snap")                 # the name is taken
        forks = src.fork(count=2)
        made += forks
        assert len(forks) == 2 and len({f.id for f in forks} | {src.id}) == 3
        for f in forks:
            assert f.files.read("/home/user/state.txt") == "v2"
            assert f.get_info().metadata == {"role": "src"}
        forks[0].files.write("/home/user/state.txt", "mine")
        assert forks[1].files.read("/home/user/state.txt") == "v2"
        with pytest.raises(InvalidArgumentError):
            src.fork(count=0)
    finally:
        for s in made:
            s.kill()
    assert Sandbox.delete_snapshot("sdk-snap", **kw) is True
    assert Sandbox.delete_snapshot("sdk-snap", **kw) is False
    assert "sdk-snap" not in [x.name for x in Sandbox.list_snapshots(**kw)]


# ---- ports ----

def _get(server, url, host=None):
    """GET url through the server's own address (the host form's name
    need not resolve here: the Host header carries it)."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        c.request("GET", u.path + ("?" + u.query if u.query else ""), headers={"Host": host or u.netloc})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def test_ports_url_and_token(server):
    with new(server) as s:
        s.files.write("/home/user/www/index.html", "hello from the sandbox")
        h = s.commands.run(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory",
                            "/home/user/www"], background=True)
        # wait until it listens (an event: the connect succeeds), bounded by the command's timeout
        s.commands.run(["python3", "-c", "import socket,time\nwhile True:\n    try:\n"
                        "        socket.create_connection(('127.0.0.1',8000),timeout=1).close(); break\n"
                        "    except OSError: time.sleep(0.05)"], timeout=60)
        p = s.get_ports()
        assert p.public is False and len(p.port_token) == 64 and p.domain
        assert s.get_host(8000) == "8000-%s.%s" % (s.id, p.domain)
        url = s.get_port_url(8000, "/index.html")
        assert url.startswith("http://8000-%s." % s.id) and "paddock_port_token=" + p.port_token in url
        assert _get(server, url) == (200, b"hello from the sandbox")
        bare = s.get_port_url(8000, "/index.html", token=False)
        assert _get(server, bare)[0] == 401
        assert s.set_ports_public(True).public is True
        assert s.get_port_url(8000, token=False) == s.get_port_url(8000)     # public: no token needed
        assert _get(server, bare) == (200, b"hello from the sandbox")
        assert s.set_ports_public(False).public is False
        assert _get(server, bare)[0] == 401
        with pytest.raises(InvalidArgumentError):
            s.get_host(0)
        with pytest.raises(InvalidArgumentError):
            s.get_port_url(70000)
        h.kill()


# ---- pty ----

def test_pty(server):
    with new(server) as s:
        got = []
        seen = threading.Event()

        def on_data(b):
            assert isinstance(b, bytes)
            got.append(b)
            if b"ROWS=" in b"".join(got):
                seen.set()
        t = s.pty.create(size=PtySize(24, 80), on_data=on_data, cmd=["/bin/bash", "--norc", "-i"])
        s.pty.resize(t.pid, (30, 100))
        s.pty.send_stdin(t.pid, "echo ROWS=$(stty size | tr ' ' x)\n")
        assert seen.wait(60), b"".join(got)
        s.pty.send_stdin(t.pid, b"exit 3\n")
        with pytest.raises(paddock.CommandExitException) as e:
            t.wait()
        assert e.value.exit_code == 3
        out = b"".join(got)
        assert b"ROWS=30x100" in out, out
        assert "ROWS=30x100" in t.stdout                   # the terminal's output, also as text
        # reattach from an offset: the output from there on, nothing before
        again = s.pty.connect(t.pid, offset=len(out) - 10)
        with pytest.raises(paddock.CommandExitException):
            again.wait()
        assert again.stdout == out[-10:].decode("utf-8", "replace") and again.offsets["stdout"] == len(out)
        with pytest.raises(NotFoundError):
            s.pty.connect(999999)
        with pytest.raises(InvalidArgumentError):
            s.pty.connect(t.pid, offset=-1)


# ---- output resumed from an offset ----

def test_output_resumes_from_offsets(server):
    with new(server) as s:
        ready = threading.Event()
        parts = []

        def seen(_text):
            parts.append(_text)
            if len(h.stdout) >= 10 and len(h.stderr) >= 6:
                ready.set()
        h = s.commands.run("printf 0123456789; printf abcdef >&2; read x; printf XYZ; printf uvw >&2",
                           background=True, stdin=True, on_stdout=seen, on_stderr=seen)
        assert ready.wait(60), parts
        # what is there so far, without following, from an offset
        assert s.commands.read_output(h.pid, offset=0) == (b"0123456789", 10, None)
        assert s.commands.read_output(h.pid, offset=4) == (b"456789", 10, None)
        assert s.commands.read_output(h.pid, stream="stderr", offset=2) == (b"cdef", 6, None)
        h.disconnect()
        # another handle goes on from byte 7 of stdout and 3 of stderr
        g = s.commands.connect(h.pid, from_stdout=7, from_stderr=3)
        s.commands.send_stdin(h.pid, "go\n")
        r = g.wait()
        assert (r.stdout, r.stderr) == ("789XYZ", "defuvw")
        assert g.offsets == {"stdout": 13, "stderr": 9}
        # and from a handle's own offsets: nothing repeated
        tail = s.commands.connect(h.pid, **{"from_" + k: v for k, v in g.offsets.items()}).wait()
        assert (tail.stdout, tail.stderr) == ("", "")
        with pytest.raises(InvalidArgumentError):
            s.commands.connect(h.pid, from_stdout=-1)
        with pytest.raises(InvalidArgumentError):
            s.commands.read_output(h.pid, offset="x")
