#!/usr/bin/python3
"""Prototype measurement (issue 15): a socket-level TCP uplink vs slirp4netns
vs the host directly, one run, rounds alternated.

    sudo /usr/bin/python3 bench/uplink_relay_proto.py [--rounds N] [--report FILE]

The arrangement of bench/uplink.py (a stand-in host and a fake internet in
network namespaces; nothing leaves the machine). Peers:

  host    the stand-in host's own sockets, no sandbox
  relay   a sandbox (--net open) behind paddock's router, whose TCP is
          redirected by hand (nft, in the router netns, a nat prerouting
          chain after paddock's) to bench/proto/tcp_relay_proto.c: a
          listening socket in the router netns, held by a process of the
          stand-in host that connects out as an ordinary socket (uid 65534)
          and relays with splice(2). UDP and DNS still go the slirp4netns
          way. The router's verdict comes first: a filter chain at
          prerouting -150 (before nat) sends a new TCP connection through
          the hard never set and the sandbox's own chain (sbmap), as the
          forward chain does; the probes at the end check it holds.
  slirp   a sandbox (--net open) behind the default uplink, slirp4netns
  netns   a sandbox (--net open) behind a plain veth into the fake internet
          (no user-mode process): what a sandbox itself can do here

Metrics (from inside the peer):
  connect   connect+close latency (median of --connects). Through the relay
            the sandbox's connect completes when the router's listener
            accepts, before the relay's own connect: see "exchange".
  exchange  connect, send a line, read the 1-byte answer to its end: a
            round trip that includes the upstream connect on every path
  bulk      --bulk-mib MiB from a sendfile(2) server behind the uplink
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
import uplink as ub  # noqa: E402
from _fakenet import HOST_ADDR, METADATA, WEB, FakeNet  # noqa: E402

EXCHANGE = r"""
import socket, statistics, sys, time
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = []
for i in range(n):
    a = time.perf_counter()
    s = socket.create_connection((addr, port), timeout=5)
    s.sendall(b"1\n")
    got = b""
    while True:
        d = s.recv(16)
        if not d:
            break
        got += d
    s.close()
    assert got == b"x", got
    t.append(time.perf_counter() - a)
print(statistics.median(t) * 1e6)
"""

# what a client sees connecting to a closed port of a reachable address
CLOSED = r"""
import socket, sys
s = socket.socket()
s.settimeout(5)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
except OSError as e:
    print("connect fails: %s" % (e.__class__.__name__ if not isinstance(e, socket.timeout) else "timeout",))
    sys.exit(0)
try:
    s.sendall(b"x")
    d = s.recv(1)
    print("connect succeeds, then %s" % ("EOF" if not d else "data"))
except OSError as e:
    print("connect succeeds, then %s on the first read" % (e.__class__.__name__,))
"""


def nft(pin, *args):
    ub.sh("nsenter", "--net=" + pin, "nft", *args)


class Peer(ub.Peer):
    """A peer with a runtime dir of its own (the relay's router pin is found there)."""

    def _env(self):
        os.environ["PADDOCK_RUNTIME_DIR"] = os.path.join(os.path.dirname(self.state), "run-" + self.name)

    def py(self, code, *args):
        self._env()
        return super().py(code, *args)

    def gc(self):
        self._env()
        return super().gc()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--connects", type=int, default=200)
    ap.add_argument("--bulk-mib", type=int, default=256)
    ap.add_argument("--relay-bin", default="/tmp/tcp_relay_proto")
    ap.add_argument("--report", default=os.path.join(REPO, "bench", "reports", "uplink-relay-proto.md"))
    ap.add_argument("--from-json", help="write the report from the raw figures of an earlier run")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            raw = json.load(f)
        write_report(a, list(raw["res"]["connect_us"]), raw["res"], raw["closed"], raw["never"], raw["own"], raw.get("load"))
        return
    if not os.access(a.relay_bin, os.X_OK):
        ub.sh("gcc", "-O2", "-o", a.relay_bin, os.path.join(REPO, "bench/proto/tcp_relay_proto.c"), "-lpthread")
    tmp = tempfile.mkdtemp(prefix="pd-bench-relay-")
    fn = FakeNet(tmp, uplink="slirp4netns").start()
    blob = os.path.join(tmp, "blob")
    srv = subprocess.Popen(["ip", "netns", "exec", fn.name, sys.executable, "-c", ub.SENDFILE_SERVER, WEB[0], blob],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    peers = []
    for name, up in (("host", None), ("relay", "slirp4netns"), ("slirp", "slirp4netns"), ("netns", "netns:" + fn.path)):
        st = os.path.join(tmp, "state-" + name)
        os.makedirs(st)
        peers.append(Peer(name, fn, st, up))
    relay = None
    keys = ("connect_us", "exchange_us", "bulk_mibs")
    res = {k: {p.name: [] for p in peers} for k in keys}
    try:
        assert srv.stdout.readline().strip() == "ready", "sendfile server did not start"
        for p in peers:
            p.py("print(1)")
        pins = glob.glob(os.path.join(tmp, "run-relay", "*", "net", "router"))
        assert len(pins) == 1, pins
        pin = pins[0]
        relay = subprocess.Popen(["nsenter", "--net=" + fn.host_path, a.relay_bin, pin, "0", "65534"],
                                 stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        ready = relay.stdout.readline().split()
        assert ready[:1] == ["ready"], "relay did not start"
        port = int(ready[1])
        # the policy before the redirect: redirected packets go to INPUT,
        # never through the forward chain where the router judges them, so
        # a filter chain before nat (-150) takes the same verdicts for a
        # new TCP connection: the hard never set, then the sandbox's own
        # chain (sbmap: rules, pins, never list, logged drops); its accept
        # ends this chain only, and nat's redirect follows
        judge = ("iifname", "pd*", "meta", "nfproto", "ipv4", "meta", "l4proto", "tcp", "ct", "state", "new",
                 "ip", "daddr", "!=", "10.201.0.0/16")
        nft(pin, "add", "chain", "inet", "paddock", "relayjudge", "{ type filter hook prerouting priority -150; }")
        nft(pin, "add", "rule", "inet", "paddock", "relayjudge", *judge, "ip", "daddr", ".", "meta", "l4proto",
            "@hard4", "counter", "drop")
        nft(pin, "add", "rule", "inet", "paddock", "relayjudge", *judge, "iifname", "vmap", "@sbmap")
        nft(pin, "add", "chain", "inet", "paddock", "relay", "{ type nat hook prerouting priority -90; }")
        nft(pin, "add", "rule", "inet", "paddock", "relay", "iifname", "pd*", "meta", "l4proto", "tcp",
            "ip", "daddr", "!=", "10.201.0.0/16", "redirect", "to", ":%d" % port)
        nft(pin, "insert", "rule", "inet", "paddock", "input", "iifname", "pd*", "tcp", "dport", str(port),
            "ct", "status", "dnat", "accept")
        closed = {p.name: p.py(CLOSED, WEB[0], "1").strip() for p in peers}
        # the never list and the host's own address, through each path
        never = {p.name: p.py(CLOSED, METADATA[0], "80").strip() for p in peers}
        own = {p.name: p.py(CLOSED, HOST_ADDR, "22").strip() for p in peers}
        for r in range(a.rounds):
            order = peers[r % len(peers):] + peers[:r % len(peers)]
            for p in order:
                res["connect_us"][p.name].append(float(p.py(ub.CONNECT, WEB[0], "8080", str(a.connects))))
                res["exchange_us"][p.name].append(float(p.py(EXCHANGE, WEB[0], str(ub.SENDFILE_PORT),
                                                             str(a.connects))))
                res["bulk_mibs"][p.name].append(float(p.py(ub.BULK, WEB[0], str(ub.SENDFILE_PORT),
                                                           str(a.bulk_mib << 20))))
            print("round %d/%d done" % (r + 1, a.rounds), file=sys.stderr)
    finally:
        if relay:
            relay.kill()
            relay.wait()
        for p in peers:
            p.gc()
        srv.kill()
        srv.wait()
        fn.stop()
        subprocess.run(["rm", "-rf", tmp])
    write_report(a, [p.name for p in peers], res, closed, never, own)



def write_report(a, names, res, closed, never, own, load=None):
    med = {k: {n: statistics.median(v) for n, v in d.items()} for k, d in res.items()}
    spread = {k: {n: (min(v), max(v)) for n, v in d.items()} for k, d in res.items()}
    if load is None:
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
    c, x, b = med["connect_us"], med["exchange_us"], med["bulk_mibs"]
    lines = ["# Socket-level TCP uplink, prototype (bench/uplink_relay_proto.py)", "",
             "Machine: %s, %d CPUs, load average at the end %s (other engineers building and testing); "
             "one run, %d rounds alternated, medians of the rounds' medians; a stand-in host and a fake "
             "internet in network namespaces (no traffic leaves)." % (
                 os.uname().release, os.cpu_count(), " ".join(load), a.rounds), "",
             "| path | connect µs | vs host | exchange µs | vs host | bulk MiB/s | vs host |",
             "|---|---|---|---|---|---|---|"]
    for n in names:
        lines.append("| %s | %.0f | %.2fx | %.0f | %.2fx | %.0f | %.2fx |" % (
            n, c[n], c[n] / c["host"], x[n], x[n] / x["host"], b[n], b[n] / b["host"]))
    lines += ["", "A closed port (%s:1) seen from each path: " % WEB[0] +
              "; ".join("%s: %s" % (n, v) for n, v in closed.items()) + ".",
              "", "The metadata address %s:80 (never list; the stand-in host reaches it): " % METADATA[0] +
              "; ".join("%s: %s" % (n, v) for n, v in never.items()) + ".",
              "", "The stand-in host's own address %s:22 (hard never set): " % HOST_ADDR +
              "; ".join("%s: %s" % (n, v) for n, v in own.items()) + "."]
    lines += ["", "Paired ratios to host, round by round (the same round's host figure; bulk: higher is "
              "better, latencies: lower is better):", "",
              "| metric | path | per round | median |", "|---|---|---|---|"]
    for k in ("connect_us", "exchange_us", "bulk_mibs"):
        for n in names[1:]:
            rs = [v / h for v, h in zip(res[k][n], res[k]["host"])]
            lines.append("| %s | %s | %s | %.2fx |" % (k, n, " ".join("%.2f" % r for r in rs),
                                                      statistics.median(rs)))
    lines += ["", "Spread of the rounds' medians (min-max): " + "; ".join(
        "%s %s" % (k, ", ".join("%s %.0f-%.0f" % (n, lo, hi) for n, (lo, hi) in d.items()))
        for k, d in spread.items()), "",
        "host = the stand-in host's own sockets. relay = a sandbox with `--net open` whose TCP the router",
        "redirects (by hand, nft) to bench/proto/tcp_relay_proto.c (listener in the router netns, upstream",
        "socket in the host's netns as uid 65534, splice(2) both ways). slirp = the default uplink today.",
        "netns = a sandbox behind a plain veth into the fake internet (no user-mode process), for scale.",
        "connect: %d connect+close per round (through the relay it ends at the router's listener, before"
        % a.connects,
        "the upstream connect); exchange: connect, one line out, a 1-byte answer read to the close (includes",
        "the upstream connect on every path); bulk: %d MiB from a sendfile(2) server." % a.bulk_mib,
        "Targets (issue 15): bulk >= 0.5x host, connect <= 2x host.", ""]
    text = "\n".join(lines)
    print(text)
    raw = {"res": res, "closed": closed, "never": never, "own": own, "load": load}
    print(json.dumps(raw))
    text += "\nRaw figures (`--from-json` rewrites this report from them):\n\n```json\n%s\n```\n" % json.dumps(raw)
    with open(a.report, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
