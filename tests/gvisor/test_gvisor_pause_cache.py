"""A gvisor sandbox paused to disk holds no memory (issue 17): the Sentry
wrote its checkpoint image, so the image's page cache was charged to the
sandbox's memory cgroup and stayed there with the Sentry gone; paddock now
drops it after the checkpoint (gvisor_ckpt.c: drop_image_cache)."""
import json
import os

import pytest

from pdtest import wait_until, pid_alive
from pdtest.server import Server, tmproot  # noqa: F401 (fixture)

T = 180
MIB = 1 << 20


@pytest.fixture(scope="module")
def srv(tmproot):
    s = Server(os.path.join(tmproot, "gvisor-cache"), "--pool", "0").start()
    try:
        yield s
    finally:
        s.finish()


def memory_cgroup(pid):
    """The v1 memory cgroup directory of a host process."""
    for line in open("/proc/%d/cgroup" % pid):
        _n, ctrl, path = line.strip().split(":", 2)
        if "memory" in ctrl.split(","):
            return "/sys/fs/cgroup/memory" + path
    pytest.skip("no v1 memory cgroup for the Sentry (host layout)")


def usage(cg):
    with open(os.path.join(cg, "memory.usage_in_bytes")) as f:
        return int(f.read())


def test_paused_to_disk_holds_no_page_cache(srv):
    st, _h, data = srv.request("POST", "/api/v1/sandboxes", {"isolation": "gvisor", "memory_mb": 512}, timeout=T)
    assert st == 201, data
    sid = json.loads(data)["id"]
    try:
        # 96 MiB of touched memory in a process that stays: it goes into the image
        st, _h, data = srv.request("POST", "/api/v1/sandboxes/%s/exec" % sid, {
            "cmd": ["sh", "-c", "python3 -c 'import time, os; b = os.urandom(96 << 20); "
                    "open(\"/tmp/ready\", \"w\").close(); time.sleep(3600)' >/dev/null 2>&1 &"]}, timeout=T)
        assert st == 200, data
        assert wait_until(lambda: json.loads(srv.request(
            "POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": ["test", "-e", "/tmp/ready"]}, timeout=T)[2])[
            "exit_code"] == 0, 120)
        sentry = srv.agent_pid(sid)
        cg = memory_cgroup(sentry)
        running = usage(cg)
        st, _h, data = srv.request("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, timeout=T)
        assert st == 200, data
        assert wait_until(lambda: not pid_alive(sentry), 30)
        image = os.path.join(srv.state, "gvisor", "paused", sid, "checkpoint.img")
        size = os.path.getsize(image)
        paused = usage(cg)
        print("running %.1f MiB, image %.1f MiB, paused %.1f MiB" % (running / MIB, size / MIB, paused / MIB))
        assert size > 96 * MIB, size
        # before: the image's pages (about its size) stayed charged
        assert paused < 16 * MIB, (running, size, paused)
        st, _h, data = srv.request("POST", "/api/v1/sandboxes/%s/resume" % sid, timeout=T)
        assert st == 200, data
        j = json.loads(srv.request("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": ["cat", "/tmp/ready"]},
                                   timeout=T)[2])
        assert j["exit_code"] == 0, j
    finally:
        assert srv.delete(sid) == 204
