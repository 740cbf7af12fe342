#!/usr/bin/python3
"""Default uplink benchmark (issue 15): what the user-mode uplink costs.

    sudo /usr/bin/python3 bench/uplink.py [--rounds N] [--report FILE]

Builds the tests' fake internet with a stand-in host (tests/network/
_fakenet.py, FakeNet(uplink=...): a "host" network namespace whose route
leads to a namespace of servers; nothing leaves the machine) and runs
paddock inside that host, so the uplink process's sockets are the stand-in
host's, as they are the real host's in production. Measured in one run,
round-robin, so the ratios compare like with like:

  host      the stand-in host itself (no sandbox): the peer to beat
  pasta     a sandbox with --net open behind pasta (passt 2023-03)
  slirp     a sandbox with --net open behind slirp4netns 1.2.0
  netns     a sandbox with --net open behind a plain veth into the fake
            internet (--net-uplink netns:..., what operators had before):
            the router's own cost, without a user-mode process

Metrics, each from inside the peer:
  connect   TCP connect+close latency to a fake-internet server (median of
            --connects per round)
  bulk      download throughput of --bulk-mib MiB from a sendfile(2) server
            behind the uplink path (the server is not the bottleneck)
  dns       time to resolve a name that is not cached anywhere (a fresh
            random name each query, answered NXDOMAIN by the fake internet's
            authoritative server): host = asking that server directly,
            sandbox = asking paddock-netd, which asks it through the uplink

Prints medians (of the rounds' medians) and ratios to host, writes a
Markdown report (default bench/reports/uplink.md). Standard library only.
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
from _fakenet import DNS, WEB, FakeNet  # noqa: E402

PADDOCK = os.environ.get("PADDOCK_BIN") or os.path.join(REPO, "build/src/paddock")
AGENT = os.environ.get("PADDOCK_AGENT") or os.path.join(REPO, "build/src/agent/paddock-agent")
SENDFILE_PORT = 9100

SENDFILE_SERVER = r"""
import os, socket, sys, threading
path = sys.argv[2]
with open(path, "wb") as f:
    f.write(b"x" * (64 << 20))
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], %d)); s.listen(64)
def one(c):
    with c:
        n = int(c.makefile().readline() or 0)
        while n > 0:
            k = os.sendfile(c.fileno(), fd, 0, min(n, size))
            if k <= 0:
                break
            n -= k
print("ready", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=one, args=(c,), daemon=True).start()
""" % SENDFILE_PORT

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

# one A question per fresh name; server: argv[1], or the sandbox's resolver
DNSQ = r"""
import os, socket, statistics, struct, sys, time
server = sys.argv[1] if sys.argv[1] != "-" else open("/etc/resolv.conf").read().split("nameserver")[1].split()[0]
t = []
for i in range(int(sys.argv[2])):
    name = "q%s.example.test" % os.urandom(6).hex()
    q = struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    a = time.perf_counter()
    s.sendto(q, (server, 53))
    r = s.recv(512)
    t.append(time.perf_counter() - a)
    assert r[:2] == q[:2], "answer to another question"
    s.close()
print(statistics.median(t) * 1e6)
"""


def sh(*argv, **kw):
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, timeout=600, **kw)


def env():
    e = dict(os.environ, PADDOCK_AGENT=AGENT)
    d = os.path.dirname(PADDOCK)
    for var, rel in (("PADDOCK_NETD", "net/paddock-netd"), ("PADDOCK_UPLINK", "net/paddock-uplink")):
        if os.access(os.path.join(d, rel), os.X_OK):
            e.setdefault(var, os.path.join(d, rel))
    return e


class Peer:
    def __init__(self, name, fn, state, uplink):
        self.name, self.fn, self.state, self.uplink = name, fn, state, uplink

    def py(self, code, *args):
        host = ["nsenter", "--net=" + self.fn.host_path]
        if self.uplink is None:
            return sh(*host, sys.executable, "-c", code, *args).stdout
        r = subprocess.run(host + [PADDOCK, "run", "--state-dir", self.state, "--net", "open", "--net-uplink",
                                   self.uplink, "--net-resolver", DNS, "--", "python3", "-c", code] + list(args),
                           capture_output=True, text=True, timeout=600, env=env(), stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError("%s: paddock run failed: %s" % (self.name, r.stderr[-800:]))
        return r.stdout

    def gc(self):
        if self.uplink is not None:
            subprocess.run(["nsenter", "--net=" + self.fn.host_path, PADDOCK, "gc", "--state-dir", self.state],
                           capture_output=True, env=env())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--connects", type=int, default=300)
    ap.add_argument("--bulk-mib", type=int, default=256)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--report", default=os.path.join(REPO, "bench", "reports", "uplink.md"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pd-bench-uplink-")
    fn = FakeNet(tmp, uplink="pasta").start()
    blob = os.path.join(tmp, "blob")
    srv = subprocess.Popen(["ip", "netns", "exec", fn.name, sys.executable, "-c", SENDFILE_SERVER, WEB[0], blob],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    peers = []
    for name, up in (("host", None), ("pasta", "pasta"), ("slirp", "slirp4netns"), ("netns", fn_uplink(fn))):
        st = os.path.join(tmp, "state-" + name)
        os.makedirs(st)
        peers.append(Peer(name, fn, st, up))
    res = {k: {p.name: [] for p in peers} for k in ("connect_us", "bulk_mibs", "dns_us")}
    try:
        assert srv.stdout.readline().strip() == "ready", "sendfile server did not start"
        for p in peers:          # warm-up: template, router, uplink, netd
            p.py("print(1)")
        for r in range(a.rounds):
            order = peers[r % len(peers):] + peers[:r % len(peers)]
            for p in order:
                res["connect_us"][p.name].append(float(p.py(CONNECT, WEB[0], "8080", str(a.connects))))
                res["bulk_mibs"][p.name].append(float(p.py(BULK, WEB[0], str(SENDFILE_PORT),
                                                            str(a.bulk_mib << 20))))
                res["dns_us"][p.name].append(float(p.py(DNSQ, DNS if p.uplink is None else "-",
                                                        str(a.queries))))
            print("round %d/%d done" % (r + 1, a.rounds), file=sys.stderr)
    finally:
        for p in peers:
            p.gc()
        srv.kill()
        srv.wait()
        fn.stop()
        subprocess.run(["rm", "-rf", tmp])

    med = {k: {n: statistics.median(v) for n, v in d.items()} for k, d in res.items()}
    c, b, d = med["connect_us"], med["bulk_mibs"], med["dns_us"]
    lines = ["# Default uplink benchmark (bench/uplink.py)", "",
             "Machine: %s, %d CPUs; one run, %d rounds round-robin, medians of the rounds' medians; "
             "a stand-in host and a fake internet in network namespaces (no traffic leaves)." % (
                 os.uname().release, os.cpu_count(), a.rounds), "",
             "| path | connect µs | vs host | bulk MiB/s | vs host | DNS µs (uncached) | vs host |",
             "|---|---|---|---|---|---|---|"]
    for p in peers:
        n = p.name
        lines.append("| %s | %.0f | %.2fx | %.0f | %.2fx | %.0f | %.2fx |" % (
            n, c[n], c[n] / c["host"], b[n], b[n] / b["host"], d[n], d[n] / d["host"]))
    lines += ["",
              "host = the stand-in host's own sockets, no sandbox. pasta, slirp = a sandbox with `--net open`",
              "behind that user-mode uplink (the router's nftables, NAT and paddock-netd in front of it, the",
              "process running as an unprivileged uid in the uplink's own namespaces). netns = the router",
              "with a plain veth into the fake internet, no user-mode process (for scale).",
              "connect: %d connect+close per round; bulk: %d MiB from a sendfile(2) server; DNS: %d fresh"
              % (a.connects, a.bulk_mib, a.queries),
              "names per round (the sandbox asks paddock-netd, which asks the fake internet's server).",
              "Targets (issue 15): bulk >= 0.5x host, connect <= 2x host.", ""]
    text = "\n".join(lines)
    print(text)
    print(json.dumps(res))
    os.makedirs(os.path.dirname(a.report), exist_ok=True)
    with open(a.report, "w") as f:
        f.write(text)


def fn_uplink(fn):
    return "netns:" + fn.path


if __name__ == "__main__":
    main()
