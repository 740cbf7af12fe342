#!/usr/bin/python3
"""The cost of a network for a recipe's RUN steps (docs/templates.md "Network
of RUN steps"), measured against the same build without one in the same run.

Two peers, each a `paddock template build` of a one-RUN recipe on a busybox
image template (pulled once from an OCI layout; no registry), the RUN
changed every build (a nonce) so that no step comes from the cache:

  - none: the default (the RUN sandbox has loopback only);
  - open: `--net open`: the RUN sandbox gets a veth to the state dir's router
    (made by the first build: not timed, a warm-up build makes it), nftables
    rules and paddock-netd, as any sandbox with a network.

The router's uplink is a network namespace this script makes
(tests/network/_fakenet.py's fake internet: nothing leaves the machine).
Rounds alternate the order of the peers so that noise on a shared machine
hits each alike; the report gives medians, the median of the per-round
ratios and its spread.

    sudo /usr/bin/python3 bench/template-run-net.py [--rounds N]

Writes bench/reports/template-run-net.md. Standard library only.
"""
import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "templates"))
sys.path.insert(0, os.path.join(ROOT, "tests", "network"))
import _oci  # noqa: E402
from _fakenet import FakeNet  # noqa: E402

REPORT = os.path.join(ROOT, "bench", "reports", "template-run-net.md")
PADDOCK = os.environ.get("PADDOCK_BIN", os.path.join(ROOT, "build", "src", "paddock"))


def build(state, ctx, nonce, net_args):
    with open(os.path.join(ctx, "Dockerfile"), "w") as f:
        f.write("FROM bb\nRUN echo %s > /nonce\n" % nonce)
    t0 = time.monotonic()
    r = subprocess.run([PADDOCK, "template", "build", "--state-dir", state, "t", ctx] + net_args,
                       capture_output=True, text=True, timeout=300)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit("build failed: %s" % r.stderr[-2000:])
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--report", default=REPORT)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    work = tempfile.mkdtemp(prefix="pd-bench-runnet-", dir="/tmp")
    state = os.path.join(work, "state")
    ctx = os.path.join(work, "ctx")
    os.makedirs(ctx)
    fn = FakeNet(work).start()
    try:
        lay = os.path.join(work, "bb")
        _oci.write_layout(lay, [_oci.busybox_layer().bytes()], config={"Env": ["PATH=/bin"]})
        r = subprocess.run([PADDOCK, "template", "pull", "--state-dir", state, "bb", "oci:%s:latest" % lay],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            sys.exit("pull failed: " + r.stderr)
        peers = {"none": [], "open": ["--net", "open"] + fn.args()}
        # warm-up: the router, the image's first use, page cache
        for p in ("open", "none"):
            build(state, ctx, "warm-" + p, peers[p])
        times = {p: [] for p in peers}
        ratios = []
        load0 = os.getloadavg()
        for i in range(a.rounds):
            order = ["none", "open"] if i % 2 == 0 else ["open", "none"]
            got = {}
            for p in order:
                got[p] = build(state, ctx, "%s-%d-%d" % (p, i, time.time_ns()), peers[p])
                times[p].append(got[p])
            ratios.append(got["open"] / got["none"])
            print("round %d: none %.3f s, open %.3f s (%.2fx)" % (i + 1, got["none"], got["open"], ratios[-1]),
                  flush=True)
        load1 = os.getloadavg()
    finally:
        subprocess.run([PADDOCK, "gc", "--state-dir", state], capture_output=True, timeout=300)
        fn.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {p: statistics.median(v) for p, v in times.items()}
    rs = sorted(ratios)
    lines = [
        "# A network for a recipe's RUN steps: `template build --net open` vs none",
        "",
        "`bench/template-run-net.py`, %s, %s, %d rounds (peers alternated), load average %.1f at the start, "
        "%.1f at the end (2 cores shared with other engineers' builds and tests: only the ratio within a "
        "round means much)." % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), platform.node(),
                                a.rounds, load0[0], load1[0]),
        "",
        "Each build: a one-RUN recipe (`RUN echo NONCE > /nonce`, a new nonce each time: no cache hit) on a "
        "busybox image template; wall time of `paddock template build`. `open`: the RUN sandbox gets a veth to "
        "the state dir's router (already made by a warm-up build), nftables rules and paddock-netd; the router's "
        "uplink is a test network namespace.",
        "",
        "| peer | median | min | max |",
        "|---|---|---|---|",
    ]
    for p in ("none", "open"):
        lines.append("| %s | %.3f s | %.3f s | %.3f s |" % (p, med[p], min(times[p]), max(times[p])))
    lines += [
        "",
        "open / none, per round: median **%.2fx** (min %.2fx, max %.2fx); difference of medians %+.0f ms "
        "per RUN step." % (statistics.median(rs), rs[0], rs[-1], (med["open"] - med["none"]) * 1000),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    with open(a.report, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
