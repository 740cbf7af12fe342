"""QEMU, which is not the agent's child, joins every cgroup hierarchy its
sandbox is in: memory and pids at the agent leaf, and (v1) cpu, cpuacct
and freezer at the sandbox level, where the CPU limit is. It used to join
memory and pids only (pd_cgroup_open_procs skipped the unsplit ones), so
the sandbox's CPU limit did not apply to it."""
import os

import pytest

from pdtest.server import Server, tmproot  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def srv(tmproot):
    s = Server(os.path.join(tmproot, "microvm-cg"), "--pool", "0", "--net-uplink", "none").start()
    yield s
    s.finish()


def test_qemu_is_in_every_hierarchy_of_its_sandbox(srv):
    st, j = srv.json("POST", "/api/v1/sandboxes", {"isolation": "microvm", "memory_mb": 256}, timeout=900)
    assert st == 201, j
    sid = j["id"]
    try:
        qemu = srv.agent_pid(sid)
        with open("/proc/%d/cgroup" % qemu) as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
        by_ctrl = {}
        for _n, ctrls, path in lines:
            for c in ctrls.split(","):
                by_ctrl[c or "v2"] = path
        # every hierarchy in which the instance made this sandbox a cgroup
        mine = []
        for h in os.listdir("/sys/fs/cgroup"):
            base = os.path.join("/sys/fs/cgroup", h, "paddock-" + srv.instance)
            if os.path.isdir(base) and any(e.startswith(sid) for e in os.listdir(base)):
                mine.append(h)
        assert mine, "no cgroup of %s found" % sid
        for h in mine:
            ctrl = "v2" if h == "unified" else h.split(",")[0]
            path = by_ctrl.get(ctrl)
            assert path is not None and sid in path, "QEMU (pid %d) is not in %s's %s cgroup: %s" % (
                qemu, sid, h, by_ctrl)
    finally:
        srv.delete(sid)
