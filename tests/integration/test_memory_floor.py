"""A memory limit below what a tier can start with is refused up front,
with the minimum: microvm's guest kernel alone keeps ~47 MiB (96M boots,
80M never reaches the agent), so --memory 64M used to hang until the
start timed out and blame the agent.

    /usr/bin/python3 -m pytest -q tests/integration/test_memory_floor.py

Needs root and a build; nothing boots (the refusal comes first)."""
import os
import subprocess

import pytest

from pdtest import PADDOCK_BIN
from pdtest.server import server_env, server_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock's state dir and server need root")

server = server_fixture("--pool", "0", prefix="pd-memfloor-")

MSG = "the microvm tier needs a memory limit of at least 96 MiB (asked: 64 MiB)"


def test_run_refuses_before_starting(tmp_path):
    state = str(tmp_path / "state")
    try:
        r = subprocess.run([PADDOCK_BIN, "run", "--state-dir", state, "--isolation", "microvm", "--memory", "64M",
                            "--", "true"], capture_output=True, text=True, timeout=60, env=server_env(),
                           stdin=subprocess.DEVNULL)
        assert (r.returncode, r.stderr) == (125, "paddock: %s\n" % MSG)
    finally:
        subprocess.run([PADDOCK_BIN, "gc", "--state-dir", state], capture_output=True, timeout=120, env=server_env())


def test_api_refuses_with_the_minimum(server):
    before = server.api("GET", "/sandboxes", expect=200)[1]
    st, j = server.api("POST", "/sandboxes", {"isolation": "microvm", "memory_mb": 64})
    assert (st, j["error"]["code"]) == (400, "bad_request"), j
    assert j["error"]["message"] == "'memory_mb': " + MSG
    assert server.api("GET", "/sandboxes", expect=200)[1] == before
    # the other tiers have no floor of their own beyond the API's range
    sid = server.create({"memory_mb": 64})["id"]
    server.delete(sid)
