#!/usr/bin/python3
"""Start-time benchmark: paddock against bwrap, crun, runc and a plain exec.

Runs `/bin/true` through every peer, round-robin within each round (the
order rotates from round to round), so that noise on a shared machine hits
all peers alike.  Per run it records the wall time (perf_counter_ns around
spawn .. os.wait4 on that child's pid).  Then, in separate untimed rounds,
the peak RSS of each peer, taken under GNU time (see measure()).  Prints a
table and writes it as Markdown to bench/reports/start-time.md.

    sudo /usr/bin/python3 bench/start-time.py [--rounds N] [--trace]

Standard library only.  Exit status is non-zero only if paddock fails.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.abspath(__file__)
DEFAULT_REPORT = os.path.join(ROOT, "bench", "reports", "start-time.md")
TRACE_RE = re.compile(r"^trace:\s+([0-9.]+) ms  (.*?)"
                      r"(?:  \[cpu ([0-9.]+) ms, (\d+) faults, children ([0-9.]+) ms\])?$")


# --------------------------------------------------------------------------
# Measuring one run.  The same function runs in the main process and in the
# crun/runc helper (see helper_main), so every peer is timed the same way.

TIME = "/usr/bin/time"
MAX_STREAK = 3  # consecutive failed timed runs that drop a peer


# Children that live across runs (the crun/runc helper): never reaped as
# orphans by measure().
LONG_LIVED = set()


def become_subreaper():
    """PR_SET_CHILD_SUBREAPER: what a measured process leaves running when it
    exits (paddock's teardown, which goes on after `paddock run` reported the
    command's exit, and the sandbox's PID 1 it no longer reaps) is
    reparented to us, so its CPU is still counted (reap_orphans)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


def our_children():
    out = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/children" % tid) as f:
                out.update(int(x) for x in f.read().split())
        except OSError:
            pass
    return out - LONG_LIVED


def reap_orphans():
    """Wait for every child the measured process left to us; their CPU
    (with what they reaped) in ns."""
    cpu = 0
    while True:
        kids = our_children()
        if not kids:
            return cpu
        for pid in kids:
            try:
                _, _, ru = os.wait4(pid, 0)
            except ChildProcessError:
                continue
            cpu += int((ru.ru_utime + ru.ru_stime) * 1e9)


def measure(argv, env=None, rss_path=None):
    """Spawn argv, wait for it with wait4. Returns a dict: wall_ns, rc (exit
    status, or 128+signal), err (its stderr), maxrss_kib.

    maxrss_kib is only measured when rss_path is given: then argv runs under
    GNU time, which writes the child's ru_maxrss to rss_path (and the wall
    time includes time's own exec, so such runs are not used for timing).
    ru_maxrss from our own wait4 is useless here: the kernel carries the
    hiwater RSS of the pre-exec memory into it, and a child forked by Python
    starts as a copy of (or, with vfork, shares) Python's ~14 MB."""
    if rss_path:
        argv = [TIME, "-f", "%M", "-o", rss_path, "--"] + list(argv)
    errf = tempfile.TemporaryFile()
    try:
        t0 = time.perf_counter_ns()
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=errf, env=env)
        except OSError as e:
            return {"wall_ns": 0, "cpu_ns": 0, "maxrss_kib": 0, "rc": 127, "err": "%s: %s" % (argv[0], e)}
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.perf_counter_ns()
        rc = os.waitstatus_to_exitcode(status)
        if rc < 0:
            rc = 128 - rc
        p.returncode = rc  # reaped by wait4; keep Popen from trying again
        # what it left running when it exited (paddock's teardown and the
        # sandbox's PID 1, reparented to us): the wall time ends at the
        # exit, the CPU counts all of it; done_ns is when the last ended.
        # Before reading stderr: the teardown's trace lines go there too.
        orphan_ns = reap_orphans()
        t2 = time.perf_counter_ns()
        errf.seek(0)
        err = errf.read().decode(errors="replace")
        rss = None
        if rss_path:
            try:
                with open(rss_path) as f:
                    rss = int(f.read().split()[-1])
            except (OSError, ValueError, IndexError):
                rss = None
        # CPU: user + system of the spawned process and of every descendant
        # it reaped (wait4's rusage), so paddock's agent and the command count.
        cpu_ns = int((ru.ru_utime + ru.ru_stime) * 1e9)
        return {"wall_ns": t1 - t0, "cpu_ns": cpu_ns + orphan_ns, "orphan_cpu_ns": orphan_ns,
                "done_ns": t2 - t0, "maxrss_kib": rss, "rc": rc, "err": err}
    finally:
        errf.close()


def helper_main():
    """Runs inside `unshare -m --propagation private`: drop the cgroup2 mounts
    that make the host's cgroup layout "hybrid" (crun refuses it), then time
    commands sent as JSON lines on stdin, one JSON line back per command."""
    umounted = []
    for mnt in cgroup2_submounts():
        r = subprocess.run(["umount", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        umounted.append({"path": mnt, "rc": r.returncode,
                         "err": r.stderr.decode(errors="replace").strip()})
    out = sys.stdout
    out.write(json.dumps({"ready": True, "umounted": umounted}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        res = measure(req["argv"], env=req.get("env"), rss_path=req.get("rss_path"))
        out.write(json.dumps(res) + "\n")
        out.flush()
    return 0


class Helper:
    """The parent's handle on helper_main."""

    def __init__(self):
        self.argv = ["unshare", "-m", "--propagation", "private", "--",
                     sys.executable, SCRIPT, "--helper"]
        self.p = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        LONG_LIVED.add(self.p.pid)
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            raise RuntimeError("helper `%s` did not start (exit %s)" %
                               (shlex.join(self.argv), self.p.returncode))
        self.info = json.loads(line)

    def measure(self, argv, env=None, rss_path=None):
        self.p.stdin.write(json.dumps({"argv": argv, "env": env, "rss_path": rss_path}) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("helper died")
        return json.loads(line)

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


# --------------------------------------------------------------------------
# Host facts.

def mountinfo():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            fstype = right.split()[0]
            yield fields[4], fstype


def cgroup2_submounts():
    return [mp for mp, fs in mountinfo() if fs == "cgroup2" and mp.startswith("/sys/fs/cgroup/")]


def cgroup_layout():
    mounts = {mp: fs for mp, fs in mountinfo() if mp == "/sys/fs/cgroup" or mp.startswith("/sys/fs/cgroup/")}
    if mounts.get("/sys/fs/cgroup") == "cgroup2":
        return "unified (cgroup v2 only at /sys/fs/cgroup)"
    v1 = sorted(os.path.basename(mp) for mp, fs in mounts.items() if fs == "cgroup")
    v2 = sorted(mp for mp, fs in mounts.items() if fs == "cgroup2")
    if v1 and v2:
        return "hybrid: cgroup v1 hierarchies (%s) + cgroup v2 at %s" % (", ".join(v1), ", ".join(v2))
    if v1:
        return "legacy: cgroup v1 only (%s)" % ", ".join(v1)
    return "unknown (%s)" % (mounts or "no cgroup mounts")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return "%s (%d online CPUs)" % (line.split(":", 1)[1].strip(), os.cpu_count())
    except OSError:
        pass
    return "%s (%d online CPUs)" % (platform.processor() or "unknown", os.cpu_count())


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def mount_count():
    try:
        with open("/proc/self/mountinfo") as f:
            return sum(1 for _ in f)
    except OSError:
        return "?"


def version_of(argv):
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "not available (%s)" % e
    text = r.stdout.decode(errors="replace").strip()
    first = text.splitlines()[0] if text else ""
    return first if r.returncode == 0 else "exit %d: %s" % (r.returncode, first)


def paddock_instance(state):
    """The cgroup/uid-range instance name paddock derives from a state
    directory (src/lib/state.c: FNV-1a 64 of its realpath, folded to 32)."""
    h = 0xcbf29ce484222325
    for b in os.path.realpath(state).encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%08x" % ((h ^ (h >> 32)) & 0xFFFFFFFF)


def paddock_cgroup_dirs(instance):
    """paddock-<instance> cgroup directories on the host (to see whether
    ours are left behind after gc; other people's are none of our business)."""
    found = set()
    base = "/sys/fs/cgroup"
    try:
        subs = [os.path.join(base, d) for d in os.listdir(base)]
    except OSError:
        return found
    for d in [base] + subs:
        try:
            for name in os.listdir(d):
                if name == "paddock-" + instance:
                    found.add(os.path.join(d, name))
        except OSError:
            pass
    return found


# --------------------------------------------------------------------------
# Peers.

class Peer:
    def __init__(self, name, label):
        self.name = name
        self.label = label
        self.runs = []          # result dicts of successful timed runs, with "round"
        self.rss = []           # peak RSS (KiB) of the successful GNU time runs
        self.error = None       # why the peer was dropped, if it was
        self.failures = []      # failed timed runs (not counted), as messages
        self.streak = 0         # consecutive failed timed runs
        self.how = ""           # how it was measured (for the report)
        self.commands = []      # display strings of the commands run
        self.namespaces = ""

    def available(self):
        return self.error is None

    def run_once(self, i, rss_path=None):
        raise NotImplementedError

    def fail(self, msg):
        if self.error is None:
            self.error = msg.strip()


class ExecPeer(Peer):
    """A command run straight from this process."""

    def __init__(self, name, label, argv, env=None):
        super().__init__(name, label)
        self.argv = argv
        self.env = env
        self.commands = [shlex.join(argv)]
        self.how = "spawned directly by the benchmark"

    def run_once(self, i, rss_path=None):
        return measure(self.argv, env=self.env, rss_path=rss_path)


class PaddockPeer(ExecPeer):
    def __init__(self, paddock, state, env, name="paddock", label="paddock run"):
        argv = [paddock, "run", "--state-dir", state, "--", "/bin/true"]
        super().__init__(name, label, argv, env)
        self.paddock = paddock
        self.state = state
        self.commands = ["PADDOCK_AGENT=%s %s" % (shlex.quote(env["PADDOCK_AGENT"]), shlex.join(argv))]


class OciPeer(Peer):
    """crun or runc: `<rt> --root <dir> run -b <bundle> <id>`, measured
    either directly or from inside the unshare helper."""

    def __init__(self, rt, root, bundle, get_helper):
        super().__init__(rt, "%s run" % rt)
        self.rt = rt
        self.root = root
        self.bundle = bundle
        self.get_helper = get_helper
        self.via_helper = False
        self.ids = []

    def argv(self, cid):
        return [self.rt, "--root", self.root, "run", "-b", self.bundle, cid]

    def _run(self, cid, rss_path=None):
        self.ids.append(cid)
        if self.via_helper:
            return self.get_helper().measure(self.argv(cid), rss_path=rss_path)
        return measure(self.argv(cid), rss_path=rss_path)

    def probe(self):
        """Try it directly first; if that fails, inside the helper."""
        r = self._run("pdbench-%d-%s-probe-direct" % (os.getpid(), self.rt))
        if r["rc"] == 0:
            self.how = "spawned directly by the benchmark (works on this host as is)"
            self.commands = [shlex.join(self.argv("<id>"))]
            return True
        direct_err = r["err"].strip()
        try:
            helper = self.get_helper()
        except Exception as e:  # noqa: BLE001 - report any reason
            self.fail("direct run failed (%s); helper unavailable: %s" % (direct_err, e))
            return False
        self.via_helper = True
        r = self._run("pdbench-%d-%s-probe-helper" % (os.getpid(), self.rt))
        if r["rc"] != 0:
            self.fail("direct run failed (%s); in the unshare helper too (exit %d: %s)"
                      % (direct_err, r["rc"], r["err"].strip()))
            return False
        um = ", ".join(u["path"] for u in helper.info["umounted"] if u["rc"] == 0) or "nothing"
        self.how = ("run directly it fails (`%s`), so it is spawned and timed by a helper "
                    "process started once as `%s`, which first unmounted %s in its private "
                    "mount namespace; unshare, umount and the helper's own start-up are outside "
                    "the timed window" % (direct_err.splitlines()[-1] if direct_err else "?",
                                          shlex.join(helper.argv[:5] + ["/usr/bin/python3", "bench/start-time.py", "--helper"]), um))
        self.commands = ["# in the helper's mount namespace, after `umount %s`:" % um,
                         shlex.join(self.argv("<id>"))]
        return True

    def run_once(self, i, rss_path=None):
        return self._run("pdbench-%d-%s-%s%d" % (os.getpid(), self.rt, "rss" if rss_path else "", i),
                         rss_path=rss_path)

    def cleanup(self):
        """Delete whatever containers of ours are still listed."""
        try:
            r = subprocess.run([self.rt, "--root", self.root, "list", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            out = r.stdout.split()
        except Exception:  # noqa: BLE001
            out = []
        left = [c for c in out if c.startswith("pdbench-")]
        for cid in left:
            argv = [self.rt, "--root", self.root, "delete", "-f", cid]
            try:
                if self.via_helper:
                    self.get_helper().measure(argv)
                else:
                    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except Exception:  # noqa: BLE001
                pass
        return left


def build_bundle(bundle):
    """config.json from `crun spec` (else `runc spec`), rootfs with
    /usr/bin/true and the libraries ldd lists. Returns the namespace list."""
    rootfs = os.path.join(bundle, "rootfs")
    os.makedirs(rootfs)
    true = os.path.realpath("/usr/bin/true")
    files = ["/usr/bin/true"]
    ldd = subprocess.run(["ldd", true], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in ldd.stdout.splitlines():
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)", line)
        if m:
            files.append(m.group(1))
    for f in files:
        dst = os.path.join(rootfs, f.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.realpath(f), dst)
    os.symlink("usr/bin", os.path.join(rootfs, "bin"))
    gen = None
    for rt in ("crun", "runc"):
        if shutil.which(rt):
            r = subprocess.run([rt, "spec"], cwd=bundle, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if r.returncode == 0:
                gen = rt
                break
    if gen is None:
        raise RuntimeError("neither `crun spec` nor `runc spec` works")
    cfg_path = os.path.join(bundle, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["process"]["args"] = ["/bin/true"]
    cfg["process"]["terminal"] = False
    cfg["root"]["path"] = rootfs
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    ns = [n["type"] for n in cfg.get("linux", {}).get("namespaces", [])]
    return gen, files, ns, cfg


# --------------------------------------------------------------------------
# Statistics and output.

def ms(ns):
    return ns / 1e6


def summarize(peer):
    walls = [r["wall_ns"] for r in peer.runs]
    cpus = [r.get("cpu_ns", 0) for r in peer.runs]
    return {"n": len(walls), "min": ms(min(walls)), "median": ms(statistics.median(walls)),
            "max": ms(max(walls)), "rss": statistics.median(peer.rss) if peer.rss else None,
            "cpu": ms(statistics.median(cpus))}


def paired_ratio(a, b, key="wall_ns"):
    """Median over rounds of a/b, using only rounds where both ran."""
    bw = {r["round"]: r.get(key, 0) for r in b.runs}
    ratios = [r.get(key, 0) / bw[r["round"]] for r in a.runs if r["round"] in bw and bw[r["round"]]]
    return statistics.median(ratios) if ratios else None


def table_rows(peers):
    pad = next(p for p in peers if p.name == "paddock")
    pad_med = summarize(pad)["median"] if pad.runs else None
    rows = []
    for p in peers:
        if not p.runs:
            rows.append([p.label, "-", "-", "-", "-", "-", "-", "-", "-", "not measured: " + (p.error or "no runs")])
            continue
        s = summarize(p)
        ratio = "%.2f×" % (s["median"] / pad_med) if pad_med else "-"
        pad_cpu = summarize(pad)["cpu"] if pad.runs else None
        cratio = "%.2f×" % (s["cpu"] / pad_cpu) if pad_cpu else "-"
        note = ("dropped after %d runs: %s" % (s["n"], p.error)) if p.error else (
            "%d failed run(s) not counted, see notes" % len(p.failures) if p.failures else "")
        rows.append([p.label, str(s["n"]), "%.2f" % s["min"], "%.2f" % s["median"], "%.2f" % s["max"],
                     "%.2f" % s["cpu"], "%d" % s["rss"] if s["rss"] is not None else "-", ratio, cratio, note])
    return rows


HEAD = ["peer", "runs", "min ms", "median ms", "max ms", "median CPU ms", "median peak RSS KiB",
        "median / paddock's", "CPU / paddock's", "note"]


def print_table(rows):
    w = [max(len(HEAD[i]), *(len(r[i]) for r in rows)) for i in range(len(HEAD) - 1)]
    fmt = "  ".join(("%%-%ds" if i == 0 else "%%%ds") % w[i] for i in range(len(w)))
    print(fmt % tuple(HEAD[:-1]))
    for r in rows:
        line = fmt % tuple(r[:-1])
        print(line + ("  " + r[-1] if r[-1] else ""))


def md_table(rows):
    out = ["| " + " | ".join(HEAD) + " |",
           "|" + "|".join(["---"] + ["---:"] * 8 + ["---"]) + "|"]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    return "\n".join(out)


def goal_lines(peers):
    pad = next(p for p in peers if p.name == "paddock")
    bw = next((p for p in peers if p.name == "bwrap"), None)
    if not pad.runs or not bw or not bw.runs:
        return ["paddock / bwrap: not available (one of them has no runs)."]
    r = summarize(pad)["median"] / summarize(bw)["median"]
    pr = paired_ratio(pad, bw)
    c = summarize(pad)["cpu"] / summarize(bw)["cpu"] if summarize(bw)["cpu"] else float("nan")
    pc = paired_ratio(pad, bw, "cpu_ns")
    out = ["**paddock median / bwrap median = %.2f** (issue 19, target 1: ≤ 1.0: %s; the longer "
           "goal ≤ 0.5: %s)." % (r, "met" if r <= 1.0 else "NOT met", "met" if r <= 0.5 else "NOT met"),
           "Median over rounds of the per-round ratio paddock / bwrap (paired, same round): %.2f." % pr,
           "**CPU per run, paddock median / bwrap median = %.2f** (%.2f ms / %.2f ms; target ≤ 1.5: %s); "
           "paired per round: %.2f." % (c, summarize(pad)["cpu"], summarize(bw)["cpu"],
                                        "met" if c <= 1.5 else "NOT met", pc if pc else float("nan"))]
    before = next((p for p in peers if p.name == "before"), None)
    if before and before.runs:
        sb, sp = summarize(before), summarize(pad)
        out.append("paddock (this build) / paddock (before): wall %.2f (paired %.2f), CPU %.2f "
                   "(paired %.2f)." % (sp["median"] / sb["median"], paired_ratio(pad, before),
                                       sp["cpu"] / sb["cpu"] if sb["cpu"] else float("nan"),
                                       paired_ratio(pad, before, "cpu_ns") or float("nan")))
    sy = next((p for p in peers if p.name == "sync"), None)
    if sy and sy.runs:
        ss, sp = summarize(sy), summarize(pad)
        out.append("Teardown after the exit / before it (this build, PADDOCK_TEARDOWN=sync): wall %.2f "
                   "(paired %.2f), CPU %.2f (paired %.2f)."
                   % (sp["median"] / ss["median"], paired_ratio(pad, sy),
                      sp["cpu"] / ss["cpu"] if ss["cpu"] else float("nan"),
                      paired_ratio(pad, sy, "cpu_ns") or float("nan")))
    left = []
    for p in peers:
        on = [r.get("orphan_cpu_ns", 0) for r in p.runs]
        if on and statistics.median(on) > 0:
            left.append("%s %.2f ms (%d of %d runs)" % (p.label, ms(statistics.median(on)),
                                                       sum(1 for x in on if x > 0), len(on)))
    if left:
        out.append("CPU of what a peer left running when it exited (reparented to the benchmark, a "
                   "subreaper, which reaps it and adds its CPU to that run's), median per run: %s. "
                   "A benchmark that is no subreaper never sees it (init reaps it)." % "; ".join(left))
    dn = [r["done_ns"] for r in pad.runs if r.get("done_ns")]
    on = [r["orphan_cpu_ns"] for r in pad.runs if r.get("orphan_cpu_ns") is not None]
    if dn:
        out.append("paddock's teardown, after its exit: median %.2f ms until it had ended too (the "
                   "wall figures end at paddock's exit), and %.2f ms of CPU of what paddock left "
                   "running (its teardown process and the sandbox's PID 1, reparented to the "
                   "benchmark, which is a subreaper): counted in paddock's CPU above."
                   % (ms(statistics.median(dn)), ms(statistics.median(on)) if on else 0.0))
    ax = next((p for p in peers if p.name == "agentexec"), None)
    if ax and ax.runs:
        sa, sp = summarize(ax), summarize(pad)
        out.append("In-process agent / agent exec'd (this build, PADDOCK_AGENT_EXEC=1): wall %.2f "
                   "(paired %.2f), CPU %.2f (paired %.2f)."
                   % (sp["median"] / sa["median"], paired_ratio(pad, ax),
                      sp["cpu"] / sa["cpu"] if sa["cpu"] else float("nan"),
                      paired_ratio(pad, ax, "cpu_ns") or float("nan")))
    plain = next((p for p in peers if p.name == "plain"), None)
    if plain and plain.runs:
        f = summarize(plain)["median"]
        a, b = summarize(pad)["median"] - f, summarize(bw)["median"] - f
        if b > 0:
            out.append("With the plain-exec floor (%.2f ms, the cost of spawning anything from "
                       "the benchmark) taken off both: %.2f ms / %.2f ms = %.2f." % (f, a, b, a / b))
    return out


def parse_trace(text):
    """[(step, wall ms)], and with PADDOCK_TRACE=cpu {step: (CPU ms, page
    faults) spent in the step}: the difference of the process's running
    totals from its previous line (the child's totals start at 0 at the
    clone), plus "children" (CPU of the reaped children at the last line:
    the sandbox child, agent and command) and "before main" (the CPU of the
    paddock process when its first line was written)."""
    steps = []
    cpu = {}
    seen = {}
    last = {}
    in_teardown = False
    for line in text.splitlines():
        m = TRACE_RE.match(line.strip())
        if not m:
            continue
        name = m.group(2).strip()
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = "%s (#%d)" % (name, seen[name])
        steps.append((name, float(m.group(1))))
        if name.startswith("teardown:"):
            in_teardown = True
        if m.group(3) is not None:
            # the teardown goes on in a child of paddock forked after the
            # result (its totals start at 0 at the fork)
            who = "child" if name.startswith("child:") else "teardown" if in_teardown else "paddock"
            c, f, k = float(m.group(3)), int(m.group(4)), float(m.group(5))
            pc, pf = last.get(who, (0.0, 0))
            if who == "paddock" and who not in last:
                cpu["before main"] = (c, f)
            else:
                cpu[name] = (c - pc, f - pf)
            last[who] = (c, f)
            if who == "paddock":
                cpu["children"] = (k, 0)
                cpu["paddock process"] = (c, f)
            if who == "teardown":
                cpu["teardown process"] = (c, f)
    return steps, cpu


# Steps of the teardown, which runs in a child of paddock after the result
# is reported (a step of paddock's own when PADDOCK_TEARDOWN=sync).
TEARDOWN_STEPS = ("teardown:", "destroy")


def trace_section(trace_runs, trace_err):
    lines = ["## Where paddock's time goes", ""]
    if trace_err:
        lines += ["Trace runs failed: %s" % trace_err, ""]
    if not trace_runs:
        return lines
    order = []
    per = {}
    pcpu = {}
    for run in trace_runs:
        for name, v in run["steps"]:
            if name not in per:
                per[name] = []
                order.append(name)
            per[name].append(v)
        for name, v in run.get("cpu", {}).items():
            pcpu.setdefault(name, []).append(v)
    n = len(trace_runs)
    walls = [ms(r["wall_ns"]) for r in trace_runs]
    parent_sums = [sum(v for name, v in r["steps"] if not name.startswith("child:") and
                       not ("teardown process" in r.get("cpu", {}) and name.startswith(TEARDOWN_STEPS)))
                   for r in trace_runs]
    outside = [w - s for w, s in zip(walls, parent_sums)]
    lines += [
        "%d runs of `paddock run --state-dir <dir> -- /bin/true` with `PADDOCK_TRACE=cpu`, "
        "after the timed rounds. Each `trace:` line is the time since the previous trace line "
        "*of the same process*; the median of each step over the runs:" % n,
        "",
        "| step | process | median ms | mean ms | min ms | max ms | seen in | median CPU ms | median page faults |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def cpu_cells(name):
        if name not in pcpu:
            return "-", "-"
        return ("%.3f" % statistics.median(c for c, _ in pcpu[name]),
                "%d" % statistics.median(f for _, f in pcpu[name]))
    for name in order:
        v = per[name]
        who = ("child" if name.startswith("child:") else "teardown" if name.startswith(TEARDOWN_STEPS)
               and "teardown process" in pcpu else "paddock")
        lines.append("| %s | %s | %.3f | %.3f | %.3f | %.3f | %d/%d | %s | %s |" %
                     ((name, who, statistics.median(v), statistics.mean(v), min(v), max(v), len(v), n)
                      + cpu_cells(name)))
    lines += [
        "",
        "- Median wall time of these traced runs (spawn to wait4): **%.3f ms**." % statistics.median(walls),
    ]
    if pcpu:
        cpus = [ms(r["cpu_ns"]) for r in trace_runs]
        lines += [
            "- CPU (`PADDOCK_TRACE=cpu`: each line also carries its process's `getrusage` totals; the "
            "CPU and page-fault columns are the differences between a process's consecutive lines): "
            "median CPU per traced run (wait4) **%.3f ms** = the paddock process %.3f ms (of which "
            "%.3f ms and %s page faults before its first line: exec, dynamic loading, option parsing) "
            "+ its reaped children %.3f ms (the sandbox child's setup in the `child:` rows, then the "
            "agent's start, its loop and `/bin/true`, and the exit of the sandbox's PID 1)."
            % (statistics.median(cpus), statistics.median(c for c, _ in pcpu["paddock process"]),
               statistics.median(c for c, _ in pcpu["before main"]),
               "%d" % statistics.median(f for _, f in pcpu["before main"]),
               statistics.median(c for c, _ in pcpu["children"])),
        ]
        if "teardown process" in pcpu:
            lines += [
                "- The `teardown` rows run in paddock's teardown process, started once the result is "
                "reported (after `result reported`; a clone that shares paddock's memory, its totals "
                "start at 0): median CPU %.3f "
                "ms. It and the sandbox's PID 1 outlive paddock; the benchmark, a subreaper, reaps them "
                "and counts their CPU in the run's total (median %.3f ms of the total above), which is "
                "why the reaped-children figure of the paddock process is small. The wall time ends at "
                "paddock's exit; the sum below leaves the teardown rows out."
                % (statistics.median(c for c, _ in pcpu["teardown process"]),
                   statistics.median(ms(r.get("orphan_cpu_ns", 0)) for r in trace_runs)),
            ]
    lines += [
        "- Median sum of the paddock-process steps: %.3f ms; median wall minus that sum "
        "(exec of paddock, dynamic loading, everything before the first trace call, exit): %.3f ms."
        % (statistics.median(parent_sums), statistics.median(outside)),
        "- The `child:` steps run in the cloned sandbox child, which inherits the trace clock "
        "as it stood at the parent's last line before clone3 (`prepared ...`), so "
        "`child: got trees` overlaps paddock's own `clone3`, "
        "`maps + cgroup attach` and `idmapped trees sent`, and all the `child:` steps together "
        "lie inside paddock's `child set up and exec'd agent`. Do not add them to the paddock "
        "steps. Lines of the two processes can interleave on stderr; they are matched by name.",
        "- A step whose mean is far above its median had a stall in some run; on a loaded "
        "machine such stalls land on a different step each run, which is why the median "
        "wall time can be well above the sum of the step medians.",
        "- These runs come after the timed rounds, at another moment of the machine's load, "
        "and tracing adds an fprintf per step: compare the steps with each other, not this "
        "total with the table above.",
        "",
    ]
    return lines



# --------------------------------------------------------------------------
# Login shell (issue 19, target 2): what the string form of a command
# (`bash -l -c`, as E2B runs commands) costs over the argv form, inside one
# sandbox, so the sandbox's start is not part of it. A bash loop times each
# form with $EPOCHREALTIME, the three forms alternating (order rotating) in
# every iteration.

LOGIN_SCRIPT = r"""
n=$1
for ((i = 0; i < n; i++)); do
  for k in 0 1 2; do
    f=$(( (i + k) % 3 ))
    t0=$EPOCHREALTIME
    case $f in
      0) /usr/bin/true ;;
      1) /bin/bash -c true ;;
      2) /bin/bash -l -c true ;;
    esac
    t1=$EPOCHREALTIME
    echo "$f $t0 $t1"
  done
done
"""
LOGIN_FORMS = ["argv `/usr/bin/true`", "`bash -c true`", "`bash -l -c true`"]


def host_files_layer(paths):
    """A tar layer of host files at their paths (binaries and the libraries
    ldd lists; symlinks /bin, /lib, /lib64 -> usr/... as on the host)."""
    import io
    import tarfile
    files = set()
    for f in paths:
        files.add(f)
        ldd = subprocess.run(["ldd", f], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in ldd.stdout.splitlines():
            m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)", line)
            if m:
                files.add(m.group(1))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        done = set()

        def mkdir(d):
            parts = d.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                p = "/".join(parts[:i])
                if p and p not in done:
                    ti = tarfile.TarInfo(p)
                    ti.type, ti.mode = tarfile.DIRTYPE, 0o1777 if p == "tmp" else 0o755
                    t.addfile(ti)
                    done.add(p)
        for d in ("usr/bin", "usr/lib", "usr/lib64", "etc/profile.d", "tmp", "root", "home"):
            mkdir(d)
        for name, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/bin")):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            t.addfile(ti)
        for f in sorted(files):
            real = os.path.realpath(f)
            rel = f.lstrip("/")
            for pre, to in (("bin/", "usr/bin/"), ("lib/", "usr/lib/"), ("lib64/", "usr/lib64/")):
                if rel.startswith(pre):
                    rel = to + rel[len(pre):]
            mkdir(os.path.dirname(rel))
            with open(real, "rb") as fh:
                data = fh.read()
            ti = tarfile.TarInfo(rel)
            ti.size, ti.mode = len(data), os.stat(real).st_mode & 0o7777
            t.addfile(ti, io.BytesIO(data))
        for name in ("etc/profile", "etc/bash.bashrc"):
            with open("/" + name, "rb") as fh:
                data = fh.read()
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))
        for name, text in (("etc/passwd", b"root:x:0:0:root:/root:/bin/bash\n"), ("etc/group", b"root:x:0:\n")):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(text), 0o644
            t.addfile(ti, io.BytesIO(text))
    return buf.getvalue()


def make_login_image(path):
    """An OCI layout of one layer: bash, coreutils' true/id, their libraries,
    and the host's Debian /etc/profile and /etc/bash.bashrc (a Debian image's
    own profile: `$(id -u)` and an /etc/profile.d loop, here empty)."""
    import gzip
    import hashlib

    def sha(b):
        return hashlib.sha256(b).hexdigest()
    tar = host_files_layer(["/usr/bin/bash", "/usr/bin/true", "/usr/bin/id"])
    blobs = os.path.join(path, "blobs", "sha256")
    os.makedirs(blobs)
    z = gzip.compress(tar, mtime=0)
    with open(os.path.join(blobs, sha(z)), "wb") as f:
        f.write(z)
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                      "rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha(tar)]}}).encode()
    with open(os.path.join(blobs, sha(cfg)), "wb") as f:
        f.write(cfg)
    man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": "sha256:" + sha(cfg), "size": len(cfg)},
                      "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                  "digest": "sha256:" + sha(z), "size": len(z)}]}).encode()
    with open(os.path.join(blobs, sha(man)), "wb") as f:
        f.write(man)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion": "1.0.0"}')
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + sha(man),
             "size": len(man), "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}, f)


def login_targets(pad, before, work):
    """(label, argv prefix, env) of each sandbox the login bench runs in."""
    out = [("base template, this build", [pad.paddock, "run", "--state-dir", pad.state], pad.env)]
    if before is not None and before.available():
        out.append(("base template, before", [before.paddock, "run", "--state-dir", before.state], before.env))
    layout = os.path.join(work, "login-image")
    try:
        make_login_image(layout)
        r = subprocess.run([pad.paddock, "template", "pull", "--state-dir", pad.state, "bench-login",
                            "oci:%s:latest" % layout], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=pad.env)
        if r.returncode == 0:
            out.append(("image template (Debian's /etc/profile), this build",
                        [pad.paddock, "run", "--state-dir", pad.state, "--template", "bench-login"], pad.env))
        else:
            print("login: image template not made: %s" % r.stdout.strip(), file=sys.stderr)
    except Exception as e:  # noqa: BLE001
        print("login: image template not made: %s" % e, file=sys.stderr)
    return out


def run_login(targets, rounds, iters):
    """{label: [[delta ms per iteration] per form]}; rounds alternate the targets."""
    res = {t[0]: [[], [], []] for t in targets}
    errs = {}
    for rnd in range(rounds):
        order = targets[rnd % len(targets):] + targets[:rnd % len(targets)]
        for label, prefix, env in order:
            r = subprocess.run(prefix + ["--", "/bin/bash", "-c", LOGIN_SCRIPT, "login", str(iters)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
            if r.returncode != 0:
                errs[label] = "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:])
                continue
            for line in r.stdout.splitlines():
                f, t0, t1 = line.split()
                res[label][int(f)].append((float(t1) - float(t0)) * 1000)
    return res, errs


def login_section(res, errs, rounds, iters):
    L = ["## Login shell: string form against argv form", "",
         "Inside one sandbox per round (so the sandbox's start is not in it), a bash loop runs "
         "the three forms %d times, alternating with a rotating order, and times each with "
         "`$EPOCHREALTIME` (fork + exec + wait from bash, as the agent spawns a command); %d "
         "rounds, the sandboxes alternating from round to round. The string form is what E2B's "
         "`commands.run` and the API's string `cmd` run (`/bin/bash -l -c`). Medians in ms:"
         % (iters, rounds), "",
         "| sandbox | n | argv | `bash -c` | `bash -l -c` | string − argv | `-l` alone (`bash -l -c` − `bash -c`) "
         "| string − argv, paired | `-l` alone, paired |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, forms in res.items():
        if not all(forms):
            L.append("| %s | 0 | - | - | - | - | - | - | %s |" % (label, errs.get(label, "no runs")))
            continue
        m = [statistics.median(f) for f in forms]
        # paired: the three forms of one iteration ran back to back
        n = min(len(f) for f in forms)
        sa = statistics.median(forms[2][i] - forms[0][i] for i in range(n))
        sl = statistics.median(forms[2][i] - forms[1][i] for i in range(n))
        L.append("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | **%.3f** | **%.3f** |" %
                 (label, n, m[0], m[1], m[2], m[2] - m[0], m[2] - m[1], sa, sl))
    L += ["", "The paired columns are the median over iterations of the difference between two "
          "forms run back to back in the same iteration: steadier than the difference of the "
          "medians on a loaded machine.", "",
          "Target 2 (issue 19): string − argv ≤ 1 ms in the base template. Image templates keep "
          "their own profile (no target; the image here is host files with Debian's own "
          "`/etc/profile`, which runs `$(id -u)`)."]
    for label, e in errs.items():
        L.append("- %s: a round failed: %s" % (label, e))
    L.append("")
    return L


def write_report(path, ctx, peers, trace_runs, trace_err, traced, login_lines=()):
    rows = table_rows(peers)
    L = ["# paddock start-time benchmark", "",
         "Generated by `bench/start-time.py` (see `bench/README.md`). Do not edit by hand.", "",
         "## Machine", "",
         "- Date: %s" % ctx["date"],
         "- Kernel: %s" % ctx["kernel"],
         "- CPU: %s" % ctx["cpu"],
         "- cgroup layout: %s" % ctx["cgroups"],
         "- Load average (1/5/15 min) before: %s; after: %s" % (ctx["load_before"], ctx["load_after"]),
         "- Host mounts (lines of /proc/self/mountinfo) before: %s; after: %s. bwrap's `--ro-bind / /` "
         "copies every one of them into each sandbox; paddock's root takes only its own trees"
         % (ctx["mounts_before"], ctx.get("mounts_after", "?")),
         "- Rounds: %d (peer order rotates each round), warm-up: %d paddock runs + 1 run of every other peer"
         % (ctx["rounds"], ctx["warmup"]),
         "- Command line: `%s`" % ctx["cmdline"],
         "",
         "## Versions", ""]
    for k, v in ctx["versions"]:
        L.append("- %s: `%s`" % (k, v))
    L += ["", "## Commands", "",
          "Each run is timed from just before the spawn (`subprocess.Popen`) to the return of "
          "`os.wait4` on that child's pid, in a Python process; stdin and stdout are /dev/null, "
          "stderr goes to a file. The `plain exec` row is the floor this method adds to every peer.",
          "", "```"]
    for p in peers:
        L.append("# %s — %s" % (p.label, p.how or "not run"))
        L += p.commands
        L.append("")
    if L[-1] == "":
        L.pop()
    L += ["```", "", "## Results", "", md_table(rows), ""]
    L += goal_lines(peers)
    L += ["",
          "Peak RSS comes from %d separate, untimed rounds (same rotation) in which each peer "
          "runs under GNU time (`/usr/bin/time -f %%M -o <file> -- <command>`); the column is "
          "the median of those. It is `ru_maxrss` of the spawned process as its parent's wait4 "
          "sees it: on Linux the largest resident set of that process *or of any descendant "
          "it reaped* (a maximum over single processes, not a sum), including the pre-exec "
          "memory of the forking parent. So for paddock it covers the paddock CLI and its agent; "
          "for crun/runc the runtime and the container's /bin/true; and it can never read below "
          "GNU time's own footprint, which the `plain exec` row shows. (`ru_maxrss` from the "
          "benchmark's own wait4 would read ~14 MB for every peer: a child forked by Python "
          "carries Python's hiwater RSS across exec.)" % ctx["rss_rounds"], "",
          "## Notes", ""]
    L += [n if n.startswith("  - ") else "- " + n for n in ctx["notes"]]
    L.append("")
    L += list(login_lines)
    if traced:
        L += trace_section(trace_runs, trace_err)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(L).rstrip() + "\n")
    os.replace(tmp, path)
    return rows


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=40, help="timed rounds (default 40)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed paddock runs first (default 3)")
    ap.add_argument("--rss-rounds", type=int, default=10,
                    help="untimed rounds under GNU time for peak RSS, after the timed ones (default 10; 0: skip)")
    ap.add_argument("--trace", action="store_true",
                    help="also run paddock with PADDOCK_TRACE=1 and report the median of each step")
    ap.add_argument("--trace-runs", type=int, default=10, help="traced paddock runs (default 10)")
    ap.add_argument("--report", default=DEFAULT_REPORT, help="Markdown report path")
    ap.add_argument("--before", metavar="PADDOCK",
                    help="an older paddock build (its agent at agent/paddock-agent beside it), "
                         "a peer of its own in every round")
    ap.add_argument("--login-rounds", type=int, default=5,
                    help="rounds of the login-shell comparison (default 5; 0: skip)")
    ap.add_argument("--login-iters", type=int, default=40,
                    help="iterations of each form per login round (default 40)")
    ap.add_argument("--agent-exec-peer", action="store_true",
                    help="add this build with PADDOCK_AGENT_EXEC=1 (the sandbox child execs "
                         "paddock-agent) as a peer")
    ap.add_argument("--sync-teardown-peer", action="store_true",
                    help="add this build with PADDOCK_TEARDOWN=sync (the teardown done before paddock "
                         "exits, as before) as a peer")
    ap.add_argument("--helper", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.helper:
        return helper_main()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if not become_subreaper():
        print("warning: PR_SET_CHILD_SUBREAPER failed: the CPU of paddock's teardown (after its "
              "exit) is not counted", file=sys.stderr)

    # SIGTERM/SIGHUP: unwind through the finally blocks so everything is cleaned up.
    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    if os.geteuid() != 0:
        print("warning: not root; paddock, crun and runc need root", file=sys.stderr)

    paddock = os.environ.get("PADDOCK_BIN") or os.path.join(ROOT, "build", "src", "paddock")
    agent = os.environ.get("PADDOCK_AGENT") or os.path.join(ROOT, "build", "src", "agent", "paddock-agent")
    paddock = os.path.abspath(paddock)
    agent = os.path.abspath(agent)
    pad_env = dict(os.environ, PADDOCK_AGENT=agent)
    pad_env.pop("PADDOCK_TRACE", None)

    ctx = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
           "kernel": os.uname().release, "cpu": cpu_model(), "cgroups": cgroup_layout(),
           "load_before": loadavg(), "mounts_before": mount_count(), "rounds": args.rounds, "warmup": args.warmup,
           "rss_rounds": args.rss_rounds,
           "cmdline": shlex.join(["/usr/bin/python3", os.path.relpath(SCRIPT, ROOT)] + sys.argv[1:]),
           "notes": []}
    ctx["versions"] = [
        ("paddock", version_of([paddock, "version"])),
        ("bwrap", version_of(["bwrap", "--version"])),
        ("crun", version_of(["crun", "--version"])),
        ("runc", version_of(["runc", "--version"])),
        ("python", sys.version.split()[0]),
        ("GNU time (peak RSS only)", version_of([TIME, "--version"])),
    ]

    work = tempfile.mkdtemp(prefix="paddock-bench-")
    state = os.path.join(work, "paddock-state")
    os.mkdir(state, 0o700)
    instance = paddock_instance(state)
    helper = [None]

    def get_helper():
        if helper[0] is None:
            helper[0] = Helper()
        return helper[0]

    peers = []
    pad = PaddockPeer(paddock, state, pad_env)
    pad.namespaces = ("user (uid map 0 → a 65536-id host range), mount, pid, net, ipc, uts, cgroup "
                      "(unshared in the child); plus cgroup v1/v2 limits (memory, pids, cpu), "
                      "a seccomp filter, an idmapped overlay root, /dev, /proc, /sys, and the agent "
                      "process that then runs the command")
    peers.append(pad)
    before = None
    if args.before:
        bbin = os.path.abspath(args.before)
        bstate = os.path.join(work, "paddock-before-state")
        os.mkdir(bstate, 0o700)
        benv = dict(pad_env, PADDOCK_AGENT=os.path.join(os.path.dirname(bbin), "agent", "paddock-agent"))
        before = PaddockPeer(bbin, bstate, benv, name="before", label="paddock run (before)")
        before.commands = ["PADDOCK_AGENT=%s %s" % (shlex.quote(benv["PADDOCK_AGENT"]), shlex.join(before.argv))]
        before.namespaces = "the same as paddock run, from the older build (--before)"
        ctx["versions"].append(("paddock (before)", version_of([bbin, "version"]) + " at " + bbin))
        peers.append(before)
    if args.agent_exec_peer:
        astate = os.path.join(work, "paddock-agent-exec-state")
        os.mkdir(astate, 0o700)
        aenv = dict(pad_env, PADDOCK_AGENT_EXEC="1")
        agent_exec = PaddockPeer(paddock, astate, aenv, name="agentexec",
                                 label="paddock run (agent exec'd)")
        agent_exec.commands = ["PADDOCK_AGENT_EXEC=1 " + pad.commands[0]]
        agent_exec.namespaces = ("the same as paddock run, this build, but the sandbox child execs "
                                 "paddock-agent instead of running the agent linked into paddock")
        peers.append(agent_exec)
    if args.sync_teardown_peer:
        sstate = os.path.join(work, "paddock-sync-state")
        os.mkdir(sstate, 0o700)
        senv = dict(pad_env, PADDOCK_TEARDOWN="sync")
        sync_peer = PaddockPeer(paddock, sstate, senv, name="sync", label="paddock run (teardown before exit)")
        sync_peer.commands = ["PADDOCK_TEARDOWN=sync " + pad.commands[0]]
        sync_peer.namespaces = ("the same as paddock run, this build, but the sandbox is torn down "
                                "before paddock exits (PADDOCK_TEARDOWN=sync)")
        peers.append(sync_peer)
    bw = ExecPeer("bwrap", "bwrap", ["bwrap", "--unshare-all", "--ro-bind", "/", "/",
                                     "--dev", "/dev", "--proc", "/proc", "/bin/true"])
    bw.namespaces = ("--unshare-all: user, mount, pid, net, ipc, uts, cgroup; no cgroup limits, "
                     "no seccomp; root is the host / bind-mounted read-only")
    peers.append(bw)
    oci = []
    bundle_info = None
    trace_runs, trace_err = [], None
    login_lines = []
    exit_code = 0
    try:
        bundle = os.path.join(work, "bundle")
        try:
            os.mkdir(bundle)
            bundle_info = build_bundle(bundle)
        except Exception as e:  # noqa: BLE001
            bundle_info = None
            bundle_err = str(e)
        for rt in ("crun", "runc"):
            p = OciPeer(rt, os.path.join(work, rt + "-root"), bundle, get_helper)
            if not shutil.which(rt):
                p.fail("%s is not installed" % rt)
            elif bundle_info is None:
                p.fail("no bundle: %s" % bundle_err)
            else:
                gen, files, ns, cfg = bundle_info
                p.namespaces = ("the bundle's: %s (from `%s spec`; no user or cgroup namespace); "
                                "the spec's cgroup (no limits set), capabilities, masked and "
                                "read-only paths, rlimits, no seccomp" % (", ".join(ns), gen))
            peers.append(p)
            oci.append(p)
        plain = ExecPeer("plain", "plain exec", ["/bin/true"])
        plain.namespaces = "none"
        peers.append(plain)

        # Warm-up (also the first paddock run builds the base template).
        print("warm-up ...", file=sys.stderr)
        for pp in [p for p in peers if isinstance(p, PaddockPeer)]:
            ok, last = 0, None
            for i in range(max(args.warmup, 1)):
                r = pp.run_once(i)
                if r["rc"] == 0:
                    ok += 1
                else:
                    last = "warm-up: `paddock run` exit %d: %s" % (r["rc"], r["err"].strip())
                    print(last, file=sys.stderr)
            if ok == 0:
                pp.fail(last)
        for p in peers:
            if isinstance(p, PaddockPeer) or not p.available():
                continue
            if isinstance(p, OciPeer):
                p.probe()
            else:
                r = p.run_once(0)
                if r["rc"] != 0:
                    p.fail("exit %d: %s" % (r["rc"], r["err"].strip()))

        # Timed rounds.
        n = len(peers)
        for rnd in range(args.rounds):
            order = peers[rnd % n:] + peers[:rnd % n]
            for p in order:
                if not p.available():
                    continue
                r = p.run_once(rnd)
                if r["rc"] != 0:
                    # Not counted. Others rebuild build/ in the same tree, so one
                    # failure may be a binary being relinked; three in a row drop the peer.
                    msg = "round %d: exit %d: %s" % (rnd, r["rc"], r["err"].strip())
                    p.failures.append(msg)
                    # bwrap's recursive bind of / races with other people's
                    # mounts coming and going on a shared host: not counted,
                    # but no reason to drop the peer.
                    if "Can't bind mount /oldroot/" not in r["err"]:
                        p.streak += 1
                    print("%s failed: %s" % (p.label, msg), file=sys.stderr)
                    if p.streak >= MAX_STREAK:
                        p.fail(msg)
                    continue
                p.streak = 0
                r["round"] = rnd
                p.runs.append(r)
            if (rnd + 1) % 10 == 0 or rnd + 1 == args.rounds:
                print("round %d/%d" % (rnd + 1, args.rounds), file=sys.stderr)

        # Peak RSS rounds, untimed, under GNU time.
        rss_path = os.path.join(work, "maxrss")
        if args.rss_rounds > 0 and not os.access(TIME, os.X_OK):
            ctx["notes"].append("Peak RSS not measured: %s (GNU time) is not installed." % TIME)
        elif args.rss_rounds > 0:
            print("peak RSS rounds ...", file=sys.stderr)
            for rnd in range(args.rss_rounds):
                order = peers[rnd % n:] + peers[:rnd % n]
                for p in order:
                    if not p.available():
                        continue
                    try:
                        os.unlink(rss_path)
                    except FileNotFoundError:
                        pass
                    r = p.run_once(rnd, rss_path=rss_path)
                    if r["rc"] == 0 and r["maxrss_kib"] is not None:
                        p.rss.append(r["maxrss_kib"])
                    elif r["rc"] != 0 and p is pad:
                        pad.fail("peak RSS round %d: exit %d: %s" % (rnd, r["rc"], r["err"].strip()))

        # Login shell, inside sandboxes.
        if args.login_rounds > 0 and pad.available():
            print("login-shell rounds ...", file=sys.stderr)
            targets = login_targets(pad, before, work)
            lres, lerr = run_login(targets, args.login_rounds, args.login_iters)
            login_lines = login_section(lres, lerr, args.login_rounds, args.login_iters)

        # Traced paddock runs.
        if args.trace:
            if not pad.available():
                trace_err = "skipped: paddock failed (%s)" % pad.error
            else:
                tenv = dict(pad_env, PADDOCK_TRACE="cpu")
                streak = 0
                while len(trace_runs) < args.trace_runs and streak < MAX_STREAK:
                    r = measure(pad.argv, env=tenv)
                    if r["rc"] != 0:
                        trace_err = "exit %d: %s" % (r["rc"], r["err"].strip())
                        streak += 1
                        continue
                    streak = 0
                    steps, cpu = parse_trace(r["err"])
                    trace_runs.append({"wall_ns": r["wall_ns"], "cpu_ns": r["cpu_ns"], "orphan_cpu_ns": r.get("orphan_cpu_ns", 0), "steps": steps, "cpu": cpu})
                if len(trace_runs) == args.trace_runs:
                    trace_err = None
                if trace_runs and not any(t["steps"] for t in trace_runs):
                    trace_err = "no `trace:` lines on stderr (built without tracing?)"
    finally:
        leftovers = []
        for p in oci:
            try:
                left = p.cleanup()
                if left:
                    leftovers.append("%s containers deleted at the end: %s" % (p.rt, ", ".join(left)))
            except Exception as e:  # noqa: BLE001
                leftovers.append("%s cleanup failed: %s" % (p.rt, e))
        if helper[0] is not None:
            helper[0].close()
        try:
            subprocess.run([paddock, "template", "rm", "--state-dir", state, "bench-login"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError as e:  # a binary being relinked: gc below still runs
            leftovers.append("`paddock template rm bench-login`: %s" % e)
        gcs = [(p.paddock, p.state) for p in peers if isinstance(p, PaddockPeer)]
        stray = []
        for gbin, gstate in gcs:
            try:
                gc = subprocess.run([gbin, "gc", "--state-dir", gstate], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True) if os.path.exists(gbin) else None
            except OSError as e:
                leftovers.append("`paddock gc --state-dir %s`: %s" % (gstate, e))
                gc = None
            if gc is not None and gc.returncode != 0:
                leftovers.append("`paddock gc` exit %d: %s" % (gc.returncode, gc.stdout.strip()))
            stray += sorted(paddock_cgroup_dirs(paddock_instance(gstate)))
        if stray:
            leftovers.append("cgroup directories of this run's paddock instance left after "
                             "`paddock gc`: %s" % ", ".join(stray))
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(work):
            leftovers.append("could not remove %s" % work)
        for msg in leftovers:
            print("cleanup: " + msg, file=sys.stderr)

    ctx["load_after"] = loadavg()
    ctx["mounts_after"] = mount_count()
    notes = ctx["notes"]
    notes.append("Namespaces and isolation each peer sets up:")
    for p in peers:
        notes.append("  - **%s**: %s" % (p.label, p.namespaces or "-"))
    if bundle_info:
        gen, files, ns, cfg = bundle_info
        notes.append("OCI bundle for crun and runc: `%s spec`, then process.args = [\"/bin/true\"], "
                     "terminal = false, root.path = a rootfs directory holding only %s (copied at "
                     "their paths) and a `bin -> usr/bin` symlink; root.readonly as generated (%s). "
                     "The namespace list was left as generated: %s."
                     % (gen, ", ".join("`%s`" % f for f in files), cfg["root"].get("readonly"),
                        ", ".join(ns)))
    for p in oci:
        if p.how:
            notes.append("%s: %s." % (p.rt, p.how))
    notes.append("Targets (issue 19, target 1): paddock's median wall time ≤ 1.0× bwrap's and its "
                 "CPU per run ≤ 1.5× bwrap's, in the same run, with all namespaces, network included, "
                 "on (the longer goal: ≤ 0.5× bwrap's wall time). paddock is the only peer here that "
                 "also sets cgroup limits, a seccomp filter and an idmapped overlay root, and "
                 "its /bin/true runs under its agent; bwrap sets up the same seven namespaces "
                 "but nothing else.")
    notes.append("The machine has few shared cores and other work on it; the peers alternate "
                 "within every round and the order rotates, so that noise falls on all of them "
                 "alike. Compare medians; max is mostly noise.")
    for p in peers:
        if p.error:
            notes.append("**%s failed** (dropped after %d failures in a row): %s"
                         % (p.label, MAX_STREAK, p.error))
        elif p.failures:
            notes.append("%s: %d timed run(s) failed and are not counted (the peer stays in "
                         "unless %d fail in a row): %s" % (p.label, len(p.failures), MAX_STREAK,
                                                           "; ".join(p.failures)))
    for msg in leftovers:
        notes.append("Cleanup: " + msg)

    rows = write_report(args.report, ctx, peers, trace_runs, trace_err, args.trace, login_lines)
    print_table(rows)
    for line in goal_lines(peers):
        print(line.replace("**", ""))
    if args.trace:
        if trace_err:
            print("trace: " + trace_err)
        if trace_runs:
            print("trace: %d runs, step medians in the report" % len(trace_runs))
    print("report: %s" % os.path.relpath(args.report, os.getcwd()))

    if pad.error or not pad.runs:
        exit_code = 1
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
