#!/usr/bin/python3
"""OCI runtime benchmark (issue 8): paddock-oci against crun and runc.

Two measurements, every runtime in the same run, round-robin within each
round (the order rotates each round) so that noise on a shared machine hits
all of them alike:

  bare    `RUNTIME --root DIR run ID` on one busybox /bin/true bundle
          (config from `paddock-oci spec`, terminal off); the wall time of
          the whole verb: create, start, wait, delete.
  podman  `podman run --rm --network none IMAGE /bin/true` with
          `--runtime` set to each; a private podman root/runroot/storage
          (vfs) under a temp dir, cgroupfs, an image imported from a busybox
          rootfs tar.

This host is cgroup v1 with a cgroup2 mount at /sys/fs/cgroup/unified that
holds no controllers; crun refuses to run while it is mounted, so the whole
benchmark re-executes itself in a private mount namespace with that mount
detached (the same environment for all three runtimes).

The bundle carries no seccomp profile: paddock-oci then installs paddock's
default filter, crun and runc install none. podman passes its own profile to
all three.

    sudo /usr/bin/python3 bench/oci.py [--rounds N] [--podman-rounds N]

Writes bench/reports/oci-start.md. Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "bench", "reports", "oci-start.md")
PADDOCK_OCI = os.path.abspath(os.environ.get("PADDOCK_OCI")
                              or os.path.join(ROOT, "build", "src", "paddock-oci"))
PEERS = {"paddock-oci": PADDOCK_OCI, "crun": shutil.which("crun") or "/usr/bin/crun",
         "runc": shutil.which("runc") or "/usr/sbin/runc"}
ISSUE = {"bare": {"crun": 9.07, "runc": 25.7}, "podman": {"crun": 134.5, "runc": 149.2}}
IMAGE = "localhost/pd-oci-bench:latest"


def reexec_in_private_mntns():
    if os.environ.get("PD_OCI_BENCH_INNER"):
        return
    env = dict(os.environ, PD_OCI_BENCH_INNER="1")
    cmd = ("umount /sys/fs/cgroup/unified 2>/dev/null; exec %s %s"
           % (sys.executable, " ".join("'%s'" % a for a in [os.path.abspath(__file__)] + sys.argv[1:])))
    os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", "sh", "-c", cmd], env)


def make_rootfs(path):
    os.makedirs(os.path.join(path, "bin"))
    for d in ("proc", "sys", "dev", "tmp", "etc"):
        os.makedirs(os.path.join(path, d))
    shutil.copy("/bin/busybox", os.path.join(path, "bin", "busybox"))
    for a in subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True).stdout.split():
        if a != "busybox":
            os.symlink("busybox", os.path.join(path, "bin", a))
    return path


def timed(argv, env=None):
    t0 = time.perf_counter_ns()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env)
    dt = (time.perf_counter_ns() - t0) / 1e6
    return dt, p.returncode, p.stderr.decode(errors="replace")


def rounds(names, n, run_one):
    times = {k: [] for k in names}
    fails = {k: 0 for k in names}
    for r in range(n):
        order = names[r % len(names):] + names[:r % len(names)]
        for k in order:
            dt, rc, err = run_one(k, r)
            if rc != 0:
                fails[k] += 1
                if fails[k] == 1:
                    print("  %s failed (rc %d): %s" % (k, rc, err.strip()[:300]), file=sys.stderr)
                continue
            times[k].append(dt)
    return times, fails


def bench_bare(work, n):
    bundle = os.path.join(work, "bundle")
    make_rootfs(os.path.join(bundle, "rootfs"))
    subprocess.run([PADDOCK_OCI, "spec", "--bundle", bundle], check=True)
    cfg = json.load(open(os.path.join(bundle, "config.json")))
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/bin/true"]
    json.dump(cfg, open(os.path.join(bundle, "config.json"), "w"))
    roots = {k: os.path.join(work, "root-" + k) for k in PEERS}

    def one(k, r):
        return timed([PEERS[k], "--root", roots[k], "run", "--bundle", bundle, "b%d" % r])
    one("paddock-oci", -1)      # warm the seccomp cache and the page cache once each
    one("crun", -1)
    one("runc", -1)
    return rounds(list(PEERS), n, one)


def bench_podman(work, n):
    d = os.path.join(work, "pm")
    os.makedirs(d)
    conf = os.path.join(d, "containers.conf")
    with open(conf, "w") as f:
        f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\nnetns = "none"\n'
                '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n[engine.runtimes]\n')
        for k, path in PEERS.items():
            f.write('%s = ["%s"]\n' % (k.replace("-", "_"), path))
    storage = os.path.join(d, "storage.conf")
    with open(storage, "w") as f:
        f.write('[storage]\ndriver = "vfs"\nrunroot = "%s/rr"\ngraphroot = "%s/g"\n' % (d, d))
    env = dict(os.environ, CONTAINERS_CONF=conf, CONTAINERS_STORAGE_CONF=storage)
    base = ["podman", "--root", d + "/g", "--runroot", d + "/rr", "--tmpdir", d + "/t",
            "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--storage-driver", "vfs"]
    rootfs = make_rootfs(os.path.join(work, "img-rootfs"))
    tar = os.path.join(work, "rootfs.tar")
    with tarfile.open(tar, "w") as t:
        t.add(rootfs, arcname=".")
    subprocess.run(base + ["import", tar, IMAGE], check=True, capture_output=True, env=env)

    def one(k, r):
        return timed(base + ["--runtime", k.replace("-", "_"), "run", "--rm", "--network", "none", IMAGE,
                             "/bin/true"], env=env)
    try:
        for k in PEERS:
            one(k, -1)
        return rounds(list(PEERS), n, one)
    finally:
        subprocess.run(base + ["rm", "--all", "--force", "--time", "0"], capture_output=True, env=env)
        subprocess.run(base + ["rmi", "--all", "--force"], capture_output=True, env=env)


def table(title, times, fails, issue):
    med = {k: statistics.median(v) for k, v in times.items() if v}
    lines = ["### %s" % title, "",
             "| runtime | runs | failed | median ms | p10 ms | p90 ms | paddock-oci / it | issue's figure ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    pd = med.get("paddock-oci")
    for k, v in times.items():
        if not v:
            lines.append("| %s | 0 | %d | - | - | - | - | %s |" % (k, fails[k], issue.get(k, "")))
            continue
        q = statistics.quantiles(v, n=10) if len(v) >= 2 else [v[0]] * 9
        ratio = "%.2fx" % (pd / med[k]) if pd else "-"
        lines.append("| %s | %d | %d | %.2f | %.2f | %.2f | %s | %s |"
                     % (k, len(v), fails[k], med[k], q[0], q[8], ratio, issue.get(k, "")))
    lines.append("")
    if pd:
        fastest = min(med, key=med.get)
        lines.append("Fastest: **%s**. paddock-oci / crun = %.2fx, paddock-oci / runc = %.2fx (below 1: paddock faster)."
                     % (fastest, pd / med["crun"] if "crun" in med else float("nan"),
                        pd / med["runc"] if "runc" in med else float("nan")))
    lines.append("")
    return lines, med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--podman-rounds", type=int, default=20)
    ap.add_argument("--report", default=REPORT)
    a = ap.parse_args()
    reexec_in_private_mntns()
    work = tempfile.mkdtemp(prefix="pd-oci-bench-")
    try:
        print("bare runtimes, %d rounds ..." % a.rounds)
        bare, bare_f = bench_bare(work, a.rounds)
        print("podman run --rm, %d rounds ..." % a.podman_rounds)
        pm, pm_f = bench_podman(work, a.podman_rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = ["# OCI runtimes: paddock-oci vs crun vs runc", "",
           "`sudo /usr/bin/python3 bench/oci.py --rounds %d --podman-rounds %d` on %s, %s, %d CPUs, %s."
           % (a.rounds, a.podman_rounds, platform.node() or "?", platform.release(), os.cpu_count(),
              datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
           "", "Versions: %s; %s; %s; %s." % tuple(
               subprocess.run(v, capture_output=True, text=True).stdout.splitlines()[0]
               for v in ([PADDOCK_OCI, "--version"], ["crun", "--version"], ["runc", "--version"],
                         ["podman", "--version"])),
           "", "Method: see the docstring of bench/oci.py (round-robin, rotating order, same run).", ""]
    t1, _ = table("Bare runtime: `RUNTIME run` of a /bin/true busybox bundle", bare, bare_f, ISSUE["bare"])
    t2, _ = table("`podman run --rm --network none IMAGE /bin/true`", pm, pm_f, ISSUE["podman"])
    out += t1 + t2
    out += ["Notes: the machine is shared (2 cores, other jobs running); the issue's figures were measured",
            "on another day and are shown for scale only; the ratios come from this run. Without a seccomp",
            "profile in the bundle paddock-oci installs paddock's default filter and crun/runc none.", ""]
    text = "\n".join(out)
    print(text)
    os.makedirs(os.path.dirname(a.report), exist_ok=True)
    with open(a.report, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
