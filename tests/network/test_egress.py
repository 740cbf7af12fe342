"""Network egress, the kernel side (issue 6): a sandbox's veth to the
instance's router netns, nftables there, against the fake internet
(_fakenet.py). Modes none/open/policy, CIDR rules, the never list
(metadata, LAN, host loopback, the uplink), limits, teardown.

Each sandbox runs PROBE: it tries every (addr, port, proto) it is given
and prints one JSON object {"addr:port/proto": "ok"|"error text"}.
"""
import json
import signal
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fakenet import (BULK_PORT, DNS, LAN, METADATA, WEB, FakeNet, fakenet, host_canaries, host_canary,  # noqa: E402,F401
                      net_dir, router_files)
from pdtest import PADDOCK_BIN, Paddock, child_env  # noqa: E402

NETD = os.environ.get("PADDOCK_NETD") or os.path.join(os.path.dirname(PADDOCK_BIN), "net", "paddock-netd")

PROBE = r"""
import json, socket, sys
out = {}
for t in json.loads(sys.argv[1]):
    addr, port, proto = t
    key = "%s:%d/%s" % (addr, port, proto)
    try:
        if proto == "tcp":
            s = socket.create_connection((addr, port), timeout=1.5)
            if port in (80, 8080):
                s.sendall(b"GET / HTTP/1.0\r\nHost: probe\r\n\r\n")
                data = b""
                while True:
                    d = s.recv(4096)
                    if not d:
                        break
                    data += d
                out[key] = "ok" if b"hello from" in data else "bad answer %r" % data[:80]
            else:
                out[key] = "ok"
            s.close()
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(1.5)
            s.sendto(b"ping", (addr, port))
            data, _ = s.recvfrom(2048)
            out[key] = "ok" if data else "empty"
    except Exception as e:
        out[key] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def pd(state_root, fakenet):
    """A state dir of its own: its router is made with this module's fake
    internet as uplink (a router keeps the settings it was made with)."""
    p = Paddock(os.path.join(state_root, "net-egress"))
    os.makedirs(p.state, exist_ok=True)
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert router_files(p) == [], "router left behind after gc"


def env():
    e = {}
    if os.access(NETD, os.X_OK):
        e["PADDOCK_NETD"] = NETD
    return e


def probe(p, fn, net_args, targets, *extra, timeout=90):
    r = p.run(list(net_args) + fn.args() + list(extra) + ["--", "python3", "-c", PROBE, json.dumps(targets)],
              timeout=timeout, env=env())
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def uplink_far_end(p):
    """The uplink netns's end of the router's transit /30: the instance's
    default transit (src/net/router.c, pd_router_default_transit) + 1."""
    from pdtest import instance_of
    n = 1 + int(instance_of(p.state), 16) % 16383
    return "10.200.%d.%d" % ((n * 4) >> 8, ((n * 4) & 0xff) + 1)


def ok(res, addr, port=80, proto="tcp"):
    return res["%s:%d/%s" % (addr, port, proto)] == "ok"


def test_open_reaches_the_internet_but_never_the_never_list(pd, fakenet, host_canaries):
    canaries, hits = host_canaries
    targets = [[a, 80, "tcp"] for a in WEB + METADATA + [LAN]]
    far = uplink_far_end(pd)
    targets += canaries + [[far, 80, "tcp"],                                     # host, uplink end
                           [DNS, 53, "udp"], [DNS, 53, "tcp"],                   # another resolver
                           [WEB[0], 443, "udp"], [WEB[0], 5353, "udp"]]          # QUIC-like, other UDP
    res = probe(pd, fakenet, ["--net", "open"], targets)
    for a in WEB:
        assert ok(res, a), res
    for a in METADATA + [LAN]:
        assert not ok(res, a), "open mode reached %s: %s" % (a, res)
    for a, port, _ in canaries:
        assert not ok(res, a, port), "open mode reached the host's %s:%d: %s" % (a, port, res)
    assert hits() == ""
    assert not ok(res, far), res
    if fakenet.mode == "netns":
        assert far in fakenet.exec("ip", "-o", "addr").stdout   # the uplink's end is there, and closed
    assert not ok(res, DNS, 53, "udp") and not ok(res, DNS, 53, "tcp"), "DNS past paddock's resolver: %s" % res
    assert ok(res, WEB[0], 443, "udp") and ok(res, WEB[0], 5353, "udp"), res


def test_none_has_no_network(pd, fakenet):
    res = probe(pd, fakenet, ["--net", "none"], [[WEB[0], 80, "tcp"], [WEB[0], 5353, "udp"]])
    assert not any(v == "ok" for v in res.values()), res


def test_policy_allows_only_named_cidrs_and_ports(pd, fakenet):
    targets = [[WEB[0], 80, "tcp"], [WEB[0], 5353, "udp"], [WEB[1], 80, "tcp"], [WEB[1], 8080, "tcp"],
               [WEB[2], 80, "tcp"], [METADATA[0], 80, "tcp"]]
    res = probe(pd, fakenet, ["--net", "policy", "--allow", WEB[0], "--allow", WEB[1] + ":8080/tcp"], targets)
    assert ok(res, WEB[0]) and ok(res, WEB[0], 5353, "udp"), res
    assert ok(res, WEB[1], 8080), res
    assert not ok(res, WEB[1], 80), "port rule let port 80 through: %s" % res
    assert not ok(res, WEB[2]) and not ok(res, METADATA[0]), res


def test_deny_wins_over_allow(pd, fakenet):
    targets = [[a, 80, "tcp"] for a in WEB]
    res = probe(pd, fakenet, ["--net", "policy", "--allow", "203.0.113.0/24", "--deny", WEB[1]], targets)
    assert ok(res, WEB[0]) and not ok(res, WEB[1]) and not ok(res, WEB[2]), res
    res = probe(pd, fakenet, ["--net", "open", "--deny", "203.0.113.0/24:80"], targets + [[WEB[0], 8080, "tcp"]])
    assert not ok(res, WEB[0]) and not ok(res, WEB[1]) and ok(res, WEB[2]) and ok(res, WEB[0], 8080), res


def test_allow_everything_does_not_open_metadata_or_lan(pd, fakenet):
    targets = [[a, 80, "tcp"] for a in METADATA + [LAN, WEB[0]]]
    res = probe(pd, fakenet, ["--net", "policy", "--allow", "0.0.0.0/0"], targets)
    assert ok(res, WEB[0]), res
    assert not any(ok(res, a) for a in METADATA + [LAN]), res
    # only an allow inside the never list opens that part of it
    res = probe(pd, fakenet, ["--net", "open", "--allow", "192.168.77.0/24"], targets)
    assert ok(res, LAN) and not any(ok(res, a) for a in METADATA), res


def test_sandboxes_do_not_reach_each_other(pd, fakenet):
    """A listener in one sandbox; another sandbox in open mode tries its
    pool address (the pool is on the never list and veth-to-veth drops)."""
    srv = pd.popen(["--net", "open"] + fakenet.args() + ["--", "python3", "-c",
                   "import socket,time\ns=socket.socket()\ns.bind(('0.0.0.0',7000))\ns.listen()\n"
                   "import subprocess\nprint(open('/etc/resolv.conf').read().split()[-1], flush=True)\n"
                   "time.sleep(60)"], env=child_env(env()), text=True)
    try:
        gw = srv.stdout.readline().strip()
        assert gw.startswith("10.201."), gw
        parts = gw.split(".")
        sb_addr = ".".join(parts[:3] + [str(int(parts[3]) + 1)])
        res = probe(pd, fakenet, ["--net", "open", "--allow", "10.201.0.0/16"], [[sb_addr, 7000, "tcp"], [gw, 7000, "tcp"]])
        assert not any(v == "ok" for v in res.values()), res
    finally:
        srv.terminate()         # paddock run cleans up on SIGTERM
        srv.wait(timeout=30)


RATE_PROBE = r"""
import select, socket, sys, time
# 40 connection attempts at once (non-blocking), then count the ones the
# kernel let through within a second: a limit of 5/s with a burst of 5
# admits about 10; no limit admits all 40
socks = []
for i in range(40):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((sys.argv[1], 80))
    socks.append(s)
deadline = time.monotonic() + float(sys.argv[2])
done = set()
while time.monotonic() < deadline and len(done) < len(socks):
    _, w, _ = select.select([], [s for s in socks if s not in done], [], 0.05)
    for s in w:
        done.add(s)
print(sum(1 for s in done if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0))
"""


def test_new_connection_rate_limit(pd, fakenet):
    r = pd.run(["--net", "open", "--net-conns-per-sec", "5"] + fakenet.args() +
               ["--", "python3", "-c", RATE_PROBE, WEB[0], "0.8"], timeout=120, env=env())
    assert r.returncode == 0, r.stderr
    limited = int(r.stdout.split()[-1])
    r = pd.run(["--net", "open"] + fakenet.args() + ["--", "python3", "-c", RATE_PROBE, WEB[0], "10"],
               timeout=120, env=env())
    assert r.returncode == 0, r.stderr
    free = int(r.stdout.split()[-1])
    assert free == 40, "unlimited sandbox lost connections: %d of 40" % free
    # half-open connections die with the sandbox; their netns may linger in
    # the kernel, but its veth is gone from the router
    links = subprocess.run(["nsenter", "--net=" + os.path.join(net_dir(pd), "router"), "ip", "-o", "link"],
                           capture_output=True, text=True, timeout=30).stdout
    assert not any(l.split(":")[1].strip().startswith("pd") for l in links.splitlines()), links
    assert 1 <= limited <= 20, "connection rate limit not enforced: %d of 40 in 0.8 s" % limited


def test_bandwidth_limit(pd, fakenet):
    code = ("import socket,time\ns=socket.create_connection(('%s', %d), timeout=30)\n"
            "t=time.monotonic()\ns.sendall(b'%%d\\n' %% (1500*1024))\nn=0\n"
            "while True:\n    d=s.recv(65536)\n    if not d: break\n    n+=len(d)\n"
            "print(n, time.monotonic()-t)" % (WEB[0], BULK_PORT))
    r = pd.run(["--net", "open", "--net-bytes-per-sec", "500K"] + fakenet.args() + ["--", "python3", "-c", code],
               timeout=120, env=env())
    assert r.returncode == 0, r.stderr
    n, secs = r.stdout.split()
    assert int(n) == 1500 * 1024
    # 1.5 MiB at 500 KiB/s is about 3 s (TCP retransmits the dropped part);
    # unlimited it is a few milliseconds here
    assert float(secs) > 1.0, "bandwidth limit not enforced: %s s" % secs


def test_process_tier_refuses_a_network(pd, fakenet):
    r = pd.run(["--isolation", "process", "--net", "open"] + fakenet.args() + ["--", "true"], env=env())
    assert r.returncode == 125 and "process tier" in r.stderr and "none" in r.stderr, r.stderr


def test_bad_network_options_are_refused(pd, fakenet):
    for args, word in [(["--net", "open", "--allow", "300.1.2.3"], "--allow"),
                       (["--net", "none", "--allow", WEB[0]], "none"),
                       (["--net", "open", "--net-conns-per-sec", "x"], "net-conns-per-sec"),
                       (["--net-bytes-per-sec", "1M"], "--net")]:
        r = pd.run(args + fakenet.args() + ["--", "true"], env=env())
        assert r.returncode == 125 and word in r.stderr, (args, r.stderr)
    r = pd.run(["--net", "open", "--net-uplink", "netns:/nonexistent/ns", "--state-dir",
                pd.state + "-other", "--", "true"], env=env())
    assert r.returncode == 125 and "uplink" in r.stderr, r.stderr


def test_two_instances_share_one_uplink(pd, state_root, fakenet):
    """Two state dirs, two routers, one uplink netns: each router takes its
    own transit /30, both reach the fake internet at the same time."""
    other = Paddock(os.path.join(state_root, "net-egress-2"))
    os.makedirs(other.state, exist_ok=True)
    try:
        assert ok(probe(other, fakenet, ["--net", "open"], [[WEB[0], 80, "tcp"]]), WEB[0])
        assert ok(probe(pd, fakenet, ["--net", "open"], [[WEB[0], 80, "tcp"]]), WEB[0])
        assert uplink_far_end(other) != uplink_far_end(pd)
    finally:
        r = other.gc()
        assert r.returncode == 0, r.stderr
    assert router_files(other) == []


def test_teardown_leaves_nothing(pd, fakenet):
    res = probe(pd, fakenet, ["--net", "open"], [[WEB[0], 80, "tcp"]])
    assert ok(res, WEB[0])
    # the router stays for the next sandbox; this sandbox left nothing in it
    # (router_files waits for the run's teardown first)
    assert [f for f in router_files(pd) if f.startswith(("sb/", "slots/"))] == []
    pin = os.path.join(net_dir(pd), "router")
    out = subprocess.run(["nsenter", "--net=" + pin, "nft", "list", "table", "inet", "paddock"],
                         capture_output=True, text=True, timeout=30).stdout
    assert "sb_" not in out and "pd" not in out.split("src4ok")[1].split("}")[0], out
    links = subprocess.run(["nsenter", "--net=" + pin, "ip", "-o", "link"], capture_output=True,
                           text=True, timeout=30).stdout
    assert not any(l.split(":")[1].strip().startswith("pd") for l in links.splitlines()), links
    # gc takes the router away: netd, the pin, the uplink veth
    pid = open(os.path.join(net_dir(pd), "netd.pid")).read().strip() if os.path.exists(
        os.path.join(net_dir(pd), "netd.pid")) else None
    r = pd.gc()
    assert r.returncode == 0, r.stderr
    assert router_files(pd) == []
    if pid:
        assert not os.path.exists("/proc/%s/cmdline" % pid) or b"paddock-netd" not in open(
            "/proc/%s/cmdline" % pid, "rb").read()
    deadline = time.monotonic() + 20
    while any(l.startswith("pdu") for l in fakenet.links()):
        assert time.monotonic() < deadline, "uplink veth left behind: %s" % fakenet.links()
        time.sleep(0.05)
    host = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, timeout=30).stdout
    assert "paddock" not in host, "a paddock table in the host's netns: %s" % host


def test_supervised_tier_gets_the_same_network(pd, fakenet):
    res = probe(pd, fakenet, ["--isolation", "supervised", "--net", "policy", "--allow", WEB[0]],
                [[WEB[0], 80, "tcp"], [WEB[1], 80, "tcp"], [METADATA[0], 80, "tcp"]])
    assert ok(res, WEB[0]) and not ok(res, WEB[1]) and not ok(res, METADATA[0]), res


def test_resolv_conf_names_the_router_and_cannot_be_changed(pd, fakenet):
    r = pd.run(["--net", "open", "-u", "root"] + fakenet.args() + ["--", "sh", "-c",
               "cat /etc/resolv.conf; echo nameserver 1.1.1.1 > /etc/resolv.conf && echo WROTE"],
               env=env())
    assert "nameserver 10.201." in r.stdout and "WROTE" not in r.stdout, (r.stdout, r.stderr)


def test_interface_uplink_macvlan(state_root, tmp_path):
    """--net-uplink IFACE:ADDR/PREFIX:GW: a macvlan on an interface of the
    caller's netns, created straight into the router netns. The "host" here
    is a test netns whose lan0 is wired to the fake internet (one of its
    own: this uplink is neither the netns nor the user-mode one)."""
    host = "pdt-mvl-%d" % os.getpid()
    p = Paddock(os.path.join(state_root, "net-macvlan"))
    os.makedirs(p.state, exist_ok=True)
    nsenter = ["nsenter", "--net=/run/netns/" + host]
    (tmp_path / "fn").mkdir()
    fakenet = FakeNet(tmp_path / "fn").start()
    subprocess.run(["ip", "netns", "add", host], check=True)
    # paddock's own argv, whatever namespace other tests run it in
    p.argv = lambda args, verb="run": [p.bin, verb, "--state-dir", p.state] + list(args)
    try:
        subprocess.run(["ip", "-n", host, "link", "add", "lan0", "type", "veth", "peer", "name", "lanpeer",
                        "netns", fakenet.name], check=True)
        subprocess.run(["ip", "-n", host, "link", "set", "lan0", "up"], check=True)
        fakenet.exec("ip", "addr", "add", "10.77.0.1/24", "dev", "lanpeer")
        fakenet.exec("ip", "link", "set", "lanpeer", "up")
        r = subprocess.run(nsenter + p.argv(["--net", "open", "--net-uplink", "lan0:10.77.0.5/24:10.77.0.1",
                                             "--", "python3", "-c", PROBE,
                                             json.dumps([[WEB[0], 80, "tcp"], ["10.77.0.1", 80, "tcp"]])]),
                           capture_output=True, text=True, timeout=90, env=child_env(env()),
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout.strip().splitlines()[-1])
        assert ok(res, WEB[0]) and not ok(res, "10.77.0.1"), res
        links = subprocess.run(["ip", "-n", host, "-o", "link"], capture_output=True, text=True).stdout
        assert "up0" not in links, "the macvlan showed up in the caller's netns: %s" % links
        bad = subprocess.run(nsenter + p.argv(["--net", "open", "--net-uplink", "nosuch0:10.77.0.5/24:10.77.0.1",
                                               "--state-dir", p.state + "-bad", "--", "true"]),
                             capture_output=True, text=True, timeout=90, env=child_env(env()))
        assert bad.returncode == 125 and "nosuch0" in bad.stderr, bad.stderr
    finally:
        subprocess.run(nsenter + [p.bin, "gc", "--state-dir", p.state], capture_output=True, env=child_env())
        subprocess.run(nsenter + [p.bin, "gc", "--state-dir", p.state + "-bad"], capture_output=True,
                       env=child_env())
        subprocess.run(["ip", "netns", "del", host])
        fakenet.stop()
    assert router_files(p) == []


RESOLVE_LOOP = r"""
import socket, struct, sys, time
ns = open('/etc/resolv.conf').read().split('nameserver')[1].split()[0]
q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0)
q += b''.join(bytes([len(l)]) + l.encode() for l in sys.argv[1].split('.')) + b'\0' + struct.pack('>HH', 1, 1)
for i in range(600):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.3)
    try:
        s.sendto(q, (ns, 53))
        a = s.recv(512)
        print('ok' if a[3] & 0xf == 0 and struct.unpack('>H', a[6:8])[0] > 0 else 'nx', flush=True)
    except OSError:
        print('fail', flush=True)
    s.close()
    time.sleep(0.05)
"""


def test_netd_is_restarted_and_relearns_its_sandboxes(pd, fakenet):
    if not os.access(NETD, os.X_OK):
        pytest.fail("paddock-netd not built: %s" % NETD)
    net = ["--net", "policy", "--allow", "web.example.test"]
    long = pd.popen(net + fakenet.args() + ["--", "python3", "-c", RESOLVE_LOOP, "web.example.test"],
                    env=child_env(env()), text=True)
    try:
        def until(word):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = long.stdout.readline().strip()
                assert line, "the resolving sandbox ended: %s" % long.stderr.read()
                if line == word:
                    return
            raise AssertionError("no %r from the resolving sandbox" % word)

        until("ok")
        pid = int(open(os.path.join(net_dir(pd), "netd.pid")).read())
        os.kill(pid, signal.SIGKILL)
        until("fail")                       # no resolver now
        # the next sandbox of the instance brings netd back, with every
        # attached sandbox's policy
        r = pd.run(net + fakenet.args() + ["--", "python3", "-c", RESOLVE_LOOP.replace("600", "1"),
                                           "web.example.test"], env=env())
        assert r.returncode == 0 and r.stdout.split() == ["ok"], (r.stdout, r.stderr)
        until("ok")                         # the long-running one resolves again
        assert int(open(os.path.join(net_dir(pd), "netd.pid")).read()) != pid
    finally:
        long.terminate()
        long.wait(timeout=30)
