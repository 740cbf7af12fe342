"""E2B creates with a network (E2B's default: the internet) come from a warm
pool class of their own (src/server/e2b/e2b_pool.c); before, the plain pool
held no sandbox with a network and every SDK create was a cold start.

    /usr/bin/python3 -m pytest -q tests/network/test_e2b_net_pool.py

Needs root (the container tier and network namespaces) and a build."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdtest.env import wait_until  # noqa: E402
from pdtest.server import Server, runtime_root, tmproot  # noqa: E402,F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (container tier, netns)")


def pooled(srv, sid):
    return [e.get("pooled") for e in srv.audit_events(sid) if e["event"] == "sandbox.create"]


def test_e2b_create_with_network_is_pooled(tmproot):
    s = Server(os.path.join(tmproot, "e2bpool"), "--pool", "1", "--net-uplink", "none").start()
    made = []
    try:
        def e2b(body):
            st, j = s.json("POST", "/sandboxes", dict({"templateID": "base"}, **body))
            assert st == 201, j
            made.append(j["sandboxID"])
            return j["sandboxID"]

        first = e2b({})                 # registers the class: a cold start
        assert pooled(s, first) == [False]

        def ready():
            st, _h, body = s.request("GET", "/metrics", key=None)
            return b'paddock_pool_ready{template="base+e2b-network+network"} 1' in body
        assert wait_until(ready, limit=180), "the E2B network class was not filled"
        second = e2b({})
        assert pooled(s, second) == [True]
        net = s.json("GET", "/api/v1/sandboxes/" + second, expect=200)[1]["network"]
        assert net["mode"] == "open", net
        info = s.json("GET", "/sandboxes/" + second, expect=200)[1]
        assert info["allowInternetAccess"] is True, info
        j = s.exec(second, "echo pooled")
        assert j["stdout"] == "pooled\n", j
        # another policy is another class: not handed a sandbox of the first
        third = e2b({"network": {"denyOut": ["10.0.0.0/8"]}})
        assert pooled(s, third) == [False]
        # no network: the plain pool, as before
        fourth = e2b({"allow_internet_access": False})
        assert s.json("GET", "/api/v1/sandboxes/" + fourth, expect=200)[1]["network"] == {"mode": "none"}
        for x in made:
            assert s.delete(x) == 204
        made.clear()
    finally:
        for x in made:
            s.delete(x)
        s.finish()
