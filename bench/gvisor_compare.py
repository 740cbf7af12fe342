"""Start and exec figures for container, gvisor and microvm, in one run
(issue 17). Start: `paddock run --isolation T -- echo x` wall time to exit
(create, first output, teardown), p50 of N after one warm-up. Exec: one
server, one sandbox per tier, p50 of N `POST /exec {"cmd": "true"}`.
Writes bench/reports/gvisor-compare.txt.

  PADDOCK_BIN=... PADDOCK_AGENT=... /usr/bin/python3 bench/gvisor_compare.py [N]"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from pdtest.server import Server  # noqa: E402

TIERS = ["container", "gvisor", "microvm"]
N = int(sys.argv[1]) if len(sys.argv) > 1 else 5
BIN = os.environ.get("PADDOCK_BIN", "build/src/paddock")


def p50(xs):
    return statistics.median(xs) * 1000


def main():
    state = tempfile.mkdtemp(prefix="pd-gv-bench-")
    rows = {}
    try:
        for t in TIERS:
            run = [BIN, "run", "--state-dir", state, "--isolation", t, "--", "echo", "x"]
            subprocess.run(run, check=True, capture_output=True, timeout=600)       # warm-up (templates)
            xs = []
            for _ in range(N):
                t0 = time.monotonic()
                r = subprocess.run(run, capture_output=True, timeout=600)
                xs.append(time.monotonic() - t0)
                assert r.returncode == 0 and r.stdout == b"x\n", r
            rows[t] = {"start_ms": p50(xs)}
        srv = Server(os.path.join(state, "srv"), "--pool", "0").start()
        try:
            for t in TIERS:
                t0 = time.monotonic()
                st, _h, data = srv.request("POST", "/api/v1/sandboxes", {"isolation": t}, timeout=600)
                rows[t]["create_ms"] = (time.monotonic() - t0) * 1000
                assert st == 201, data
                sid = json.loads(data)["id"]
                srv.request("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": "true"}, timeout=600)
                xs = []
                for _ in range(N * 2):
                    t0 = time.monotonic()
                    st, _h, data = srv.request("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": "true"},
                                               timeout=600)
                    xs.append(time.monotonic() - t0)
                    assert st == 200, data
                rows[t]["exec_ms"] = p50(xs)
                m = json.loads(srv.request("GET", "/api/v1/sandboxes/%s/metrics" % sid)[2])
                rows[t]["idle_mem_mb"] = m.get("memory_bytes", 0) / 1e6
                srv.delete(sid)
        finally:
            srv.finish()
    finally:
        subprocess.run([BIN, "gc", "--state-dir", state], capture_output=True, timeout=300)
    out = ["tier        run p50 ms  create ms  exec p50 ms  mem after 1 exec MB   (n=%d, %s)"
           % (N, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))]
    for t in TIERS:
        r = rows[t]
        out.append("%-10s  %10.0f  %9.0f  %11.1f  %8.1f" % (t, r["start_ms"], r["create_ms"], r["exec_ms"],
                                                            r["idle_mem_mb"]))
    g, c = rows["gvisor"], rows["container"]
    out.append("gvisor/container: run %.1fx, exec %.1fx" % (g["start_ms"] / c["start_ms"], g["exec_ms"] / c["exec_ms"]))
    text = "\n".join(out) + "\n"
    print(text, end="")
    with open(os.path.join(os.path.dirname(__file__), "reports", "gvisor-compare.txt"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
