"""microvm guests with a network (issues 6 x 7): the guest's virtio-net NIC
is a tap in QEMU's own network namespace, bridged to the veth the router
attaches there exactly as for a container sandbox (docs/network.md,
"microvm"), so the same nftables rules, DNS pinning, strict proxy and audit
apply. Against the fake internet (_fakenet.py). VM counts kept small (TCG)."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fakenet import DNS, LAN, METADATA, WEB, FakeNet, host_canary, net_dir, router_files  # noqa: E402,F401
from pdtest import Paddock  # noqa: E402
from pdtest.server import Server, tmproot  # noqa: E402,F401 (fixture)
from test_egress import PROBE, env, ok  # noqa: E402
from test_server_network import net_files, reach  # noqa: E402

VM = ["--isolation", "microvm", "--memory", "256M"]
SLOW = 600      # the first use boots the template with a NIC (TCG)

# resolves names through the guest's /etc/resolv.conf and fetches / on port 80
FETCH = r"""
import json, socket, sys
out = {}
for name in json.loads(sys.argv[1]):
    try:
        addr = socket.gethostbyname(name)
    except OSError as e:
        out[name] = "nxdomain"
        continue
    try:
        s = socket.create_connection((addr, 80), timeout=3)
        s.sendall(b"GET / HTTP/1.0\r\nHost: " + name.encode() + b"\r\n\r\n")
        data = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
        out[name] = "ok" if b"hello from" in data else "bad answer %r" % data[:80]
    except Exception as e:
        out[name] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""

# the guest's own view: eth0's MAC and the source address toward its gateway
WHOAMI = r"""
import socket, sys
mac = open("/sys/class/net/eth0/address").read().strip()
gw = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((gw, 53))
print(mac, s.getsockname()[0], gw, flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def fakenet(tmp_path_factory):
    """The netns uplink only: guests are slow under TCG (the default uplink
    with a guest: test_uplink.py)."""
    fn = FakeNet(tmp_path_factory.mktemp("fakenet")).start()
    yield fn
    fn.stop()


@pytest.fixture(scope="module")
def pd(state_root, fakenet):
    p = Paddock(os.path.join(state_root, "net-microvm"))
    os.makedirs(p.state, exist_ok=True)
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert router_files(p) == [], "router left behind after gc"


def vm_run(p, fn, net_args, cmd, timeout=SLOW):
    r = p.run(VM + list(net_args) + fn.args() + ["--"] + cmd, timeout=timeout, env=env())
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_open_reaches_the_internet_but_never_metadata_or_host_loopback(pd, fakenet, host_canary):
    targets = [[WEB[0], 80, "tcp"], [WEB[1], 80, "tcp"], [METADATA[0], 80, "tcp"], [METADATA[1], 80, "tcp"],
               [LAN, 80, "tcp"], ["127.0.0.1", host_canary, "tcp"], ["10.200.255.1", 80, "tcp"],
               [DNS, 53, "udp"], [DNS, 53, "tcp"]]
    res = vm_run(pd, fakenet, ["--net", "open"], ["python3", "-c", PROBE, json.dumps(targets)])
    assert ok(res, WEB[0]) and ok(res, WEB[1]), res
    for a in METADATA + [LAN]:
        assert not ok(res, a), "a guest in open mode reached %s: %s" % (a, res)
    # the guest's 127.0.0.1 is its own; the host's loopback and the uplink are not reachable
    assert not ok(res, "127.0.0.1", host_canary) and not ok(res, "10.200.255.1"), res
    assert not ok(res, DNS, 53, "udp") and not ok(res, DNS, 53, "tcp"), "DNS past paddock's resolver: %s" % res


def test_policy_reaches_an_allowed_name_only(pd, fakenet):
    policy = ["--net", "policy", "--allow", "web.example.test:80/tcp"]
    names = ["web.example.test", "api.example.test", "other.example.test"]
    res = vm_run(pd, fakenet, policy, ["python3", "-c", FETCH, json.dumps(names)])
    assert res == {"web.example.test": "ok", "api.example.test": "nxdomain", "other.example.test": "nxdomain"}, res
    # a resolver other than the router's, over UDP and TCP, and a direct
    # connection to an address never resolved: all closed
    res = vm_run(pd, fakenet, policy, ["python3", "-c", PROBE, json.dumps(
        [[DNS, 53, "udp"], [DNS, 53, "tcp"], [WEB[1], 80, "tcp"], [METADATA[0], 80, "tcp"]])])
    assert not any(v == "ok" for v in res.values()), res
    # the decisions are audited beside the sandbox as for a container
    # (paddock run keeps no audit log after the run; the server test covers it)


def test_none_has_no_nic(pd, fakenet):
    r = pd.run(VM + ["--", "sh", "-c", "ls /sys/class/net"], timeout=SLOW)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["lo"], r.stdout


def test_two_clones_get_their_own_address_and_mac(pd, fakenet):
    procs = [subprocess.Popen(pd.argv(VM + ["--net", "open"] + fakenet.args() + ["--", "python3", "-c", WHOAMI],
                                      "run", True),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, **env())) for _ in range(2)]
    try:
        seen = [p.stdout.readline().split() for p in procs]     # both guests run now
        for p in procs:
            p.stdin.close()
        for p in procs:
            assert p.wait(timeout=SLOW) == 0, p.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(len(s) == 3 for s in seen), seen
    (mac0, ip0, gw0), (mac1, ip1, gw1) = seen
    assert ip0 != ip1 and mac0 != mac1 and gw0 != gw1, seen
    assert ip0.startswith("10.201.") and ip1.startswith("10.201."), seen
    assert mac0 != "02:70:00:00:00:01" and mac1 != "02:70:00:00:00:01", "a clone kept the template's MAC"


def test_teardown_leaves_nothing(pd, fakenet):
    res = vm_run(pd, fakenet, ["--net", "open"], ["python3", "-c", PROBE, json.dumps([[WEB[0], 80, "tcp"]])])
    assert ok(res, WEB[0]), res
    assert [f for f in router_files(pd) if f.startswith(("sb/", "slots/"))] == []
    pin = os.path.join(net_dir(pd), "router")
    out = subprocess.run(["nsenter", "--net=" + pin, "nft", "list", "table", "inet", "paddock"],
                         capture_output=True, text=True, timeout=30).stdout
    assert "sb_" not in out, out
    # QEMU (and with it its netns: tap0, br0, eth0) is gone: no QEMU of this state dir runs
    qemus = subprocess.run(["pgrep", "-f", "qemu-system-x86_64.*" + pd.state], capture_output=True,
                           text=True).stdout.split()
    assert qemus == [], qemus
    assert pd.leftovers() == {}, pd.leftovers()


SPOOF = r"""
import fcntl, json, socket, struct, sys
web, spoof = sys.argv[1], sys.argv[2]
def fetch(src):
    s = socket.socket()
    s.settimeout(2)
    if src:
        s.bind((src, 0))
    try:
        s.connect((web, 80))
        return "ok"
    except OSError as e:
        return str(e)
    finally:
        s.close()
out = {"own": fetch(None)}
# root in its own kernel: a second address on eth0, another sandbox's
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sin = struct.pack("HH4s8x", socket.AF_INET, 0, socket.inet_aton(spoof))
fcntl.ioctl(c, 0x8916, struct.pack("16s16s", b"eth0:1", sin))      # SIOCSIFADDR
out["spoofed"] = fetch(spoof)
print(json.dumps(out))
"""


def test_a_guest_cannot_send_from_another_address(pd, fakenet):
    res = vm_run(pd, fakenet, ["--net", "open", "-u", "root"], ["python3", "-c", SPOOF, WEB[0], "10.201.255.250"])
    assert res["own"] == "ok", res
    # the address was taken (bind worked): the router dropped the SYN
    assert "timed out" in res["spoofed"], "the router let a spoofed source through: %s" % res


@pytest.fixture(scope="module")
def fakenet_srv(tmp_path_factory):
    """The server's own fake internet: the `pd` fixture's router still holds
    the transit addresses of `fakenet` (a router per uplink)."""
    fn = FakeNet(tmp_path_factory.mktemp("fakenet-vmsrv")).start()
    yield fn
    fn.stop()


def test_server_live_policy_audit_and_kill9(tmproot, fakenet_srv):
    fakenet = fakenet_srv
    """Through paddock serve: a microvm with a policy, changed live
    (router-side, as for containers), its DNS decisions in the sandbox's
    audit log; kill -9 of the server, the next one adopts the guest with its
    network; gc afterwards leaves no router, slot or QEMU."""
    s = Server(os.path.join(tmproot, "vmnet"), "--pool", "0", "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver).start()
    try:
        # the first microvm of a state dir builds the base template (minutes
        # on a loaded TCG host): not what this test is about
        sid = s.create({"isolation": "microvm", "timeout": 600,
                        "network": {"mode": "policy", "allow": [WEB[0]]}}, timeout=600)["id"]
        assert reach(s, sid, WEB[:2]) == {WEB[0]: True, WEB[1]: False}
        st, j = s.json("PUT", "/api/v1/sandboxes/%s/network" % sid, {"mode": "policy", "allow": [WEB[1]]})
        assert st == 200, j
        assert reach(s, sid, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        st, j = s.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": [
            "python3", "-c", "import socket\ntry: socket.gethostbyname('api.example.test'); print('resolved')\n"
                             "except OSError: print('nxdomain')"]})
        assert st == 200 and j["stdout"].strip() == "nxdomain", j
        lines = [json.loads(l) for l in s.request("GET", "/api/v1/sandboxes/%s/audit" % sid)[2].decode().splitlines()
                 if l.strip()]
        assert any(e.get("event") == "net.dns" and e.get("decision") == "deny" and "api.example.test" in json.dumps(e)
                   for e in lines), lines
        s.stop(signal.SIGKILL)
        s.start()                                   # adopts the guest; its network still works
        assert reach(s, sid, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        s.stop(signal.SIGKILL)
    finally:
        s.finish()                                    # paddock gc after the server is gone
    assert net_files(s.state) == []
    qemus = subprocess.run(["pgrep", "-f", "qemu-system-x86_64.*" + s.state], capture_output=True,
                           text=True).stdout.split()
    assert qemus == [], qemus
