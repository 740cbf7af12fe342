#!/usr/bin/env bash
# Screenshots of the web console (docs/console.md) into docs/console/, made
# with the browser and driver of the console's tests (Debian's chromium,
# tests/console's puppeteer-core): sign-in, the list, a sandbox, the
# terminal, at 1280x800 (light and dark) and at phone width. Not part of CI;
# run it again when the UI changes and commit the PNGs. As root, after
# scripts/setup.sh and a build:
#
#   sudo scripts/screenshots.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-docs/console}")
mkdir -p "$out"
PADDOCK_BIN=${PADDOCK_BIN:-$PWD/build/src/paddock} PADDOCK_AGENT=${PADDOCK_AGENT:-$PWD/build/src/agent/paddock-agent} \
  PD_OUT="$out" /usr/bin/python3 - <<'PY'
import os, shutil, signal, subprocess, sys, tempfile
sys.path.insert(0, "tests")
from pdtest.env import kill_by_cmdline
from pdtest.server import Server

srv = Server(None, "--pool", "0").start()
profile = tempfile.mkdtemp(prefix="pd-console-shots-", dir="/tmp")
try:
    for body in ({"memory_mb": 256}, {"isolation": "container", "timeout": 1800},
                 {"network": {"mode": "policy", "rules": ["allow:*.pypi.org:443/tcp"]}}):
        srv.create(body)
    env = dict(os.environ, PD_URL=srv.url, PD_KEY=srv.key, PD_PROFILE=profile)
    p = subprocess.Popen(["node", "tests/console/screenshots.mjs"], env=env, start_new_session=True)
    try:
        rc = p.wait(timeout=300)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        kill_by_cmdline(profile.encode())
    sys.exit(rc)
finally:
    shutil.rmtree(profile, ignore_errors=True)
    srv.finish(check=False)
PY
ls -la "$out"
