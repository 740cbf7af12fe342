#!/usr/bin/python3
"""What a Prometheus scrape costs (issue 20): GET /metrics, which reads
every live sandbox's cgroup, against GET /api/v1/health (the cheapest
route) on the same server, alternated request by request, at several
numbers of live sandboxes. Prints a table and writes the Markdown report
bench/reports/metrics.md.

    sudo /usr/bin/python3 bench/metrics.py [--rounds N] [--sizes 0,8,32]

Standard library only; the server is the tests' harness (tests/pdtest), on
127.0.0.1, its own state dir, finished (and gc'd) on exit, also on failure.
"""
import argparse
import datetime
import http.client
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
os.environ.setdefault("PADDOCK_BIN", os.path.join(REPO, "build/src/paddock"))
os.environ.setdefault("PADDOCK_AGENT", os.path.join(REPO, "build/src/agent/paddock-agent"))
from pdtest.server import Server  # noqa: E402


def timed(conn, path):
    t = time.perf_counter_ns()
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    dt = time.perf_counter_ns() - t
    assert r.status == 200, (path, r.status, body[:200])
    return dt / 1e6, len(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--sizes", default="0,8,32")
    ap.add_argument("--report", default=os.path.join(HERE, "reports", "metrics.md"))
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    srv = Server(None, "--pool", "0", "--max-per-key", "1000", prefix="pd-bench-metrics-")
    rows = []
    load = os.getloadavg()
    try:
        srv.start()
        ids = []
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        for n in sizes:
            while len(ids) < n:
                sid = srv.create({"memory_mb": 128})["id"]
                srv.exec(sid, "true")       # a workload that ran: its cgroup has figures
                ids.append(sid)
            for _ in range(5):              # warm-up, untimed
                timed(conn, "/metrics")
                timed(conn, "/api/v1/health")
            m, h, size = [], [], 0
            for i in range(a.rounds):       # alternated, the order flipped every round
                pair = ("/metrics", "/api/v1/health") if i % 2 == 0 else ("/api/v1/health", "/metrics")
                for p in pair:
                    dt, sz = timed(conn, p)
                    (m if p == "/metrics" else h).append(dt)
                    if p == "/metrics":
                        size = sz
            ratios = sorted(x / y for x, y in zip(m, h))
            rows.append({
                "n": n, "metrics_med": statistics.median(m), "health_med": statistics.median(h),
                "metrics_p90": statistics.quantiles(m, n=10)[-1], "health_p90": statistics.quantiles(h, n=10)[-1],
                "ratio_med": statistics.median(ratios), "ratio_q1": ratios[len(ratios) // 4],
                "ratio_q3": ratios[3 * len(ratios) // 4], "bytes": size,
                "spread": (statistics.quantiles(h, n=10)[-1] / statistics.median(h)),
            })
            r = rows[-1]
            print("%3d sandboxes: /metrics %.2f ms (p90 %.2f), /health %.2f ms (p90 %.2f), ratio %.1f "
                  "[IQR %.1f-%.1f], %d bytes" % (n, r["metrics_med"], r["metrics_p90"], r["health_med"],
                                                 r["health_p90"], r["ratio_med"], r["ratio_q1"], r["ratio_q3"],
                                                 r["bytes"]))
        conn.close()
        for sid in ids:
            srv.delete(sid)
    finally:
        srv.finish()
    load_after = os.getloadavg()
    with open(a.report, "w") as f:
        f.write("# GET /metrics: what a scrape costs\n\n")
        f.write("`bench/metrics.py --rounds %d --sizes %s`, %s UTC, %s, %d CPUs, load average %.1f before, "
                "%.1f after (the machine is shared: other builds and tests ran meanwhile).\n\n"
                % (a.rounds, a.sizes, datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), platform.release(),
                   os.cpu_count(), load[0], load_after[0]))
        f.write("One server (`--pool 0`), one keep-alive connection; each round asks `/metrics` and "
                "`/api/v1/health` once, the order flipped every round; the ratio is taken per round "
                "(`/metrics` time / health time), then its median and quartiles. Sandboxes: 128 MiB, "
                "container tier, each having run one command.\n\n")
        f.write("| live sandboxes | /metrics median (p90) ms | /health median (p90) ms | ratio median [IQR] | "
                "/metrics bytes | health p90/median |\n|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %d | %.2f (%.2f) | %.2f (%.2f) | %.1f [%.1f–%.1f] | %d | %.1f |\n"
                    % (r["n"], r["metrics_med"], r["metrics_p90"], r["health_med"], r["health_p90"], r["ratio_med"],
                       r["ratio_q1"], r["ratio_q3"], r["bytes"], r["spread"]))
        f.write("\nThe last column is the noise of the cheapest route (p90 over median): the larger, "
                "the noisier the machine was while that row ran. What grows with the sandboxes is "
                "the per-sandbox part of the scrape (a cgroup read per sandbox, and the network's "
                "drop counters for those with a network, none here).\n")
    print("report:", a.report)


if __name__ == "__main__":
    main()
