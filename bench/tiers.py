#!/usr/bin/env python3
"""Start time of each isolation tier for /bin/true, and the supervised tier's
overhead on a syscall-heavy and a CPU-bound job, all in the same run with the
peers alternated round-robin (this machine is shared and noisy).

    sudo /usr/bin/python3 bench/tiers.py [--rounds N] [--jobs M] [--old BUILD_DIR]

--old BUILD_DIR adds "supervised (old)": the same jobs run by another build's
paddock (BUILD_DIR/src/paddock, its own paddock-agent and paddock-supervisor
beside it), alternated with the others in every round, so a change to the
supervisor is measured against the code it replaces in the same run.

Writes bench/reports/tiers.md."""
import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PADDOCK = os.environ.get("PADDOCK_BIN") or os.path.join(REPO, "build/src/paddock")
ENV = dict(os.environ, PADDOCK_AGENT=os.environ.get("PADDOCK_AGENT")
           or os.path.join(REPO, "build/src/agent/paddock-agent"))
IO_JOB = "find /usr/lib -type f -print0 2>/dev/null | head -z -n 20000 | xargs -0 cat > /dev/null 2>&1; true"
CPU_JOB = "python3 -c 'sum(i*i for i in range(3000000))'"
# One brokered call, measured inside the sandbox: microseconds per
# open+close of a regular file and of a directory (O_DIRECTORY, as find does).
OPEN_JOB = ("import os,time\n"
            "def per(p, fl, n=3000):\n"
            "    t = time.perf_counter()\n"
            "    for _ in range(n): os.close(os.open(p, fl))\n"
            "    return (time.perf_counter() - t) / n * 1e6\n"
            "print('%.2f %.2f' % (per('/etc/passwd', os.O_RDONLY), per('/usr/lib', os.O_RDONLY | os.O_DIRECTORY)))\n")


def old_env(build):
    return dict(os.environ, PADDOCK_AGENT=os.path.join(build, "src/agent/paddock-agent"))


CPU = {}         # id(list of wall times) -> list of CPU times, filled by timed()


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv, env=None, cpu=None):
    """Wall ms of one run; its CPU ms (user + system of every process it
    reaped: paddock, the sandbox's processes, the supervisor) appended to
    cpu if given."""
    c0 = children_cpu()
    t = time.perf_counter()
    r = subprocess.run(argv, env=env or ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=600)
    dt = (time.perf_counter() - t) * 1000
    if r.returncode != 0:
        raise SystemExit("failed: %s: %s" % (" ".join(argv), r.stderr.decode()[-300:]))
    if cpu is not None:
        cpu.append((children_cpu() - c0) * 1000)
    return dt


def inside(argv, env=None):
    r = subprocess.run(argv, env=env or ENV, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit("failed: %s: %s" % (" ".join(argv), r.stderr.decode()[-300:]))
    return [float(x) for x in r.stdout.split()]


def stats(xs):
    xs = sorted(xs)
    return xs[0], statistics.median(xs), xs[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--old", help="another build directory: its supervised tier as a peer")
    a = ap.parse_args()
    # The process tier's uid must reach its workspace: a state dir whose
    # parents are searchable by others (docs/security.md).
    top = tempfile.mkdtemp(prefix="paddock-bench-tiers-")
    os.chmod(top, 0o711)
    state = os.path.join(top, "state")
    run = [PADDOCK, "run", "--state-dir", state]
    tiers = ["process", "container", "supervised"]
    try:
        for t in tiers:                     # warm-up (builds the base template)
            timed(run + ["--isolation", t, "--", "/bin/true"])
        start = {t: [] for t in tiers}
        for _ in range(a.rounds):
            for t in tiers:
                start[t].append(timed(run + ["--isolation", t, "--", "/bin/true"]))
        load0 = os.getloadavg()
        # Peers of the job runs: label -> (paddock run argv, env). The order
        # rotates every round so no peer always follows the same one.
        peers = {"container": (run + ["--isolation", "container"], ENV),
                 "supervised": (run + ["--isolation", "supervised"], ENV)}
        if a.old:
            old_bin = os.path.join(os.path.abspath(a.old), "src/paddock")
            peers["supervised (old)"] = ([old_bin, "run", "--state-dir", state, "--isolation", "supervised"],
                                         old_env(os.path.abspath(a.old)))
            timed(peers["supervised (old)"][0] + ["--", "/bin/true"], peers["supervised (old)"][1])
        names = list(peers)
        jobs = {(t, j): [] for t in names for j in ("io", "io_cpu", "cpu", "open", "opendir")}
        # The syscall-heavy job reads 20000 files: the first run after
        # they left the page cache would pay for the disk. Not measured.
        timed(peers["container"][0] + ["--", "bash", "-c", IO_JOB])
        for i in range(a.jobs):
            for t in names[i % len(names):] + names[:i % len(names)]:
                argv, env = peers[t]
                f, d = inside(argv + ["--", "python3", "-c", OPEN_JOB], env)
                jobs[(t, "open")].append(f)
                jobs[(t, "opendir")].append(d)
                jobs[(t, "io")].append(timed(argv + ["--", "bash", "-c", IO_JOB], env, jobs[(t, "io_cpu")]))
                jobs[(t, "cpu")].append(timed(argv + ["--", "bash", "-c", CPU_JOB], env))
                sys.stderr.write("round %d %s: io %.0f ms, open %.1f µs, opendir %.1f µs\n"
                                 % (i + 1, t, jobs[(t, "io")][-1], f, d))
        load1 = os.getloadavg()
    finally:
        subprocess.run([PADDOCK, "gc", "--state-dir", state], env=ENV, capture_output=True)
        subprocess.run(["rm", "-rf", top])

    ref = statistics.median(start["container"])
    lines = ["# Isolation tiers: start time and supervised overhead", "",
             "Generated by `bench/tiers.py` on %s; kernel %s; %d CPUs; %d rounds alternated, %d job runs."
             % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), platform.release(), os.cpu_count(),
                a.rounds, a.jobs), "",
             "## `paddock run --isolation TIER -- /bin/true`", "",
             "| tier | min ms | median ms | max ms | median / container |", "|---|---:|---:|---:|---:|"]
    for t in tiers:
        lo, med, hi = stats(start[t])
        lines.append("| %s | %.2f | %.2f | %.2f | %.2f× |" % (t, lo, med, hi, med / ref))
    sups = [t for t in names if t != "container"]
    lines += ["", "## Supervised overhead (whole `paddock run`, median of %d)" % a.jobs, "",
              "| job | container ms | %s | target |" % " | ".join("%s ms | ratio" % t for t in sups),
              "|---|---:|%s---:|" % ("---:|---:|" * len(sups))]
    for j, cmd, target in (("io", IO_JOB, "≤ 1.5×"), ("cpu", CPU_JOB, "≤ 1.1×")):
        c = statistics.median(jobs[("container", j)])
        cells = ["%.0f | %.2f×" % (statistics.median(jobs[(t, j)]), statistics.median(jobs[(t, j)]) / c) for t in sups]
        lines.append("| `%s` | %.0f | %s | %s |" % (cmd.replace("|", "\\|"), c, " | ".join(cells), target))
    # Same-round ratios: each round's supervised run over that round's
    # container run (the load changes between rounds, less within one).
    lines += ["", "Per round, the syscall-heavy job (ms; ratio to the same round's container run):", "",
              "| round | container | %s |" % " | ".join(sups), "|---:|---:|%s" % ("---:|" * len(sups))]
    for i in range(a.jobs):
        c = jobs[("container", "io")][i]
        lines.append("| %d | %.0f | %s |" % (i + 1, c, " | ".join("%.0f (%.2f×)" % (jobs[(t, "io")][i], jobs[(t, "io")][i] / c)
                                                               for t in sups)))
    lines.append("| CPU ms (user + system, every process of the run), median | %.0f | %s |" % (
        statistics.median(jobs[("container", "io_cpu")]),
        " | ".join("%.0f (%.2f×)" % (statistics.median(jobs[(t, "io_cpu")]), statistics.median(jobs[(t, "io_cpu")])
                                     / statistics.median(jobs[("container", "io_cpu")])) for t in sups)))
    lines.append("| median of the rounds' ratios | | %s |" % " | ".join(
        "%.2f×" % statistics.median(jobs[(t, "io")][i] / jobs[("container", "io")][i] for i in range(a.jobs))
        for t in sups))
    lines += ["", "## One brokered call (inside the sandbox, median of %d runs of 3000 calls)" % a.jobs, "",
              "| call | peer | µs | − container µs | ratio | spread (min–max µs) |",
              "|---|---|---:|---:|---:|---:|"]
    for j, what in (("open", "`open(\"/etc/passwd\", O_RDONLY)` + `close`"),
                    ("opendir", "`open(\"/usr/lib\", O_RDONLY|O_DIRECTORY)` + `close`")):
        c = statistics.median(jobs[("container", j)])
        for t in names:
            s = statistics.median(jobs[(t, j)])
            lo, _, hi = stats(jobs[(t, j)])
            lines.append("| %s | %s | %.1f | %.1f | %.1f× | %.1f–%.1f |" % (what.replace("|", "\\|"), t, s, s - c, s / c, lo, hi))
    lines += ["", "Load average (1/5/15 min) when the job runs started: %.2f %.2f %.2f; when they ended: "
              "%.2f %.2f %.2f (2 CPUs shared with other work: ratios within this run are what count)." % (load0 + load1)]
    lines += ["", "Each brokered open costs the supervised tier a round trip through its supervisor's two",
              "processes (three hand-offs: caller, main, broker, caller) and the open performed by the broker",
              "(docs/security.md); the syscall-heavy job is dominated by them. CPU ms are user + system time of",
              "every process the run reaped (paddock, the sandbox's processes, the supervisor): less sensitive",
              "to the machine's load than wall time. Where the time goes: bench/README.md."]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(REPO, "bench/reports"), exist_ok=True)
    with open(os.path.join(REPO, "bench/reports/tiers.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
