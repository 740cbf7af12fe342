#!/usr/bin/python3
"""E2B's own template tests (packages/js-sdk/tests/template) against a fresh
`paddock serve`, with nothing from the internet (docs/e2b.md "E2B's template
tests").

    scripts/e2b-template-suite.py SDK_DIR [VITEST_ARGS...]

SDK_DIR is an E2B checkout's packages/js-sdk with its node_modules installed
(what ../shared/tools/e2b-suite prepares under its work dir); node (22) must
be on PATH. This script:

  1. starts Debian's docker-registry on a free loopback port (its own config;
     never the packaged service on :5000);
  2. pushes stand-ins for the public images the tests name (ubuntu:22.04,
     ubuntu:24.04, node:24): the host's busybox with its applets, /bin/bash a
     wrapper of busybox's sh, root and nothing else (tests/templates/_oci.py
     makes them byte by byte);
  3. writes a registries.conf that rewrites docker.io to that registry (no
     fallback to Docker Hub: a pull of any other docker.io image fails);
  4. starts `paddock serve` (CONTAINERS_REGISTRIES_CONF set, the registry
     allowed with --template-registry docker.io and its loopback address);
  5. runs vitest (project `template`, default: tests/template; tools/e2b-suite runs project
     `unit` only, which excludes tests/template), writes
     SDK_DIR/../../../template-report.json, stops everything, `paddock gc`.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "templates"))
import _oci  # noqa: E402
from _reg import Registry  # noqa: E402

IMAGES = ["library/ubuntu:22.04", "library/ubuntu:24.04", "library/node:24"]


def stand_in(path):
    """busybox with every applet, /bin/bash wrapping its sh."""
    lay = _oci.busybox_layer()
    applets = subprocess.run([_oci.BUSYBOX, "--list"], capture_output=True, text=True).stdout.split()
    have = set(_oci.TOOLS) | {"busybox"}
    for a in applets:
        if a not in have and (a.isidentifier() or a in ("[", "[[")):
            lay.symlink("bin/" + a, "busybox")
    lay.file("bin/bash", '#!/bin/sh\nexec /bin/sh "$@"\n', mode=0o755)
    for d in ("usr", "usr/bin", "home", "var", "var/tmp"):
        lay.dir(d)
    lay.file("root/.bashrc", "# stand-in\n")
    return _oci.write_layout(path, [lay.bytes()], config={"Env": ["PATH=/usr/local/bin:/usr/bin:/bin:/sbin"]})


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sdk = os.path.abspath(sys.argv[1])
    args = sys.argv[2:] or ["tests/template"]
    paddock = os.environ.get("PADDOCK_BIN", os.path.join(TOP, "build", "src", "paddock"))
    work = tempfile.mkdtemp(prefix="pd-e2b-tpl-", dir="/tmp")
    os.makedirs(os.path.join(work, "registry"))
    reg = Registry(os.path.join(work, "registry"))
    srv = None
    state = os.path.join(work, "state")
    rc = 1
    try:
        push_conf = os.path.join(work, "push.conf")
        with open(push_conf, "w") as f:
            f.write('[[registry]]\nlocation = "%s"\ninsecure = true\n' % reg.host)
        lay = os.path.join(work, "stand-in")
        stand_in(lay)
        for img in IMAGES:
            _oci.push(lay, "%s/%s" % (reg.host, img), {"CONTAINERS_REGISTRIES_CONF": push_conf})
        conf = os.path.join(work, "registries.conf")
        with open(conf, "w") as f:
            f.write('unqualified-search-registries = ["docker.io"]\n'
                    '[[registry]]\nprefix = "docker.io"\nlocation = "%s"\ninsecure = true\n' % reg.host)
        env = dict(os.environ, CONTAINERS_REGISTRIES_CONF=conf)
        port = free_port()
        key = subprocess.run([paddock, "key", "create", "--state-dir", state], capture_output=True, text=True,
                             env=env, check=True).stdout.strip().splitlines()[-1].strip()
        log = open(os.path.join(work, "serve.log"), "w")
        srv = subprocess.Popen([paddock, "serve", "--listen", "127.0.0.1:%d" % port, "--state-dir", state,
                                "--template-registry", "docker.io", "--template-registry", reg.host],
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        for _ in range(200):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/api/v1/health" % port, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        venv = dict(env, E2B_API_URL="http://127.0.0.1:%d" % port, E2B_SANDBOX_URL="http://127.0.0.1:%d" % port,
                    E2B_API_KEY=key, E2B_VALIDATE_API_KEY="false")
        for k in ("E2B_DEBUG", "E2B_DOMAIN"):
            venv.pop(k, None)
        report = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(sdk))), "template-report.json")
        print("e2b-template-suite: server http://127.0.0.1:%d, log %s/serve.log" % (port, work), file=sys.stderr)
        rc = subprocess.run(["./node_modules/.bin/vitest", "run", "--project", "template", "--maxWorkers=2",
                             "--testTimeout=180000", "--reporter=default", "--reporter=json",
                             "--outputFile.json=" + report] + args, cwd=sdk, env=venv).returncode
        print("e2b-template-suite: JSON report %s" % report, file=sys.stderr)
    finally:
        if srv:
            srv.terminate()
            try:
                srv.wait(timeout=30)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
        if os.path.isdir(state):
            subprocess.run([paddock, "gc", "--state-dir", state], capture_output=True)
        reg.stop()
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
