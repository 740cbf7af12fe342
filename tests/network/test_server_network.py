"""The network through `paddock serve` (issue 6): the create field `network`,
live change with PUT /api/v1/sandboxes/{id}/network, the E2B fields
(allow_internet_access, network.allowOut/denyOut, the --e2b-network
setting), and nothing left behind after kill -9 of the server."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fakenet import WEB, FakeNet  # noqa: E402
from pdtest import runtime_dir  # noqa: E402
from pdtest.server import Server, run_paddock, runtime_root, tmproot  # noqa: E402,F401 (fixture)

PROBE = ("import socket,json,sys\nout={}\nfor a in sys.argv[1:]:\n"
         "    try:\n        socket.create_connection((a,8080),timeout=1.5).close(); out[a]='ok'\n"
         "    except Exception as e: out[a]=str(e)\nprint(json.dumps(out))")


@pytest.fixture(scope="module")
def fakenet(tmp_path_factory):
    fn = FakeNet(tmp_path_factory.mktemp("fakenet-srv")).start()
    yield fn
    fn.stop()


def reach(srv, sid, addrs):
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": ["python3", "-c", PROBE] + list(addrs)})
    assert st == 200 and j["exit_code"] == 0, j
    res = json.loads(j["stdout"])
    return {a: res[a] == "ok" for a in addrs}


def net_files(state):
    d = os.path.join(runtime_dir(state, runtime_root()), "net")
    if not os.path.isdir(d):
        return []
    out = [n for n in os.listdir(d) if n in ("router", "netd.pid", "netd.sock", "config")]
    for sub in ("sb", "slots", "policy"):
        if os.path.isdir(os.path.join(d, sub)):
            out += ["%s/%s" % (sub, n) for n in os.listdir(os.path.join(d, sub))]
    return sorted(out)


def test_create_with_a_policy_and_change_it_live(tmproot, fakenet):
    s = Server(os.path.join(tmproot, "net"), "--pool", "1", "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver).start()
    try:
        sb = s.create({"network": {"mode": "policy", "allow": [WEB[0]]}})
        sid = sb["id"]
        assert sb["network"]["mode"] == "policy", sb
        assert reach(s, sid, WEB[:2]) == {WEB[0]: True, WEB[1]: False}
        # the kernel counted the refused SYNs
        net = s.json("GET", "/api/v1/sandboxes/%s/network" % sid, expect=200)[1]
        assert net["mode"] == "policy" and net["dropped_packets"] >= 1 and net["dropped_bytes"] > 0, net
        st, j = s.json("PUT", "/api/v1/sandboxes/%s/network" % sid, {"mode": "policy", "allow": [WEB[1]]})
        assert st == 200 and j["mode"] == "policy", j
        assert reach(s, sid, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        assert s.json("GET", "/api/v1/sandboxes/%s" % sid, expect=200)[1]["network"] == j
        assert s.json("GET", "/api/v1/sandboxes/%s/network" % sid, expect=200)[1]["rules"] == j["rules"]
        # bad input changes nothing
        for body, code in [({"mode": "policy", "allow": ["300.1.1.1"]}, 400), ({"mode": "bogus"}, 400),
                           ({"mode": "none"}, 409), ("not json", 400)]:
            st, _, data = s.request("PUT", "/api/v1/sandboxes/%s/network" % sid, body)
            assert st == code, (body, st, data)
        assert reach(s, sid, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        # a name the policy does not allow: NXDOMAIN, and paddock-netd's
        # decision lands in the sandbox's audit log next to the server's
        st, j = s.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": [
            "python3", "-c", "import socket\ntry: socket.gethostbyname('api.example.test'); print('resolved')\n"
                             "except OSError: print('nxdomain')"]})
        assert st == 200 and j["stdout"].strip() == "nxdomain", j
        lines = [json.loads(l) for l in s.request("GET", "/api/v1/sandboxes/%s/audit" % sid)[2].decode().splitlines()
                 if l.strip()]
        assert "sandbox.network" in [e.get("event") for e in lines], lines
        assert any(e.get("event") == "net.dns" and e.get("decision") == "deny" and "api.example.test" in json.dumps(e)
                   for e in lines), lines
        # a sandbox made without a network keeps none
        plain = s.create({})
        assert plain["network"] == {"mode": "none"}
        st, _, _ = s.request("PUT", "/api/v1/sandboxes/%s/network" % plain["id"], {"mode": "open"})
        assert st == 409
        assert reach(s, plain["id"], WEB[:1]) == {WEB[0]: False}
        st, _, data = s.request("POST", "/api/v1/sandboxes", {"network": {"mode": "open", "allow": ["x" * 300]}})
        assert st == 400, data
        assert s.delete(sid) == 204 and s.delete(plain["id"]) == 204
        assert [f for f in net_files(s.state) if "/" in f] == [], net_files(s.state)
    finally:
        s.finish()
    assert net_files(s.state) == []


def test_e2b_fields_map_onto_the_policy(tmproot, fakenet):
    s = Server(os.path.join(tmproot, "e2bnet"), "--pool", "0", "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver).start()
    try:
        def e2b(body):
            st, j = s.json("POST", "/sandboxes", dict({"templateID": "base"}, **body))
            assert st == 201, j
            return j["sandboxID"], s.json("GET", "/api/v1/sandboxes/" + j["sandboxID"], expect=200)[1]["network"]

        sid, net = e2b({})                      # the server setting: open (an uplink is set)
        assert net["mode"] == "open" and reach(s, sid, WEB[:1]) == {WEB[0]: True}
        sid2, net = e2b({"allow_internet_access": False})
        assert net == {"mode": "none"}
        sid3, net = e2b({"network": {"denyOut": ["0.0.0.0/0"], "allowOut": [WEB[1]]}})
        assert net["mode"] == "policy"
        assert reach(s, sid3, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        sid4, net = e2b({"network": {"denyOut": [WEB[0]]}})
        assert net["mode"] == "open"
        assert reach(s, sid4, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        for bad in [{"allow_internet_access": "yes"}, {"network": {"allowOut": "1.2.3.4"}},
                    {"network": {"bogus": []}}, {"network": {"denyOut": ["999.1.1.1"]}}]:
            st, _, data = s.request("POST", "/sandboxes", dict({"templateID": "base"}, **bad))
            assert st == 400, (bad, st, data)
        for x in (sid, sid2, sid3, sid4):
            assert s.delete(x) == 204
    finally:
        s.finish()
    # no setting: E2B's own default, the internet, whatever the uplink (one
    # that cannot reach anything says so in the sandbox's network info)
    t = Server(os.path.join(tmproot, "e2bdefault"), "--pool", "0", "--net-uplink", "none").start()
    try:
        st, j = t.json("POST", "/sandboxes", {"templateID": "base"})
        assert st == 201, j
        net = t.json("GET", "/api/v1/sandboxes/" + j["sandboxID"], expect=200)[1]["network"]
        assert net["mode"] == "open", net
        assert net["egress"]["ok"] is False and "--net-uplink none" in net["egress"]["problem"], net
        info = t.json("GET", "/sandboxes/" + j["sandboxID"], expect=200)[1]
        assert info["allowInternetAccess"] is True, info
        assert [n for n in info["notes"] if n.startswith("network: ") and "--net-uplink none" in n], info
    finally:
        t.finish()
    # --e2b-network none caps E2B sandboxes: no network, and a create that
    # asks for one is refused (not quietly given less)
    u = Server(os.path.join(tmproot, "e2bcap"), "--pool", "0", "--e2b-network", "none", "--net-uplink",
               fakenet.uplink, "--net-resolver", fakenet.resolver).start()
    try:
        for body in ({}, {"allow_internet_access": False}, {"allow_internet_access": None}):
            st, j = u.json("POST", "/sandboxes", dict({"templateID": "base"}, **body))
            assert st == 201, (body, j)
            assert u.json("GET", "/api/v1/sandboxes/" + j["sandboxID"], expect=200)[1]["network"] == {"mode": "none"}
            info = u.json("GET", "/sandboxes/" + j["sandboxID"], expect=200)[1]
            assert info["allowInternetAccess"] is False and info["notes"] == [], info
        for body in ({"allow_internet_access": True}, {"network": {"allowOut": [WEB[0]]}}):
            st, _, data = u.request("POST", "/sandboxes", dict({"templateID": "base"}, **body))
            assert st == 400 and b"--e2b-network none" in data, (body, st, data)
        # the native API is not capped
        sb = u.create({"network": {"mode": "open"}})
        assert reach(u, sb["id"], WEB[:1]) == {WEB[0]: True}
    finally:
        u.finish()


def test_create_cli_network_flags(tmproot, fakenet):
    """`paddock create --net/--allow/--deny` as `paddock run` takes them; a
    bad rule is refused before any request; a network that reaches nothing
    is created and says why in one line."""
    s = Server(os.path.join(tmproot, "netcli"), "--pool", "0", "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver).start()

    def create(srv, *args):
        return run_paddock("create", *args, timeout=120,
                           env={"PADDOCK_URL": "http://127.0.0.1:%d" % srv.port, "PADDOCK_API_KEY": srv.key})
    try:
        r = create(s, "--net", "policy", "--allow", WEB[0], "--deny", WEB[1])
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        sid = r.stdout.strip()
        net = s.json("GET", "/api/v1/sandboxes/%s/network" % sid, expect=200)[1]
        assert net["mode"] == "policy" and net["egress"]["ok"] is True, net
        assert reach(s, sid, WEB[:2]) == {WEB[0]: True, WEB[1]: False}
        r = create(s, "--net", "open", "--deny", WEB[1])
        assert r.returncode == 0, r.stderr
        assert reach(s, r.stdout.strip(), WEB[:3]) == {WEB[0]: True, WEB[1]: False, WEB[2]: True}
        ids = lambda: sorted(x["id"] for x in s.json("GET", "/api/v1/sandboxes", expect=200)[1]["sandboxes"])
        before = ids()
        for args, word in [(["--net", "bogus"], "--net"), (["--allow", "300.1.2.3"], "--allow"),
                           (["--net", "open", "--deny", "*.x:99999"], "--deny")]:
            r = create(s, *args)
            assert r.returncode == 2 and word in r.stderr and not r.stdout, (args, r.stderr)
        assert ids() == before, "a refused create made a sandbox"
    finally:
        s.finish()
    t = Server(os.path.join(tmproot, "netcli-none"), "--pool", "0", "--net-uplink", "none").start()
    try:
        r = create(t, "--net", "open")
        assert r.returncode == 0 and len(r.stdout.split()) == 1, (r.stdout, r.stderr)
        warn = [l for l in r.stderr.splitlines() if l.strip()]
        assert len(warn) == 1 and warn[0].startswith("paddock: warning: network:") and "none" in warn[0], warn
    finally:
        t.finish()


def test_kill9_of_the_server_leaves_nothing_behind(tmproot, fakenet):
    s = Server(os.path.join(tmproot, "net9"), "--pool", "0", "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver).start()
    try:
        sid = s.create({"network": {"mode": "open"}, "timeout": 600})["id"]
        assert reach(s, sid, WEB[:1]) == {WEB[0]: True}
        s.stop(signal.SIGKILL)
        s.start()                                   # adopts the sandbox; its network still works
        assert reach(s, sid, WEB[:1]) == {WEB[0]: True}
        s.stop(signal.SIGKILL)
    finally:
        s.finish()                                    # paddock gc after the server is gone
    assert net_files(s.state) == []
    deadline = time.monotonic() + 20
    while any(l.startswith("pdu") for l in fakenet.links()):
        assert time.monotonic() < deadline, "uplink veth left behind: %s" % fakenet.links()
        time.sleep(0.05)


DROP_PROBE = r"""
import json, socket, sys
for a, port, proto in json.loads(sys.argv[1]):
    if proto == "tcp":
        try:
            socket.create_connection((a, port), timeout=0.5).close()
        except OSError:
            pass
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"x", (a, port))
        s.close()
print("sent")
"""


# a UDP packet from a source address not the sandbox's, sent from the host
# into the sandbox's netns (nothing in a sandbox has CAP_NET_RAW)
SPOOF = r"""
import socket, struct, sys
dst = socket.inet_aton(sys.argv[1])
udp = struct.pack("!HHHH", 4000, 7777, 9, 0) + b"x"
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton("10.99.99.99"), dst)
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
s.sendto(ip + udp, (sys.argv[1], 0))
"""



def spoof_from(srv, sid, dst):
    mark = "31.%d" % (os.getpid() % 100000)
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": [
        "sh", "-c", "sleep %s >/dev/null 2>&1 </dev/null &" % mark]})
    assert st == 200 and j["exit_code"] == 0, j
    pid, deadline = None, time.monotonic() + 15
    while not pid:      # the background sleep may exec after sh returned
        assert time.monotonic() < deadline, "the sandbox's sleep not found"
        for p in os.listdir("/proc"):
            try:
                if p.isdigit() and open("/proc/%s/cmdline" % p, "rb").read() == b"sleep\0" + mark.encode() + b"\0":
                    pid = p
            except OSError:
                pass
    try:
        r = subprocess.run(["nsenter", "--net=/proc/%s/ns/net" % pid, "python3", "-c", SPOOF, dst],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    finally:
        os.kill(int(pid), signal.SIGKILL)


def audit_of(srv, sid):
    body = srv.request("GET", "/api/v1/sandboxes/%s/audit" % sid)[2].decode()
    return [json.loads(l) for l in body.splitlines() if l.strip()]


def drops_of(lines):
    return [e for e in lines if e.get("event") == "net.deny"]


def send(srv, sid, targets):
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid,
                     {"cmd": ["python3", "-c", DROP_PROBE, json.dumps(targets)]})
    assert st == 200 and j["stdout"].strip() == "sent", j


def wait_drops(srv, sid, want, timeout=20):
    """Poll the audit log until every (addr, port, proto, rule) of want has
    a drop line; returns the drop lines."""
    deadline = time.monotonic() + timeout
    while True:
        drops = drops_of(audit_of(srv, sid))
        got = {(e.get("addr"), e.get("port"), e.get("proto"), e.get("rule")) for e in drops}
        if set(want) <= got or time.monotonic() > deadline:
            assert set(want) <= got, (want, drops)
            return drops
        time.sleep(0.2)


def test_kernel_drops_are_audited(tmproot, fakenet):
    """Packets the kernel drops (never resolved address, a deny rule, the
    never list, another resolver) each leave a deny line with address,
    port, protocol and the rule kind; a flood leaves a bounded number."""
    from _fakenet import DNS, METADATA
    s = Server(os.path.join(tmproot, "netdrop"), "--pool", "1", "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver).start()
    try:
        pol = s.create({"network": {"mode": "policy", "allow": [WEB[0]]}})["id"]
        opn = s.create({"network": {"mode": "open", "deny": [WEB[1]]}})["id"]
        send(s, pol, [[WEB[2], 8080, "tcp"], [WEB[1], 8080, "tcp"], [WEB[2], 5353, "udp"]])
        drops = wait_drops(s, pol, [(WEB[2], 8080, "tcp", "default"), (WEB[1], 8080, "tcp", "default"),
                                    (WEB[2], 5353, "udp", "default")])
        assert all(e["decision"] == "deny" and e["sandbox"] == pol for e in drops), drops
        send(s, opn, [[METADATA[0], 80, "tcp"], [DNS, 53, "udp"], [DNS, 53, "tcp"], [WEB[1], 8080, "tcp"]])
        drops = wait_drops(s, opn, [(METADATA[0], 80, "tcp", "never"), (DNS, 53, "udp", "resolver"),
                                    (DNS, 53, "tcp", "resolver"), (WEB[1], 8080, "tcp", "deny")])
        assert all(e["decision"] == "deny" and e["sandbox"] == opn for e in drops), drops
        # router-wide drops, found by the sandbox's veth: a router port
        # other than DNS and the proxy, another sandbox, a forged source
        gw = [l.split()[1] for l in s.json("POST", "/api/v1/sandboxes/%s/exec" % pol, {
            "cmd": ["cat", "/etc/resolv.conf"]})[1]["stdout"].splitlines() if l.startswith("nameserver")][0]
        other = addr_of(s, opn)
        send(s, pol, [[gw, 22, "tcp"], [other, 8080, "tcp"]])
        wait_drops(s, pol, [(gw, 22, "tcp", "router"), (other, 8080, "tcp", "peer")])
        spoof_from(s, pol, WEB[2])
        drops = wait_drops(s, pol, [(WEB[2], 7777, "udp", "spoof")])
        assert not [e for e in drops_of(audit_of(s, opn)) if e["rule"] in ("spoof", "router", "peer")]
        # new connections over the sandbox's rate limit
        lim = s.create({"network": {"mode": "open", "conn_per_sec": 2}})["id"]
        send(s, lim, [[WEB[0], 30000 + i, "udp"] for i in range(40)])
        drops = wait_drops(s, lim, [])
        deadline = time.monotonic() + 20
        while not any(e["rule"] == "rate" and e["addr"] == WEB[0] for e in drops):
            assert time.monotonic() < deadline, drops
            time.sleep(0.2)
            drops = drops_of(audit_of(s, lim))
        assert s.delete(lim) == 204
        # the allowed address is not in the drops
        assert reach(s, pol, [WEB[0]]) == {WEB[0]: True}
        assert WEB[0] not in [e.get("addr") for e in drops_of(audit_of(s, pol))]

        # a flood: 2000 packets to one address and port, 1500 to as many ports
        before = len(drops_of(audit_of(s, pol)))
        t0 = time.monotonic()
        send(s, pol, [[WEB[2], 9999, "udp"]] * 2000 + [[WEB[2], 20000 + i, "udp"] for i in range(1500)])
        elapsed = time.monotonic() - t0
        # the repeats of one (address, port) come as one summary line
        drops = wait_drops(s, pol, [(WEB[2], 9999, "udp", "default")])
        deadline = time.monotonic() + 10
        while not any(e.get("port") == 9999 and e.get("repeats") for e in drops) and time.monotonic() < deadline:
            time.sleep(0.2)
            drops = drops_of(audit_of(s, pol))
        assert any(e.get("port") == 9999 and e.get("repeats", 0) >= 1 for e in drops), drops[-5:]
        new = len(drops) - before
        # the kernel lets 20 through at once, then 10/s (nft.h); generous slack
        assert new <= 20 + 10 * (elapsed + 15) + 5, (new, elapsed)
        net = s.json("GET", "/api/v1/sandboxes/%s/network" % pol, expect=200)[1]
        assert net["dropped_packets"] >= 3500, net
        assert s.delete(pol) == 204 and s.delete(opn) == 204
    finally:
        s.finish()
    assert net_files(s.state) == []


MY_ADDR = ("import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
           "s.connect(('%s',9))\nprint(s.getsockname()[0])" % WEB[0])


def addr_of(srv, sid):
    st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": ["python3", "-c", MY_ADDR]})
    assert st == 200 and j["exit_code"] == 0, j
    return j["stdout"].strip()


def test_fork_and_snapshot_with_a_network(tmproot, fakenet):
    """A fork carries the source's policy as it is now (after a live
    change), each copy with its own address; a sandbox started from a
    snapshot has the network its create asks for, none by default."""
    s = Server(os.path.join(tmproot, "netfork"), "--pool", "0", "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver).start()
    try:
        src = s.create({"network": {"mode": "policy", "allow": [WEB[0]]}, "timeout": 600})["id"]
        st, pol = s.json("PUT", "/api/v1/sandboxes/%s/network" % src, {"mode": "policy", "allow": [WEB[1]]})
        assert st == 200, pol
        st, j = s.json("POST", "/api/v1/sandboxes/%s/fork" % src, {"count": 2})
        assert st == 201, (st, j)
        kids = [x["id"] for x in j["sandboxes"]]
        assert all(x["network"] == pol for x in j["sandboxes"]), j
        for k in kids:
            net = s.json("GET", "/api/v1/sandboxes/%s/network" % k, expect=200)[1]
            assert net["mode"] == "policy" and net["rules"] == pol["rules"], net
            assert reach(s, k, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        addrs = [addr_of(s, x) for x in [src] + kids]
        assert len(set(addrs)) == 3, addrs
        # a live change of one copy is its own
        st, _ = s.json("PUT", "/api/v1/sandboxes/%s/network" % kids[0], {"mode": "policy", "allow": [WEB[0]]})
        assert st == 200
        assert reach(s, kids[0], WEB[:2]) == {WEB[0]: True, WEB[1]: False}
        assert reach(s, kids[1], WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        assert reach(s, src, WEB[:2]) == {WEB[0]: False, WEB[1]: True}

        st, j = s.json("POST", "/api/v1/sandboxes/%s/snapshots" % src, {"name": "netsnap"})
        assert st == 201, (st, j)
        plain = s.create({"template": "netsnap"})
        assert plain["network"] == {"mode": "none"}, plain
        assert reach(s, plain["id"], WEB[:1]) == {WEB[0]: False}
        opn = s.create({"template": "netsnap", "network": {"mode": "open"}})
        assert opn["network"]["mode"] == "open", opn
        assert reach(s, opn["id"], WEB[:2]) == {WEB[0]: True, WEB[1]: True}
        for x in [src, plain["id"], opn["id"]] + kids:
            assert s.delete(x) == 204
        assert [f for f in net_files(s.state) if "/" in f] == [], net_files(s.state)
    finally:
        s.finish()
    assert net_files(s.state) == []
