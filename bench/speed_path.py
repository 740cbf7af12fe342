#!/usr/bin/python3
"""The request path and the output stream, two paddock builds side by side
(issue 19, targets 3 and 5). In one run, peers alternated round by round in
a rotating order:

  a. create -> first output: `POST /api/v1/sandboxes {}` then `POST
     .../exec` of `echo hi`, timed to the exec answer (the DELETE after it
     is timed apart), on a `paddock serve --pool N` of each build; the argv
     form `{"cmd":["echo","hi"]}` and `{"cmd":["bash","-c","echo hi"]}` (the
     login profile, `bash -l`, is target 2's and left out of both); beside
     them `bwrap --unshare-all ... echo hi` and a plain `echo hi`. After every
     HTTP run the benchmark waits (untimed) until /metrics shows the pool full
     again, so every create finds a full pool and no refill overlaps the
     next peer.
  b. exec round trip in a running sandbox: `POST .../exec {"cmd":["/bin/true"]}`
     on each build.
  c. output stream: `GET .../processes/{pid}/output?follow=1` of `head -c N
     /dev/zero` (as bench/server.py part c) on each build, beside the host
     pipe (`head -c N /dev/zero` read by the same Python loop).

    sudo /usr/bin/python3 bench/speed_path.py --before /path/to/old/build/src/paddock \\
        [--after build/src/paddock] [--rounds 100] [--exec-rounds 300] [--stream-mib 512] [--reps 5]

Each build runs with the agent beside it (dirname(paddock)/agent/paddock-agent).
p50/p99 are nearest-rank; ratios are medians of the same run. Writes
bench/reports/speed-path.md (--report). Standard library only; helpers from
bench/server.py. Cleanup on exit, also on failure: servers get SIGTERM,
`paddock gc --state-dir` runs on each state directory, no paddock-<instance>
cgroup of ours may be left, the temp directory is removed.
"""

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server as sb  # noqa: E402  (bench/server.py)

ROOT = sb.ROOT
DEFAULT_REPORT = os.path.join(ROOT, "bench", "reports", "speed-path.md")


class Build:
    def __init__(self, name, paddock, work, pool):
        self.name = name
        self.paddock = os.path.abspath(paddock)
        self.agent = os.path.join(os.path.dirname(self.paddock), "agent", "paddock-agent")
        for p in (self.paddock, self.agent):
            if not os.access(p, os.X_OK):
                raise SystemExit("%s: %s is not an executable (build it first)" % (name, p))
        self.server = sb.Server(self.paddock, self.agent, work, name, ["--pool", str(pool)])


def stats(v):
    if not v:
        return None
    return {"n": len(v), "min": min(v), "p50": sb.pct(v, 50), "p99": sb.pct(v, 99), "max": max(v)}


def fmt(x):
    return sb.fmt_ms(x) if x is not None else "-"


def bench_create(args, builds, bw_argv, plain_argv):
    peers = []
    for b in builds:
        for form, cmd in (("argv", ["echo", "hi"]), ("bash -c", ["bash", "-c", "echo hi"])):
            p = sb.Peer("%s %s" % (b.name, form), "%s: HTTP warm pool, %s" % (b.name, form),
                        "POST /api/v1/sandboxes {} ; POST .../exec {\"cmd\":%s}" % sb.json.dumps(cmd))
            p.extra.update(build=b, cmd=cmd)
            peers.append(p)
    pbw = sb.Peer("bwrap", "bwrap", shlex.join(bw_argv))
    ppl = sb.Peer("plain", "plain exec", shlex.join(plain_argv))
    peers += [pbw, ppl]
    clients = {b.name: (b.server.client(), b.server.client()) for b in builds}

    def run(p):
        if p in (pbw, ppl):
            t, ok, err = sb.spawn_echo(bw_argv if p is pbw else plain_argv)
            if ok:
                p.walls.append(t)
            return ok, err
        b = p.extra["build"]
        c, mc = clients[b.name]
        ok, err = sb.http_echo(b.server, c, p, p.extra["cmd"])
        b.server.wait_pool(mc, args.pool, timeout=args.pool_wait)
        return ok, err

    for b in builds:
        if b.server.wait_pool(clients[b.name][1], args.pool, timeout=120) is None:
            raise RuntimeError("%s: the pool did not fill in 120 s" % b.name)
    for _ in range(args.warmup):
        for p in peers:
            run(p)
    for p in peers:
        p.walls.clear()
        p.parts.clear()
    print("a. create -> first output, %d rounds ..." % args.rounds, file=sys.stderr)
    for i in range(args.rounds):
        k = i % len(peers)
        for p in peers[k:] + peers[:k]:
            ok, err = run(p)
            if not ok:
                p.failures.append(err)
                # bwrap's recursive bind of / races with mounts other work on
                # the machine makes and removes (EINVAL on a vanished one):
                # counted and reported, never the end of the run
                if len(p.failures) > args.max_errors and p not in (pbw, ppl):
                    raise RuntimeError("%s: %s" % (p.label, err))
    for c, mc in clients.values():
        c.close()
        mc.close()
    return peers


def bench_exec(args, builds):
    res = {}
    for b in builds:
        c = b.server.client()
        st, s = c.call("POST", "/api/v1/sandboxes", obj={})
        if st != 201:
            raise RuntimeError("%s: create: %s" % (b.name, sb.http_error(st, s)))
        res[b.name] = {"c": c, "sid": s["id"], "ms": []}

    def one(b):
        r = res[b.name]
        t0 = time.perf_counter_ns()
        st, x = r["c"].call("POST", "/api/v1/sandboxes/%s/exec" % r["sid"], obj={"cmd": ["/bin/true"]})
        t1 = time.perf_counter_ns()
        if st == 200 and isinstance(x, dict) and x.get("exit_code") == 0:
            r["ms"].append(sb.ms(t1 - t0))
    for _ in range(args.warmup * 3):
        for b in builds:
            one(b)
    for r in res.values():
        r["ms"].clear()
    print("b. exec round trips ...", file=sys.stderr)
    for i in range(args.exec_rounds):
        for b in (builds if i % 2 else builds[::-1]):
            one(b)
    return res


def proc_cpu_ms(pid):
    """user + system CPU of a process, all its threads, in ms."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def bench_stream(args, builds, res):
    nbytes = args.stream_mib * sb.MiB
    buf = bytearray(sb.MiB)
    out = {b.name: [] for b in builds}
    out["host pipe"] = []
    print("c. output stream, %d MiB x %d ..." % (args.stream_mib, args.reps), file=sys.stderr)
    order = [b.name for b in builds] + ["host pipe"]
    for i in range(args.reps):
        k = i % len(order)
        for name in order[k:] + order[:k]:
            if name == "host pipe":
                out[name].append(sb.bench_host_pipe(nbytes, buf))
                continue
            b = next(x for x in builds if x.name == name)
            r = res[name]
            c0 = proc_cpu_ms(b.server.p.pid)
            x = sb.bench_stream(r["c"], b.server, r["sid"], nbytes, buf)
            c1 = proc_cpu_ms(b.server.p.pid)
            if c0 is not None and c1 is not None:
                x["server_cpu_ms_per_gib"] = (c1 - c0) * (1 << 30) / nbytes
            out[name].append(x)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the old build's paddock binary")
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "src", "paddock"))
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--exec-rounds", type=int, default=300)
    ap.add_argument("--stream-mib", type=int, default=512)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pool", type=int, default=4)
    ap.add_argument("--pool-wait", type=float, default=15.0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-errors", type=int, default=10)
    ap.add_argument("--skip", default="", help="comma list of parts to skip: a,b,c")
    ap.add_argument("--report", default=DEFAULT_REPORT)
    args = ap.parse_args()
    skip = set(s.strip() for s in args.skip.split(",") if s.strip())

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    ctx = sb.machine_ctx(shlex.join(["/usr/bin/python3", os.path.relpath(os.path.abspath(__file__), ROOT)]
                                    + sys.argv[1:]))
    work = tempfile.mkdtemp(prefix="paddock-bench-speed-path-")
    builds = []
    problems, failed = [], None
    peers = ex = st = None
    bw_argv = ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "echo", "hi"]
    plain_argv = [shutil.which("echo") or "/bin/echo", "hi"]
    try:
        builds = [Build("before", args.before, work, args.pool), Build("after", args.after, work, args.pool)]
        ctx["versions"] = [("before", "%s (%s)" % (sb.version_of([builds[0].paddock, "version"]), args.before)),
                           ("after", "%s (%s)" % (sb.version_of([builds[1].paddock, "version"]), args.after)),
                           ("bwrap", sb.version_of(["bwrap", "--version"])),
                           ("python", sys.version.split()[0])]
        print("starting servers ...", file=sys.stderr)
        for b in builds:
            b.server.start()
        if "a" not in skip:
            peers = bench_create(args, builds, bw_argv, plain_argv)
        if "b" not in skip or "c" not in skip:
            ex = bench_exec(args, builds) if "b" not in skip or "c" not in skip else None
            if "c" not in skip:
                st = bench_stream(args, builds, ex)
            for r in ex.values():
                r["c"].call("DELETE", "/api/v1/sandboxes/%s" % r["sid"])
                r["c"].close()
            if "b" in skip:
                ex = None
    except Exception as e:  # noqa: BLE001 - reported, then cleaned up
        failed = "%s: %s" % (type(e).__name__, e)
        print("error: " + failed, file=sys.stderr)
    finally:
        for b in builds:
            problems += b.server.stop()
        shutil.rmtree(work, ignore_errors=True)
    ctx["load_after"] = sb.loadavg()
    write_report(args, ctx, builds, peers, ex, st, problems, failed)
    return 1 if failed or problems else 0


def write_report(args, ctx, builds, peers, ex, st, problems, failed):
    L = ["# paddock request path and output stream, before / after", "",
         "Generated by `bench/speed_path.py` (see `bench/README.md`). Do not edit by hand.", ""]
    L += sb.machine_lines(ctx)
    L += ["## Servers", "", "One `paddock serve --pool %d` per build, each on its own state directory and "
          "a free loopback port; `http.client` keep-alive connections, TCP_NODELAY." % args.pool, ""]
    if failed:
        L += ["**The run failed: %s**" % failed, ""]
    if peers:
        bw = stats(next(p for p in peers if p.name == "bwrap").walls)
        L += ["## a. Create -> first output (pooled create + exec of `echo hi`)", "",
              "%d rounds, peers in a rotating order; HTTP: from sending the create to the exec answer "
              "with `stdout` `\"hi\\n\"`; the pool is full again before every create (untimed wait). "
              "Ratios: p50 / bwrap's p50." % args.rounds, "",
              "| peer | runs | min ms | p50 ms | p99 ms | max ms | p50 / bwrap | p50 of the parts |",
              "|---|---:|---:|---:|---:|---:|---:|---|"]
        for p in peers:
            s = stats(p.walls)
            if not s:
                L.append("| %s | 0 | - | - | - | - | - | %s |" % (p.label, "; ".join(p.failures[:1])))
                continue
            parts = ""
            if p.parts:
                parts = "create %s + exec %s; delete %s (not in total)" % tuple(
                    fmt(sb.pct(p.parts[k], 50)) for k in ("create", "exec", "delete"))
            L.append("| %s | %d | %s | %s | %s | %s | %.2f× | %s |" % (
                p.label, s["n"], fmt(s["min"]), fmt(s["p50"]), fmt(s["p99"]), fmt(s["max"]),
                s["p50"] / bw["p50"] if bw else float("nan"), parts))
        L.append("")
        for form in ("argv", "bash -c"):
            a = stats(next(p for p in peers if p.name == "after " + form).walls)
            b = stats(next(p for p in peers if p.name == "before " + form).walls)
            if a and b and bw:
                L.append("- %s: after p50 %s ms = %.2f× bwrap (before %s ms = %.2f× bwrap); after / before "
                         "%.2f×." % (form, fmt(a["p50"]), a["p50"] / bw["p50"], fmt(b["p50"]),
                                     b["p50"] / bw["p50"], a["p50"] / b["p50"]))
        L.append("- Target (issue 19, 3): argv form ≤ 0.5× bwrap, p50.")
        fails = ["%s %d (%s)" % (p.label, len(p.failures), p.failures[0][:160]) for p in peers if p.failures]
        L += ["- Failed runs (not counted): %s." % ("; ".join(fails) if fails else "none"), ""]
    if ex:
        L += ["## b. Exec round trip in a running sandbox", "",
              "`POST .../exec {\"cmd\":[\"/bin/true\"]}`, builds alternated.", "",
              "| build | runs | min ms | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|---:|"]
        for b in builds:
            s = stats(ex[b.name]["ms"])
            if s:
                L.append("| %s | %d | %s | %s | %s | %s |" % (b.name, s["n"], fmt(s["min"]), fmt(s["p50"]),
                                                            fmt(s["p99"]), fmt(s["max"])))
        sa, sb_ = stats(ex["after"]["ms"]), stats(ex["before"]["ms"])
        if sa and sb_:
            L.append("")
            L.append("- after / before p50: %.2f×." % (sa["p50"] / sb_["p50"]))
        L.append("")
    if st:
        L += ["## c. Output stream", "",
              "`sh -c 'read x; exec head -c %d /dev/zero'` in one sandbox per build, `GET "
              ".../output?follow=1` (chunked) read with `readinto` into a 1 MiB buffer, timed from the stdin "
              "line that releases the writer to the end of the body; counted only if every byte came and no "
              "`X-Paddock-Gap`. Host pipe: the same loop on `head -c N /dev/zero`. MB/s is 10^6 bytes/s. Server CPU: "
              "user + system time of the build's `paddock serve` (all threads, /proc/PID/stat) over the transfer, "
              "less sensitive to the machine's load than the rate. "
              "%d repetitions, order rotated." % (args.stream_mib * sb.MiB, args.reps), "",
              "| peer | ok / reps | min MB/s | median MB/s | max MB/s | median / host pipe | server CPU ms per GiB (median) |",
              "|---|---:|---:|---:|---:|---:|---:|"]
        med = {}
        for name, rs in st.items():
            v = sorted(r["bytes"] / r["secs"] / sb.MB for r in rs if r["ok"])
            if v:
                med[name] = sb.statistics.median(v)
        for name, rs in st.items():
            v = sorted(r["bytes"] / r["secs"] / sb.MB for r in rs if r["ok"])
            if not v:
                L.append("| %s | 0 / %d | - | - | - | - | - |" % (name, len(rs)))
                continue
            cpu = [r["server_cpu_ms_per_gib"] for r in rs if r["ok"] and "server_cpu_ms_per_gib" in r]
            L.append("| %s | %d / %d | %.0f | %.0f | %.0f | %s | %s |" % (
                name, len(v), len(rs), v[0], med[name], v[-1],
                "%.2f" % (med[name] / med["host pipe"]) if "host pipe" in med else "-",
                "%.0f" % sb.statistics.median(cpu) if cpu else "-"))
        if "after" in med and "before" in med:
            L += ["", "- after / before median: %.2f×; target (issue 19, 5): ≥ 1000 MB/s." %
                  (med["after"] / med["before"])]
        L.append("")
    L += ["## Notes", "",
          "- The machine has 2 shared cores and other work on it (load averages above); the client, the "
          "servers, the agents and the commands share them. Peers alternate in a rotating order, so noise "
          "falls on all of them alike; compare p50s and ratios of this run, not across runs.",
          "- Cleanup: %s." % ("; ".join(problems) if problems else
                              "both servers stopped with SIGTERM, `paddock gc --state-dir` run on each, no "
                              "cgroup directory of these instances left, temp directory removed")]
    sb.write_md(args.report, L)
    print("\n".join(L))


if __name__ == "__main__":
    sys.exit(main())
