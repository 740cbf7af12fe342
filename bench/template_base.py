#!/usr/bin/python3
"""Recipes on base vs recipes on an image, measured in the same run
(docs/templates.md "Recipes on base", "Start and ready commands").

1. A 4-step recipe (RUN, COPY, ENV, RUN) built cold (a new --build-arg each
   round, so no cache): `FROM base` (one sandbox, snapshotted) vs `FROM` a
   busybox image template (a sandbox per RUN, layers) vs `FROM` the same
   image with the step cache warm except the last RUN.
2. The unchanged rebuild of each (no sandbox starts).
3. `paddock run --template T -- /bin/true`: the base-built template vs
   `base` itself.
4. Server creates (POST /api/v1/sandboxes + DELETE): a base-built template
   with a start command whose ready command passes at once vs the same
   template without one.

Rounds alternate the peers (round-robin), medians and ratios are reported;
nothing is downloaded (the image is the host's busybox, made here).

    sudo /usr/bin/python3 bench/template_base.py [--rounds N]

Writes bench/reports/template-base.md.
"""
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
PADDOCK = os.path.abspath(os.environ.get("PADDOCK_BIN") or os.path.join(ROOT, "build/src/paddock"))
AGENT = os.path.abspath(os.environ.get("PADDOCK_AGENT") or os.path.join(ROOT, "build/src/agent/paddock-agent"))
REPORT = os.path.join(ROOT, "bench", "reports", "template-base.md")
sys.path.insert(0, os.path.join(ROOT, "tests", "templates"))
import _oci  # noqa: E402

ENV = dict(os.environ, PADDOCK_AGENT=AGENT)


def pd(state, *args, check=True):
    r = subprocess.run([PADDOCK] + list(args[:1]) + ["--state-dir", state] + list(args[1:]), capture_output=True,
                       text=True, env=ENV, timeout=600)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr[-2000:]))
    return r


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def recipe(ctx, name, text):
    p = os.path.join(ctx, name)
    with open(p, "w") as f:
        f.write(text)
    return p


def http(port, key, method, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d/api/v1%s" % (port, path), method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        data = r.read()
    return json.loads(data) if data.strip() else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--report", default=REPORT)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="pd-bench-tplbase-", dir="/tmp")
    state = os.path.join(work, "state")
    ctx = os.path.join(work, "ctx")
    os.makedirs(ctx)
    with open(os.path.join(ctx, "data.txt"), "w") as f:
        f.write("x" * 100000)
    res = {}
    srv = None
    load = []
    try:
        lay = os.path.join(work, "bb")
        _oci.write_layout(lay, [_oci.busybox_layer().bytes()], config={"Env": ["PATH=/bin"]})
        pd(state, "template", "pull", "bb", "oci:%s:latest" % lay)
        steps = "ARG N\nRUN echo $N > /opt-n || echo $N > /n\nCOPY data.txt /data.txt\nENV A=b\nRUN cat /data.txt > /copy\n"
        r_base = recipe(ctx, "R.base", "FROM base\n" + steps)
        r_img = recipe(ctx, "R.img", "FROM bb\n" + steps)
        r_img2 = recipe(ctx, "R.img2", "FROM bb\nRUN echo fixed > /fixed\nCOPY data.txt /data.txt\nENV A=b\n"
                                      "ARG N\nRUN echo $N > /n\n")
        # warm-up: base template made, image cache filled
        pd(state, "template", "build", "tb", "-f", r_base, "--build-arg", "N=0", ctx)
        pd(state, "template", "build", "ti", "-f", r_img, "--build-arg", "N=0", ctx)
        pd(state, "template", "build", "ti2", "-f", r_img2, "--build-arg", "N=0", ctx)
        peers = {
            "build FROM base (cold)": lambda i: pd(state, "template", "build", "tb", "-f", r_base, "--build-arg",
                                                    "N=%d" % i, ctx),
            "build FROM image (cold: 2 RUNs, 1 COPY)": lambda i: pd(state, "template", "build", "ti", "-f", r_img,
                                                                   "--build-arg", "N=%d" % i, ctx),
            "build FROM image (cache warm but the last RUN)": lambda i: pd(state, "template", "build", "ti2", "-f",
                                                                          r_img2, "--build-arg", "N=%d" % i, ctx),
        }
        for rnd in range(1, a.rounds + 1):
            load.append(os.getloadavg()[0])
            for k, fn in peers.items():
                res.setdefault(k, []).append(timed(lambda: fn(rnd)))
        unchanged = {
            "unchanged rebuild FROM base": lambda: pd(state, "template", "build", "tb", "-f", r_base,
                                                      "--build-arg", "N=%d" % a.rounds, ctx),
            "unchanged rebuild FROM image": lambda: pd(state, "template", "build", "ti", "-f", r_img,
                                                       "--build-arg", "N=%d" % a.rounds, ctx),
        }
        for _ in range(a.rounds):
            for k, fn in unchanged.items():
                res.setdefault(k, []).append(timed(fn))
        runs = {
            "run --template (built on base) -- /bin/true": lambda: pd(state, "run", "--template", "tb", "--",
                                                                      "/bin/true"),
            "run --template base -- /bin/true": lambda: pd(state, "run", "--", "/bin/true"),
        }
        for _ in range(a.rounds * 2):
            for k, fn in runs.items():
                res.setdefault(k, []).append(timed(fn))
        # server creates: with and without a start command
        recipe(ctx, "R.start", 'FROM base\nLABEL paddock.start-cmd="exec sleep 3600" paddock.ready-cmd="true"\n')
        recipe(ctx, "R.nostart", "FROM base\nLABEL nothing=here\n")
        pd(state, "template", "build", "ws", "-f", os.path.join(ctx, "R.start"), ctx)
        pd(state, "template", "build", "ns", "-f", os.path.join(ctx, "R.nostart"), ctx)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        key = pd(state, "key", "create").stdout.strip().splitlines()[-1].strip()
        log = open(os.path.join(work, "serve.log"), "w")
        srv = subprocess.Popen([PADDOCK, "serve", "--listen", "127.0.0.1:%d" % port, "--state-dir", state,
                                "--pool", "0"], env=ENV, stdout=log, stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/api/v1/health" % port, timeout=1)
                break
            except OSError:
                time.sleep(0.1)

        def create(t):
            sb = http(port, key, "POST", "/sandboxes", {"template": t})
            http(port, key, "DELETE", "/sandboxes/" + sb["id"])

        creates = {"create+delete, template with a start command (ready at once)": lambda: create("ws"),
                   "create+delete, same template without one": lambda: create("ns")}
        for _ in range(a.rounds * 2):
            for k, fn in creates.items():
                res.setdefault(k, []).append(timed(fn))
    finally:
        if srv:
            srv.terminate()
            srv.wait(timeout=30)
        subprocess.run([PADDOCK, "gc", "--state-dir", state], capture_output=True, env=ENV)
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}

    def spread(v):
        return "%.2f–%.2f" % (min(v), max(v))

    pairs = [("build FROM base (cold)", "build FROM image (cold: 2 RUNs, 1 COPY)"),
             ("build FROM base (cold)", "build FROM image (cache warm but the last RUN)"),
             ("unchanged rebuild FROM base", "unchanged rebuild FROM image"),
             ("run --template (built on base) -- /bin/true", "run --template base -- /bin/true"),
             ("create+delete, template with a start command (ready at once)",
              "create+delete, same template without one")]
    out = ["# Recipes on base (bench/template_base.py)", "",
           "%s, %s, %d cores, %d rounds per peer (alternated); load average during the builds %.1f–%.1f "
           "(other engineers building and testing on the same 2 cores: a noisy host; compare the ratios, "
           "measured in the same rounds, not the absolute times)." % (
               datetime.date.today().isoformat(), platform.node(), os.cpu_count(), a.rounds, min(load), max(load)),
           "", "| peer | median s | min–max s | n |", "|---|---|---|---|"]
    for k, v in res.items():
        out.append("| %s | %.3f | %s | %d |" % (k, med[k], spread(v), len(v)))
    out += ["", "| ratio | value |", "|---|---|"]
    for x, y in pairs:
        out.append("| %s / %s | %.2f |" % (x, y, med[x] / med[y]))
    text = "\n".join(out) + "\n"
    os.makedirs(os.path.dirname(a.report), exist_ok=True)
    with open(a.report, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
