"""The console in a real browser (console.test.mjs): Debian's chromium driven
by puppeteer-core (tests/console/package-lock.json, installed by
scripts/setup.sh), against a paddock serve of its own. One browser for
the suite; the browser and the server are ended even when a step fails:
node runs in its own session (process group), which is killed, and any
chromium still holding this run's profile dir is killed by pid.

    sudo /usr/bin/python3 -m pytest -q tests/console/test_console_browser.py
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from pdtest.env import kill_by_cmdline
from pdtest.server import run_paddock, server_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("PD_CHROMIUM", "/usr/bin/chromium")
NODE = shutil.which("node")
BUDGET_S = 240

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root"),
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason="no chromium (scripts/setup.sh installs it)"),
    pytest.mark.skipif(not NODE, reason="no node (scripts/setup.sh installs it)"),
    pytest.mark.skipif(not os.path.isdir(os.path.join(HERE, "node_modules", "puppeteer-core")),
                       reason="puppeteer-core not installed (scripts/setup.sh: npm ci in tests/console)"),
]

srv = server_fixture("--pool", "0")


def image_template(srv):
    """A busybox image template (shared: the operator's, from an OCI layout
    of the templates suite's helper) for the console's recipe build."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "templates"))
    import _oci
    lay = tempfile.mkdtemp(prefix="pd-console-oci-", dir="/tmp")
    try:
        _oci.write_layout(lay, [_oci.busybox_layer().bytes()], config={"Env": ["PATH=/bin"]})
        r = run_paddock("template", "pull", "--state-dir", srv.state, "consbb", "oci:%s:latest" % lay, timeout=180)
        assert r.returncode == 0, r.stderr
    finally:
        shutil.rmtree(lay, ignore_errors=True)
    return "consbb"


def test_console_in_browser(srv):
    r = run_paddock("key", "create", "--name", "browser2", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    key2 = r.stdout.strip()
    base = image_template(srv)
    profile = tempfile.mkdtemp(prefix="pd-console-chromium-", dir="/tmp")
    env = dict(os.environ, PD_URL=srv.url, PD_KEY=srv.key, PD_KEY2=key2, PD_PROFILE=profile, PD_CHROMIUM=CHROMIUM,
               PD_TPL_BASE=base)
    p = subprocess.Popen([NODE, os.path.join(HERE, "console.test.mjs")], cwd=HERE, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=BUDGET_S)
    except subprocess.TimeoutExpired:
        out = "(over %d s)" % BUDGET_S
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        else:
            try:
                os.killpg(p.pid, signal.SIGKILL)    # chromium helpers left in node's group
            except ProcessLookupError:
                pass
        # a chromium that left the group (its zygote) still names our profile
        kill_by_cmdline(profile.encode())
        shutil.rmtree(profile, ignore_errors=True)
    print(out)
    assert p.returncode == 0, out
    assert "1.." in out, out


def _disk_tier(srv):
    """A tier that pauses to disk and can run here, from GET /api/v1/tiers:
    gvisor (seconds) before microvm (a TCG template boot: minutes)."""
    st, j = srv.api("GET", "/tiers")
    assert st == 200, j
    ok = {t["name"] for t in j["tiers"] if t.get("available")}
    return "gvisor" if "gvisor" in ok else None


def test_console_pause_choice(srv):
    """Pause to disk / in memory from the console where the tier can do both."""
    tier = _disk_tier(srv)
    if not tier:
        pytest.skip("no tier that pauses to disk in seconds here: runsc cannot run a sandbox on this host "
                    "(GET /api/v1/tiers says why)")
    profile = tempfile.mkdtemp(prefix="pd-console-chromium-", dir="/tmp")
    env = dict(os.environ, PD_URL=srv.url, PD_KEY=srv.key, PD_PROFILE=profile, PD_CHROMIUM=CHROMIUM,
               PD_DISK_TIER=tier)
    p = subprocess.Popen([NODE, os.path.join(HERE, "pause_disk.test.mjs")], cwd=HERE, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=BUDGET_S)
    except subprocess.TimeoutExpired:
        out = "(over %d s)" % BUDGET_S
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        kill_by_cmdline(profile.encode())
        shutil.rmtree(profile, ignore_errors=True)
    print(out)
    assert p.returncode == 0, out
    assert "1..4" in out, out
