#!/usr/bin/python3
"""A gvisor sandbox paused to disk: the memory its cgroup still holds, and
what dropping the checkpoint image's page cache costs (issue 17,
src/tiers/gvisor_ckpt.c: drop_image_cache), before/after in the same run.

    sudo -E /usr/bin/python3 bench/gvisor_pause_cache.py --before OLD/build/src/paddock [ROUNDS]

Two `paddock serve` (tests/pdtest), this build's and the --before one's (an
older checkout built beside; the same agent), each on its own state dir.
Each round, in an order that alternates, on each server: a gvisor sandbox
(--memory 512 MiB) whose process holds 96 MiB of random bytes; its memory
cgroup's usage running; pause to disk (timed); the usage paused (the Sentry
gone); resume (timed: the image is read back, from disk once its cache is
dropped); the process still there; delete. Medians, ratios of medians, all
samples. Writes bench/reports/gvisor-pause-cache.md. Standard library only."""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import pdtest.server as pds  # noqa: E402
from pdtest import pid_alive, wait_until  # noqa: E402

T = 300
MIB = 1 << 20


def memory_cgroup(pid):
    for line in open("/proc/%d/cgroup" % pid):
        _n, ctrl, path = line.strip().split(":", 2)
        if "memory" in ctrl.split(","):
            return "/sys/fs/cgroup/memory" + path
    raise SystemExit("no v1 memory cgroup for the Sentry")


def usage(cg):
    with open(os.path.join(cg, "memory.usage_in_bytes")) as f:
        return int(f.read())


def one(srv):
    def req(m, p, b=None, expect=200):
        t = time.monotonic()
        st, _h, d = srv.request(m, "/api/v1/" + p, b, timeout=T)
        dt = (time.monotonic() - t) * 1000
        assert st == expect, (m, p, st, d[:500])
        return dt, (json.loads(d) if d.strip() else None)

    _, sb = req("POST", "sandboxes", {"isolation": "gvisor", "memory_mb": 512}, 201)
    sid = sb["id"]
    try:
        req("POST", "sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c", "python3 -c 'import time, os; "
                                                       "b = os.urandom(96 << 20); open(\"/tmp/ready\", \"w\").close(); "
                                                       "time.sleep(3600)' >/dev/null 2>&1 &"]})
        assert wait_until(lambda: req("POST", "sandboxes/%s/exec" % sid,
                                      {"cmd": ["test", "-e", "/tmp/ready"]})[1]["exit_code"] == 0, 120)
        sentry = srv.agent_pid(sid)
        cg = memory_cgroup(sentry)
        running = usage(cg)
        pause_ms, _ = req("POST", "sandboxes/%s/pause" % sid, {"mode": "disk"})
        assert wait_until(lambda: not pid_alive(sentry), 30)
        paused = usage(cg)
        image = os.path.getsize(os.path.join(srv.state, "gvisor", "paused", sid, "checkpoint.img"))
        resume_ms, _ = req("POST", "sandboxes/%s/resume" % sid)
        alive = req("POST", "sandboxes/%s/exec" % sid, {"cmd": ["pgrep", "-f", "os.urandom"]})[1]["exit_code"] == 0
        return {"running": running / MIB, "paused": paused / MIB, "image": image / MIB, "pause_ms": pause_ms,
                "resume_ms": resume_ms, "alive": alive}
    finally:
        srv.request("DELETE", "/api/v1/sandboxes/" + sid, timeout=T)


def start(binary):
    pds.PADDOCK_BIN = binary
    return pds.Server(None, "--pool", "0").start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="the older build's paddock binary")
    ap.add_argument("rounds", nargs="?", type=int, default=5)
    ap.add_argument("--report", default=os.path.join(HERE, "reports", "gvisor-pause-cache.md"))
    a = ap.parse_args()
    builds = {"after": os.path.abspath(os.environ.get("PADDOCK_BIN") or os.path.join(HERE, "..", "build/src/paddock")),
              "before": os.path.abspath(a.before)}
    srvs = {}
    res = {k: [] for k in builds}
    try:
        for k, b in builds.items():
            srvs[k] = start(b)
        for i in range(a.rounds):
            for k in (("after", "before") if i % 2 else ("before", "after")):
                r = one(srvs[k])
                res[k].append(r)
                print(k, i, r, flush=True)
    finally:
        for s in srvs.values():
            s.finish()
    med = {k: {f: statistics.median(x[f] for x in v) for f in ("running", "paused", "image", "pause_ms", "resume_ms")}
           for k, v in res.items()}
    load = os.getloadavg()
    out = ["# gvisor tier: a paused-to-disk sandbox's memory (bench/gvisor_pause_cache.py)", "",
           "%s; %d rounds, before/after alternated; runsc %s; 2 shared cores, load average at the end %.1f / %.1f / %.1f "
           "(other engineers building and testing at the same time: times are inflated and noisy, compare within "
           "a row)." % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), a.rounds, runsc_version(), *load), "",
           "before: `%s` (no cache drop); after: `%s` (fdatasync + POSIX_FADV_DONTNEED on the image after the "
           "checkpoint). Workload: a process holding 96 MiB of random bytes; it was still there after every resume: "
           "%s." % (builds["before"], builds["after"], all(x["alive"] for v in res.values() for x in v)), "",
           "| median | before | after | after / before |", "|---|---|---|---|"]
    for f, unit in (("running", "MiB"), ("image", "MiB"), ("paused", "MiB"), ("pause_ms", "ms"), ("resume_ms", "ms")):
        b, af = med["before"][f], med["after"][f]
        out.append("| %s (%s) | %.1f | %.1f | %s |" % (f.replace("_ms", ""), unit, b, af,
                                                         "%.2fx" % (af / b) if b else "-"))
    out += ["", "`running`/`paused`: the sandbox's memory cgroup (`memory.usage_in_bytes`, v1) with the workload "
            "running and after the pause to disk with the Sentry gone; `pause`/`resume`: the API call's wall time.",
            "", "All samples:", ""]
    for k, v in res.items():
        for f in ("paused", "pause_ms", "resume_ms"):
            out.append("- %s %s: %s" % (k, f, ", ".join("%.1f" % x[f] for x in v)))
    os.makedirs(os.path.dirname(a.report), exist_ok=True)
    with open(a.report, "w") as fh:
        fh.write("\n".join(out) + "\n")
    print("\n".join(out))


def runsc_version():
    import subprocess
    try:
        return subprocess.run(["runsc", "--version"], capture_output=True, text=True,
                              timeout=30).stdout.split("\n")[0].replace("runsc version ", "")
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
