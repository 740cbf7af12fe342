"""A delete answers once the sandbox's processes are dead and it is gone
from the API; its mounts, network, cgroups and directory are removed after
the answer (src/server/core/teardown.c, issue 19). That teardown is
observable (GET /api/v1/health "teardowns_pending", /metrics
paddock_teardowns_pending), finished by the server's stop, and finished by
the next server when this one dies in the middle of it.

PADDOCK_TEST_TEARDOWN_HOLD=1 makes a server keep its teardowns queued
until it stops: the state between the answer and the teardown, held still
so the test can look at it and kill the server there."""
import os
import signal

from pdtest import pid_alive, procs_with
from pdtest.server import Server, tmproot  # noqa: F401 (fixture)

MARK = "86399.25"      # a sleep of the sandbox's, found by its command line


def metric(s, name):
    st, _h, data = s.request("GET", "/metrics", key=None)
    assert st == 200
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no %s in /metrics" % name)


def mine(s, sid):
    """What of sandbox sid is still on the host: its directories, its cgroups."""
    return {k: [x for x in v if sid in x] for k, v in s.leftovers().items() if any(sid in x for x in v)}


def live_sandbox(s):
    sid = s.create()["id"]
    s.v1.start(sid, {"cmd": "sleep " + MARK})
    assert s.exec(sid, "pgrep -f 'sleep %s' >/dev/null && echo up" % MARK)["stdout"] == "up\n"
    assert procs_with("sleep\0" + MARK), "the sandbox's sleep is not visible on the host"
    return sid, s.agent_pid(sid)


def test_delete_answers_then_teardown_completes(tmproot, monkeypatch):
    monkeypatch.setenv("PADDOCK_TEST_TEARDOWN_HOLD", "1")
    s = Server(os.path.join(tmproot, "held"), "--pool", "0").start()
    monkeypatch.delenv("PADDOCK_TEST_TEARDOWN_HOLD")
    try:
        sid, agent = live_sandbox(s)
        assert mine(s, sid).get("cgroups"), s.leftovers()
        assert s.delete(sid, wait=False) == 204
        # answered: gone from the API, every process of it dead ...
        assert s.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404
        assert s.request("DELETE", "/api/v1/sandboxes/" + sid)[0] == 404
        assert sid not in [x["id"] for x in s.json("GET", "/api/v1/sandboxes", expect=200)[1]["sandboxes"]]
        assert not pid_alive(agent)
        assert not procs_with("sleep\0" + MARK)
        # ... and the rest still to do, which the server says
        assert s.teardowns_pending() == 1
        assert metric(s, "paddock_teardowns_pending") == 1
        left = mine(s, sid)
        assert left.get("sandboxes") and left.get("cgroups"), s.leftovers()
        # the stop finishes it
        assert s.stop() == 0
        assert mine(s, sid) == {}, s.leftovers()
    finally:
        s.finish()


def test_teardown_without_hold_leaves_nothing(tmproot):
    s = Server(os.path.join(tmproot, "free"), "--pool", "0").start()
    try:
        before = metric(s, "paddock_teardowns_total")
        sid, agent = live_sandbox(s)
        assert s.delete(sid, wait=False) == 204
        assert not pid_alive(agent)
        s.wait_teardowns()          # the completion state, then nothing of it
        assert mine(s, sid) == {}, s.leftovers()
        assert metric(s, "paddock_teardowns_total") == before + 1
        assert metric(s, "paddock_teardowns_pending") == 0
    finally:
        s.finish()


def test_server_killed_during_teardown_next_one_finishes_it(tmproot, monkeypatch):
    state = os.path.join(tmproot, "crash")
    monkeypatch.setenv("PADDOCK_TEST_TEARDOWN_HOLD", "1")
    s = Server(state, "--pool", "0").start()
    monkeypatch.delenv("PADDOCK_TEST_TEARDOWN_HOLD")
    try:
        keep = s.create()["id"]
        sid, agent = live_sandbox(s)
        assert s.delete(sid, wait=False) == 204
        assert not pid_alive(agent)
        assert s.teardowns_pending() == 1
        assert mine(s, sid), s.leftovers()
        s.stop(signal.SIGKILL)          # dies with the teardown not done
        assert mine(s, sid), "the teardown ran although held"
        s.start()                       # adoption finishes it before serving
        assert mine(s, sid) == {}, s.leftovers()
        assert s.teardowns_pending() == 0
        # the deleted one stays deleted; the other one was adopted and works
        assert s.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404
        assert s.exec(keep, "echo alive")["stdout"] == "alive\n"
        assert s.delete(keep) == 204
        assert mine(s, keep) == {}, s.leftovers()
    finally:
        s.finish()


def test_sandboxes_being_torn_down_count_against_the_maximum(tmproot, monkeypatch):
    monkeypatch.setenv("PADDOCK_TEST_TEARDOWN_HOLD", "1")
    s = Server(os.path.join(tmproot, "max"), "--pool", "0", "--max-sandboxes", "1").start()
    monkeypatch.delenv("PADDOCK_TEST_TEARDOWN_HOLD")
    try:
        sid = s.create()["id"]
        assert s.delete(sid, wait=False) == 204
        assert s.teardowns_pending() == 1
        # its mounts, cgroups and network are still there: no room yet
        st, j = s.json("POST", "/api/v1/sandboxes", {})
        assert st in (429, 503), (st, j)
        assert "still being torn down" in j["error"]["message"], j
        assert s.json("GET", "/api/v1/sandboxes", expect=200)[1]["sandboxes"] == []
    finally:
        s.finish()


def test_snapshot_deletable_right_after_its_sandbox(tmproot, monkeypatch):
    """A sandbox started from a snapshot uses it until its teardown, which
    comes after the delete's answer: deleting the snapshot right after the
    sandbox (what a client does next) waits for that teardown instead of
    answering 409 "in use" (native and E2B routes alike). Each teardown
    starts 0.5 s late here, so the delete always comes before it."""
    monkeypatch.setenv("PADDOCK_TEST_TEARDOWN_DELAY_MS", "500")
    s = Server(os.path.join(tmproot, "snapdel"), "--pool", "0").start()
    monkeypatch.delenv("PADDOCK_TEST_TEARDOWN_DELAY_MS")
    try:
        for route in ("/api/v1/snapshots/", "/templates/"):
            sid = s.create()["id"]
            name = "td-snap-" + ("native" if "v1" in route else "e2b")
            s.json("POST", "/api/v1/sandboxes/%s/snapshots" % sid, {"name": name}, expect=201)
            assert s.delete(sid) == 204
            user = s.create({"template": name})["id"]
            assert s.exec(user, "echo up")["stdout"] == "up\n"
            assert s.delete(user, wait=False) == 204
            st, _h, body = s.request("DELETE", route + name)
            assert st == 204, (route, st, body[:500])
            assert s.teardowns_pending() == 0
            assert s.request("DELETE", route + name)[0] == 404
    finally:
        s.stop()
