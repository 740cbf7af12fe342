#!/usr/bin/python3
"""microvm benchmark (issue 7): cold boot vs template-clone start vs the
container tier's start, pause-to-disk and resume times against guest memory,
memory per idle clone, and fork 10. Peers run in the same run, alternating.
Writes bench/reports/microvm.md.

    sudo /usr/bin/python3 bench/microvm.py [--rounds N] [--build DIR]

Standard library only. Uses its own state dirs under /tmp and `paddock gc`s
them at the end."""
import argparse
import datetime
import glob
import json
import os
import platform
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--report", default=REPORT)
    a = ap.parse_args()
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
