#!/usr/bin/python3
"""The default uplink with its TCP relay vs the host and slirp4netns alone
(issue 15), one run, rounds alternated, paired ratios.

    sudo /usr/bin/python3 bench/uplink_relay.py [--rounds N] [--report FILE]

The arrangement of bench/uplink.py (a stand-in host and a fake internet in
network namespaces; nothing leaves the machine). Peers:

  host    the stand-in host's own sockets, no sandbox
  relay   a sandbox with --net open behind the default uplink: TCP through
          the socket-level relay (src/net/relay.h), the SYN held until the
          relay's own connect answered; UDP/DNS through slirp4netns
  slirp   a sandbox with --net open, --net-uplink slirp4netns (every
          protocol through slirp4netns: the default before the relay)

Metrics (from inside the peer):
  connect   connect+close (median of --connects); through the relay the
            sandbox's connect completes only when the relay's own connect
            has, so this includes the upstream connect
  exchange  connect, a line out, a 1-byte answer read to the close
  bulk      --bulk-mib MiB from a sendfile(2) server behind the uplink
  dns       a fresh name per query through paddock-netd (UDP: slirp4netns
            on both sandbox peers)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
import uplink as ub  # noqa: E402
from _fakenet import DNS, WEB, FakeNet  # noqa: E402
from uplink_relay_proto import EXCHANGE  # noqa: E402

KEYS = ("connect_us", "exchange_us", "bulk_mibs", "dns_us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--connects", type=int, default=200)
    ap.add_argument("--bulk-mib", type=int, default=256)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--report", default=os.path.join(REPO, "bench", "reports", "uplink-relay.md"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pd-bench-relay-")
    fn = FakeNet(tmp, uplink="relay").start()
    blob = os.path.join(tmp, "blob")
    srv = subprocess.Popen(["ip", "netns", "exec", fn.name, sys.executable, "-c", ub.SENDFILE_SERVER, WEB[0], blob],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    peers = []
    for name, up in (("host", None), ("relay", "relay"), ("slirp", "slirp4netns")):
        st = os.path.join(tmp, "state-" + name)
        os.makedirs(st)
        peers.append(ub.Peer(name, fn, st, up))
    res = {k: {p.name: [] for p in peers} for k in KEYS}
    loads = []
    try:
        assert srv.stdout.readline().strip() == "ready", "sendfile server did not start"
        for p in peers:
            p.py("print(1)")
        for r in range(a.rounds):
            order = peers[r % len(peers):] + peers[:r % len(peers)]
            for p in order:
                res["connect_us"][p.name].append(float(p.py(ub.CONNECT, WEB[0], "8080", str(a.connects))))
                res["exchange_us"][p.name].append(float(p.py(EXCHANGE, WEB[0], str(ub.SENDFILE_PORT),
                                                             str(a.connects))))
                res["bulk_mibs"][p.name].append(float(p.py(ub.BULK, WEB[0], str(ub.SENDFILE_PORT),
                                                           str(a.bulk_mib << 20))))
                res["dns_us"][p.name].append(float(p.py(ub.DNSQ, DNS if p.uplink is None else "-",
                                                        str(a.queries))))
            with open("/proc/loadavg") as f:
                loads.append(float(f.read().split()[0]))
            print("round %d/%d done (load %.1f)" % (r + 1, a.rounds, loads[-1]), file=sys.stderr)
    finally:
        for p in peers:
            p.gc()
        srv.kill()
        srv.wait()
        fn.stop()
        subprocess.run(["rm", "-rf", tmp])
    write_report(a, [p.name for p in peers], res, loads)


def write_report(a, names, res, loads):
    med = {k: {n: statistics.median(v) for n, v in d.items()} for k, d in res.items()}
    lines = ["# Default uplink with the TCP relay (bench/uplink_relay.py)", "",
             "Machine: %s, %d CPUs shared with other engineers' builds and tests (load average after each "
             "round: %s); one run, %d rounds alternated; a stand-in host and a fake internet in network "
             "namespaces (no traffic leaves)." % (os.uname().release, os.cpu_count(),
                                                  " ".join("%.1f" % l for l in loads), a.rounds), "",
             "Medians of the rounds' medians:", "",
             "| path | connect µs | exchange µs | bulk MiB/s | DNS µs |", "|---|---|---|---|---|"]
    for n in names:
        lines.append("| %s | %.0f | %.0f | %.0f | %.0f |" % (n, med["connect_us"][n], med["exchange_us"][n],
                                                            med["bulk_mibs"][n], med["dns_us"][n]))
    lines += ["", "Paired ratios to host, round by round (each round's own host figure; bulk: higher is "
              "better, the rest: lower is better), median in the last column:", "",
              "| metric | path | per round | median |", "|---|---|---|---|"]
    for k in KEYS:
        for n in names[1:]:
            rs = [v / h for v, h in zip(res[k][n], res[k]["host"])]
            lines.append("| %s | %s | %s | %.2fx |" % (k, n, " ".join("%.2f" % r for r in rs), statistics.median(rs)))
    lines += ["", "relay vs slirp in the same round (relay / slirp):", "", "| metric | per round | median |",
              "|---|---|---|"]
    for k in KEYS:
        rs = [v / s for v, s in zip(res[k]["relay"], res[k]["slirp"])]
        lines.append("| %s | %s | %.2fx |" % (k, " ".join("%.2f" % r for r in rs), statistics.median(rs)))
    lines += ["",
              "host = the stand-in host's own sockets. relay = a sandbox with `--net open` behind the default",
              "uplink (TCP through the relay, the SYN held in NFQUEUE until the relay's own connect answered,",
              "so connect includes the upstream connect; UDP and DNS through slirp4netns). slirp = `--net-uplink",
              "slirp4netns` (every protocol through slirp4netns). connect: %d connect+close per round;" % a.connects,
              "exchange: connect, a line out, a 1-byte answer read to the close; bulk: %d MiB from a sendfile(2)"
              % a.bulk_mib,
              "server; DNS: %d fresh names per round through paddock-netd." % a.queries,
              "Targets (issue 15): connect <= 2x host, bulk >= 0.5x host.", ""]
    text = "\n".join(lines)
    raw = {"res": res, "loads": loads}
    text += "\nRaw figures:\n\n```json\n%s\n```\n" % json.dumps(raw)
    print(text)
    os.makedirs(os.path.dirname(a.report), exist_ok=True)
    with open(a.report, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
