#!/usr/bin/python3
"""The gvisor tier's checkpoints (issue 17): pause to disk, snapshot and fork
through `runsc checkpoint`/`restore`, each against its peer in the same run.

    PADDOCK_BIN=build/src/paddock PADDOCK_AGENT=build/src/agent/paddock-agent \\
        sudo -E /usr/bin/python3 bench/gvisor_ckpt.py [ROUNDS]     # default 5

One `paddock serve` (tests/pdtest), one gvisor sandbox with a workload that
holds memory (a 64 MiB file in its overlay, which lives in the Sentry's
memory, and a counting process). Each round, in an order that rotates:

| pair | what | peer |
|---|---|---|
| pause | pause to disk + resume (checkpoint, restore) | pause in memory + resume (runsc pause/resume) |
| start | create from a gvisor snapshot (restore) | create a fresh gvisor sandbox (runsc run) |
| copy  | fork 1 (checkpoint, restore the source and a copy) | snapshot (checkpoint, restore the source) |

Medians of each, ratios of medians. Also: the checkpoint image's size and
the sandbox's memory (its cgroup's) before and during a pause to disk. Writes
bench/reports/gvisor-ckpt.md. Standard library only."""
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from pdtest.server import Server  # noqa: E402

T = 300


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    srv = Server(None, "--pool", "0").start()
    res = {k: [] for k in ("pause_disk", "pause_mem", "from_snapshot", "fresh", "fork1", "snapshot")}
    extra = {}
    try:
        def req(m, p, b=None, expect=200):
            t = time.monotonic()
            st, _h, d = srv.request(m, "/api/v1/" + p, b, timeout=T)
            dt = (time.monotonic() - t) * 1000
            assert st == expect, (m, p, st, d[:500])
            return dt, (json.loads(d) if d.strip() else None)

        _, sb = req("POST", "sandboxes", {"isolation": "gvisor", "timeout": 3600}, 201)
        sid = sb["id"]
        srv.exec(sid, "head -c 64M /dev/urandom > /home/user/blob; sh -c 'i=0; while true; do i=$((i+1)); "
                      "echo $i > /home/user/c; sleep 0.1; done' >/dev/null 2>&1 &")
        req("POST", "sandboxes/%s/snapshots" % sid, {"name": "bench-gv"}, 201)
        img = os.path.join(srv.state, "templates", "bench-gv", "checkpoint.img")
        extra["image_mb"] = os.path.getsize(img) / 2**20
        _, m = req("GET", "sandboxes/%s/metrics" % sid)
        extra["mem_running_mb"] = m["memory_bytes"] / 2**20

        def pause_disk():
            a, _ = req("POST", "sandboxes/%s/pause" % sid, {"mode": "disk"})
            if "mem_paused_mb" not in extra:
                st, _h, d = srv.request("GET", "/api/v1/sandboxes/%s/metrics" % sid)
                extra["mem_paused_mb"] = json.loads(d)["memory_bytes"] / 2**20 if st == 200 else -1
            b, _ = req("POST", "sandboxes/%s/resume" % sid)
            res["pause_disk"].append(a + b)

        def pause_mem():
            a, _ = req("POST", "sandboxes/%s/pause" % sid, {"mode": "memory"})
            b, _ = req("POST", "sandboxes/%s/resume" % sid)
            res["pause_mem"].append(a + b)

        def from_snapshot():
            a, j = req("POST", "sandboxes", {"template": "bench-gv"}, 201)
            res["from_snapshot"].append(a)
            req("DELETE", "sandboxes/" + j["id"], expect=204)

        def fresh():
            a, j = req("POST", "sandboxes", {"isolation": "gvisor"}, 201)
            res["fresh"].append(a)
            req("DELETE", "sandboxes/" + j["id"], expect=204)

        def fork1():
            a, j = req("POST", "sandboxes/%s/fork" % sid, {"count": 1}, 201)
            res["fork1"].append(a)
            req("DELETE", "sandboxes/" + j["sandboxes"][0]["id"], expect=204)

        def snapshot():
            name = "bench-gv-%d" % len(res["snapshot"])
            a, _ = req("POST", "sandboxes/%s/snapshots" % sid, {"name": name}, 201)
            res["snapshot"].append(a)
            req("DELETE", "snapshots/" + name, expect=204)

        jobs = [pause_disk, pause_mem, from_snapshot, fresh, fork1, snapshot]
        for r in range(rounds):
            for j in jobs[r % len(jobs):] + jobs[:r % len(jobs)]:
                j()
        # the workload survived all of it
        c1 = int(srv.exec(sid, "cat /home/user/c")["stdout"])
        time.sleep(0.5)
        extra["counter_alive"] = int(srv.exec(sid, "cat /home/user/c")["stdout"]) > c1
        req("DELETE", "sandboxes/" + sid, expect=204)
        req("DELETE", "snapshots/bench-gv", expect=204)
    finally:
        srv.finish(check=False)
    med = {k: statistics.median(v) for k, v in res.items()}
    load = os.getloadavg()
    lines = ["# gvisor tier: checkpoint and restore (bench/gvisor_ckpt.py)", "",
             "%s; %d rounds, order rotated each round; runsc %s; 2 shared cores, load average at the end "
             "%.1f / %.1f / %.1f (other engineers building and testing at the same time: "
             "absolute times are inflated, compare within a pair)." % (
                 time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), rounds,
                 os.popen("runsc --version 2>/dev/null").read().split("\n")[0].split()[-1], *load), "",
             "Workload: a 64 MiB file in the sandbox's overlay (the Sentry's memory) and a process counting "
             "in the background; it still counted after every round: %s." % extra.get("counter_alive"), "",
             "| pair | measured | median ms | peer | median ms | ratio |", "|---|---|---|---|---|---|"]
    for pair, a, b, la, lb in (("pause", "pause_disk", "pause_mem", "pause to disk + resume",
                                "pause in memory + resume"),
                               ("start", "from_snapshot", "fresh", "create from a gvisor snapshot",
                                "create fresh (runsc run)"),
                               ("copy", "fork1", "snapshot", "fork 1", "snapshot")):
        lines.append("| %s | %s | %.0f | %s | %.0f | %.2fx |" % (pair, la, med[a], lb, med[b], med[a] / med[b]))
    lines += ["", "All samples (ms): " + "; ".join("%s %s" % (k, [round(x) for x in v]) for k, v in res.items()),
              "", "Checkpoint image: %.1f MiB. The sandbox's memory (its cgroup) running: %.1f MiB; paused to "
              "disk: %.1f MiB (the Sentry has exited)." % (extra.get("image_mb", 0), extra.get("mem_running_mb", 0),
                                                            extra.get("mem_paused_mb", 0))]
    out = os.path.join(HERE, "reports", "gvisor-ckpt.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
