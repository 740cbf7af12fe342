"""A lab for paddock-netd on its own (tests only): three network namespaces
made by hand and removed afterwards.

    internet  198.51.100.1 (authoritative DNS, _fakedns.py), web servers on
              198.51.100.10/.11/.20 (_fakeweb.py), uplink side 192.0.2.1
    router    uplink 192.0.2.2 (masquerade), sandbox side 10.201.0.1/30,
              forwarding on (this netns only), paddock-netd, and a table
              inet paddock laid out like src/net/nft.c's (made with the nft
              CLI here: this lab tests netd, not the nft programming)
    sandbox   eth0 10.201.0.2/30, default route via the router, resolv.conf
              pointing at the router (/etc/netns/<ns>/resolv.conf)

The sandbox's key (nft set names p4_<key>, netd's id) is `sb1`.
"""
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KEY = "sb1"
SB_ADDR = "10.201.0.2"
GW = "10.201.0.1"
DNS_ADDR = "198.51.100.1"
WEB = {"a": "198.51.100.10", "b": "198.51.100.11", "c": "198.51.100.20"}
PROXY_PORT = 15001

ZONE = {
    "allowed.test": [["A", WEB["a"], 300]],
    "www.allowed.test": [["A", WEB["a"], 300]],
    "api.allowed.test": [["A", WEB["a"], 300], ["AAAA", "2001:db8::10", 300]],
    "cdn.allowed.test": [["CNAME", "edge.cdn.test", 300]],
    "edge.cdn.test": [["A", WEB["b"], 60]],
    "other.test": [["A", WEB["c"], 300]],
    "private.allowed.test": [["A", "10.0.0.5", 300], ["A", WEB["a"], 300]],
    "meta.allowed.test": [["A", "169.254.169.254", 300]],
    "loop.allowed.test": [["A", "127.0.0.1", 300]],
    "short.allowed.test": [["A", WEB["b"], 2]],
    # answered late, but before netd's 1.5 s upstream retry
    "slow.allowed.test": [["DELAY", 1.2, 0], ["A", WEB["b"], 300]],
    # more addresses than one pin batch takes (64)
    "many.allowed.test": [["A", "203.0.113.%d" % i, 300] for i in range(1, 71)],
    # later than netd's first retry: the first try's answer must still count
    "slower.allowed.test": [["DELAY", 2.0, 0], ["A", WEB["b"], 300]],
    "evil.test": [["A", WEB["c"], 300]],
    "metadata.google.internal": [["A", "169.254.169.254", 300]],
}


def netd_bin():
    env = os.environ.get("PADDOCK_NETD")
    if env:
        return env
    pb = os.environ.get("PADDOCK_BIN") or os.path.join(REPO, "build/src/paddock")
    return os.path.join(os.path.dirname(os.path.abspath(pb)), "net", "paddock-netd")


def run(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def wait_file(path, proc, timeout=20):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError("%s exited: %s" % (proc.args, proc.stderr.read() if proc.stderr else ""))
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.02)   # polling a file with a deadline (the helper has no fd to hand us)


NFT_TABLE = """
table inet paddock {
  set p4_%(key)s { type ipv4_addr . inet_proto . inet_service; flags interval,timeout; }
  set p6_%(key)s { type ipv6_addr . inet_proto . inet_service; flags interval,timeout; }
  chain forward {
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    iifname "sb0" ip daddr . meta l4proto . th dport @p4_%(key)s accept
    iifname "sb0" counter drop
  }
  chain prerouting {
    type nat hook prerouting priority dstnat; policy accept;
    iifname "sb0" meta l4proto tcp th dport { 80, 443 } redirect to :%(proxy)d
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    oifname "up0" masquerade
  }
}
"""


class Lab:
    def __init__(self, tmp, netd_args=()):
        self.tmp = str(tmp)
        self.netd_args = list(netd_args)
        sfx = secrets.token_hex(3)
        self.inet, self.rtr, self.sbx = "pdni" + sfx, "pdnr" + sfx, "pdns" + sfx
        self.procs = []
        self.ctl = None
        self.audit = os.path.join(self.tmp, "audit.jsonl")
        self.qlog = os.path.join(self.tmp, "queries.log")
        open(self.qlog, "w").close()

    # -- setup / teardown --
    def start(self, strict_redirect=True):
        for ns in (self.inet, self.rtr, self.sbx):
            run("ip", "netns", "add", ns)
        I, R, S = (["ip", "-n", n] for n in (self.inet, self.rtr, self.sbx))
        run(*R, "link", "add", "up0", "type", "veth", "peer", "name", "inet0", "netns", self.inet)
        run(*R, "link", "add", "sb0", "type", "veth", "peer", "name", "eth0", "netns", self.sbx)
        for ns in (I, R, S):
            run(*ns, "link", "set", "lo", "up")
        run(*I, "addr", "add", "192.0.2.1/24", "dev", "inet0")
        for a in [DNS_ADDR] + list(WEB.values()):
            run(*I, "addr", "add", a + "/32", "dev", "lo")
        run(*I, "link", "set", "inet0", "up")
        run(*R, "addr", "add", "192.0.2.2/24", "dev", "up0")
        run(*R, "link", "set", "up0", "up")
        run(*R, "addr", "add", GW + "/30", "dev", "sb0")
        run(*R, "link", "set", "sb0", "up")
        run(*R, "route", "add", "default", "via", "192.0.2.1")
        run(*S, "addr", "add", SB_ADDR + "/30", "dev", "eth0")
        run(*S, "link", "set", "eth0", "up")
        run(*S, "route", "add", "default", "via", GW)
        run("ip", "netns", "exec", self.rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        table = NFT_TABLE % {"key": KEY, "proxy": PROXY_PORT}
        if not strict_redirect:
            table = table.replace('iifname "sb0" meta l4proto tcp th dport { 80, 443 } redirect to :%d'
                                  % PROXY_PORT, "")
        subprocess.run(["ip", "netns", "exec", self.rtr, "nft", "-f", "-"], input=table,
                       check=True, text=True, capture_output=True)
        os.makedirs("/etc/netns/" + self.sbx, exist_ok=True)
        with open("/etc/netns/%s/resolv.conf" % self.sbx, "w") as f:
            f.write("nameserver %s\noptions timeout:2 attempts:1\n" % GW)
        # the fake internet's servers
        zone = os.path.join(self.tmp, "zone.json")
        with open(zone, "w") as f:
            json.dump(ZONE, f)
        ready = os.path.join(self.tmp, "dns.ready")
        self.spawn(self.inet, ["python3", os.path.join(HERE, "_fakedns.py"), "--listen", DNS_ADDR,
                               "--zone", zone, "--log", self.qlog, "--ready", ready], ready)
        cert, key = os.path.join(self.tmp, "c.pem"), os.path.join(self.tmp, "k.pem")
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
            "/CN=allowed.test", "-keyout", key, "-out", cert)
        ready = os.path.join(self.tmp, "web.ready")
        self.spawn(self.inet, ["python3", os.path.join(HERE, "_fakeweb.py"), "--cert", cert,
                               "--key", key, "--ready", ready] + list(WEB.values()), ready)
        self.start_netd()

    def spawn(self, ns, argv, ready):
        p = subprocess.Popen(["ip", "netns", "exec", ns] + argv, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        wait_file(ready, p)
        return p

    def start_netd(self):
        self.sock = os.path.join(self.tmp, "netd.sock")
        r, w = os.pipe()
        self.netd_err = open(os.path.join(self.tmp, "netd.stderr"), "w")
        self.netd = subprocess.Popen(
            ["ip", "netns", "exec", self.rtr, netd_bin(), "--control", self.sock, "--upstream",
             DNS_ADDR, "--proxy-port", str(PROXY_PORT), "--ready-fd", str(w)] + self.netd_args,
            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=self.netd_err)
        self.procs.append(self.netd)
        os.close(w)
        got = os.read(r, 1)      # netd writes "1" once it listens; EOF if it died
        os.close(r)
        if got != b"1":
            raise RuntimeError("paddock-netd did not start: " + open(self.netd_err.name).read())
        self.ctl = socket.socket(socket.AF_UNIX)
        self.ctl.settimeout(10)
        self.ctl.connect(self.sock)

    def stop(self):
        if self.ctl:
            self.ctl.close()
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for ns in (self.sbx, self.rtr, self.inet):
            run("ip", "netns", "del", ns, check=False)
        shutil.rmtree("/etc/netns/" + self.sbx, ignore_errors=True)

    # -- netd control --
    def call(self, req):
        body = json.dumps(req).encode()
        self.ctl.sendall(struct.pack("!I", len(body)) + body)
        hdr = self.recv_exact(4)
        return json.loads(self.recv_exact(struct.unpack("!I", hdr)[0]))

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.ctl.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("netd closed the control socket")
            buf += chunk
        return buf

    def add(self, policy, key=KEY, addrs=(SB_ADDR,)):
        return self.call({"op": "add", "id": key, "iface": "sb0", "addrs": list(addrs),
                          "audit": self.audit, "policy": policy})

    def update(self, policy, key=KEY):
        return self.call({"op": "update", "id": key, "policy": policy})

    # -- the sandbox side --
    def sh(self, *argv, timeout=30):
        return subprocess.run(["ip", "netns", "exec", self.sbx] + list(argv), capture_output=True,
                              text=True, timeout=timeout)

    def dig(self, name, qtype="A", server=GW, tcp=False):
        args = ["dig", "@" + server, "+time=2", "+tries=1", "+nocookie", "+noedns", name, qtype]
        if tcp:
            args.insert(2, "+tcp")
        out = self.sh(*args).stdout
        status = None
        for line in out.splitlines():
            if "status:" in line:
                status = line.split("status:")[1].split(",")[0].strip()
        answers = []
        section = False
        for line in out.splitlines():
            if line.startswith(";; ANSWER SECTION"):
                section = True
                continue
            if section:
                if not line.strip():
                    break
                parts = line.split()
                answers.append((parts[3], parts[4]))
        return status, answers

    def curl(self, url, *extra, timeout=6):
        r = self.sh("curl", "-sS", "-k", "--max-time", str(timeout), *extra, url, timeout=timeout + 10)
        return r.returncode, r.stdout + r.stderr

    def py(self, code, timeout=20):
        r = self.sh("python3", "-c", code, timeout=timeout)
        return r.stdout.strip(), r.stderr

    def audit_lines(self):
        if not os.path.exists(self.audit):
            return []
        with open(self.audit) as f:
            return [json.loads(line) for line in f if line.strip()]

    def queries(self):
        with open(self.qlog) as f:
            return [line.split(" ", 1)[1].strip() for line in f if line.strip()]

    def netd_alive(self):
        return self.netd.poll() is None and self.call({"op": "ping"}) == {"ok": True}


# ---- pytest fixtures shared by the netd lab tests (test_dns, test_strict) ----
@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """paddock-netd in a lab of hand-made namespaces, for the whole module."""
    if not os.path.exists(netd_bin()):
        pytest.fail("paddock-netd not built: %s" % netd_bin())
    lb = Lab(tmp_path_factory.mktemp("netdlab"))
    try:
        lb.start()
        yield lb
    finally:
        lb.stop()


@pytest.fixture
def sb(lab):
    """Each test adds the sandbox with its own policy and removes it."""
    open(lab.audit, "w").close()
    open(lab.qlog, "w").close()
    yield lab
    assert lab.call({"op": "remove", "id": KEY}) == {"ok": True}
    subprocess.run(["ip", "netns", "exec", lab.rtr, "nft", "flush", "set", "inet", "paddock",
                    "p4_" + KEY], check=True)
    assert lab.netd_alive(), "paddock-netd died"
