"""An out-of-memory kill reads as such on every surface: POST /exec, the
process object, the output stream's exit record, `paddock exec`, the
Python SDK (the E2B end event: tests/compat/e2b/commands.test.mjs).

    /usr/bin/python3 -m pytest -q tests/server/test_server_oom.py

Needs root (the container tier) and a build."""
import json
import os
import subprocess
import sys

import pytest

from pdtest import PADDOCK_BIN, REPO
from pdtest.server import server_fixture

sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
import paddock  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

server = server_fixture("--pool", "0", prefix="pd-oom-")

HOG = ["python3", "-c", "a = bytearray(600 << 20)"]      # 600 MiB under a 128 MiB limit


@pytest.fixture(scope="module")
def sid(server):
    i = server.create({"memory_mb": 128})["id"]
    yield i
    server.delete(i)


def test_exec_result_says_oom_and_the_limit(server, sid):
    j = server.v1.exec(sid, {"cmd": HOG})
    assert (j["exit_code"], j["signal"], j["reason"], j["memory_limit_mb"]) == (None, 9, "oom", 128), j


def test_process_object_and_exit_record_say_oom(server, sid):
    p = server.v1.start(sid, {"cmd": HOG})
    obj = server.v1.wait(sid, p["pid"])
    assert (obj["reason"], obj["signal"], obj["memory_limit_mb"]) == ("oom", 9, 128), obj
    _h, data = server.v1.output(sid, p["pid"], format="frames")
    exits = [json.loads(l)["exit"] for l in data.splitlines() if b'"exit"' in l]
    assert exits == [{"exit_code": None, "signal": 9, "reason": "oom", "memory_limit_mb": 128}], data
    _st, j = server.v1.json("GET", "/sandboxes/%s/processes" % sid, expect=200)
    assert [q["reason"] for q in j["processes"] if q["pid"] == p["pid"]] == ["oom"]


def test_cli_exec_prints_the_reason(server, sid):
    r = server.cli("exec", sid, "--", *HOG, remote=True, timeout=120)
    assert r.returncode == 137, r.stderr
    assert r.stderr == "paddock: out of memory: the kernel killed the command (limit 128 MiB)\n"


def test_python_sdk_result(server, sid):
    s = paddock.Sandbox.connect(sid, api_key=server.key, url=server.url)
    with pytest.raises(paddock.CommandExitException) as e:
        s.commands.run(" ".join(HOG[:2]) + " '%s'" % HOG[2])
    assert e.value.reason == "oom" and e.value.result.memory_limit_mb == 128
    assert "out of memory" in str(e.value) and "128 MiB" in str(e.value)


def test_a_plain_sigkill_is_not_oom(server):
    i = server.create({"memory_mb": 128})["id"]
    try:
        j = server.v1.exec(i, {"cmd": ["sh", "-c", "kill -KILL $$"]})
        assert (j["signal"], j["reason"]) == (9, "signal") and "memory_limit_mb" not in j, j
    finally:
        server.delete(i)
