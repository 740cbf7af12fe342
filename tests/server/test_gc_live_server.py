"""`paddock gc` on a state dir a `paddock serve` is running on (docs/cli.md):
refused in one line naming the server's pid, and nothing of the server's
is touched (its sandboxes, its runtime dir, its router); once the server
has stopped, gc does its work."""
import os

from pdtest.server import Server, tmproot  # noqa: F401 (fixture)


def test_gc_refuses_while_a_server_runs_and_changes_nothing(tmproot):
    s = Server(os.path.join(tmproot, "gclive"), "--pool", "0").start()
    try:
        sid = s.create()["id"]
        sandboxes = os.path.join(s.rundir, "sandboxes")
        before = sorted(os.listdir(s.rundir)), sorted(os.listdir(sandboxes))
        assert sid in before[1]
        g = s.gc()
        assert g.returncode == 125, (g.returncode, g.stdout, g.stderr)
        assert g.stdout == ""
        assert g.stderr.startswith("paddock: gc: paddock serve (pid %d) is running on state directory "
                                   % s.proc.pid), g.stderr
        assert g.stderr.endswith("its sandboxes and runtime dir are left alone; stop it first\n"), g.stderr
        assert g.stderr.count("\n") == 1, g.stderr
        # nothing changed: the runtime dir, the sandbox, the server
        assert (sorted(os.listdir(s.rundir)), sorted(os.listdir(sandboxes))) == before
        assert s.exec(sid, ["echo", "still here"])["stdout"] == "still here\n"
        other = s.create()["id"]
        assert s.exec(other, ["true"])["exit_code"] == 0
        assert s.delete(other) == 204
        assert s.proc.poll() is None
    finally:
        s.stop()
    # the server is gone: gc removes what it left (the sandbox it kept)
    g = s.gc()
    assert g.returncode == 0, g.stderr
    assert g.stdout == "removed 1 sandbox\n", g.stdout
    s.finish()
