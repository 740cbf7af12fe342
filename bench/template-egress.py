#!/usr/bin/python3
"""The cost of the egress guard of server-made pulls (docs/templates.md,
"Redirects"; src/image/egress.c), measured against the same pull without it
in the same run.

Three peers, each a cold `paddock template pull` (empty state dir: store and
download cache) of the same 3-layer image (bench/templates.py's: busybox,
Python's standard library, a few packages) from a local docker-registry on
a free loopback port:

  - no guard: `template pull NAME 127.0.0.1:P/bench:1` (what the local CLI does);
  - guard, forwarder: the same with `--egress-allow 127.0.0.1:P` (what a server
    build does): skopeo runs in a network namespace of its own and reaches the
    registry through paddock's loopback forwarder (Go never proxies loopback);
  - guard, proxy: the registry named by a host name of /etc/hosts that maps to
    127.0.0.1 (other than "localhost"; skipped when there is none), with
    `--egress-allow NAME:P`: skopeo goes through paddock's HTTP proxy.

Rounds alternate the peers so that noise on a shared machine hits each
alike; the report gives medians and ratios to "no guard".

    sudo /usr/bin/python3 bench/template-egress.py [--rounds N]

Writes bench/reports/template-egress.md. Standard library only.
"""
import argparse
import datetime
import importlib.util
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("pd_bench_templates", os.path.join(ROOT, "bench", "templates.py"))
T = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(T)
REPORT = os.path.join(ROOT, "bench", "reports", "template-egress.md")


def loopback_alias():
    """A name /etc/hosts maps to 127.0.0.1, other than localhost (Go proxies it)."""
    try:
        with open("/etc/hosts") as f:
            for line in f:
                parts = line.split("#")[0].split()
                if len(parts) >= 2 and parts[0] == "127.0.0.1":
                    for n in parts[1:]:
                        if n != "localhost" and "." not in n:
                            return n
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--report", default=REPORT)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    work = tempfile.mkdtemp(prefix="pd-bench-egress-", dir="/tmp")
    reg = None
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        host = "127.0.0.1:%d" % port
        cfg = os.path.join(work, "registry.yml")
        with open(cfg, "w") as f:
            f.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/reg\n"
                    "http:\n  addr: %s\n" % (work, host))
        reg = subprocess.Popen(["docker-registry", "serve", cfg], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                urllib.request.urlopen("http://%s/v2/" % host, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        alias = loopback_alias()
        conf = os.path.join(work, "registries.conf")
        with open(conf, "w") as f:
            f.write('[[registry]]\nlocation = "%s"\ninsecure = true\n' % host)
            if alias:
                f.write('[[registry]]\nlocation = "%s:%d"\ninsecure = true\n' % (alias, port))
        print("making the image ...", flush=True)
        tar_bytes, gz_bytes = T.make_image(os.path.join(work, "img"))
        ref = host + "/bench:1"
        subprocess.run(["skopeo", "--registries-conf", conf, "copy", "--quiet", "oci:%s/img" % work,
                        "docker://" + ref], check=True, stdin=subprocess.DEVNULL)
        env = dict(os.environ, PADDOCK_AGENT=T.AGENT, CONTAINERS_REGISTRIES_CONF=conf)
        env.pop("PADDOCK_STATE_DIR", None)
        state = os.path.join(work, "state")
        peers = {"no guard": ([], ref), "guard, forwarder": (["--egress-allow", host], ref)}
        if alias:
            peers["guard, proxy"] = (["--egress-allow", "%s:%d" % (alias, port)], "%s:%d/bench:1" % (alias, port))
        times = {k: [] for k in peers}
        print("%d rounds of %d peers ..." % (a.rounds, len(peers)), flush=True)
        for i in range(a.rounds):
            order = list(peers) if i % 2 == 0 else list(reversed(peers))
            for k in order:
                extra, r = peers[k]
                shutil.rmtree(state, ignore_errors=True)
                times[k].append(T.timed([T.PADDOCK, "template", "--state-dir", state, "pull"] + extra +
                                        ["--", "img", r], env))
        shutil.rmtree(state, ignore_errors=True)
        base = T.med(times["no guard"])
        spread = {k: (min(v), max(v)) for k, v in times.items()}
        lines = ["# Egress guard of server-made pulls: cost", "",
                 "`bench/template-egress.py` (%s, %s, %d CPUs, %s). A cold `paddock template pull` of a "
                 "3-layer image (%.1f MiB of tar, %.1f MiB gzip) from a loopback docker-registry, %d rounds, "
                 "peers alternated each round." % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
                                                   platform.node(), os.cpu_count(), platform.release(),
                                                   tar_bytes / 2**20, gz_bytes / 2**20, a.rounds),
                 "", "| peer | median ms | min-max ms | ratio of medians | median of per-round ratios |",
                 "|---|---|---|---|---|"]
        for k, v in times.items():
            # paired: each round's peer against that round's "no guard"
            paired = [x / y for x, y in zip(v, times["no guard"])]
            lines.append("| %s | %.0f | %.0f-%.0f | %.2fx | %.2fx |" % (k, T.med(v), spread[k][0], spread[k][1],
                                                                        T.med(v) / base, T.med(paired)))
        lines += ["", "Raw (ms): " + "; ".join("%s: %s" % (k, ", ".join("%.0f" % x for x in v))
                                             for k, v in times.items()), "",
                  "The machine is shared (2 cores, other engineers building and testing): compare the "
                  "ratios, and the min-max spread says how noisy the run was." +
                  ("" if alias else " No /etc/hosts alias of 127.0.0.1: the proxy peer was not run.")]
        os.makedirs(os.path.dirname(a.report), exist_ok=True)
        with open(a.report, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines))
    finally:
        if reg:
            reg.terminate()
            reg.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
