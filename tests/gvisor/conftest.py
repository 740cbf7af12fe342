"""The gvisor tier's suite: skipped as a whole only when runsc cannot run a
sandbox on this host (named in the skip)."""
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

RUNSC = shutil.which("runsc") or ("/usr/sbin/runsc" if os.path.exists("/usr/sbin/runsc") else None)


def _runsc_works():
    if not RUNSC:
        return "runsc is not installed (Debian package 'runsc'; scripts/setup.sh installs it)"
    try:
        r = subprocess.run([RUNSC, "--platform=ptrace", "--network=none", "do", "true"], capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "runsc do true did not finish in 120 s"
    if r.returncode != 0:
        return "runsc cannot run a sandbox on this host (--platform=ptrace): %s" % r.stderr.strip()[-300:]
    return None


WHY = _runsc_works()


def pytest_collection_modifyitems(config, items):
    if WHY:
        for it in items:
            if "/gvisor/" in str(it.fspath):
                it.add_marker(pytest.mark.skip(reason=WHY))
