#!/usr/bin/python3
"""Output stream and file transfer throughput, two paddock builds side by
side with the host baselines, in one run (issue 19, target 5).

Per repetition, in an order that rotates from repetition to repetition:

  - output stream: in one sandbox per build, `sh -c 'read x; exec head -c N
    /dev/zero'` started with a stdin pipe, `GET .../output?follow=1` on a
    second connection, timed from the stdin line that releases the writer
    to the last byte of the body (as bench/server.py part c); counted only
    if every byte came and no `X-Paddock-Gap`;
  - file upload: `PUT .../files?path=` of a --file-mib random file from
    host tmpfs; file download: `GET .../files?path=` of it;
  - host baselines: the same Python loop reading `head -c N /dev/zero`
    from a pipe, and reading the file from /dev/shm.

For every paddock transfer it also records the CPU time (user + system,
/proc/PID/stat) of the build's `paddock serve` and of the sandbox's agent
over the transfer, per GiB: less sensitive to the machine's load than the
rate.

    sudo /usr/bin/python3 bench/streams.py --before /path/to/old/build/src/paddock \\
        [--after build/src/paddock] [--stream-mib 1024] [--file-mib 256] [--reps 5]

Each build runs with the agent beside it (dirname(paddock)/agent/paddock-agent),
`--pool 0`. Writes bench/reports/streams.md (--report). Standard library
only; helpers from bench/server.py. Cleanup on exit, also on failure:
servers get SIGTERM, `paddock gc --state-dir` runs on each state directory,
no paddock-<instance> cgroup of ours may be left, temp directories removed.
"""

import argparse
import hashlib
import os
import shlex
import shutil
import signal
import statistics
import sys
import tempfile

sys.dont_write_bytecode = True  # no bench/__pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server as sb  # noqa: E402  (bench/server.py)

ROOT = sb.ROOT
DEFAULT_REPORT = os.path.join(ROOT, "bench", "reports", "streams.md")
GiB = 1 << 30


class Build:
    def __init__(self, name, paddock, work):
        self.name = name
        self.paddock = os.path.abspath(paddock)
        self.agent = os.path.join(os.path.dirname(self.paddock), "agent", "paddock-agent")
        for p in (self.paddock, self.agent):
            if not os.access(p, os.X_OK):
                raise SystemExit("%s: %s is not an executable (build it first)" % (name, p))
        self.server = sb.Server(self.paddock, self.agent, work, name, ["--pool", "0"])
        self.c = None
        self.sid = None
        self.agent_pid = None


def cpu_ms(pid):
    """user + system CPU of a process, all its threads, in ms (None if gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def ctx_switches(pid):
    """Context switches (voluntary + involuntary) of a process, all its
    threads: the wake-ups a transfer costs it."""
    n = 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                for line in f:
                    if line.endswith("ctxt_switches:\t" + line.split("\t")[-1]) and "ctxt_switches" in line:
                        n += int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return n


def find_agent(server_pid):
    """The sandbox's agent: the descendant of the server named paddock-agent
    (the build runs no pool, so one sandbox, one agent)."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            kids.setdefault(int(st.rsplit(")", 1)[1].split()[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    todo, found = list(kids.get(server_pid, [])), []
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/comm" % p) as f:
                if f.read().strip() == "paddock-agent":
                    found.append(p)
        except OSError:
            pass
        todo += kids.get(p, [])
    return min(found) if found else None


def timed(b, fn):
    # the agent only: the server's connection thread ends with the request,
    # and a thread that is gone takes its counts with it
    w0 = ctx_switches(b.agent_pid) if b.agent_pid else None
    s0, a0 = cpu_ms(b.server.p.pid), cpu_ms(b.agent_pid) if b.agent_pid else None
    x = fn()
    s1, a1 = cpu_ms(b.server.p.pid), cpu_ms(b.agent_pid) if b.agent_pid else None
    w1 = ctx_switches(b.agent_pid) if b.agent_pid else None
    if x.get("ok") and x["bytes"] and w0 is not None and w1 is not None:
        x["switches_gib"] = (w1 - w0) * GiB / x["bytes"]
        if s0 is not None and s1 is not None:
            x["server_ms_gib"] = (s1 - s0) * GiB / x["bytes"]
        if a0 is not None and a1 is not None:
            x["agent_ms_gib"] = (a1 - a0) * GiB / x["bytes"]
    return x


def run(args, builds, fpath, size, digest):
    nbytes = args.stream_mib * sb.MiB
    buf = bytearray(sb.MiB)
    jobs = []
    for b in builds:
        jobs.append(("%s: output stream" % b.name, "stream", b))
        jobs.append(("%s: file upload" % b.name, "upload", b))
        jobs.append(("%s: file download" % b.name, "download", b))
    jobs += [("host pipe", "pipe", None), ("host tmpfs file", "file", None)]
    res = {name: [] for name, _, _ in jobs}

    def one(kind, b):
        if kind == "pipe":
            return sb.bench_host_pipe(nbytes, buf)
        if kind == "file":
            return sb.bench_host_file(fpath, size, buf)
        if kind == "stream":
            return timed(b, lambda: sb.bench_stream(b.c, b.server, b.sid, nbytes, buf))
        if kind == "upload":
            return timed(b, lambda: sb.bench_upload(b.c, b.sid, fpath, size))
        return timed(b, lambda: sb.bench_download(b.c, b.sid, size, buf))

    # an untimed warm-up of each (the first stream pays for growing buffers)
    for _, kind, b in jobs:
        one(kind, b)
    for i in range(args.reps):
        k = i % len(jobs)
        print("rep %d/%d ..." % (i + 1, args.reps), file=sys.stderr)
        for name, kind, b in jobs[k:] + jobs[:k]:
            res[name].append(one(kind, b))
    # the file inside each sandbox is the host's (sha256 via /exec)
    sums = {}
    for b in builds:
        st, x = b.c.call("POST", "/api/v1/sandboxes/%s/exec" % b.sid,
                         obj={"cmd": ["sha256sum", "/tmp/bench-file"]})
        sums[b.name] = st == 200 and isinstance(x, dict) and x.get("stdout", "").split()[:1] == [digest]
    return jobs, res, sums


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the old build's paddock binary")
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "src", "paddock"))
    ap.add_argument("--stream-mib", type=int, default=1024)
    ap.add_argument("--file-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--report", default=DEFAULT_REPORT)
    args = ap.parse_args()

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    ctx = sb.machine_ctx(shlex.join(["/usr/bin/python3", os.path.relpath(os.path.abspath(__file__), ROOT)]
                                    + sys.argv[1:]))
    work = tempfile.mkdtemp(prefix="paddock-bench-streams-")
    shm = tempfile.mkdtemp(prefix="paddock-bench-streams-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    builds, problems, failed, out = [], [], None, None
    try:
        builds = [Build("before", args.before, work), Build("after", args.after, work)]
        ctx["versions"] = [("before", "%s (%s)" % (sb.version_of([builds[0].paddock, "version"]), args.before)),
                           ("after", "%s (%s)" % (sb.version_of([builds[1].paddock, "version"]), args.after)),
                           ("python", sys.version.split()[0])]
        fpath = os.path.join(shm, "file")
        size = args.file_mib * sb.MiB
        h = hashlib.sha256()
        with open(fpath, "wb") as f:
            for _ in range(args.file_mib):
                blk = os.urandom(sb.MiB)
                h.update(blk)
                f.write(blk)
        print("starting servers ...", file=sys.stderr)
        for b in builds:
            b.server.start()
            b.c = b.server.client()
            st, s = b.c.call("POST", "/api/v1/sandboxes", obj={"timeout": 3600, "disk_mb": 2048})
            if st != 201:
                raise RuntimeError("%s: create: %s" % (b.name, sb.http_error(st, s)))
            b.sid = s["id"]
            b.agent_pid = find_agent(b.server.p.pid)
        out = run(args, builds, fpath, size, h.hexdigest())
        for b in builds:
            b.c.call("DELETE", "/api/v1/sandboxes/%s" % b.sid)
            b.c.close()
    except Exception as e:  # noqa: BLE001 - reported, then cleaned up
        failed = "%s: %s" % (type(e).__name__, e)
        print("error: " + failed, file=sys.stderr)
    finally:
        for b in builds:
            problems += b.server.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    ctx["load_after"] = sb.loadavg()
    write_report(args, ctx, out, problems, failed)
    return 1 if failed or problems else 0


def write_report(args, ctx, out, problems, failed):
    L = ["# paddock output stream and file transfers, before / after", "",
         "Generated by `bench/streams.py` (see `bench/README.md`). Do not edit by hand.", ""]
    L += sb.machine_lines(ctx)
    L += ["## What runs", "",
          "One `paddock serve --pool 0` per build, each on its own state directory and a free loopback "
          "port, one sandbox each (`disk_mb` 2048); `http.client` keep-alive connections, TCP_NODELAY, "
          "bodies read with `readinto` into a 1 MiB buffer. %d repetitions after one untimed warm-up, "
          "the order of the %s transfers rotated each repetition. MB/s is 10^6 bytes/s." % (
              args.reps, "eight"), "",
          "- output stream: `sh -c 'read x; exec head -c %d /dev/zero'` with a stdin pipe, `GET "
          ".../output?follow=1` (chunked), timed from the stdin line that releases the writer to the end "
          "of the body; counted only if every byte came and no `X-Paddock-Gap`." % (args.stream_mib * sb.MiB),
          "- file upload: `PUT .../files?path=/tmp/bench-file` of a %d MiB random file on host tmpfs "
          "(`Content-Length`), timed to the answer; download: `GET` of it to the last byte." % args.file_mib,
          "- host pipe: the same Python loop reading `head -c N /dev/zero` from a pipe; host tmpfs file: "
          "the file read from /dev/shm.",
          "- CPU per GiB: user + system time of the build's `paddock serve` (all threads) and of the "
          "sandbox's `paddock-agent` over the transfer (/proc/PID/stat, 10 ms ticks), median; the "
          "agent's context switches (voluntary + involuntary, /proc/PID/status; the server's are not "
          "counted: its connection thread ends with the request and takes its counts along), median: "
          "the wake-ups a GiB costs it.", ""]
    if failed:
        L += ["**The run failed: %s**" % failed, ""]
    if out:
        jobs, res, sums = out
        med = {}
        rows = []
        for name, kind, b in jobs:
            rs = res[name]
            v = sorted(r["bytes"] / r["secs"] / sb.MB for r in rs if r["ok"])
            med[name] = statistics.median(v) if v else None
        for name, kind, b in jobs:
            rs = res[name]
            v = sorted(r["bytes"] / r["secs"] / sb.MB for r in rs if r["ok"])
            base = "host pipe" if kind in ("stream", "pipe") else "host tmpfs file"
            peer = None
            if b is not None:
                other = "before" if b.name == "after" else "after"
                peer = name.replace(b.name + ":", other + ":", 1)
            srv = [r["server_ms_gib"] for r in rs if "server_ms_gib" in r]
            ag = [r["agent_ms_gib"] for r in rs if "agent_ms_gib" in r]
            sw = [r["switches_gib"] for r in rs if "switches_gib" in r]
            rows.append([name, "%d / %d" % (len(v), len(rs)),
                         "%.0f" % v[0] if v else "-", "%.0f" % med[name] if v else "-", "%.0f" % v[-1] if v else "-",
                         "%.2f" % (med[name] / med[base]) if v and med.get(base) else "-",
                         "%.2f×" % (med[name] / med[peer]) if v and b is not None and b.name == "after"
                         and med.get(peer) else "",
                         "%.0f" % statistics.median(srv) if srv else "-",
                         "%.0f" % statistics.median(ag) if ag else "-",
                         "%.0f" % statistics.median(sw) if sw else "-"])
        L += ["## Results", "",
              sb.md_table(["transfer", "ok / reps", "min MB/s", "median MB/s", "max MB/s", "median / host baseline",
                           "after / before", "serve CPU ms/GiB", "agent CPU ms/GiB",
                           "agent context switches per GiB"], rows), ""]
        a, bf = med.get("after: output stream"), med.get("before: output stream")
        if a:
            L.append("**Output stream median: %.0f MB/s = %.2f of the host pipe in this run** (before: %s); "
                     "target (issue 19, 5): ≥ 1000 MB/s: %s." % (
                         a, a / med["host pipe"] if med.get("host pipe") else float("nan"),
                         "%.0f MB/s, after / before %.2f×" % (bf, a / bf) if bf else "-",
                         "met" if a >= 1000 else "NOT met"))
        L.append("")
        for kind in ("output stream", "file upload", "file download"):
            pa, pb = res.get("after: " + kind, []), res.get("before: " + kind, [])
            pr = [x["bytes"] / x["secs"] / (y["bytes"] / y["secs"]) for x, y in zip(pa, pb) if x["ok"] and y["ok"]]
            cp = [(x["server_ms_gib"] + x["agent_ms_gib"]) / (y["server_ms_gib"] + y["agent_ms_gib"])
                  for x, y in zip(pa, pb) if "agent_ms_gib" in x and "agent_ms_gib" in y
                  and "server_ms_gib" in x and "server_ms_gib" in y and y["server_ms_gib"] + y["agent_ms_gib"] > 0]
            if pr:
                L.append("- %s, paired by repetition (after / before of the same repetition), median: rate "
                         "%.2f× (%d pairs, range %.2f–%.2f), serve + agent CPU per GiB %s." % (
                             kind, statistics.median(pr), len(pr), min(pr), max(pr),
                             "%.2f×" % statistics.median(cp) if cp else "-"))
        L.append("- sha256 of the uploaded file inside each sandbox equals the host's: %s." % ", ".join(
            "%s %s" % (k, "yes" if v else "NO") for k, v in sums.items()))
        for name, _, _ in jobs:
            bad = [r for r in res[name] if not r["ok"]]
            if bad:
                L.append("- %s: %d failed (%s)." % (name, len(bad), bad[0].get("err") or
                                                    "bytes %s, gap %s" % (bad[0]["bytes"], bad[0].get("gap"))))
        L.append("")
    L += ["## Notes", "",
          "- The machine has 2 shared cores and other engineers' builds and tests on it (load averages "
          "above); the client, the servers, the agents and the commands share them. Transfers alternate in a "
          "rotating order, so noise falls on all of them alike: compare ratios of this run, not across runs.",
          "- Cleanup: %s." % ("; ".join(problems) if problems else
                              "both servers stopped with SIGTERM, `paddock gc --state-dir` run on each, no "
                              "cgroup directory of these instances left, temp directories removed")]
    sb.write_md(args.report, L)
    print("\n".join(L))


if __name__ == "__main__":
    sys.exit(main())
