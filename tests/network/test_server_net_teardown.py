"""A sandbox with a network, deleted: the answer comes once its processes
are dead; its network (its entries in the router's runtime dir: slot,
policy, per-sandbox state) goes after the answer (src/server/core/
teardown.c), and when the server dies before that, the next one finishes
it while adopting (tests/server/test_server_teardown.py has the rest)."""
import os
import signal
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fakenet import FakeNet  # noqa: E402
from pdtest import pid_alive, runtime_dir  # noqa: E402
from pdtest.server import Server, runtime_root, tmproot  # noqa: E402,F401 (fixture)


@pytest.fixture(scope="module")
def fakenet(tmp_path_factory):
    fn = FakeNet(tmp_path_factory.mktemp("fakenet-td")).start()
    yield fn
    fn.stop()


def net_of(state, sid):
    """The router's runtime entries that name sandbox sid."""
    d = os.path.join(runtime_dir(state, runtime_root()), "net")
    out = []
    for sub in ("sb", "slots", "policy"):
        p = os.path.join(d, sub)
        if os.path.isdir(p):
            for n in os.listdir(p):
                full = os.path.join(p, n)
                try:
                    body = open(full).read() if os.path.isfile(full) else ""
                except OSError:
                    body = ""
                if sid in n or sid in body:
                    out.append("%s/%s" % (sub, n))
    return sorted(out)


def test_network_torn_down_after_the_answer_and_after_a_crash(tmproot, fakenet, monkeypatch):
    state = os.path.join(tmproot, "nettd")
    monkeypatch.setenv("PADDOCK_TEST_TEARDOWN_HOLD", "1")
    s = Server(state, "--pool", "0", "--net-uplink", fakenet.uplink, "--net-resolver", fakenet.resolver).start()
    monkeypatch.delenv("PADDOCK_TEST_TEARDOWN_HOLD")
    try:
        sid = s.create({"network": {"mode": "open"}})["id"]
        agent = s.agent_pid(sid)
        assert net_of(state, sid), "no network entries found for the sandbox"
        assert s.delete(sid, wait=False) == 204
        assert s.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404
        assert not pid_alive(agent)
        assert s.teardowns_pending() == 1
        assert net_of(state, sid), "the network went before the (held) teardown"
        s.stop(signal.SIGKILL)
        s.start()                   # adoption finishes the teardown before serving
        assert net_of(state, sid) == []
        assert [x for x in s.leftovers().get("sandboxes", []) if sid in x] == []
        # and without the hold: the completion state, then nothing of it
        sid2 = s.create({"network": {"mode": "open"}})["id"]
        assert net_of(state, sid2)
        assert s.delete(sid2) == 204        # waits for teardowns_pending 0
        assert net_of(state, sid2) == []
    finally:
        s.finish()
