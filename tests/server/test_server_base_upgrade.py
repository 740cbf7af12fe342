"""An outdated base template (a server of an older build made it) is
rebuilt beside the old one, never removed under the sandboxes whose root
is mounted from it: the old one is moved aside and goes once no mount
uses it (after the rebuild, or `paddock gc`)."""
import glob
import os

from pdtest.server import server_fixture

srv = server_fixture("--pool", "0", "--net-uplink", "none", prefix="pd-baseup-")

LOOK = ["sh", "-c", "cat /etc/hostname /etc/passwd | wc -l; ls /etc | wc -l"]


def retired(state):
    return glob.glob(os.path.join(state, "templates", ".base-retired-*"))


def test_running_sandbox_keeps_its_root_across_a_rebuild(srv):
    st, j = srv.json("POST", "/api/v1/sandboxes", {})
    assert st == 201, j
    old = j["id"]
    before = srv.exec(old, LOOK)
    assert before["exit_code"] == 0, before
    base = os.path.join(srv.state, "templates", "base")
    ino = os.stat(base).st_ino
    # what a template of an older paddock says
    with open(os.path.join(base, "version"), "w") as f:
        f.write("4\n")
    assert retired(srv.state) == []
    st, j = srv.json("POST", "/api/v1/sandboxes", {})
    assert st == 201, j
    new = j["id"]
    try:
        assert os.stat(base).st_ino != ino, "base was not rebuilt"
        with open(os.path.join(base, "version")) as f:
            assert f.read() != "4\n"
        assert srv.exec(new, LOOK)["stdout"] == before["stdout"]
        # the sandbox started from the old one still has all of its root
        assert srv.exec(old, LOOK)["stdout"] == before["stdout"]
        # kept while mounted
        left = retired(srv.state)
        assert len(left) == 1, left
        assert os.path.exists(os.path.join(left[0], "rootfs", "etc", "passwd"))
    finally:
        srv.delete(old)
    srv.delete(new)
    # no sandbox uses it now: gc removes it (and says nothing of it); gc
    # refuses while the server runs (its runtime dir is the server's), so
    # the server stops first, the last thing this module does
    srv.stop()
    g = srv.gc()
    assert g.returncode == 0, g.stderr
    assert retired(srv.state) == [], g.stderr
    assert "outdated base" not in g.stderr

