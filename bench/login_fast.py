#!/usr/bin/python3
"""A command through the login-shell form, against its argv form, two
builds side by side (issue 19 target 2: `bash -l -c CMD` ≤ 1 ms more than
the argv form in the base template). In one sandbox per build (`paddock
serve --pool 0`, the base template), rounds of four peers in a rotating
order, each `POST /api/v1/sandboxes/{id}/exec`:

  argv:   {"cmd": ["echo", "hi"]}
  login:  {"cmd": ["/bin/bash", "-l", "-c", "echo hi"]}   (what E2B's
          commands.run and a string cmd send; the agent's login fast path,
          src/agent/login_fast.c, runs it without bash where it can)

on the "before" and the "after" build. The figure is the paired difference
login − argv of the same build in the same round (median over rounds), and
the medians of each peer. Also `login-bash`: {"cmd": ["/bin/bash",
"--login", "-c", "echo hi"]} on the after build (the same to bash, never
taken by the fast path: what real bash costs there).

    sudo /usr/bin/python3 bench/login_fast.py --before OLD/build/src/paddock [--rounds 200]

Writes bench/reports/login-fast.md (--report). Helpers from bench/server.py;
servers get SIGTERM and `paddock gc` on exit, also on failure.
"""
import argparse
import os
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server as sb  # noqa: E402

ROOT = sb.ROOT
DEFAULT_REPORT = os.path.join(ROOT, "bench", "reports", "login-fast.md")
FORMS = {
    "argv": ["echo", "hi"],
    "login": ["/bin/bash", "-l", "-c", "echo hi"],
    "login-bash": ["/bin/bash", "--login", "-c", "echo hi"],
}


class Build:
    def __init__(self, name, paddock, work):
        self.name = name
        self.paddock = os.path.abspath(paddock)
        self.agent = os.path.join(os.path.dirname(self.paddock), "agent", "paddock-agent")
        for p in (self.paddock, self.agent):
            if not os.access(p, os.X_OK):
                raise SystemExit("%s: %s is not an executable (build it first)" % (name, p))
        self.server = sb.Server(self.paddock, self.agent, work, name, ["--pool", "0"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "src", "paddock"))
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--report", default=DEFAULT_REPORT)
    args = ap.parse_args()
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda n, f: (_ for _ in ()).throw(SystemExit(128 + n)))
    ctx = sb.machine_ctx(shlex.join(["/usr/bin/python3", "bench/login_fast.py"] + sys.argv[1:]))
    work = tempfile.mkdtemp(prefix="paddock-bench-login-fast-")
    builds, problems, failed = [], [], None
    samples = {}
    pairs = {}
    try:
        builds = [Build("before", args.before, work), Build("after", args.after, work)]
        for b in builds:
            b.server.start()
        peers = []
        for b in builds:
            c = b.server.client()
            st, s = c.call("POST", "/api/v1/sandboxes", obj={})
            if st != 201:
                raise RuntimeError("%s: create: %s" % (b.name, sb.http_error(st, s)))
            for form in (("argv", "login", "login-bash") if b.name == "after" else ("argv", "login")):
                peers.append((b.name, form, c, s["id"]))

        def one(p):
            name, form, c, sid = p
            t0 = time.perf_counter_ns()
            st, x = c.call("POST", "/api/v1/sandboxes/%s/exec" % sid, obj={"cmd": FORMS[form]})
            t1 = time.perf_counter_ns()
            if st != 200 or x.get("exit_code") != 0 or x.get("stdout") != "hi\n":
                raise RuntimeError("%s %s: %s %s" % (name, form, st, x))
            return sb.ms(t1 - t0)
        for _ in range(args.warmup):
            for p in peers:
                one(p)
        for i in range(args.rounds):
            k = i % len(peers)
            got = {}
            for p in peers[k:] + peers[:k]:
                got[(p[0], p[1])] = one(p)
            for key, v in got.items():
                samples.setdefault(key, []).append(v)
            for b in builds:
                pairs.setdefault((b.name, "login"), []).append(got[(b.name, "login")] - got[(b.name, "argv")])
            pairs.setdefault(("after", "login-bash"), []).append(got[("after", "login-bash")] - got[("after", "argv")])
        for p in peers:
            if p[1] == "argv":
                p[2].call("DELETE", "/api/v1/sandboxes/%s" % p[3])
    except Exception as e:  # noqa: BLE001
        failed = "%s: %s" % (type(e).__name__, e)
        print("error: " + failed, file=sys.stderr)
    finally:
        for b in builds:
            problems += b.server.stop()
        shutil.rmtree(work, ignore_errors=True)
    ctx["load_after"] = sb.loadavg()

    f = sb.fmt_ms
    L = ["# Login-shell form vs argv form through the agent (`bench/login_fast.py`)", "",
         "Generated by `bench/login_fast.py` (see bench/README.md). Do not edit by hand.", "",
         "- Date: %s; kernel %s; CPU %s" % (ctx["date"], ctx["kernel"], ctx["cpu"]),
         "- Load average before: %s; after: %s (2 shared cores, other engineers building and testing)"
         % (ctx["load_before"], ctx["load_after"]),
         "- Command line: `%s`" % ctx["cmdline"],
         "- before: `%s`; after: `%s`" % (args.before, os.path.relpath(args.after, ROOT)),
         "- %d rounds, peers in a rotating order, one sandbox per build (base template), %d warm-up rounds"
         % (len(next(iter(samples.values()), [])), args.warmup), ""]
    if failed:
        L += ["**Failed**: %s" % failed, ""]
    L += ["| build | form | cmd | p50 ms | p99 ms | min ms |", "|---|---|---|---:|---:|---:|"]
    for (name, form), v in sorted(samples.items()):
        L.append("| %s | %s | `%s` | %s | %s | %s |" % (name, form, shlex.join(FORMS[form]), f(sb.pct(v, 50)),
                                                      f(sb.pct(v, 99)), f(min(v))))
    L += ["", "Paired differences, same round (median over rounds; the target is ≤ 1 ms for login − argv):", "",
          "| build | difference | median ms | mean ms |", "|---|---|---:|---:|"]
    for (name, form), v in sorted(pairs.items()):
        L.append("| %s | %s − argv | %.2f | %.2f |" % (name, form, statistics.median(v), statistics.mean(v)))
    if problems:
        L += ["", "Cleanup problems: " + "; ".join(problems)]
    L.append("")
    with open(args.report, "w") as fh:
        fh.write("\n".join(L))
    print("\n".join(L))
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
