#!/usr/bin/python3
"""Two paddock builds side by side on the hot path (issue 13: a refactor must
not slow it). In one run, with the two builds alternated pair by pair:

  1. start to exit of `paddock run --isolation TIER -- /bin/true` (container
     and process tiers by default), each build on its own state directory;
  2. the server's exec round trip: one `paddock serve --pool 0` per build,
     one running sandbox in each, `POST /api/v1/sandboxes/{id}/exec
     {"cmd": ["/bin/true"]}` over a keep-alive connection (as bench/server.py
     part b).

    sudo /usr/bin/python3 bench/arch_before_after.py \\
        --before /path/to/old/build/src/paddock --after build/src/paddock \\
        [--rounds 150] [--exec-rounds 1000] [--tiers container,process]

Each build runs with the agent and helpers beside it (build/src/agent/...,
found from the binary's own path; every PADDOCK_* variable of the caller is
dropped). Round i runs before-then-after when i is even and after-then-before
when odd, so drift and order effects fall on both alike. Reported per figure:
min, p10, median, p90, max of each build; the ratio of the medians
(after / before) and the median of the per-pair ratios with a 95% bootstrap
interval. Writes bench/reports/arch-before-after.md (--report). Standard
library only; helpers from bench/server.py. Cleanup on exit, also on
failure: servers get SIGTERM, `paddock gc --state-dir` runs on every state
directory with the build that made it, no paddock-<instance> cgroup of ours
may be left, the temp directory is removed.
"""

import argparse
import glob
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server as sb  # noqa: E402  (bench/server.py)

ROOT = sb.ROOT
DEFAULT_REPORT = os.path.join(ROOT, "bench", "reports", "arch-before-after.md")


class Build:
    """One paddock build: its CLI, the agent beside it, a state dir of its own."""

    def __init__(self, name, paddock, work):
        self.name = name
        self.paddock = os.path.abspath(paddock)
        self.agent = os.path.join(os.path.dirname(self.paddock), "agent", "paddock-agent")
        for p in (self.paddock, self.agent):
            if not os.access(p, os.X_OK):
                raise SystemExit("%s: %s is not an executable (build it first)" % (name, p))
        self.env = dict(os.environ, PADDOCK_AGENT=self.agent)
        self.state = os.path.join(work, name + "-state")
        self.checkout = os.path.dirname(os.path.dirname(os.path.dirname(self.paddock)))
        self.commit = git_commit(self.checkout)

    def run_argv(self, tier):
        return [self.paddock, "run", "--state-dir", self.state, "--isolation", tier, "--", "/bin/true"]

    def run_true(self, tier, errf):
        """-> (wall ms from spawn to reaped exit, CPU ms: user + system of
        paddock and every descendant it reaped, from wait4). Raises on a
        non-zero exit."""
        argv = self.run_argv(tier)
        errf.seek(0)
        errf.truncate()
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=errf)
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.perf_counter_ns()
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            errf.seek(0)
            raise RuntimeError("%s: %s exited %d: %s" % (self.name, shlex.join(argv), p.returncode,
                                                          errf.read().decode(errors="replace")[-300:]))
        return (t1 - t0) / 1e6, (ru.ru_utime + ru.ru_stime) * 1e3

    def gc(self):
        if not os.path.isdir(self.state):
            return []
        r = subprocess.run([self.paddock, "gc", "--state-dir", self.state], env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        problems = []
        if r.returncode != 0:
            problems.append("%s: paddock gc exit %d: %s" % (self.name, r.returncode, r.stdout.strip()))
        stray = sorted(sb.paddock_cgroup_dirs(sb.paddock_instance(self.state)))
        if stray:
            problems.append("%s: cgroups left: %s" % (self.name, ", ".join(stray)))
        return problems


def git_commit(d):
    try:
        r = subprocess.run(["git", "-C", d, "log", "-1", "--format=%h %s"], capture_output=True, text=True,
                           timeout=10)
        return r.stdout.strip()[:100] if r.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


# --------------------------------------------------------------------------
# statistics

def summary(xs):
    return {"n": len(xs), "min": min(xs), "p10": sb.pct(xs, 10), "median": statistics.median(xs),
            "p90": sb.pct(xs, 90), "max": max(xs)}


def paired(before, after, seed=13):
    """after/before: ratio of medians, median of per-pair ratios and its 95%
    bootstrap interval (2000 resamples of the pairs)."""
    ratios = [a / b for b, a in zip(before, after)]
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    return {"of_medians": statistics.median(after) / statistics.median(before),
            "paired": statistics.median(ratios), "lo": meds[49], "hi": meds[1949]}


# --------------------------------------------------------------------------
# 1. paddock run -- /bin/true

def bench_start(builds, tiers, rounds, warmup, work):
    """-> {tier: ({build: [wall ms]}, {build: [cpu ms]})}"""
    res = {}
    with open(os.path.join(work, "stderr"), "w+b") as errf:
        for tier in tiers:
            for b in builds:                  # the first run builds the base template
                for _ in range(warmup):
                    b.run_true(tier, errf)
            wall = {b.name: [] for b in builds}
            cpu = {b.name: [] for b in builds}
            print("start time, %s tier: %d pairs ..." % (tier, rounds), file=sys.stderr)
            for i in range(rounds):
                for b in (builds if i % 2 == 0 else builds[::-1]):
                    w, c = b.run_true(tier, errf)
                    wall[b.name].append(w)
                    cpu[b.name].append(c)
            res[tier] = (wall, cpu)
    return res


# --------------------------------------------------------------------------
# 2. exec round trip through the server

def proc_cpu_ms(pid):
    """user + system CPU of a whole process (all its threads, live or gone), ms;
    clock ticks, so 10 ms steps at 100 Hz."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e3 / os.sysconf("SC_CLK_TCK")


def sandbox_cpu_ms(state, sid):
    """CPU of a sandbox's cgroup (agent and workload), from cpuacct, ms; None
    where this host has no cpuacct hierarchy."""
    inst = sb.paddock_instance(state)
    for p in glob.glob("/sys/fs/cgroup/*/paddock-%s/%s/cpuacct.usage" % (inst, sid)):
        with open(p) as f:
            return int(f.read()) / 1e6
    return None


def cpu_now(servers, sids, states):
    out = []
    for s, sid, st in zip(servers, sids, states):
        sbx = sandbox_cpu_ms(st, sid)
        out.append((proc_cpu_ms(s.p.pid), sbx))
    return out

def bench_exec(builds, work, rounds, warmup):
    servers, clients, paths, sids = [], [], [], []
    out = {b.name: [] for b in builds}
    cpu = {}
    try:
        for b in builds:
            s = sb.Server(b.paddock, b.agent, work, b.name + "-serve", ["--pool", "0"])
            servers.append(s)
            s.start()       # environment: ours (no PADDOCK_*, main) + the build's agent
            c = s.client()
            st, body = c.call("POST", "/api/v1/sandboxes", obj={})
            if st != 201:
                raise RuntimeError("%s: create: %s" % (b.name, sb.http_error(st, body)))
            clients.append(c)
            sids.append(body["id"])
            paths.append("/api/v1/sandboxes/%s/exec" % body["id"])
        req = {"cmd": ["/bin/true"]}

        def one(k):
            t0 = time.perf_counter_ns()
            st, r = clients[k].call("POST", paths[k], obj=req)
            t1 = time.perf_counter_ns()
            if st != 200 or not isinstance(r, dict) or r.get("exit_code") != 0:
                raise RuntimeError("%s: exec: %s" % (builds[k].name, sb.http_error(st, r)))
            return (t1 - t0) / 1e6

        for _ in range(warmup):
            for k in range(len(builds)):
                one(k)
        print("exec round trip: %d pairs ..." % rounds, file=sys.stderr)
        states = [s.state for s in servers]
        c0 = cpu_now(servers, sids, states)
        for i in range(rounds):
            for k in (range(len(builds)) if i % 2 == 0 else reversed(range(len(builds)))):
                out[builds[k].name].append(one(k))
        c1 = cpu_now(servers, sids, states)
        for k, b in enumerate(builds):
            srv = (c1[k][0] - c0[k][0]) / rounds
            sbx = (c1[k][1] - c0[k][1]) / rounds if c0[k][1] is not None and c1[k][1] is not None else None
            cpu[b.name] = (srv, sbx)
        for c, p in zip(clients, paths):
            c.call("DELETE", p[:-len("/exec")])
            c.close()
    finally:
        problems = []
        for s in servers:
            problems += s.stop()
    return out, cpu, problems


# --------------------------------------------------------------------------
# report

def rows_for(title, t, names):
    b, a = t[names[0]], t[names[1]]
    sbf, saf, pr = summary(b), summary(a), paired(b, a)
    lines = []
    for n, s in ((names[0], sbf), (names[1], saf)):
        lines.append("| %s | %s | %d | %.2f | %.2f | **%.2f** | %.2f | %.2f |"
                     % (title, n, s["n"], s["min"], s["p10"], s["median"], s["p90"], s["max"]))
    ratio = "| %s | **after / before** | | | | **%.3f×** (medians) | %.3f× paired [%.3f, %.3f] | |" % (
        title, pr["of_medians"], pr["paired"], pr["lo"], pr["hi"])
    return lines + [ratio], pr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the old build's paddock binary")
    ap.add_argument("--after", required=True, help="the new build's paddock binary")
    ap.add_argument("--rounds", type=int, default=150, help="start-time pairs per tier (default 150)")
    ap.add_argument("--exec-rounds", type=int, default=1000, help="exec round-trip pairs (default 1000)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs of each build first (default 5)")
    ap.add_argument("--tiers", default="container,process", help="tiers for part 1 (default container,process)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: start,exec")
    ap.add_argument("--report", default=DEFAULT_REPORT, help="Markdown report path")
    args = ap.parse_args()
    skip = set(s.strip() for s in args.skip.split(",") if s.strip())
    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()]

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    if os.geteuid() != 0:
        print("warning: not root; paddock needs root for these tiers", file=sys.stderr)

    # each build finds its helpers beside itself; nothing of ours overrides that
    for k in [k for k in os.environ if k.startswith("PADDOCK_")]:
        del os.environ[k]
    # the process tier's uid must reach its workspace: parents searchable
    work = tempfile.mkdtemp(prefix="paddock-bench-arch-")
    os.chmod(work, 0o711)
    builds = [Build("before", args.before, work), Build("after", args.after, work)]
    names = [b.name for b in builds]
    ctx = sb.machine_ctx(shlex.join(["/usr/bin/python3", os.path.relpath(os.path.abspath(__file__), ROOT)]
                                    + sys.argv[1:]))
    ctx["versions"] = [("paddock " + b.name, sb.version_of([b.paddock, "version"])) for b in builds]
    ctx["versions"].append(("python", sys.version.split()[0]))
    start, execs, exec_cpu, problems, failed = {}, None, {}, [], None
    try:
        if "start" not in skip:
            start = bench_start(builds, tiers, args.rounds, args.warmup, work)
        if "exec" not in skip:
            execs, exec_cpu, p = bench_exec(builds, work, args.exec_rounds, args.warmup * 10)
            problems += p
    except Exception as e:  # noqa: BLE001 - reported, then cleaned up
        failed = "%s: %s" % (type(e).__name__, e)
        print("error: " + failed, file=sys.stderr)
    finally:
        for b in builds:
            problems += b.gc()
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(work):
            problems.append("could not remove " + work)
    ctx["load_after"] = sb.loadavg()

    L = ["# Before / after the architecture refactor: the hot path", "",
         "Generated by `bench/arch_before_after.py` (see its docstring). Do not edit by hand.", ""]
    L += sb.machine_lines(ctx)
    L += ["## Builds", ""]
    for b in builds:
        L.append("- **%s**: `%s` (checkout at `%s`)" % (b.name, b.paddock, b.commit))
    L += ["",
          "Pairs alternate: round i runs before then after when i is even, after then before when odd. "
          "Wall: milliseconds as the client sees them. CPU (`paddock run` only): user + system time of the "
          "`paddock run` process and of every descendant it reaped (wait4's rusage), less sensitive to "
          "other load on the machine than wall time. The ratio is after / before: above 1 the "
          "new build is slower. \"paired\" is the median of the per-pair ratios, with its 95% bootstrap "
          "interval; on this shared 2-core machine it is the figure to trust over single medians.", "",
          "| figure | build | n | min | p10 | median | p90 | max |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    for tier in tiers:
        if tier in start:
            rows, pr = rows_for("`paddock run --isolation %s -- /bin/true`, wall" % tier, start[tier][0], names)
            L += rows
            verdicts.append(("run, %s tier, wall" % tier, pr))
            rows, pr = rows_for("`paddock run --isolation %s -- /bin/true`, CPU" % tier, start[tier][1], names)
            L += rows
            verdicts.append(("run, %s tier, CPU (user+sys)" % tier, pr))
    if execs and all(execs[n] for n in names):
        rows, pr = rows_for("`POST .../exec {\"cmd\":[\"/bin/true\"]}` (server, `--pool 0`)", execs, names)
        L += rows
        verdicts.append(("exec round trip", pr))
    L.append("")
    if exec_cpu:
        L += ["CPU per exec over the whole exec run (the server process's user+system from /proc, in clock "
              "ticks; the sandbox's cgroup from cpuacct.usage: agent and /bin/true):", "",
              "| build | server ms/exec | sandbox ms/exec |", "|---|---:|---:|"]
        for n in names:
            srv, sbx = exec_cpu[n]
            L.append("| %s | %.3f | %s |" % (n, srv, "%.3f" % sbx if sbx is not None else "n/a"))
        b, a = exec_cpu[names[0]], exec_cpu[names[1]]
        if b[0] > 0:
            L.append("| **after / before** | %.3f× | %s |" % (
                a[0] / b[0], "%.3f×" % (a[1] / b[1]) if a[1] is not None and b[1] else "n/a"))
        L.append("")
    for what, pr in verdicts:
        L.append("- %s: after/before %.3f× (medians), %.3f× paired, 95%% interval [%.3f, %.3f]."
                 % (what, pr["of_medians"], pr["paired"], pr["lo"], pr["hi"]))
    if failed:
        L += ["", "**The run failed:** " + failed]
    for m in problems:
        L.append("- cleanup: " + m)
    L.append("")
    text = "\n".join(L)
    sys.stdout.write(text)
    if args.report:
        sb.write_md(args.report, L)
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
