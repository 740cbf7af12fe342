"""Domain rules end to end (issue 6): `paddock run --net policy|open` with
domain rules, against the fake internet (_fakenet.py), through the real
router, nftables and paddock-netd. DNS exfiltration, direct-IP, IP-literal
forms, other resolvers, DNS over TCP, raw UDP/53, QUIC, SNI/Host checks and
the audit log.

Each sandbox runs ACT: a list of actions in, one JSON result per action out;
then it waits for a line on stdin so the test can read the sandbox's audit
log (<runtime dir>/sandboxes/<id>/net-audit.jsonl) while it exists."""
import glob
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fakenet import DNS, LAN, METADATA, WEB, FakeNet, fakenet  # noqa: E402,F401
from pdtest import PADDOCK_BIN, Paddock, child_env, runtime_dir  # noqa: E402

NETD = os.environ.get("PADDOCK_NETD") or os.path.join(os.path.dirname(PADDOCK_BIN), "net", "paddock-netd")

ACT = r"""
import json, socket, ssl, struct, sys

def dns(server, name, tcp, qtype=1):
    if server == "GW":   # paddock's resolver, as resolv.conf names it
        server = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
    q = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for l in name.rstrip(".").split("."):
        q += bytes([len(l)]) + l.encode()
    q += b"\0" + struct.pack("!HH", qtype, 1)
    if tcp:
        s = socket.create_connection((server, 53), timeout=2)
        s.sendall(struct.pack("!H", len(q)) + q)
        n = struct.unpack("!H", s.recv(2))[0]
        r = b""
        while len(r) < n:
            r += s.recv(n - len(r))
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        s.sendto(q, (server, 53))
        r = s.recv(4096)
    return "rcode=%d an=%d" % (r[3] & 15, struct.unpack("!H", r[6:8])[0])

def http(addr, port, host):
    s = socket.create_connection((addr, port), timeout=3)
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    data = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        data += d
    return "ok " + data.decode(errors="replace").split("\r\n\r\n", 1)[-1].strip() if b"hello from" in data else "bad %r" % data[:60]

def tls(addr, sni):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = ctx.wrap_socket(socket.create_connection((addr, 443), timeout=3), server_hostname=sni)
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sni).encode())
    data = s.recv(4096)
    return "ok" if b"200" in data else "bad %r" % data[:60]

def udp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.5)
    s.sendto(b"q", (addr, port))
    return "ok" if s.recv(100) else "empty"

out = []
for a in json.loads(sys.argv[1]):
    try:
        if a[0] == "resolve":
            out.append("ok " + ",".join(sorted({i[4][0] for i in socket.getaddrinfo(a[1], 80, socket.AF_INET, socket.SOCK_STREAM)})))
        elif a[0] == "dns":
            out.append(dns(a[1], a[2], a[3] == "tcp"))
        elif a[0] == "http":
            out.append(http(a[1], a[2], a[3]))
        elif a[0] == "tls":
            out.append(tls(a[1], a[2]))
        elif a[0] == "udp":
            out.append(udp(a[1], a[2]))
    except Exception as e:
        out.append("error %s: %s" % (type(e).__name__, e))
print(json.dumps(out), flush=True)
sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def pd(state_root, fakenet):
    p = Paddock(os.path.join(state_root, "net-domains"))
    os.makedirs(p.state, exist_ok=True)
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr


def env():
    return {"PADDOCK_NETD": NETD} if os.access(NETD, os.X_OK) else {}


def act(pd, fn, net_args, actions):
    """Run ACT in a sandbox; returns (results, audit lines)."""
    proc = pd.popen(list(net_args) + fn.args() + ["--", "python3", "-c", ACT, json.dumps(actions)],
                    env=child_env(env()), text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError("sandbox failed: %s" % proc.stderr.read())
        res = json.loads(line)
        audit = []
        for f in glob.glob(os.path.join(runtime_dir(pd.state), "sandboxes", "*", "net-audit.jsonl")):
            with open(f) as fh:
                audit += [json.loads(l) for l in fh if l.strip()]
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(60) == 0, proc.stderr.read()
        return res, audit
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def queries(fn):
    if not os.path.exists(fn.dns_log):
        return []
    with open(fn.dns_log) as f:
        return [l.split(" ", 1)[1].strip() for l in f if l.strip()]


POLICY = ["--net", "policy", "--allow", "web.example.test:80/tcp", "--allow", "web.example.test:443/tcp",
          "--allow", "*.api.example.test"]


def test_allowed_name_reachable_others_not(pd, fakenet):
    res, audit = act(pd, fakenet, POLICY, [
        ["resolve", "web.example.test"],
        ["http", "web.example.test", 80, "web.example.test"],
        ["resolve", "other.example.test"],
        ["http", WEB[2], 80, "other.example.test"],
        ["http", WEB[1], 8080, "x"],
    ])
    assert res[0] == "ok " + WEB[0], res
    assert res[1].startswith("ok hello from %s host=web.example.test" % WEB[0]), res
    assert res[2].startswith("error gaierror"), res
    assert res[3].startswith("error") or res[3].startswith("bad"), res
    assert res[4].startswith("error"), res
    kinds = {(a["event"][4:], a["decision"], a.get("name")) for a in audit}
    assert ("dns", "allow", "web.example.test") in kinds, audit
    assert ("pin", "allow", "web.example.test") in kinds, audit
    assert ("dns", "deny", "other.example.test") in kinds, audit
    assert ("connect", "allow", "web.example.test") in kinds, audit
    assert ("connect", "deny", "other.example.test") in kinds, audit


def test_dns_exfiltration_never_leaves(pd, fakenet):
    secret = "c2VjcmV0LXRva2VuLTEyMzQ.other.example.test"
    before = len(queries(fakenet))
    res, audit = act(pd, fakenet, POLICY, [
        ["resolve", secret],
        ["dns", "GW", secret, "tcp"],
        ["resolve", "web.example.test.other.example.test"],
    ])
    assert all(r.startswith("error") for r in res[::2]), res
    assert queries(fakenet)[before:] == [], "a denied name reached the upstream"
    assert any(a["event"] == "net.dns" and a["decision"] == "deny" and a["name"] == secret.lower()
               for a in audit), audit


def test_ip_literal_forms_and_direct_ip(pd, fakenet):
    """Addresses written as names never go through DNS (and are not names);
    connecting to them directly is the kernel's call: never resolved = closed."""
    web1 = [int(x) for x in WEB[1].split(".")]
    decimal = str((web1[0] << 24) | (web1[1] << 16) | (web1[2] << 8) | web1[3])
    octal = ".".join("0%o" % x for x in web1)
    res, audit = act(pd, fakenet, POLICY, [
        ["http", decimal, 8080, "api.example.test"],
        ["http", octal, 8080, "api.example.test"],
        ["http", "::ffff:" + WEB[1], 8080, "api.example.test"],
        ["http", WEB[1], 8080, "api.example.test"],
        ["resolve", "other.example.test."],
        ["dns", "GW", WEB[1], "udp"],
        ["dns", "GW", decimal, "udp"],
    ])
    assert all(r.startswith("error") or r.startswith("bad") for r in res[:5]), res
    assert res[5] == "rcode=3 an=0" and res[6] == "rcode=3 an=0", res


def test_other_resolvers_and_raw_dns(pd, fakenet):
    before = len(queries(fakenet))
    res, _ = act(pd, fakenet, POLICY, [
        ["dns", DNS, "other.example.test", "udp"],
        ["dns", DNS, "other.example.test", "tcp"],
        ["resolve", "web.example.test"],
        ["dns", WEB[0], "other.example.test", "udp"],     # raw UDP/53 to a pinned address
        ["dns", "GW", "web.example.test", "tcp"],         # paddock's resolver over TCP
    ])
    assert res[0].startswith("error") and res[1].startswith("error"), res
    assert res[3].startswith("error"), res
    assert res[4] == "rcode=0 an=1", res
    assert "other.example.test" not in queries(fakenet)[before:]


def test_quic_needs_a_udp_rule(pd, fakenet):
    res, _ = act(pd, fakenet, POLICY, [["resolve", "web.example.test"], ["udp", WEB[0], 443]])
    assert res[1].startswith("error"), res
    res, _ = act(pd, fakenet, POLICY + ["--allow", "web.example.test:443/udp"],
                 [["resolve", "web.example.test"], ["udp", WEB[0], 443]])
    assert res[1] == "ok", res


def test_strict_sni_and_host(pd, fakenet):
    res, audit = act(pd, fakenet, POLICY, [
        ["resolve", "web.example.test"],
        ["tls", WEB[0], "web.example.test"],
        ["tls", WEB[0], "other.example.test"],       # fronting: denied name, allowed address
        ["http", WEB[0], 80, "other.example.test"],
        ["http", WEB[0], 80, WEB[0]],                # no name, address allowed only by pin
        ["resolve", "x.api.example.test"],           # NXDOMAIN upstream: allowed, not pinned
    ])
    assert res[1] == "ok", res
    assert res[2].startswith("error") and not res[3].startswith("ok") and not res[4].startswith("ok"), res
    conn = [a for a in audit if a["event"] == "net.connect"]
    assert [c["decision"] for c in conn] == ["allow", "deny", "deny", "deny"], conn
    assert conn[1]["name"] == "other.example.test" and conn[1]["addr"] == WEB[0] and conn[1]["port"] == 443


def test_open_mode_metadata_name_and_rebinding(pd, fakenet):
    res, audit = act(pd, fakenet, ["--net", "open", "--deny", "other.example.test"], [
        ["resolve", "metadata.google.internal"],
        ["resolve", "meta.example.test"],            # answers 169.254.169.254: removed
        ["resolve", "lan.example.test"],             # answers a LAN address: removed
        ["resolve", "other.example.test"],
        ["http", "web.example.test", 80, "web.example.test"],
        ["http", METADATA[0], 80, "metadata.google.internal"],
    ])
    assert res[0].startswith("error"), res
    assert res[1].startswith("error") and res[2].startswith("error"), res
    assert res[3].startswith("error"), res
    assert res[4].startswith("ok"), res
    assert not res[5].startswith("ok"), res
    assert any(a.get("reason") == "metadata" and a["event"] == "net.pin" for a in audit), audit


def test_live_domain_policy_change_through_the_server(tmp_path):
    """PUT /sandboxes/{id}/network with domain rules: new DNS answers and new
    connections follow at once; an address pinned for a name the new policy
    drops is closed, one it keeps stays open."""
    from pdtest.server import Server

    code = ("import socket,json,sys\nout=[]\n"
            "for a in sys.argv[1:]:\n"
            "    try:\n"
            "        ip=socket.gethostbyname(a) if not a[0].isdigit() else a\n"
            "        socket.create_connection((ip,8080),timeout=1.5).close(); out.append('ok '+ip)\n"
            "    except Exception as e: out.append('error '+type(e).__name__)\n"
            "print(json.dumps(out))")

    def reach(srv, sid, *targets):
        st, j = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": ["python3", "-c", code] + list(targets)})
        assert st == 200 and j["exit_code"] == 0, j
        return json.loads(j["stdout"])

    # a fake internet of its own: the module's is the uplink of another
    # instance's router (two routers cannot share one uplink netns)
    (tmp_path / "fn").mkdir()
    fakenet = FakeNet(tmp_path / "fn").start()
    s = None
    try:
        s = Server(str(tmp_path / "srv"), "--pool", "1", "--net-uplink", fakenet.uplink,
                   "--net-resolver", fakenet.resolver).start()
        sb = s.create({"network": {"mode": "policy", "allow": ["web.example.test", "api.example.test"]}})
        sid = sb["id"]
        assert reach(s, sid, "web.example.test", "api.example.test") == ["ok " + WEB[0], "ok " + WEB[1]]
        st, j = s.json("PUT", "/api/v1/sandboxes/%s/network" % sid,
                       {"mode": "policy", "allow": ["api.example.test", "other.example.test"]})
        assert st == 200, j
        # web's pinned address closed at once; api's kept (cached answers still work)
        assert reach(s, sid, WEB[0], WEB[1]) == ["error TimeoutError", "ok " + WEB[1]]
        assert reach(s, sid, "web.example.test", "other.example.test") == \
            ["error gaierror", "ok " + WEB[2]]
        assert s.delete(sid) == 204
    finally:
        if s:
            s.finish()
        fakenet.stop()


def test_exact_name_reaches_a_private_address_wildcard_does_not(pd, fakenet):
    """An exact allow names its host explicitly: its private (LAN) address is
    pinned; the same address through a wildcard is removed from the answer
    (DNS rebinding); a deny CIDR yields to the exact name only."""
    res, audit = act(pd, fakenet, ["--net", "policy", "--allow", "lan.example.test"],
                     [["resolve", "lan.example.test"], ["http", LAN, 80, "lan.example.test"]])
    assert res == ["ok " + LAN, res[1]] and res[1].startswith("ok hello from " + LAN), res
    res, audit = act(pd, fakenet, ["--net", "policy", "--allow", "*.example.test"],
                     [["resolve", "lan.example.test"], ["http", LAN, 80, "lan.example.test"],
                      ["resolve", "meta.example.test"]])
    assert res[0].startswith("error") and not res[1].startswith("ok"), res
    assert res[2].startswith("error"), res
    assert any(a["event"] == "net.pin" and a["decision"] == "deny" and a["addr"] == LAN and
               a["reason"] == "private" for a in audit), audit
    res, _ = act(pd, fakenet, ["--net", "policy", "--allow", "*.example.test", "--allow", "web.example.test",
                               "--deny", WEB[0], "--deny", WEB[1]],
                 [["resolve", "web.example.test"], ["http", "web.example.test", 80, "web.example.test"],
                  ["resolve", "api.example.test"]])
    assert res[0] == "ok " + WEB[0] and res[1].startswith("ok"), res
    assert res[2].startswith("error"), res      # wildcard answer inside a deny CIDR: removed
