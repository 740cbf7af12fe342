"""Rebuilding the agent under a running server (the linker leaves a
non-executable file at the path while it writes, then a new binary)
must not break creates: the server keeps the agent it started with, a
copy in <state>/agent/ (pd_agent_pin)."""
import os
import shutil
import stat

import pytest

from pdtest import env as pdenv
from pdtest.server import Server, need_build, tmproot  # noqa: F401 (fixture)


@pytest.fixture
def own_agent(tmp_path, tmproot, request):
    """A server whose $PADDOCK_AGENT is a copy we may rewrite."""
    need_build()
    ag = tmp_path / "paddock-agent"
    shutil.copy2(pdenv.PADDOCK_AGENT, ag)
    # the process tier needs a state dir whose parents others can search
    os.chmod(tmproot, 0o755)
    s = Server(os.path.join(tmproot, request.node.name.replace("[", "-").rstrip("]")),
               "--pool", "0", "--net-uplink", "none")
    try:
        yield s, ag
    finally:
        s.finish()


def start_with(s, agent):
    saved = pdenv.PADDOCK_AGENT
    pdenv.PADDOCK_AGENT = str(agent)
    try:
        s.start()
    finally:
        pdenv.PADDOCK_AGENT = saved


def create_exec(s):
    st, j = s.json("POST", "/api/v1/sandboxes", {})
    assert st == 201, j
    try:
        assert s.exec(j["id"], ["echo", "ok"])["stdout"] == "ok\n"
    finally:
        s.delete(j["id"])


@pytest.mark.parametrize("tier", ["container", "process"])
def test_creates_survive_an_agent_rebuild(own_agent, tier):
    s, ag = own_agent
    start_with(s, ag)
    st, j = s.json("POST", "/api/v1/sandboxes", {"isolation": tier})
    assert st == 201, j
    old = j["id"]
    # what `ninja` does to the path: unlink, write 0644, chmod +x at the end
    data = ag.read_bytes()
    ag.unlink()
    ag.write_bytes(b"\x7fELF half-written")
    os.chmod(ag, 0o644)
    try:
        for _ in range(2):
            st, j = s.json("POST", "/api/v1/sandboxes", {"isolation": tier})
            assert st == 201, j
            assert s.exec(j["id"], ["echo", "ok"])["stdout"] == "ok\n"
            s.delete(j["id"])
        # the sandbox made before the rebuild still answers
        assert s.exec(old, ["true"])["exit_code"] == 0
    finally:
        ag.write_bytes(data)
        os.chmod(ag, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        s.delete(old)
    # the copy it runs is the one it started with, in its state dir
    pinned = os.path.join(s.state, "agent", "paddock-agent")
    with open(pinned, "rb") as f:
        assert f.read() == data


def test_restart_takes_the_new_agent(own_agent):
    """The copy is made at each start: a restarted server runs the agent
    now at the path (a new inode; sandboxes on the old copy keep theirs)."""
    s, ag = own_agent
    start_with(s, ag)
    pinned = os.path.join(s.state, "agent", "paddock-agent")
    ino = os.stat(pinned).st_ino
    s.stop()
    start_with(s, ag)
    assert os.stat(pinned).st_ino != ino
    create_exec(s)


def test_unusable_agent_refuses_start(own_agent):
    """An agent path that is not there: serve says so and does not start."""
    s, ag = own_agent
    ag.unlink()
    with pytest.raises(AssertionError, match="PADDOCK_AGENT"):
        start_with(s, ag)
