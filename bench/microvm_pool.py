#!/usr/bin/python3
"""microvm through the server (issue 7): request to first output of `echo hi`
over the HTTP API for a microvm taken from the warm pool, a microvm cloned on
demand (a server without a pool), and the container tier (pooled and not),
peers alternating in the same run. Writes bench/reports/microvm-pool.md.

    sudo /usr/bin/python3 bench/microvm_pool.py [--rounds N] [--build DIR] [--old-build DIR]
        [--assets-from STATE/vm]

Standard library only. Two servers on their own state dirs under /tmp,
stopped and `paddock gc`ed at the end."""
import argparse
import datetime
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
REPORT = os.path.join(ROOT, "bench", "reports", "microvm-pool.md")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


class Server:
    def __init__(self, build, tmp, name, pool, agent=None, assets=None):
        self.bin = os.path.join(build, "src", "paddock")
        self.env = dict(os.environ, PADDOCK_AGENT=agent or os.path.join(build, "src", "agent", "paddock-agent"))
        self.state = os.path.join(tmp, name)
        if assets:
            # content-addressed boot assets of another state dir, linked: no base image build
            os.makedirs(os.path.join(self.state, "vm"))
            for f in os.listdir(assets):
                if f.startswith(("vmlinux-", "initrd-", "rootfs-")):
                    os.link(os.path.join(assets, f), os.path.join(self.state, "vm", f))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = open(os.path.join(tmp, name + ".log"), "ab")
        self.proc = subprocess.Popen([self.bin, "serve", "--listen", "127.0.0.1:%d" % self.port, "--state-dir",
                                      self.state, "--pool", str(pool)], env=self.env, stdout=self.log,
                                     stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/api/v1/health" % self.port, timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("paddock serve did not start (see %s.log)" % self.state)
                time.sleep(0.1)
        with open(os.path.join(self.state, "api-key")) as f:
            self.key = f.read().strip()

    def api(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request("http://127.0.0.1:%d/api/v1/%s" % (self.port, path), data=data, method=method,
                                   headers={"Authorization": "Bearer " + self.key})
        with urllib.request.urlopen(r, timeout=600) as resp:
            text = resp.read()
        return json.loads(text) if text.strip() else None

    def start_to_output(self, body):
        """Seconds from the create request to `echo hi`'s output; the sandbox id."""
        t0 = time.perf_counter()
        sid = self.api("POST", "sandboxes", body)["id"]
        out = self.api("POST", "sandboxes/%s/exec" % sid, {"cmd": ["echo", "hi"]})
        dt = time.perf_counter() - t0
        assert out["stdout"] == "hi\n", out
        return dt, sid

    def pooled(self, template, isolation):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=30) as r:
            text = r.read().decode()
        key = 'paddock_pool_ready_isolation{template="%s",isolation="%s"} ' % (template, isolation)
        for line in text.splitlines():
            if line.startswith(key):
                return int(line.split()[-1])
        return 0

    def wait_pool(self, isolation, n, limit=300):
        deadline = time.monotonic() + limit
        while self.pooled("base", isolation) < n:   # the filler reports nothing else to wait on
            if time.monotonic() > deadline:
                raise SystemExit("the %s pool did not fill in %d s" % (isolation, limit))
            time.sleep(0.2)

    def audit_pooled(self, sid):
        r = urllib.request.Request("http://127.0.0.1:%d/api/v1/sandboxes/%s/audit" % (self.port, sid),
                                   headers={"Authorization": "Bearer " + self.key})
        with urllib.request.urlopen(r, timeout=60) as resp:
            for line in resp.read().decode().splitlines():
                e = json.loads(line)
                if e["event"] == "sandbox.create":
                    return e.get("pooled")
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)
        subprocess.run([self.bin, "gc", "--state-dir", self.state], env=self.env, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=300)
        self.log.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--old-build", help="another build (e.g. main's) whose pooled microvm is a peer")
    ap.add_argument("--assets-from", help="a state dir's vm/ whose boot assets every server links")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="pd-bench-vmpool-", dir="/tmp")
    servers = []
    load0 = os.getloadavg()
    res = {"vm_pooled": [], "vm_clone": [], "ct_pooled": [], "ct_nopool": [], "direct": []}
    agent = os.path.join(a.build, "src", "agent", "paddock-agent")
    try:
        pool = Server(a.build, tmp, "pool", 1, assets=a.assets_from)
        nopool = Server(a.build, tmp, "nopool", 0, assets=a.assets_from)
        servers = [pool, nopool]
        old = None
        if a.old_build:
            # the same guest agent: the peers differ in the host side and the template only
            old = Server(os.path.abspath(a.old_build), tmp, "pool-old", 1, agent=agent, assets=a.assets_from)
            servers.append(old)
            res["vm_pooled_old"] = []
        vm = {"isolation": "microvm"}
        # first use: assets and template snapshot built on each state dir
        for s in servers:
            _dt, sid = s.start_to_output(vm)
            s.api("DELETE", "sandboxes/" + sid)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import vmdirect
        direct = vmdirect.DirectBoot(os.path.join(pool.state, "vm"), tmp)
        peers = [("vm_pooled", pool, vm), ("vm_clone", nopool, vm), ("ct_pooled", pool, {}),
                 ("ct_nopool", nopool, {})] + ([("vm_pooled_old", old, vm)] if old else [])
        for i in range(a.rounds):
            for s in (pool, old):
                if s:
                    s.wait_pool("microvm", 1)
            pool.wait_pool("container", 1)
            for key, srv, body in peers[i % len(peers):] + peers[:i % len(peers)]:
                dt, sid = srv.start_to_output(body)
                want = srv is not nopool
                if srv.audit_pooled(sid) != want:
                    raise SystemExit("%s: pooled=%s, expected %s" % (key, not want, want))
                res[key].append(dt)
                srv.api("DELETE", "sandboxes/" + sid)
                if key.startswith("vm_pooled"):
                    srv.wait_pool("microvm", 1)     # the refill runs outside the next peer's time
            res["direct"].append(direct.run())
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    write_report(a, res, load0, load1)


def write_report(a, res, load0, load1):
    base = med(res["ct_pooled"])
    rows = [("container tier, warm pool", "ct_pooled"), ("container tier, no pool", "ct_nopool"),
            ("microvm, warm pool (a clone made ahead)", "vm_pooled"),
            ("microvm, warm pool, old build (main)", "vm_pooled_old"),
            ("microvm, no pool (clone of the template snapshot on demand)", "vm_clone"),
            ("QEMU direct boot of the same kernel to `echo hi` (no paddock; bench/vmdirect.py)", "direct")]
    rows = [r for r in rows if res.get(r[1])]
    lines = ["# microvm through the server: warm pool vs on-demand clone", "",
             "Generated by `bench/microvm_pool.py` (see `bench/README.md`). Do not edit by hand.", "",
             "## Machine", "",
             "- Date: %s UTC" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S"),
             "- Kernel: %s; %d online CPUs; accel: %s" % (platform.release(), os.cpu_count(),
                                                          "kvm" if "vmx" in open("/proc/cpuinfo").read() else "tcg"),
             "- Load average before / after: %.1f / %.1f (shared machine; other jobs ran)" % (load0[0], load1[0]), "",
             "## Create to first output of `echo hi` over the HTTP API (wall, median of %d, peers alternating)"
             % a.rounds, "",
             "| peer | median s | p90 s | ratio to the pooled container | ratio to the pooled microvm |",
             "|---|---|---|---|---|"]
    for name, k in rows:
        v = sorted(res[k])
        lines.append("| %s | %.3f | %.3f | %.2f | %.2f |" % (name, med(v), v[min(len(v) - 1, int(len(v) * 0.9))],
                                                     med(v) / base, med(v) / med(res["vm_pooled"])))
    lines += ["", "The pool takes the clone's restore (QEMU start, state load, relay and clock/RNG sync) and its "
                  "first command's cold start (the filler runs one login shell in each pooled microvm: a fresh "
                  "QEMU translates the guest's code anew and faults in its copy-on-write memory) out of the "
                  "request: what is left is the API, the agent's exec and the guest's work under %s." %
              ("KVM" if "vmx" in open("/proc/cpuinfo").read() else "TCG"),
              "Pooled microvm / on-demand clone: %.2fx." % (med(res["vm_pooled"]) / med(res["vm_clone"])), "",
              "Raw: " + "; ".join("%s %s" % (k, [round(x, 3) for x in v]) for k, v in res.items()), ""]
    with open(REPORT, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
