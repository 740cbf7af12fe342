#!/usr/bin/python3
"""Network benchmark (issue 6): what paddock's egress path costs.

    sudo /usr/bin/python3 bench/network.py [--rounds N] [--report FILE]

Builds the tests' fake internet (tests/network/_fakenet.py: a network
namespace with HTTP/bulk servers, nothing leaves the machine), then measures
in one run, so the ratios compare like with like:

  start     `paddock run -- /bin/true` wall time with --net none vs
            --net open vs --net policy (10 and 10,000 CIDR rules); the
            router already exists (made by a warm-up run), as it does for
            every sandbox but the instance's first
  connect   TCP connect+close latency to a fake-internet server, from inside
            a sandbox (open, policy with 10 and 10,000 rules) and from a
            "direct" netns wired to the fake internet by a plain veth (no
            router, no nftables, no NAT): the peer without paddock
  bulk      download throughput of 64 MiB from the bulk server, same peers

Prints medians and ratios, writes a Markdown report (default
bench/reports/network.md). Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "network"))
from _fakenet import BULK_PORT, WEB, FakeNet  # noqa: E402

PADDOCK = os.environ.get("PADDOCK_BIN") or os.path.join(REPO, "build/src/paddock")
AGENT = os.environ.get("PADDOCK_AGENT") or os.path.join(REPO, "build/src/agent/paddock-agent")

CONNECT = r"""
import socket, statistics, sys, time
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = []
for i in range(n):
    a = time.perf_counter()
    socket.create_connection((addr, port), timeout=5).close()
    t.append(time.perf_counter() - a)
print(statistics.median(t) * 1e6)
"""

BULK = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
n = int(sys.argv[3])
a = time.perf_counter()
s.sendall(b"%d\n" % n)
got = 0
while True:
    d = s.recv(1 << 20)
    if not d:
        break
    got += len(d)
assert got == n, got
print(n / (time.perf_counter() - a) / (1 << 20))
"""


def sh(*argv, **kw):
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, timeout=300, **kw)


class Direct:
    """A netns joined to the fake internet by one veth: no paddock at all."""

    def __init__(self, fn):
        self.fn = fn
        self.name = "pdb-direct-%d" % os.getpid()

    def start(self):
        sh("ip", "netns", "add", self.name)
        sh("ip", "-n", self.name, "link", "set", "lo", "up")
        sh("ip", "-n", self.name, "link", "add", "eth0", "type", "veth", "peer", "name", "pdbd0",
           "netns", self.fn.name)
        sh("ip", "-n", self.name, "addr", "add", "10.199.0.2/30", "dev", "eth0")
        sh("ip", "-n", self.name, "link", "set", "eth0", "up")
        sh("ip", "-n", self.name, "route", "add", "default", "via", "10.199.0.1")
        sh("ip", "-n", self.fn.name, "addr", "add", "10.199.0.1/30", "dev", "pdbd0")
        sh("ip", "-n", self.fn.name, "link", "set", "pdbd0", "up")
        return self

    def py(self, code, *args):
        return sh("ip", "netns", "exec", self.name, sys.executable, "-c", code, *args).stdout

    def stop(self):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def env():
    e = dict(os.environ, PADDOCK_AGENT=AGENT)
    netd = os.path.join(os.path.dirname(PADDOCK), "net", "paddock-netd")
    if os.access(netd, os.X_OK):
        e.setdefault("PADDOCK_NETD", netd)
    return e


def rules(n):
    """n distinct /32 allow rules that do not include the target, plus it."""
    out = ["--allow", WEB[0]]
    for i in range(n - 1):
        out += ["--allow", "198.18.%d.%d" % (i // 250, i % 250 + 1)]
    return out


def run(state, fn, net, *cmd):
    a = time.perf_counter()
    r = subprocess.run([PADDOCK, "run", "--state-dir", state] + net + fn.args() + ["--"] + list(cmd),
                       capture_output=True, text=True, timeout=300, env=env(), stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - a
    if r.returncode != 0:
        raise RuntimeError("paddock run %s failed: %s" % (net[:2], r.stderr[-500:]))
    return wall, r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--connects", type=int, default=300)
    ap.add_argument("--bulk-mib", type=int, default=64)
    ap.add_argument("--report", default=os.path.join(REPO, "bench", "reports", "network.md"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pd-bench-net-")
    state = os.path.join(tmp, "state")
    os.makedirs(state)
    fn = FakeNet(tmp).start()
    direct = Direct(fn).start()
    peers = {
        "none": ["--net", "none"],
        "open": ["--net", "open"],
        "policy-10": ["--net", "policy"] + rules(10),
        "policy-10000": ["--net", "policy"] + rules(10000),
    }
    res = {"start_ms": {}, "connect_us": {}, "bulk_mibs": {}}
    try:
        run(state, fn, peers["open"], "true")           # warm-up: template, router, netd
        run(state, fn, peers["none"], "true")
        for name, net in peers.items():
            walls = [run(state, fn, net, "true")[0] * 1e3 for _ in range(a.rounds)]
            res["start_ms"][name] = statistics.median(walls)
        for name in ("open", "policy-10", "policy-10000"):
            vals = [float(run(state, fn, peers[name], "python3", "-c", CONNECT, WEB[0], "8080",
                              str(a.connects))[1]) for _ in range(3)]
            res["connect_us"][name] = statistics.median(vals)
            vals = [float(run(state, fn, peers[name], "python3", "-c", BULK, WEB[0], str(BULK_PORT),
                              str(a.bulk_mib << 20))[1]) for _ in range(3)]
            res["bulk_mibs"][name] = statistics.median(vals)
        res["connect_us"]["direct"] = statistics.median(
            float(direct.py(CONNECT, WEB[0], "8080", str(a.connects))) for _ in range(3))
        res["bulk_mibs"]["direct"] = statistics.median(
            float(direct.py(BULK, WEB[0], str(BULK_PORT), str(a.bulk_mib << 20))) for _ in range(3))
    finally:
        subprocess.run([PADDOCK, "gc", "--state-dir", state], capture_output=True, env=env())
        direct.stop()
        fn.stop()
        subprocess.run(["rm", "-rf", tmp])

    s, c, b = res["start_ms"], res["connect_us"], res["bulk_mibs"]
    lines = ["# Network benchmark (bench/network.py)", "",
             "Machine: %s, %d CPUs; one run, medians; fake internet in a netns (no traffic leaves)." % (
                 os.uname().release, os.cpu_count()), "",
             "## Sandbox start (`paddock run -- true`, %d rounds each)" % a.rounds, "",
             "| network | median ms | vs none |", "|---|---|---|"]
    for k, v in s.items():
        lines.append("| %s | %.1f | %.2fx |" % (k, v, v / s["none"]))
    lines += ["", "## TCP connect latency (%d connects, median of 3 sandboxes)" % a.connects, "",
              "| path | median µs | vs direct |", "|---|---|---|"]
    for k in ("direct", "open", "policy-10", "policy-10000"):
        lines.append("| %s | %.1f | %.2fx |" % (k, c[k], c[k] / c["direct"]))
    lines += ["", "## Bulk download (%d MiB, median of 3)" % a.bulk_mib, "",
              "| path | MiB/s | vs direct |", "|---|---|---|"]
    for k in ("direct", "open", "policy-10", "policy-10000"):
        lines.append("| %s | %.0f | %.2fx |" % (k, b[k], b[k] / b["direct"]))
    lines += ["", "direct = a netns with a plain veth to the fake internet (no router, nftables or NAT).",
              "policy-N = N CIDR allow rules in the sandbox's nft interval set (the target among them).", ""]
    text = "\n".join(lines)
    print(text)
    print(json.dumps(res))
    os.makedirs(os.path.dirname(a.report), exist_ok=True)
    with open(a.report, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
