"""`paddock serve`: who may reach a sandbox's ports, and by which name
(docs/api.md "Ports", docs/e2b.md "Ports"): the port domain carries the
server's port and resolves on this machine (`*.localhost`, libnss-myhostname),
E2B-created sandboxes are public unless allowPublicTraffic is false, native
ones need the port token, the code interpreter's port needs the access
token, a paused autoResume sandbox is resumed by an authorised request and
by nothing else, hostile Host headers touch nothing.

    sudo /usr/bin/python3 -m pytest -q tests/server/test_server_ports_access.py

Standard library only. Needs root (sandboxes), build/src/paddock and the
agent (PADDOCK_BIN / PADDOCK_AGENT as in tests/pdtest/env.py).
"""
import http.client
import json
import os
import socket
import time

import pytest

from pdtest.server import server_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

# the default domain, localhost: what `paddock serve` gives out unless told
srv = server_fixture("--pool", "0", prefix="pd-srv-pacc-")

WEB = ("mkdir -p /tmp/www && cd /tmp/www && echo hi > hello.txt && "
       "exec python3 -m http.server %d --bind 127.0.0.1")


def e2b(srv, method, path, body=None):
    """An E2B control-plane call with the server's key: (status, JSON)."""
    return srv.json(method, path, body, key=None, headers={"X-API-KEY": srv.key})


def e2b_create(srv, **body):
    st, j = e2b(srv, "POST", "/v2/sandboxes", dict({"templateID": "base"}, **body))
    assert st == 201, j
    return j


def serve(srv, sid, port=8000):
    """Start http.server on port inside sid; wait until it answers through
    the path form (the owner's key)."""
    st, p = srv.api("POST", "/sandboxes/%s/processes" % sid, {"cmd": WEB % port})
    assert st == 201, p
    deadline = time.monotonic() + 30
    while True:
        st, _h, body = srv.request("GET", "/api/v1/sandboxes/%s/ports/%d/hello.txt" % (sid, port))
        if st == 200:
            return
        assert st == 502, (st, body)
        assert time.monotonic() < deadline, "http.server not up in 30 s: %s" % body
        time.sleep(0.1)


def ports(srv, sid):
    return srv.api("GET", "/sandboxes/%s/ports" % sid, expect=200)[1]


def host_get(srv, sid, port=8000, path="/hello.txt", headers=None, host=None):
    h = {"Host": host or "%d-%s.localhost:%d" % (port, sid, srv.port)}
    h.update(headers or {})
    return srv.raw("GET", path, headers=h)


def ids(srv):
    return sorted(s["id"] for s in srv.api("GET", "/sandboxes", expect=200)[1]["sandboxes"])


def state(srv, sid):
    return srv.api("GET", "/sandboxes/%s" % sid, expect=200)[1]["state"]


@pytest.fixture(scope="module")
def native(srv):
    sid = srv.create()["id"]
    serve(srv, sid)
    yield sid
    srv.delete(sid)


def test_domain_names_the_server_and_resolves_here(srv, native):
    """The URL the API hands out works as it is, through this machine's own
    resolver: `8000-<id>.localhost` is looked up with getaddrinfo (nss
    myhostname answers *.localhost with loopback) and the server routes the
    request by its Host header."""
    info = ports(srv, native)
    assert info["domain"] == "localhost:%d" % srv.port
    name = "8000-%s.localhost" % native
    try:
        addrs = socket.getaddrinfo(name, srv.port, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as e:
        pytest.skip("this host does not resolve *.localhost (libnss-myhostname with `myhostname` on the "
                    "hosts line of /etc/nsswitch.conf; scripts/setup.sh installs it): %s" % e)
    assert {a[4][0] for a in addrs} == {"127.0.0.1"}
    # an ordinary client, given only the URL: connects to what the name resolves to
    conn = http.client.HTTPConnection(name, srv.port, timeout=30)
    try:
        conn.request("GET", "/hello.txt", headers={"X-Paddock-Port-Token": info["port_token"]})
        r = conn.getresponse()
        assert (r.status, r.read()) == (200, b"hi\n")
        conn.request("GET", "/hello.txt")
        r = conn.getresponse()
        assert r.status == 401, "a native sandbox's ports are private"
        r.read()
    finally:
        conn.close()


def test_native_sandbox_is_private(srv, native):
    assert ports(srv, native)["public"] is False
    st, _h, _b = host_get(srv, native)
    assert st == 401
    st, _h, body = host_get(srv, native, headers={"E2B-Traffic-Access-Token": ports(srv, native)["port_token"]})
    assert (st, body) == (200, b"hi\n")


def test_hostile_hosts_touch_nothing(srv, native):
    tok = ports(srv, native)["port_token"]
    other = srv.create()["id"]
    try:
        ev0 = len(srv.audit_events(native))
        cases = {
            # another sandbox's id with this one's token: that id's token is another
            "8000-%s.localhost:%d" % (other, srv.port): (401,),
            "0-%s.localhost" % native: (400,),
            "65536-%s.localhost" % native: (400,),
            "08000-%s.localhost" % native: (400,),
            "99999999-%s.localhost" % native: (400,),
            # not a port host at all: the ordinary routes answer (nothing relayed)
            "8000-..%s.localhost" % native: (404, 401),
            "8000-%s..localhost" % native: (404, 401),
            "8000-%s.localhost.evil.example" % native: (404, 401),
            "8000-%s/../x.localhost" % native: (404, 401, 400),
            "8000-%s.localhost:80x" % native: (404, 401),
            "8000-%s.localhost" % ("a" * 4000): (404, 401, 400, 431),
            "%s-%s.localhost" % ("9" * 3000, native): (404, 401, 400, 431),
        }
        for host, want in cases.items():
            st, _h, body = host_get(srv, native, headers={"X-Paddock-Port-Token": tok}, host=host)
            assert st in want, (host[:80], st, body[:200])
            assert body != b"hi\n"
        # nothing happened to either sandbox, and the server still serves
        assert state(srv, native) == "running" and state(srv, other) == "running"
        assert len(srv.audit_events(native)) == ev0
        st, _h, body = host_get(srv, native, headers={"X-Paddock-Port-Token": tok})
        assert (st, body) == (200, b"hi\n")
    finally:
        srv.delete(other)


def test_e2b_sandbox_public_by_default(srv):
    j = e2b_create(srv)
    sid = j["sandboxID"]
    try:
        assert j["domain"] == "localhost:%d" % srv.port
        assert len(j["trafficAccessToken"]) == 64
        serve(srv, sid)
        st, _h, body = host_get(srv, sid)
        assert (st, body) == (200, b"hi\n"), "E2B sandboxes are public unless allowPublicTraffic is false"
        st, info = e2b(srv, "GET", "/sandboxes/%s" % sid)
        assert st == 200 and info["network"]["allowPublicTraffic"] is True, info
        assert info["domain"] == j["domain"]
    finally:
        srv.delete(sid)


def test_e2b_allow_public_traffic_false(srv):
    j = e2b_create(srv, network={"allowPublicTraffic": False})
    sid, tok = j["sandboxID"], j["trafficAccessToken"]
    try:
        serve(srv, sid)
        for h in ({}, {"e2b-traffic-access-token": "0" * 64}, {"e2b-traffic-access-token": tok[:-1]},
                  {"X-Access-Token": j["envdAccessToken"]}, {"Authorization": "Bearer " + srv.key}):
            st, _h, body = host_get(srv, sid, headers=h)
            assert st == 401, (h, st, body)
        st, _h, body = host_get(srv, sid, headers={"e2b-traffic-access-token": tok})
        assert (st, body) == (200, b"hi\n")
        st, info = e2b(srv, "GET", "/sandboxes/%s" % sid)
        assert info["network"]["allowPublicTraffic"] is False
        assert ports(srv, sid)["public"] is False
    finally:
        srv.delete(sid)


def test_e2b_bad_port_options(srv):
    for body in ({"network": {"allowPublicTraffic": "no"}}, {"autoResume": {"enabled": True}},
                 {"autoPause": True, "autoResume": {"enabled": "yes"}}, {"autoPause": True, "autoResume": 1},
                 {"autoPause": True, "autoResume": {"enabled": True, "x": 1}}):
        before = ids(srv)
        st, j = e2b(srv, "POST", "/v2/sandboxes", dict({"templateID": "base"}, **body))
        assert st == 400, (body, st, j)
        assert ids(srv) == before, "a refused create made nothing"


def test_code_interpreter_port_needs_the_access_token(srv):
    """Port 49999 runs code: public ports, the port token and the traffic
    token do not open it; the access token does (and is not passed on)."""
    j = e2b_create(srv)
    sid = j["sandboxID"]
    try:
        serve(srv, sid, 49999)
        assert ports(srv, sid)["public"] is True
        for h in ({}, {"X-Paddock-Port-Token": j["trafficAccessToken"]},
                  {"E2B-Traffic-Access-Token": j["trafficAccessToken"]}, {"X-Access-Token": "0" * 64}):
            st, _h, body = host_get(srv, sid, 49999, headers=h)
            assert st == 401, (h, st, body)
            st, _h, body = srv.raw("GET", "/api/v1/sandboxes/%s/ports/49999/hello.txt" % sid, headers=h)
            assert st == 401, (h, st, body)
        st, _h, body = host_get(srv, sid, 49999, headers={"X-Access-Token": j["envdAccessToken"]})
        assert (st, body) == (200, b"hi\n")
        # the E2B route to the interpreter: the traffic token manages contexts, never runs code
        h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49999", "E2B-Traffic-Access-Token": j["trafficAccessToken"],
             "Content-Type": "application/json"}
        for path in ("/execute", "/execute/", "/execute//", "/hello.txt"):
            st, _h, body = srv.raw("POST", path, body=b'{"code": "1"}', headers=h)
            assert st == 401, (path, st, body)
    finally:
        srv.delete(sid)


def test_paused_without_auto_resume_is_e2b_502(srv):
    j = e2b_create(srv)
    sid = j["sandboxID"]
    try:
        serve(srv, sid)
        st, _b = e2b(srv, "POST", "/sandboxes/%s/pause" % sid)
        assert st == 204
        st, _h, body = host_get(srv, sid)
        assert st == 502, body
        j2 = json.loads(body)
        assert j2["code"] == 502 and j2["sandboxId"] == sid and "autoResume" in j2["message"], j2
        assert state(srv, sid) == "paused"
        # the path form says 409, in the native API's words
        st, _h, body = srv.request("GET", "/api/v1/sandboxes/%s/ports/8000/hello.txt" % sid)
        assert st == 409, body
        assert state(srv, sid) == "paused"
    finally:
        srv.delete(sid)


def test_auto_resume_on_traffic(srv):
    j = e2b_create(srv, autoPause=True, autoResume={"enabled": True}, network={"allowPublicTraffic": False})
    sid, tok = j["sandboxID"], j["trafficAccessToken"]
    try:
        serve(srv, sid)
        st, info = e2b(srv, "GET", "/sandboxes/%s" % sid)
        assert info["lifecycle"] == {"onTimeout": "pause", "autoResume": True}, info
        st, _b = e2b(srv, "POST", "/sandboxes/%s/pause" % sid)
        assert st == 204 and state(srv, sid) == "paused"
        # unauthorised requests and hostile ports do not wake it
        for h, port in (({}, 8000), ({"e2b-traffic-access-token": "0" * 64}, 8000),
                        ({"e2b-traffic-access-token": tok}, 0), ({"e2b-traffic-access-token": tok}, 65536)):
            st, _h, _b = host_get(srv, sid, port, headers=h)
            assert st in (400, 401), (h, port, st)
        st, _h, _b = host_get(srv, sid, 49999, headers={"e2b-traffic-access-token": tok})
        assert st == 401
        assert state(srv, sid) == "paused"
        assert "sandbox.auto_resume" not in [e["event"] for e in srv.audit_events(sid)]
        # the right token: resumed, and the frozen service answers
        st, _h, body = host_get(srv, sid, headers={"e2b-traffic-access-token": tok})
        assert (st, body) == (200, b"hi\n")
        assert state(srv, sid) == "running"
        events = [e["event"] for e in srv.audit_events(sid)]
        assert events.count("sandbox.auto_resume") == 1, events
    finally:
        srv.delete(sid)


def test_public_and_auto_resume_survive_a_restart(srv):
    j = e2b_create(srv, autoPause=True, autoResume={"enabled": True})
    pub, priv = j["sandboxID"], srv.create()["id"]
    try:
        srv.api("POST", "/sandboxes/%s/ports/public" % priv, {"public": True}, expect=200)
        srv.stop()
        srv.start()
        assert ports(srv, pub)["public"] is True and ports(srv, priv)["public"] is True
        st, info = e2b(srv, "GET", "/sandboxes/%s" % pub)
        assert info["lifecycle"]["autoResume"] is True, info
        srv.api("POST", "/sandboxes/%s/ports/public" % priv, {"public": False}, expect=200)
        assert ports(srv, priv)["public"] is False
        st, _j = srv.api("POST", "/sandboxes/%s/ports/public" % priv, {"public": False, "x": 1})
        assert st == 400
    finally:
        srv.delete(pub)
        srv.delete(priv)


def test_cli_port(srv, native):
    r = srv.cli("port", native, "8000", remote=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    tok = ports(srv, native)["port_token"]
    assert lines == ["http://8000-%s.localhost:%d/" % (native, srv.port), "X-Paddock-Port-Token: " + tok]
    host = lines[0][len("http://"):-1]
    st, _h, body = srv.raw("GET", "/hello.txt", headers={"Host": host, "X-Paddock-Port-Token": tok})
    assert (st, body) == (200, b"hi\n")
    r = srv.cli("port", native, "8000", "--json", remote=True)
    assert r.returncode == 0 and json.loads(r.stdout)["port_token"] == tok
    for bad in ("0", "65536", "x", "-1", ""):
        r = srv.cli("port", native, bad, remote=True)
        assert r.returncode == 2, (bad, r.stdout, r.stderr)
        assert r.stdout == ""
    r = srv.cli("port", "z" * 20, "8000", remote=True)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    r = srv.cli("port", "not-an-id", "8000", remote=True)
    assert r.returncode == 2
