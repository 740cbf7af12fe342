#!/usr/bin/python3
"""Templates benchmark: paddock against its peers, measured in the same run.

1. Pull + unpack of one image from a local registry (started here, on a free
   loopback port): `paddock template pull` (cold: empty store and download
   cache) vs `podman pull` (empty private storage, overlay) vs `skopeo copy`
   to a `dir:` (download only, nothing unpacked).
2. A cached rebuild of a 10-step recipe: `paddock template build` vs
   `buildah bud --layers` (private storage, --isolation chroot), each after
   one build that filled its cache.
3. Sandbox start: `paddock run --template IMAGE -- /bin/true` vs
   `paddock run -- /bin/true` (template base) vs `podman run --rm` of the same
   image (runc: crun refuses this hybrid cgroup host; private storage; the
   ulimits this host allows).

The image is made here from host files (busybox; Python's standard library;
a few Python packages): nothing is downloaded. Rounds are round-robin within
each part so that noise on a shared machine hits every peer alike.

    sudo /usr/bin/python3 bench/templates.py [--rounds N] [--pull-rounds N]

Writes bench/reports/templates.md. Standard library only.
"""
import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PADDOCK = os.path.abspath(os.environ.get("PADDOCK_BIN") or os.path.join(ROOT, "build/src/paddock"))
AGENT = os.path.abspath(os.environ.get("PADDOCK_AGENT") or os.path.join(ROOT, "build/src/agent/paddock-agent"))
REPORT = os.path.join(ROOT, "bench", "reports", "templates.md")
PKGS = ["/usr/lib/python3/dist-packages/numpy", "/usr/lib/python3/dist-packages/yaml",
        "/usr/lib/python3/dist-packages/jinja2", "/usr/lib/python3/dist-packages/markupsafe"]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def layer_of(paths, extra=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for p in paths:
            if os.path.exists(p):
                t.add(p, arcname=p.lstrip("/"), filter=lambda ti: (setattr(ti, "uid", 0), setattr(ti, "gid", 0),
                                                                   setattr(ti, "uname", ""), setattr(ti, "gname", ""),
                                                                   ti)[-1])
        for name, data, mode in extra or []:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), mode
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def make_image(path):
    """An OCI layout: busybox + /etc; Python's stdlib; some packages."""
    bb = io.BytesIO()
    with tarfile.open(fileobj=bb, mode="w", format=tarfile.PAX_FORMAT) as t:
        for d in ("bin", "etc", "tmp", "root", "usr", "usr/bin"):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            t.addfile(ti)
        with open("/bin/busybox", "rb") as f:
            data = f.read()
        ti = tarfile.TarInfo("bin/busybox")
        ti.size, ti.mode = len(data), 0o755
        t.addfile(ti, io.BytesIO(data))
        for tool in ("sh", "true", "ls", "cat", "echo", "mkdir"):
            ti = tarfile.TarInfo("bin/" + tool)
            ti.type, ti.linkname = tarfile.SYMTYPE, "busybox"
            t.addfile(ti)
        for name, text in (("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", b"root:x:0:\n")):
            ti = tarfile.TarInfo(name)
            ti.size = len(text)
            t.addfile(ti, io.BytesIO(text))
    layers = [bb.getvalue(), layer_of(["/usr/lib/python3.11"]), layer_of(PKGS)]
    blobs = os.path.join(path, "blobs", "sha256")
    os.makedirs(blobs)
    descs, diffs = [], []
    for tar in layers:
        diffs.append("sha256:" + sha(tar))
        z = gzip.compress(tar, compresslevel=6, mtime=0)
        with open(os.path.join(blobs, sha(z)), "wb") as f:
            f.write(z)
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + sha(z),
                      "size": len(z)})
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/bin:/usr/bin"]},
                      "rootfs": {"type": "layers", "diff_ids": diffs},
                      # buildah wants one history entry per layer
                      "history": [{"created_by": "bench layer %d" % i} for i in range(len(layers))]}).encode()
    with open(os.path.join(blobs, sha(cfg)), "wb") as f:
        f.write(cfg)
    man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": "sha256:" + sha(cfg), "size": len(cfg)}, "layers": descs}).encode()
    with open(os.path.join(blobs, sha(man)), "wb") as f:
        f.write(man)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion": "1.0.0"}')
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                      "digest": "sha256:" + sha(man), "size": len(man)}]}, f)
    return sum(len(l) for l in layers), sum(d["size"] for d in descs)


def timed(argv, env=None, check=True):
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env)
    dt = (time.perf_counter() - t0) * 1000
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv[:4]), r.stderr[-2000:]))
    return dt


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20, help="sandbox starts per peer")
    ap.add_argument("--pull-rounds", type=int, default=5)
    ap.add_argument("--build-rounds", type=int, default=10)
    ap.add_argument("--report", default=REPORT)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    work = tempfile.mkdtemp(prefix="pd-bench-tpl-", dir="/tmp")
    reg = None
    pm_env = None
    pm = None
    try:
        # ---- the registry and the image
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
        conf = os.path.join(work, "registries.conf")
        with open(conf, "w") as f:
            f.write('[[registry]]\nlocation = "%s"\ninsecure = true\n' % host)
        print("making the image ...", flush=True)
        tar_bytes, gz_bytes = make_image(os.path.join(work, "img"))
        ref = host + "/bench:1"
        subprocess.run(["skopeo", "--registries-conf", conf, "copy", "--quiet", "oci:%s/img" % work,
                        "docker://" + ref], check=True, stdin=subprocess.DEVNULL)
        env = dict(os.environ, PADDOCK_AGENT=AGENT, CONTAINERS_REGISTRIES_CONF=conf)
        env.pop("PADDOCK_STATE_DIR", None)
        state = os.path.join(work, "state")
        # podman: private storage (overlay), this host's ulimits
        pm_dir = os.path.join(work, "pm")
        os.makedirs(pm_dir)
        pconf = os.path.join(pm_dir, "containers.conf")
        with open(pconf, "w") as f:
            f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\nnetns = "none"\n'
                    '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n')
        pm_env = dict(os.environ, CONTAINERS_CONF=pconf, CONTAINERS_REGISTRIES_CONF=conf)
        pm = ["podman", "--root", pm_dir + "/g", "--runroot", pm_dir + "/rr", "--tmpdir", pm_dir + "/t",
              "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--storage-driver", "overlay"]

        # ---- 1. pull + unpack
        print("pull + unpack, %d rounds ..." % a.pull_rounds, flush=True)
        pulls = {"paddock template pull": [], "podman pull": [], "skopeo copy (dir:)": []}
        for i in range(a.pull_rounds):
            for k in list(pulls):
                if k.startswith("paddock"):
                    shutil.rmtree(state, ignore_errors=True)
                    pulls[k].append(timed([PADDOCK, "template", "--state-dir", state, "pull", "img", ref], env))
                elif k.startswith("podman"):
                    subprocess.run(pm + ["rmi", "--all", "--force"], capture_output=True, env=pm_env)
                    pulls[k].append(timed(pm + ["pull", "-q", "--tls-verify=false", ref], pm_env))
                else:
                    d = os.path.join(work, "skdir")
                    shutil.rmtree(d, ignore_errors=True)
                    pulls[k].append(timed(["skopeo", "--registries-conf", conf, "copy", "--quiet", "docker://" + ref,
                                           "dir:" + d], env))
        # a second pull of the same image: the layers are in the store
        warm = [timed([PADDOCK, "template", "--state-dir", state, "pull", "--replace", "img", ref], env)
                for _ in range(a.pull_rounds)]

        # ---- 2. cached rebuild of a 10-step recipe
        print("cached rebuild, %d rounds ..." % a.build_rounds, flush=True)
        ctx = os.path.join(work, "ctx")
        os.makedirs(ctx)
        for n in range(3):
            with open(os.path.join(ctx, "f%d" % n), "w") as f:
                f.write("file %d\n" % n * 100)
        steps = ["FROM %s" % ref, "ENV A=1", "WORKDIR /app", "COPY f0 /app/", "RUN echo one > /app/one",
                 "COPY f1 /app/", "RUN echo two > /app/two", "ENV B=2", "COPY f2 /app/", "RUN echo three > /app/3",
                 "CMD [\"/bin/sh\"]"]
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write("\n".join(steps) + "\n")
        ba_env = dict(os.environ, CONTAINERS_CONF=pconf, CONTAINERS_REGISTRIES_CONF=conf)
        bah = ["buildah", "--root", pm_dir + "/g", "--runroot", pm_dir + "/rr", "--storage-driver", "overlay"]
        timed([PADDOCK, "template", "--state-dir", state, "build", "app", ctx], env)
        timed(bah + ["bud", "--layers", "--isolation", "chroot", "--tls-verify=false", "-q", "-t", "app", ctx], ba_env)
        builds = {"paddock template build (cached)": [], "buildah bud --layers (cached)": []}
        for i in range(a.build_rounds):
            builds["paddock template build (cached)"].append(
                timed([PADDOCK, "template", "--state-dir", state, "build", "app", ctx], env))
            builds["buildah bud --layers (cached)"].append(
                timed(bah + ["bud", "--layers", "--isolation", "chroot", "--tls-verify=false", "-q", "-t", "app", ctx],
                      ba_env))

        # ---- 3. sandbox start
        print("sandbox start, %d rounds ..." % a.rounds, flush=True)
        starts = {"paddock run, image template": [PADDOCK, "run", "--state-dir", state, "--template", "img", "--",
                                                   "/bin/true"],
                  "paddock run, base": [PADDOCK, "run", "--state-dir", state, "--", "/bin/true"],
                  # runc: crun refuses this hybrid cgroup host (bench/oci.py)
                  "podman run --rm (runc)": pm + ["--runtime", "runc", "run", "--rm", "--network", "none", ref,
                                                  "/bin/true"]}
        for k, argv in starts.items():   # warm: base template, podman's image
            timed(argv, pm_env if k.startswith("podman") else env)
        st = {k: [] for k in starts}
        keys = list(starts)
        for i in range(a.rounds):
            for k in keys[i % len(keys):] + keys[:i % len(keys)]:
                st[k].append(timed(starts[k], pm_env if k.startswith("podman") else env))

        # ---- report (the raw figures first: a formatting slip loses nothing)
        with open(os.path.join(ROOT, "bench", "reports", "templates.json"), "w") as f:
            json.dump({"pull": pulls, "pull_warm": warm, "build": builds, "start": st}, f)
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        ver = lambda argv: subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()[0]
        lines = ["# Templates benchmark", "",
                 "`sudo /usr/bin/python3 bench/templates.py --rounds %d --pull-rounds %d --build-rounds %d` on %s, "
                 "%s, %d CPUs, %s. %s; %s; %s." % (a.rounds, a.pull_rounds, a.build_rounds, platform.node() or "?",
                                                   platform.release(), os.cpu_count(), now, ver(["skopeo", "--version"]),
                                                   ver(["podman", "--version"]), ver(["buildah", "--version"])),
                 "", "The image: 3 layers, %.1f MiB of tar, %.1f MiB gzip (busybox; Python's standard library; "
                 "numpy, yaml, jinja2, markupsafe from the host), in a local registry on loopback." %
                 (tar_bytes / 2 ** 20, gz_bytes / 2 ** 20), ""]

        def table(title, d, ref_key):
            out = ["## " + title, "", "| peer | runs | median ms | p10 ms | p90 ms | / %s |" % ref_key,
                   "|---|---|---|---|---|---|"]
            r = med(d[ref_key])
            for k, v in d.items():
                q = statistics.quantiles(v, n=10) if len(v) >= 2 else [v[0]] * 9
                out.append("| %s | %d | %.1f | %.1f | %.1f | %.2f |" % (k, len(v), med(v), q[0], q[-1], med(v) / r))
            return out + [""]
        pulls["paddock template pull (layers in the store)"] = warm
        lines += table("Pull + unpack (cold; skopeo copy only downloads)", pulls, "paddock template pull")
        lines += table("Cached rebuild of a 10-step recipe", builds, "paddock template build (cached)")
        lines += table("Sandbox start (`/bin/true`, wall time of the whole command)", st,
                       "paddock run, base")
        r_img = med(st["paddock run, image template"]) / med(st["paddock run, base"])
        r_pm = med(st["paddock run, image template"]) / med(st["podman run --rm (runc)"])
        lines += ["Targets: an image template starts within 10 %% of `base` (here %.2fx) and faster than podman "
                  "(here %.2fx of podman's time)." % (r_img, r_pm), ""]
        text = "\n".join(lines)
        print(text)
        os.makedirs(os.path.dirname(a.report), exist_ok=True)
        with open(a.report, "w") as f:
            f.write(text)
    finally:
        if pm:
            subprocess.run(pm + ["rm", "--all", "--force", "--time", "0"], capture_output=True, env=pm_env)
            subprocess.run(pm + ["rmi", "--all", "--force"], capture_output=True, env=pm_env)
            subprocess.run(["umount", "-R", os.path.join(work, "pm", "g", "overlay")], capture_output=True)
        if reg:
            reg.kill()
            reg.wait()
        if os.path.isdir(os.path.join(work, "state")):
            subprocess.run([PADDOCK, "gc", "--state-dir", os.path.join(work, "state")], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
