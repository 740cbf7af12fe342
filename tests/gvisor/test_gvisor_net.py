"""The gvisor tier with a network (issue 17): runsc's netstack over the veth
the instance's router attaches to the netns runsc starts in, so the router's
egress policy applies unchanged, live changes too. Against the fake internet
of tests/network (_fakenet.py: a network namespace the test makes)."""
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "network"))
from _fakenet import WEB, FakeNet  # noqa: E402
from pdtest.server import Server, tmproot  # noqa: E402,F401 (fixture)
from test_server_network import net_files, reach  # noqa: E402

T = 180


@pytest.fixture(scope="module")
def fakenet(tmp_path_factory):
    fn = FakeNet(tmp_path_factory.mktemp("fakenet-gv")).start()
    yield fn
    fn.stop()


def test_policy_applies_and_changes_live(tmproot, fakenet):
    s = Server(os.path.join(tmproot, "gvnet"), "--pool", "0", "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver).start()
    try:
        st, _h, data = s.request("POST", "/api/v1/sandboxes",
                                 {"isolation": "gvisor", "network": {"mode": "policy", "allow": [WEB[0]]}}, timeout=T)
        assert st == 201, data
        sb = json.loads(data)
        sid = sb["id"]
        assert sb["isolation"] == "gvisor" and sb["network"]["mode"] == "policy", sb
        assert reach(s, sid, WEB[:2]) == {WEB[0]: True, WEB[1]: False}
        net = s.json("GET", "/api/v1/sandboxes/%s/network" % sid, expect=200)[1]
        assert net["dropped_packets"] >= 1, net
        st, j = s.json("PUT", "/api/v1/sandboxes/%s/network" % sid, {"mode": "policy", "allow": [WEB[1]]})
        assert st == 200, j
        assert reach(s, sid, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        # the Sentry's netstack, not the host kernel's: the host netns the
        # veth is in has no address left (runsc took it over)
        st, j = s.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": "uname -r; cat /etc/resolv.conf"})
        assert j["stdout"].split("\n")[0] != os.uname().release and "nameserver" in j["stdout"], j
        # a checkpoint cannot carry the netstack's veth: refused, and the
        # sandbox goes on
        st, _h, data = s.request("POST", "/api/v1/sandboxes/%s/pause" % sid, {"mode": "disk"})
        assert st == 400 and b"cannot checkpoint a sandbox with a network" in data, (st, data)
        st, _h, data = s.request("POST", "/api/v1/sandboxes/%s/fork" % sid, {"count": 1})
        assert st == 400 and b"network" in data, (st, data)
        assert reach(s, sid, WEB[:2]) == {WEB[0]: False, WEB[1]: True}
        assert s.delete(sid) == 204
        assert [f for f in net_files(s.state) if "/" in f] == []
    finally:
        s.finish()
