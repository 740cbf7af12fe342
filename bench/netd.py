#!/usr/bin/python3
"""paddock-netd benchmark (issue 6, the names side): what DNS through
paddock's resolver and the strict Host/SNI proxy cost.

    sudo /usr/bin/python3 bench/netd.py [--queries N] [--requests N] [--bulk-mib N]

Builds the tests' fake internet (tests/network/_fakenet.py; nothing leaves
the machine) and, in one run:

  dns       median latency of one A query: from a "direct" netns (a plain
            veth to the fake internet) to the authoritative server, vs from
            a sandbox to paddock-netd for allowed names asked once (checked,
            forwarded), an allowed name asked again (from the sandbox's
            cache, filtered, pinned in nft) and a denied name (NXDOMAIN
            locally)
  request   median latency of one HTTP GET (connect, request, response) to
            the same server: direct; --net open (kernel forwarding, no
            proxy); --net policy with a domain rule on port 80 (strict mode:
            nft redirects to netd's proxy, which reads the Host, checks it,
            connects and splices); the same rule's pinned address on port
            8080 (kernel only)
  bulk      download throughput of N MiB over the same four paths

Prints medians and ratios and writes bench/reports/netd.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "network"))
sys.path.insert(0, os.path.join(REPO, "bench"))
from _fakenet import DNS, WEB, FakeNet  # noqa: E402
from network import PADDOCK, Direct, env, run  # noqa: E402  (bench/network.py's helpers)

CLIENT = r"""
import json, socket, statistics, struct, sys, time
mode, n = sys.argv[1], int(sys.argv[2])
args = sys.argv[3:]
def ns():
    return [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
def query(server, name):
    m = struct.pack("!HHHHHH", 7, 0x100, 1, 0, 0, 0)
    for l in name.split("."):
        m += bytes([len(l)]) + l.encode()
    m += b"\0\0\1\0\1"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(m, (server, 53))
    return s.recv(512)
def get(addr, port, host, path):
    s = socket.create_connection((addr, port), timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
    got = 0
    while True:
        d = s.recv(262144)
        if not d:
            break
        got += len(d)
    s.close()
    return got
t = []
if mode == "dns":
    server = args[0] if args[0] != "NS" else ns()
    query(server, args[1].replace("{i}", "warm"))
    for i in range(n):
        name = args[1].replace("{i}", "q%d" % i)
        a = time.perf_counter()
        query(server, name)
        t.append(time.perf_counter() - a)
    print(statistics.median(t) * 1e6)
elif mode == "get":
    addr, port, host = args[0], int(args[1]), args[2]
    if addr == "RESOLVE":
        addr = socket.gethostbyname(host)
    for i in range(n):
        a = time.perf_counter()
        assert get(addr, port, host, "/") > 0
        t.append(time.perf_counter() - a)
    print(statistics.median(t) * 1e6)
elif mode == "bulk":
    addr, port, host = args[0], int(args[1]), args[2]
    if addr == "RESOLVE":
        addr = socket.gethostbyname(host)
    a = time.perf_counter()
    got = get(addr, port, host, "/bytes/%d" % n)
    assert got >= n, got
    print(n / (time.perf_counter() - a) / 2**20)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--bulk-mib", type=int, default=64)
    ap.add_argument("--report", default=os.path.join(REPO, "bench", "reports", "netd.md"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pd-bench-netd-")
    state = os.path.join(tmp, "state")
    os.makedirs(state)
    fn = FakeNet(tmp).start()
    direct = Direct(fn).start()
    host = "web.example.test"
    pol = ["--net", "policy", "--allow", host + ":80/tcp", "--allow", host + ":8080/tcp",
           "--allow", "*.nx.example.test"]
    opn = ["--net", "open"]
    res = {"dns_us": {}, "request_us": {}, "bulk_mibs": {}}

    def sb(net, *args):
        return float(run(state, fn, net, "python3", "-c", CLIENT, *args)[1].strip().splitlines()[-1])

    def med3(f):
        return statistics.median(f() for _ in range(3))
    try:
        run(state, fn, opn, "/bin/true")           # make the router (warm-up)
        q, r, b = str(a.queries), str(a.requests), str(a.bulk_mib << 20)
        d = res["dns_us"]
        d["direct"] = med3(lambda: float(direct.py(CLIENT, "dns", q, DNS, host)))
        d["netd-forwarded"] = med3(lambda: sb(pol, "dns", q, "NS", "{i}.nx.example.test"))
        d["netd-cached"] = med3(lambda: sb(pol, "dns", q, "NS", host))
        d["netd-denied"] = med3(lambda: sb(pol, "dns", q, "NS", "other.example.test"))
        t = res["request_us"]
        t["direct"] = med3(lambda: float(direct.py(CLIENT, "get", r, WEB[0], "80", host)))
        t["open"] = med3(lambda: sb(opn, "get", r, "RESOLVE", "80", host))
        t["strict-proxy"] = med3(lambda: sb(pol, "get", r, "RESOLVE", "80", host))
        t["pinned"] = med3(lambda: sb(pol, "get", r, "RESOLVE", "8080", host))
        k = res["bulk_mibs"]
        k["direct"] = med3(lambda: float(direct.py(CLIENT, "bulk", b, WEB[0], "80", host)))
        k["open"] = med3(lambda: sb(opn, "bulk", b, "RESOLVE", "80", host))
        k["strict-proxy"] = med3(lambda: sb(pol, "bulk", b, "RESOLVE", "80", host))
        k["pinned"] = med3(lambda: sb(pol, "bulk", b, "RESOLVE", "8080", host))
    finally:
        subprocess.run([PADDOCK, "gc", "--state-dir", state], capture_output=True, env=env())
        direct.stop()
        fn.stop()
    lines = ["# paddock-netd: DNS and strict-proxy cost", "",
             "One run, same machine, peers side by side (%d queries, %d requests, %d MiB; "
             "median of 3 sandboxes each)." % (a.queries, a.requests, a.bulk_mib), "",
             "## DNS query latency", "", "| path | median µs | vs direct |", "|---|---|---|"]
    for key in ("direct", "netd-forwarded", "netd-cached", "netd-denied"):
        lines.append("| %s | %.1f | %.2fx |" % (key, d[key], d[key] / d["direct"]))
    lines += ["", "## HTTP request latency (connect, GET, response, close)", "",
              "| path | median µs | vs direct | vs open |", "|---|---|---|---|"]
    for key in ("direct", "open", "strict-proxy", "pinned"):
        lines.append("| %s | %.1f | %.2fx | %.2fx |" % (key, t[key], t[key] / t["direct"], t[key] / t["open"]))
    lines += ["", "## Bulk download", "", "| path | MiB/s | vs direct | vs open |", "|---|---|---|---|"]
    for key in ("direct", "open", "strict-proxy", "pinned"):
        lines.append("| %s | %.0f | %.2fx | %.2fx |" % (key, k[key], k[key] / k["direct"], k[key] / k["open"]))
    lines += ["", "direct = a netns with a plain veth to the fake internet (no paddock).",
              "netd-allowed: paddock-netd checks the name, forwards it, filters the answer and pins "
              "the address in nft (one netlink batch) before answering; netd-denied: NXDOMAIN "
              "without going upstream.",
              "strict-proxy: port 80 under a domain rule; nft redirects to paddock-netd, which reads "
              "the Host, checks it against the pins, connects and relays with splice(2). "
              "pinned: port 8080 of the same rule, kernel forwarding only.", ""]
    text = "\n".join(lines)
    print(text)
    print(json.dumps(res))
    os.makedirs(os.path.dirname(a.report), exist_ok=True)
    with open(a.report, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
