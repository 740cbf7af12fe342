"""The socket-level TCP relay of the default uplink (src/net/relay.h,
docs/network.md): a sandbox's new TCP connection is judged by the router,
its SYN held in NFQUEUE until the relay's own connect has answered, then
redirected to the relay's listener. What a client inside sees must be what
it sees on a real network: a refused port refuses the connect itself
(ECONNREFUSED, not a reset after a successful connect), an address that
never answers lets the client's own connect timeout fire, an unreachable
one is unreachable. The relay killed: its connections end, it comes back,
nothing is left. All inside a stand-in host (_fakenet.py); nothing leaves
the machine.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fakenet import BULK_PORT, DNS, WEB, FakeNet, hosted, net_dir, router_files  # noqa: E402
from pdtest import Paddock, child_env  # noqa: E402
from test_uplink import LONG_READ, env, live_pids, status, wait_for  # noqa: E402

CONNECT = r"""
import errno, json, socket, sys, time
addr, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket()
s.settimeout(timeout)
t = time.monotonic()
try:
    s.connect((addr, port))
    try:
        s.sendall(b"1\n")
        d = s.recv(1)
        out = "connected, then %s" % ("data" if d else "EOF")
    except OSError as e:
        out = "connected, then %s" % type(e).__name__
except socket.timeout:
    out = "timeout"
except OSError as e:
    out = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps([out, time.monotonic() - t]))
"""


@pytest.fixture(scope="module")
def fn(tmp_path_factory):
    f = FakeNet(tmp_path_factory.mktemp("fakenet-relay"), uplink="relay").start()
    try:
        # in the fake internet: a port whose SYNs vanish, and one whose SYNs
        # get ICMP host unreachable
        f.exec("nft", "add table inet relaytest")
        f.exec("nft", "add chain inet relaytest in { type filter hook input priority 0; }")
        f.exec("nft", "add rule inet relaytest in tcp dport 7301 drop")
        f.exec("nft", "add rule inet relaytest in tcp dport 7302 reject with icmp type host-unreachable")
        with hosted(f):
            yield f
    finally:
        f.stop()


@pytest.fixture(scope="module")
def pd(state_root, fn):
    p = Paddock(os.path.join(state_root, "relay"))
    os.makedirs(p.state, exist_ok=True)
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert router_files(p) == [], "router left behind after gc"


def run(p, cmd, net=("--net", "open"), timeout=120):
    r = p.run(list(net) + ["--net-uplink", "relay", "--net-resolver", DNS, "--"] + cmd, timeout=timeout, env=env())
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


def connect(p, addr, port, timeout, net=("--net", "open")):
    r = run(p, ["python3", "-c", CONNECT, addr, str(port), str(timeout)], net=net)
    return json.loads(r.stdout.strip().splitlines()[-1])


def relay_counter(p, chain, what):
    """Packets counted by the rule of chain that mentions what."""
    r = subprocess.run(["nsenter", "--net=" + os.path.join(net_dir(p), "router"), "nft", "list", "chain", "inet",
                        "paddock", chain], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        if what in line and "packets" in line:
            return int(line.split("packets")[1].split()[0])
    raise AssertionError("no rule with %r in %s: %s" % (what, chain, r.stdout))


def relay_pids(p):
    """(supervisor, the relay worker, the gate) of p's router."""
    sup = int(open(os.path.join(net_dir(p), "uplink.pid")).read())
    found = {}
    for pid in open("/proc/%d/task/%d/children" % (sup, sup)).read().split():
        try:
            found[open("/proc/%s/comm" % pid).read().strip()] = int(pid)
        except OSError:
            pass
    return sup, found.get("pd-relay"), found.get("pd-relay-gate")


def test_tcp_goes_through_the_relay(pd, fn):
    r = run(pd, ["python3", "-c", "import urllib.request as u; print(u.urlopen('http://web.example.test/').read())"])
    assert "hello from" in r.stdout, r.stdout
    assert relay_counter(pd, "relayq", "queue") >= 1     # the SYN was held, then passed
    eg = dict(l.split("=", 1) for l in open(os.path.join(net_dir(pd), "egress")).read().splitlines())
    assert eg["uplink"] == "relay" and eg["problem"] == "", eg


def test_refused_port_refuses_the_connect(pd, fn):
    """Fails on the prototype's semantics (connect succeeded, then a reset)."""
    out, _ = connect(pd, WEB[0], 81, 20)
    assert out == "ECONNREFUSED", out


def test_unanswering_address_lets_the_clients_timeout_fire(pd, fn):
    """Fails on the prototype's semantics (the connect succeeded at once)."""
    out, took = connect(pd, WEB[0], 7301, 2)
    assert out == "timeout", out


def test_unreachable_is_unreachable(pd, fn):
    out, _ = connect(pd, WEB[0], 7302, 20)
    assert out == "EHOSTUNREACH", out


def test_the_relay_is_unprivileged(pd, fn):
    run(pd, ["true"])
    sup, worker, gate = relay_pids(pd)
    assert worker and gate, (worker, gate, open(os.path.join(net_dir(pd), "uplink.log")).read()[-2000:])
    st = status(worker)
    assert int(st["Uid"][0]) >= 1000000000 and len(set(st["Uid"])) == 1, st["Uid"]
    assert st["CapEff"] == ["0000000000000000"] and st["CapPrm"] == ["0000000000000000"], st["CapEff"]
    assert st["NoNewPrivs"] == ["1"]
    assert os.readlink("/proc/%d/ns/net" % worker) == os.readlink("/proc/%d/ns/net" % sup)  # the host's
    # the gate: CAP_NET_ADMIN only (bit 12), in the router's netns only
    st = status(gate)
    assert int(st["Uid"][0]) >= 1000000000 and st["NoNewPrivs"] == ["1"], st
    assert st["CapEff"] == ["0000000000001000"] and st["CapPrm"] == ["0000000000001000"], st["CapEff"]
    assert st["CapBnd"] == ["0000000000001000"], st["CapBnd"]
    router = os.stat(os.path.join(net_dir(pd), "router"))
    gns = os.stat("/proc/%d/ns/net" % gate)
    assert (gns.st_dev, gns.st_ino) == (router.st_dev, router.st_ino)


def test_relay_killed_mid_transfer_comes_back(pd, fn):
    run(pd, ["true"])
    sup, worker, gate = relay_pids(pd)
    reader = pd.popen(["--net", "open", "--net-uplink", "relay", "--net-resolver", DNS, "--", "python3", "-c",
                       LONG_READ, WEB[0], str(BULK_PORT)], env=child_env(env()), text=True)
    try:
        assert reader.stdout.readline().strip() == "STREAMING", reader.stderr.read()
        os.kill(worker, signal.SIGKILL)
        # the connection ends (its sockets died with the relay): an error or
        # an early EOF, never a hang or corrupt data
        line = reader.stdout.readline().split()
        assert line and line[0] in ("ERROR", "EOF") and line[-1] == "0", line
        assert reader.wait(timeout=60) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    wait_for(lambda: relay_pids(pd)[1] not in (None, worker), "the relay was not restarted")
    assert relay_pids(pd)[0] == sup and relay_pids(pd)[2] == gate
    wait_for(lambda: connect(pd, WEB[1], 80, 5)[0] == "connected, then data", "egress did not come back")
    log = open(os.path.join(net_dir(pd), "uplink.log")).read()
    assert "the TCP relay (pid %d) ended (signal 9)" % worker in log, log


def test_gate_killed_fails_closed_and_comes_back(pd, fn):
    run(pd, ["true"])
    sup, worker, gate = relay_pids(pd)
    os.kill(gate, signal.SIGKILL)
    # the supervisor stops (and its process and relay with it); the queue
    # has no reader: SYNs are dropped, not passed anywhere else
    wait_for(lambda: sup not in live_pids() or status(sup)["State"][0] == "Z", "the supervisor outlived its gate")
    wait_for(lambda: worker not in live_pids() or status(worker)["State"][0] == "Z", "the relay outlived its gate")
    # the next sandbox revives it all
    run(pd, ["true"])
    wait_for(lambda: relay_pids(pd)[2] not in (None, gate), "the gate was not revived")
    wait_for(lambda: connect(pd, WEB[1], 80, 5)[0] == "connected, then data", "egress did not come back")


KEEP_READING = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.sendall(b"%d\n" % (64 << 20))
got = 0
while got < 4 << 20:
    got += len(s.recv(1 << 16))
print("STREAMING", flush=True)
sys.stdin.readline()                    # the uplink process is killed meanwhile
while True:
    d = s.recv(1 << 16)
    if not d:
        break
    got += len(d)
print("END", got, flush=True)
"""


def test_slirp4netns_killed_leaves_relayed_tcp_alone(pd, fn):
    """Relayed TCP does not cross the packet-level process: killing it
    (restarted by the supervisor) ends no relayed connection."""
    from test_uplink import uplink_pids
    run(pd, ["true"])
    sup, proc = uplink_pids(pd)
    assert proc and open("/proc/%d/comm" % proc).read().strip() == "slirp4netns"
    reader = pd.popen(["--net", "open", "--net-uplink", "relay", "--net-resolver", DNS, "--", "python3", "-c",
                       KEEP_READING, WEB[0], str(BULK_PORT)], env=child_env(env()), text=True,
                      stdin=subprocess.PIPE)
    try:
        assert reader.stdout.readline().strip() == "STREAMING", reader.stderr.read()
        os.kill(proc, signal.SIGKILL)
        wait_for(lambda: uplink_pids(pd)[1] not in (None, proc), "slirp4netns was not restarted")
        reader.stdin.write("go\n")
        reader.stdin.flush()
        assert reader.stdout.readline().split() == ["END", str(64 << 20)]
        assert reader.wait(timeout=60) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
