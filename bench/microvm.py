#!/usr/bin/python3
"""microvm benchmark (issue 7): cold boot vs template-clone start vs the
container tier's start, pause-to-disk and resume times against guest memory,
memory per idle clone, and fork 10. Peers run in the same run, alternating.
Writes bench/reports/microvm.md.

    sudo /usr/bin/python3 bench/microvm.py [--rounds N] [--build DIR]
    sudo /usr/bin/python3 bench/microvm.py --start-only [--old-build DIR] [--rounds N]

Standard library only. Uses its own state dirs under /tmp and `paddock gc`s
them at the end."""
import argparse
import datetime
import glob
import json
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "bench", "reports", "microvm.md")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


class Bench:
    def __init__(self, build):
        self.bin = os.path.join(build, "src", "paddock")
        self.env = dict(os.environ, PADDOCK_AGENT=os.path.join(build, "src", "agent", "paddock-agent"))
        self.tmp = tempfile.mkdtemp(prefix="pd-bench-vm-", dir="/tmp")
        self.state = os.path.join(self.tmp, "st")

    def run(self, args, check=True):
        t0 = time.perf_counter()
        r = subprocess.run([self.bin, "run", "--state-dir", self.state] + args, capture_output=True, text=True,
                           env=self.env, stdin=subprocess.DEVNULL, timeout=600)
        dt = time.perf_counter() - t0
        if check and r.returncode != 0:
            raise SystemExit("paddock run %s failed: %s" % (args, r.stderr))
        return dt, r

    # --- server ---
    def serve(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = open(os.path.join(self.tmp, "serve.log"), "ab")
        self.srv = subprocess.Popen([self.bin, "serve", "--listen", "127.0.0.1:%d" % self.port, "--state-dir",
                                     self.state, "--pool", "0"], env=self.env, stdout=self.log, stderr=self.log,
                                    stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/health" % self.port, timeout=2):
                    break
            except OSError:
                time.sleep(0.1)
        with open(os.path.join(self.state, "api-key")) as f:
            self.key = f.read().strip()

    def api(self, method, path, body=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + self.key,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                data = r.read()
                return r.status, json.loads(data) if data else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def stop(self):
        if getattr(self, "srv", None):
            self.srv.terminate()
            self.srv.wait(timeout=60)
        subprocess.run([self.bin, "gc", "--state-dir", self.state], env=self.env, capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


def qemu_pids(state):
    out = []
    for rec in glob.glob("/run/paddock/*/sandboxes/*/record") + glob.glob("/dev/shm/paddock/*/sandboxes/*/record"):
        try:
            with open(rec) as f:
                kv = dict(l.strip().split("=", 1) for l in f if "=" in l)
            pid = int(kv.get("agent_pid", 0))
            if kv.get("tier") != "microvm" or pid <= 0:
                continue
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if state.encode() in f.read():      # ours: its RAM file is under our state dir
                    out.append(pid)
        except (OSError, ValueError, KeyError):
            pass
    return out


def pss_kib(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def timed(argv, env):
    """Wall seconds, CPU seconds (this process and every child it reaped:
    QEMU and the relay included) and the CompletedProcess-like result."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = p.communicate(timeout=600)
    dt = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dt, ru, p.returncode, out.decode(), err.decode()


def start_only(a):
    """One-shot `paddock run --isolation microvm -- echo hi` of this build
    against its peers in the same run, alternating every round: the old
    build (--old-build, on its own state dir, same guest agent and assets),
    QEMU booting the same kernel directly (bench/vmdirect.py) and the
    container tier. Wall and CPU per run."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import vmdirect
    b = Bench(os.path.abspath(a.build))
    peers = [("new", b.bin, b.state)]
    if a.old_build:
        peers.append(("old", os.path.join(os.path.abspath(a.old_build), "src", "paddock"),
                      os.path.join(b.tmp, "st-old")))
    res = {"load_before": os.getloadavg(), "wall": {}, "cpu": {}}
    if a.assets_from:
        # content-addressed boot assets of another state dir, linked: no base image build
        os.makedirs(os.path.join(b.state, "vm"))
        for f in os.listdir(a.assets_from):
            if f.startswith(("vmlinux-", "initrd-", "rootfs-")):
                os.link(os.path.join(a.assets_from, f), os.path.join(b.state, "vm", f))
    try:
        for name, binp, state in peers:
            # first use: the new build makes the assets, the old one links them
            if name == "old":
                os.makedirs(os.path.join(state, "vm"))
                for f in os.listdir(os.path.join(b.state, "vm")):
                    if f.startswith(("vmlinux-", "initrd-", "rootfs-")):
                        os.link(os.path.join(b.state, "vm", f), os.path.join(state, "vm", f))
            _dt, _ru, rc, out, err = timed([binp, "run", "--state-dir", state, "--isolation", "microvm", "--",
                                            "echo", "hi"], b.env)
            if rc != 0 or out != "hi\n":
                raise SystemExit("%s: %s" % (name, err))
        direct = vmdirect.DirectBoot(os.path.join(b.state, "vm"), b.tmp)
        b.run(["--", "true"])
        jobs = [(n, [bp, "run", "--state-dir", st, "--isolation", "microvm", "--", "echo", "hi"]) for n, bp, st in peers]
        jobs.append(("container", [b.bin, "run", "--state-dir", b.state, "--", "echo", "hi"]))
        for i in range(a.rounds):
            order = jobs[i % len(jobs):] + jobs[:i % len(jobs)]     # rotate: nobody always first
            for name, argv in order:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                dt, ru, rc, out, err = timed(argv, b.env)
                if rc != 0 or out != "hi\n":
                    raise SystemExit("%s: rc %d: %s" % (name, rc, err))
                res["wall"].setdefault(name, []).append(dt)
                res["cpu"].setdefault(name, []).append(ru.ru_utime + ru.ru_stime - before.ru_utime - before.ru_stime)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            dt = direct.run()
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            res["wall"].setdefault("direct", []).append(dt)
            res["cpu"].setdefault("direct", []).append(ru.ru_utime + ru.ru_stime - before.ru_utime - before.ru_stime)
    finally:
        for name, binp, state in peers[1:]:
            subprocess.run([binp, "gc", "--state-dir", state], env=b.env, capture_output=True)
        b.stop()
    res["load_after"] = os.getloadavg()
    rows = [("new", "microvm one-shot, this build"), ("old", "microvm one-shot, old build (main)"),
            ("direct", "QEMU direct boot of the same kernel to `echo hi` (no paddock)"),
            ("container", "container tier one-shot, this build")]
    base = med(res["wall"].get("old") or res["wall"]["new"])
    lines = ["# microvm one-shot start: this build vs old build vs QEMU direct boot", "",
             "Generated by `bench/microvm.py --start-only` (see `bench/README.md`). Do not edit by hand.", "",
             "## Machine", "",
             "- Date: %s UTC" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S"),
             "- Kernel: %s; %d online CPUs; accel: tcg" % (platform.release(), os.cpu_count()),
             "- Load average (1/5/15 min) before: %s; after: %s (a shared 2-core machine: other engineers' "
             "builds and tests ran meanwhile, so walls are inflated; compare ratios within this run)" % (
                 " ".join("%.2f" % x for x in res["load_before"]), " ".join("%.2f" % x for x in res["load_after"])),
             "", "## `paddock run --isolation microvm -- echo hi` to its output and exit (%d rounds, peers "
             "alternating, order rotated each round)" % a.rounds, "",
             "CPU: user + system of the process and the children it reaped (QEMU, the relay), per run.", "",
             "| peer | wall median s | wall p90 s | CPU median s | wall / old build | CPU / old build |",
             "|---|---|---|---|---|---|"]
    cbase = med(res["cpu"].get("old") or res["cpu"]["new"])
    for k, label in rows:
        if k not in res["wall"]:
            continue
        w = sorted(res["wall"][k])
        lines.append("| %s | %.3f | %.3f | %.3f | %.2f | %.2f |" % (
            label, med(w), w[min(len(w) - 1, int(len(w) * 0.9))], med(res["cpu"][k]), med(w) / base,
            med(res["cpu"][k]) / cbase))
    lines += ["", "Raw wall: " + "; ".join("%s %s" % (k, [round(x, 3) for x in v]) for k, v in res["wall"].items()),
              "", "Raw CPU: " + "; ".join("%s %s" % (k, [round(x, 3) for x in v]) for k, v in res["cpu"].items()),
              ""]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(ROOT, "bench", "reports", "microvm-start.md"), "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--report", default=REPORT)
    ap.add_argument("--start-only", action="store_true",
                    help="only the one-shot start against its peers (bench/reports/microvm-start.md)")
    ap.add_argument("--old-build", help="with --start-only: another build (e.g. main's) as a peer")
    ap.add_argument("--assets-from", help="with --start-only: a state dir's vm/ whose boot assets are linked")
    a = ap.parse_args()
    if a.start_only:
        start_only(a)
        return
    b = Bench(os.path.abspath(a.build))
    res = {"load_before": os.getloadavg()}
    try:
        # first use: assets + template (timed once, as the user sees it)
        t_first, r = b.run(["--isolation", "microvm", "--", "echo", "hi"])
        res["first"] = t_first
        # container tier's own warm-up
        b.run(["--", "true"])
        clone, cont, cold = [], [], []
        for i in range(a.rounds):
            # alternate peers within a round
            dt, r = b.run(["--isolation", "microvm", "--", "echo", "hi"])
            assert r.stdout == "hi\n"
            clone.append(dt)
            dt, r = b.run(["--", "echo", "hi"])
            cont.append(dt)
            if i < max(3, a.rounds // 3):
                # cold: no template snapshot (assets cached): boot + save + clone
                for d in glob.glob(os.path.join(b.state, "vm", "tpl-*")):
                    shutil.rmtree(d)
                dt, r = b.run(["--isolation", "microvm", "--", "echo", "hi"])
                cold.append(dt)
        res.update(clone=clone, container=cont, cold=cold)

        b.serve()
        # pause to disk / resume vs guest memory
        pr = {}
        for mb in (256, 512, 1024):
            for rep in range(3):
                st, j = b.api("POST", "/api/v1/sandboxes", {"isolation": "microvm", "memory_mb": mb})
                assert st == 201, (st, j)
                sid = j["id"]
                # touch a quarter of the guest's memory so the save has something to carry
                st, j = b.api("POST", "/api/v1/sandboxes/%s/exec" % sid,
                              {"cmd": "python3 -c 'import time; b = bytearray(%d << 20); "
                                      "b[::4096] = b\"x\" * len(b[::4096]); time.sleep(0)' " % (mb // 4)})
                assert st == 200, (st, j)
                t0 = time.perf_counter()
                st, j = b.api("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "disk"})
                tp = time.perf_counter() - t0
                assert st == 200, (st, j)
                size = os.path.getsize(os.path.join(b.state, "vm", "paused", sid, "state"))
                t0 = time.perf_counter()
                st, j = b.api("POST", "/api/v1/sandboxes/%s/resume" % sid)
                tr = time.perf_counter() - t0
                assert st == 200, (st, j)
                st, j = b.api("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": "echo ok"})
                assert st == 200 and j["stdout"] == "ok\n", (st, j)
                pr.setdefault(mb, []).append((tp, tr, size))
                b.api("DELETE", "/api/v1/sandboxes/%s" % sid)
        res["pause"] = pr

        # memory per idle clone
        ids = []
        for _ in range(5):
            st, j = b.api("POST", "/api/v1/sandboxes", {"isolation": "microvm", "memory_mb": 512})
            assert st == 201, (st, j)
            ids.append(j["id"])
        time.sleep(2)   # let them settle idle before reading their memory
        pids = qemu_pids(b.state)
        res["pss"] = [pss_kib(p) for p in pids]
        res["rss"] = [rss_kib(p) for p in pids]
        # fork 10 of one of them
        for sid in ids[1:]:
            b.api("DELETE", "/api/v1/sandboxes/%s" % sid)
        t0 = time.perf_counter()
        st, j = b.api("POST", "/api/v1/sandboxes/%s/fork" % ids[0], {"count": 10})
        res["fork10"] = time.perf_counter() - t0
        assert st == 201, (st, j)
        kids = [x["id"] for x in j["sandboxes"]]
        for sid in kids + ids[:1]:
            b.api("DELETE", "/api/v1/sandboxes/%s" % sid)
    finally:
        b.stop()
    res["load_after"] = os.getloadavg()
    write_report(a, res)


def write_report(a, res):
    cl, co, cd = med(res["clone"]), med(res["container"]), med(res["cold"])
    lines = ["# microvm benchmark", "",
             "Generated by `bench/microvm.py` (see `bench/README.md`). Do not edit by hand.", "",
             "## Machine", "",
             "- Date: %s UTC" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S"),
             "- Kernel: %s; %d online CPUs; accel: %s" % (
                 platform.release(), os.cpu_count(),
                 "kvm" if any(f in open("/proc/cpuinfo").read() for f in (" vmx", " svm")) else "tcg"),
             "- Load average (1/5/15 min) before: %s; after: %s (a shared machine: other engineers' builds "
             "and tests ran meanwhile)" % (" ".join("%.2f" % x for x in res["load_before"]),
                                           " ".join("%.2f" % x for x in res["load_after"])), "",
             "## Start: request to first output of `echo hi` (`paddock run`, wall, median of %d)" % len(res["clone"]),
             "",
             "| peer | median s | ratio to container tier |", "|---|---|---|",
             "| container tier | %.3f | 1.00 |" % co,
             "| microvm, template clone | %.3f | %.2f |" % (cl, cl / co),
             "| microvm, cold boot (no template: boot + save + clone; %d runs) | %.3f | %.2f |" % (len(res["cold"]), cd, cd / co),
             "| microvm, very first use (base image + template built) | %.3f | %.2f |" % (res["first"], res["first"] / co),
             "", "Cold boot / template clone: %.1fx." % (cd / cl), "",
             "## Pause to disk and resume vs guest memory (server API, a quarter of the memory touched; 3 runs each)",
             "",
             "| guest memory | pause median s | resume median s | saved state MiB | pause s per GiB |",
             "|---|---|---|---|---|"]
    for mb, v in sorted(res["pause"].items()):
        tp, tr, sz = med([x[0] for x in v]), med([x[1] for x in v]), med([x[2] for x in v]) / 2 ** 20
        lines.append("| %d MiB | %.3f | %.3f | %.0f | %.2f |" % (mb, tp, tr, sz, tp / (mb / 1024)))
    lines += ["", "E2B documents about 4 s per GiB to pause and about 1 s to resume.", "",
              "## Memory per idle clone (512 MiB guests, 5 clones at once)", "",
              "| measure | median KiB |", "|---|---|",
              "| QEMU PSS (shared template pages split among clones) | %d |" % med(res["pss"]),
              "| QEMU RSS | %d |" % med(res["rss"]), "",
              "## fork 10 (server API, one 512 MiB guest)", "",
              "%.2f s for 10 copies (%.3f s each)." % (res["fork10"], res["fork10"] / 10), "",
              "Raw: clone %s; container %s; cold %s" % (
                  [round(x, 3) for x in res["clone"]], [round(x, 3) for x in res["container"]],
                  [round(x, 3) for x in res["cold"]]), ""]
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(a.report), exist_ok=True)
    with open(a.report, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
