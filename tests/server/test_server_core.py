"""paddock serve, the core: auth, the sandbox lifecycle routes, validation,
body caps, TTL, pause/resume, audit, metrics, restart adoption, and a
corrupt state database.

    /usr/bin/python3 -m pytest -q tests/server/test_server_core.py

Standard library only. Needs root (the container tier) and a build
(build/src/paddock, build/src/agent/paddock-agent). Every server listens on
127.0.0.1 only, on its own state directory, and `paddock gc` must find that
state directory clean at the end.
"""
import glob
import http.client
import json
import os
import signal
import socket
import threading
import time
import urllib.parse

import pytest

from pdtest import free_port, instance_of, pid_alive, wait_until
from pdtest.server import Server, run_paddock, tmproot  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")


@pytest.fixture(scope="module")
def srv(tmproot):
    s = Server(os.path.join(tmproot, "main"), "--pool", "1").start()
    yield s
    s.finish()


def wait_gone(srv, sid, limit=30):
    return wait_until(lambda: srv.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404, limit, 0.2)


# ---- auth and routing ----

def test_health_needs_no_key(srv):
    st, body = srv.json("GET", "/api/v1/health", key=None, expect=200)
    assert body["status"] == "ok" and "version" in body and isinstance(body["sandboxes"], int)


def test_unauthorized(srv):
    st, body = srv.json("GET", "/api/v1/sandboxes", key=None)
    assert st == 401 and body["error"]["code"] == "unauthorized"
    st, body = srv.json("GET", "/api/v1/sandboxes", key="pdk_" + "0" * 48)
    assert st == 401 and body["error"]["code"] == "unauthorized"
    st, _, _ = srv.request("POST", "/api/v1/sandboxes", body={}, key="wrong")
    assert st == 401
    st, _, _ = srv.request("GET", "/api/v1/sandboxes", key=None, headers={"X-API-Key": srv.key})
    assert st == 200


def test_unknown_route_and_method(srv):
    st, body = srv.json("GET", "/api/v1/nothing-here")
    assert st == 404 and body["error"]["code"] == "not_found"
    st, _, _ = srv.request("PUT", "/api/v1/sandboxes")
    assert st == 405


# ---- lifecycle ----

def test_create_get_list_delete(srv):
    sb = srv.create({"metadata": {"who": "test-cgld"}, "env": {"FOO": "bar"}, "memory_mb": 512})
    sid = sb["id"]
    assert len(sid) == 20 and sid.isalnum() and sid.islower()
    assert sb["state"] == "running" and sb["template"] == "base" and sb["isolation"] == "container"
    assert sb["env"] == {"FOO": "bar"} and sb["metadata"] == {"who": "test-cgld"}
    assert sb["timeout"] == 300 and sb["expires_at"] and sb["created_at"].endswith("Z")
    assert pid_alive(srv.agent_pid(sid))
    _, got = srv.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
    assert got["id"] == sid and got["metadata"] == {"who": "test-cgld"}
    _, lst = srv.json("GET", "/api/v1/sandboxes", expect=200)
    assert sid in [s["id"] for s in lst["sandboxes"]]
    pid = srv.agent_pid(sid)
    assert srv.delete(sid) == 204
    assert srv.request("GET", "/api/v1/sandboxes/" + sid)[0] == 404
    assert srv.delete(sid) == 404
    assert not os.path.exists(os.path.join(srv.rundir, "sandboxes", sid))
    assert not pid_alive(pid)


def test_list_filters_and_paging(srv):
    tag = "pg%d" % os.getpid()
    ids = [srv.create({"metadata": {"grp": tag, "n": str(i)}})["id"] for i in range(3)]
    try:
        q = "/api/v1/sandboxes?metadata=" + urllib.parse.quote("grp=" + tag)
        _, lst = srv.json("GET", q, expect=200)
        assert sorted(s["id"] for s in lst["sandboxes"]) == sorted(ids)
        _, lst = srv.json("GET", q + "&metadata=" + urllib.parse.quote("n=1"), expect=200)
        assert [s["id"] for s in lst["sandboxes"]] == [ids[1]]
        # paging: limit 2, then the rest from the cursor
        _, p1 = srv.json("GET", q + "&limit=2", expect=200)
        assert len(p1["sandboxes"]) == 2 and p1["next_cursor"]
        _, p2 = srv.json("GET", q + "&limit=2&cursor=" + p1["next_cursor"], expect=200)
        assert len(p2["sandboxes"]) == 1 and p2["next_cursor"] is None
        assert sorted(s["id"] for s in p1["sandboxes"] + p2["sandboxes"]) == sorted(ids)
        # state filter
        srv.json("POST", "/api/v1/sandboxes/%s/pause" % ids[0], expect=200)
        _, lst = srv.json("GET", q + "&state=paused", expect=200)
        assert [s["id"] for s in lst["sandboxes"]] == [ids[0]]
        _, lst = srv.json("GET", q + "&state=running", expect=200)
        assert sorted(s["id"] for s in lst["sandboxes"]) == sorted(ids[1:])
        _, lst = srv.json("GET", q + "&state=running,paused", expect=200)
        assert len(lst["sandboxes"]) == 3
        assert srv.request("GET", "/api/v1/sandboxes?state=bogus")[0] == 400
        assert srv.request("GET", "/api/v1/sandboxes?limit=0")[0] == 400
        assert srv.request("GET", "/api/v1/sandboxes?limit=1001")[0] == 400
    finally:
        for i in ids:
            assert srv.delete(i) == 204   # a paused sandbox too


# ---- validation ----

@pytest.mark.parametrize("tpl", ["../x", "/etc", "a/b", "..", "", "Base", "x" * 65, 5, None])
def test_template_must_be_a_name(srv, tpl):
    st, body = srv.json("POST", "/api/v1/sandboxes", {"template": tpl})
    assert st == 400 and body["error"]["code"] == "bad_request"


def test_unknown_template(srv):
    st, body = srv.json("POST", "/api/v1/sandboxes", {"template": "no-such-template"})
    assert st == 400 and "unknown template" in body["error"]["message"]


def test_e2b_template_id_may_name_a_tier(srv):
    """E2B's create passes only a templateID through the SDKs: a tier's name
    there means template base on that tier (microvm first; any tier since
    tiers are one table, src/lib/tier_list.h)."""
    st, _, data = srv.request("POST", "/v2/sandboxes", {"templateID": "supervised"}, key=None,
                              headers={"X-API-Key": srv.key, "Content-Type": "application/json"})
    assert st == 201, (st, data)
    sid = json.loads(data)["sandboxID"]
    try:
        _, sb = srv.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
        assert sb["isolation"] == "supervised" and sb["template"] == "base", sb
    finally:
        assert srv.delete(sid) == 204
    st, _, data = srv.request("POST", "/v2/sandboxes", {"isolation": "gvisor-not-yet"}, key=None,
                              headers={"X-API-Key": srv.key, "Content-Type": "application/json"})
    assert st == 400 and json.loads(data)["message"] == (
        "isolation must be one of process, container, supervised, gvisor, microvm"), (st, data)


@pytest.mark.parametrize("body", [
    {"bogus": 1},
    {"tempalte": "base"},
    {"memory_mb": "512"},
    {"memory_mb": 8},
    {"memory_mb": 65537},
    {"memory_mb": True},
    {"cpus": "1"},
    {"cpus": 0.01},
    {"cpus": 65},
    {"pids": 0},
    {"pids": 1.5},
    {"disk_mb": 0},
    {"timeout": 0},
    {"timeout": 86401},
    {"env": {"A": 1}},
    {"env": {"A=B": "x"}},
    {"env": []},
    {"metadata": ["a"]},
    {"metadata": {"a": {"b": "c"}}},
    {"isolation": "vm"},
])
def test_create_validation(srv, body):
    st, resp = srv.json("POST", "/api/v1/sandboxes", body)
    assert st == 400, resp
    assert resp["error"]["code"] == "bad_request" and resp["error"]["message"]


@pytest.mark.parametrize("raw", ['{', '{"template": "base"', '{"a":}', 'nul', '[]', '"x"', '{"a":1}{'])
def test_malformed_json(srv, raw):
    st, _, data = srv.request("POST", "/api/v1/sandboxes", body=raw, headers={"Content-Type": "application/json"})
    assert st == 400, data
    assert json.loads(data)["error"]["code"] == "bad_request"


def send_raw(port, head, body_iter):
    """Send a request by hand; return (status, body) or None if cut off."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(head)
        try:
            for chunk in body_iter:
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
                if b"\r\n\r\n" in data:
                    hdr, _, rest = data.partition(b"\r\n\r\n")
                    cl = [l for l in hdr.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                    if cl and len(rest) >= int(cl[0].split(b":")[1]):
                        break
        except ConnectionResetError:
            pass
        if not data:
            return None
        return int(data.split(b" ")[1]), data.partition(b"\r\n\r\n")[2]
    finally:
        s.close()


def test_oversized_body_content_length(srv):
    big = b"x" * (2 << 20)
    head = ("POST /api/v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Content-Length: %d\r\n\r\n" % (srv.key, len(big))).encode()
    # 413 comes back before the body is sent (we send none of it here)
    st, body = send_raw(srv.port, head, [])
    assert st == 413 and json.loads(body)["error"]["code"] == "too_large"
    # a client that sends it all anyway gets the 413 too (or, if it is still
    # writing when the server closes, a reset: the body is never buffered)
    r = send_raw(srv.port, head, [big[i:i + 65536] for i in range(0, len(big), 65536)])
    assert r is None or r[0] == 413
    # curl's way: Expect: 100-continue, and no body sent after the 413
    head2 = head.replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n")
    st, body = send_raw(srv.port, head2, [])
    assert st == 413


def test_oversized_body_chunked(srv):
    head = ("POST /api/v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Transfer-Encoding: chunked\r\n\r\n" % srv.key).encode()
    chunk = b"y" * 65536
    chunks = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 32 + [b"0\r\n\r\n"]
    r = send_raw(srv.port, head, chunks)
    assert r is not None and r[0] == 413


def test_chunked_body_accepted(srv):
    body = json.dumps({"metadata": {"via": "chunked"}}).encode()
    head = ("POST /api/v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" % srv.key).encode()
    st, data = send_raw(srv.port, head, [b"%x\r\n%s\r\n" % (len(body), body), b"0\r\n\r\n"])
    assert st == 201, data
    sid = json.loads(data)["id"]
    assert srv.delete(sid) == 204


@pytest.mark.parametrize("sid", ["notanid", "aaaaaaaaaaaaaaaaaaaa", "..", "AAAAAAAAAAAAAAAAAAAA", "a" * 300])
def test_bad_id_is_404(srv, sid):
    for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/metrics"), ("POST", "/pause"),
                           ("GET", "/audit")):
        st, _, data = srv.request(method, "/api/v1/sandboxes/" + urllib.parse.quote(sid, safe="") + suffix)
        assert st == 404, (method, suffix, data)


def test_other_keys_sandbox_is_404(srv):
    r = run_paddock("key", "create", "--name", "second", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    key2 = r.stdout.strip()
    assert key2.startswith("e2b_") and "\n" not in key2
    sid = srv.create()["id"]
    try:
        for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/metrics"), ("POST", "/pause"),
                               ("GET", "/audit")):
            st, _, _ = srv.request(method, "/api/v1/sandboxes/%s%s" % (sid, suffix), key=key2)
            assert st == 404, (method, suffix)
        _, lst = srv.json("GET", "/api/v1/sandboxes", key=key2, expect=200)
        assert sid not in [s["id"] for s in lst["sandboxes"]]
        st, _, _ = srv.request("POST", "/api/v1/sandboxes/%s/timeout" % sid, body={"timeout": 5}, key=key2)
        assert st == 404
        # revoked keys are refused at once
        kid = [l.split()[0] for l in run_paddock("key", "list", "--state-dir", srv.state).stdout.splitlines()
               if " second " in l][0]
        assert run_paddock("key", "revoke", kid, "--state-dir", srv.state).returncode == 0
        assert srv.request("GET", "/api/v1/sandboxes", key=key2)[0] == 401
    finally:
        assert srv.delete(sid) == 204


# ---- TTL, pause, metrics, audit ----

def test_timeout_reaps_sandbox(srv):
    sb = srv.create({"timeout": 600})
    sid = sb["id"]
    pid = srv.agent_pid(sid)
    st, got = srv.json("POST", "/api/v1/sandboxes/%s/timeout" % sid, {"timeout": 1}, expect=200)
    assert got["timeout"] == 1
    assert srv.request("POST", "/api/v1/sandboxes/%s/timeout" % sid, body={"timeout": "1"})[0] in (400, 404)
    assert wait_gone(srv, sid, 30), "sandbox not reaped within 30 s of its timeout"
    assert not pid_alive(pid)
    events = [e["event"] for e in srv.audit_events(sid)]
    assert events[0] == "sandbox.create" and events[-1] == "sandbox.timeout"


def test_timeout_validation(srv):
    sid = srv.create()["id"]
    try:
        for body in ({}, {"timeout": 0}, {"timeout": "5"}, {"timeout": 5, "x": 1}, []):
            st, _, _ = srv.request("POST", "/api/v1/sandboxes/%s/timeout" % sid, body=body)
            assert st == 400, body
    finally:
        srv.delete(sid)


def test_metrics_fields(srv):
    sid = srv.create({"memory_mb": 256, "pids": 100})["id"]
    try:
        _, m = srv.json("GET", "/api/v1/sandboxes/%s/metrics" % sid, expect=200)
        for k in ("cpu_seconds", "memory_bytes", "memory_peak_bytes", "memory_limit_bytes", "pids",
                  "pids_limit", "disk_used_bytes", "disk_limit_bytes"):
            assert k in m and isinstance(m[k], (int, float)), k
        assert m["memory_limit_bytes"] == 256 << 20 and m["pids_limit"] == 100
    finally:
        srv.delete(sid)


def freezer_state(srv, sid):
    for p in glob.glob("/sys/fs/cgroup/freezer/paddock-%s/%s/freezer.state" % (instance_of(srv.state), sid)):
        with open(p) as f:
            return f.read().strip()
    return None


def test_pause_resume(srv):
    sid = srv.create({"timeout": 120})["id"]
    try:
        _, sb = srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid, expect=200)
        assert sb["state"] == "paused" and sb["expires_at"] is None
        # cgroup v1's freezer is asynchronous: FREEZING until every task stopped
        assert freezer_state(srv, sid) in (None, "FROZEN", "FREEZING")
        st, body = srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid)
        assert st == 409 and body["error"]["code"] == "conflict"
        time.sleep(1.2)
        _, sb = srv.json("POST", "/api/v1/sandboxes/%s/resume" % sid, expect=200)
        assert sb["state"] == "running" and sb["expires_at"]
        assert freezer_state(srv, sid) in (None, "THAWED")
        # the TTL was frozen while paused: still close to 120 s left
        left = time.mktime(time.strptime(sb["expires_at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.mktime(time.gmtime())
        assert 110 <= left <= 121, left
        assert srv.request("POST", "/api/v1/sandboxes/%s/resume" % sid)[0] == 409
    finally:
        assert srv.delete(sid) == 204


def test_audit_lines(srv):
    sid = srv.create()["id"]
    srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid, expect=200)
    srv.json("POST", "/api/v1/sandboxes/%s/resume" % sid, expect=200)
    assert srv.delete(sid) == 204
    events = srv.audit_events(sid)   # the log outlives the sandbox
    assert [e["event"] for e in events] == ["sandbox.create", "sandbox.pause", "sandbox.resume", "sandbox.delete"]
    for e in events:
        assert e["sandbox"] == sid and e["key"] and e["ts"].endswith("Z") and "T" in e["ts"]
    path = os.path.join(srv.state, "audit", sid + ".jsonl")
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_audit_follow_ends_on_delete(srv):
    sid = srv.create()["id"]
    got = {}

    def follow():
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("GET", "/api/v1/sandboxes/%s/audit?follow=1" % sid,
                     headers={"Authorization": "Bearer " + srv.key})
        r = conn.getresponse()
        got["status"] = r.status
        got["body"] = r.read()
        conn.close()

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(0.5)
    assert t.is_alive(), "follow=1 ended before the sandbox was deleted"
    srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid, expect=200)
    assert srv.delete(sid) == 204
    t.join(15)
    assert not t.is_alive(), "follow=1 did not end after the delete"
    assert got["status"] == 200
    events = [json.loads(l)["event"] for l in got["body"].decode().splitlines()]
    assert events == ["sandbox.create", "sandbox.pause", "sandbox.delete"]


def test_prometheus_metrics(srv):
    st, hdr, data = srv.request("GET", "/metrics", key=None)
    assert st == 200
    text = data.decode()
    for name in ("paddock_sandboxes{state=\"running\"}", "paddock_sandbox_creates_total",
                 "paddock_pool_ready{template=\"base\"}", "paddock_http_requests_total{code=\"2xx\"}",
                 "paddock_build_info"):
        assert name in text, name


def test_templates_list(srv):
    _, body = srv.json("GET", "/api/v1/templates", expect=200)
    assert "base" in [t["name"] for t in body["templates"]]


def test_concurrent_gets(srv):
    sid = srv.create()["id"]
    try:
        results = []
        lock = threading.Lock()

        def get():
            try:
                st, _, _ = srv.request("GET", "/api/v1/sandboxes/" + sid, timeout=30)
            except Exception as e:   # noqa: BLE001 - recorded as a failure
                st = repr(e)
            with lock:
                results.append(st)

        threads = [threading.Thread(target=get) for _ in range(100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results == [200] * 100
    finally:
        srv.delete(sid)


def test_concurrent_creates(srv):
    out = []
    lock = threading.Lock()

    def create():
        try:
            st, _, data = srv.request("POST", "/api/v1/sandboxes", {"metadata": {"c": "1"}}, timeout=20)
            body = json.loads(data)
        except Exception as e:   # noqa: BLE001 - recorded as a failure
            st, body = repr(e), None
        with lock:
            out.append((st, body))

    threads = [threading.Thread(target=create) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    ids = [b["id"] for st, b in out if st == 201]
    try:
        assert [st for st, _ in out] == [201] * 6, [b for st, b in out if st != 201]
        assert len(set(ids)) == 6
    finally:
        for i in ids:
            srv.delete(i)


def test_second_server_on_same_state_dir_refused(srv):
    r = run_paddock("serve", "--listen", "127.0.0.1:%d" % free_port(), "--state-dir", srv.state, timeout=30)
    assert r.returncode != 0 and "another paddock serve" in r.stderr, r.stderr


# ---- restart, limits, corrupt state ----

def test_kill9_restart_adopts(tmproot):
    s = Server(os.path.join(tmproot, "restart"), "--pool", "0", "--max-per-key", "3").start()
    try:
        a = s.create({"timeout": 600, "metadata": {"k": "a"}})
        b = s.create({"timeout": 900})
        s.json("POST", "/api/v1/sandboxes/%s/pause" % b["id"], expect=200)
        pids = {x["id"]: s.agent_pid(x["id"]) for x in (a, b)}
        s.stop(signal.SIGKILL)
        for p in pids.values():
            assert pid_alive(p), "a sandbox died with the server"
        s.start()
        _, lst = s.json("GET", "/api/v1/sandboxes", expect=200)
        by_id = {x["id"]: x for x in lst["sandboxes"]}
        assert set(by_id) == set(pids)
        assert by_id[a["id"]]["state"] == "running" and by_id[a["id"]]["metadata"] == {"k": "a"}
        assert by_id[b["id"]]["state"] == "paused"
        # the deadline survived (within clock granularity)
        t0 = time.mktime(time.strptime(a["expires_at"][:19], "%Y-%m-%dT%H:%M:%S"))
        t1 = time.mktime(time.strptime(by_id[a["id"]]["expires_at"][:19], "%Y-%m-%dT%H:%M:%S"))
        assert abs(t1 - t0) <= 2, (a["expires_at"], by_id[a["id"]]["expires_at"])
        for p in pids.values():
            assert pid_alive(p)
        s.json("POST", "/api/v1/sandboxes/%s/resume" % b["id"], expect=200)
        _, m = s.json("GET", "/api/v1/sandboxes/%s/metrics" % a["id"], expect=200)
        # limits: 3 per key
        c = s.create()
        st, body = s.json("POST", "/api/v1/sandboxes", {})
        assert st == 429 and body["error"]["code"] == "too_many"
        for x in (a, b, c):
            assert s.delete(x["id"]) == 204
        for p in pids.values():
            assert not pid_alive(p)
    finally:
        s.finish()


def test_kill9_lost_sandbox_marked_failed(tmproot):
    s = Server(os.path.join(tmproot, "lost"), "--pool", "0").start()
    try:
        sid = s.create()["id"]
        pid = s.agent_pid(sid)
        s.stop(signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)        # the sandbox dies while no server runs
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        s.start()
        _, sb = s.json("GET", "/api/v1/sandboxes/" + sid, expect=200)
        assert sb["state"] == "failed" and sb["notes"]
        assert not os.path.exists(os.path.join(s.rundir, "sandboxes", sid))
        assert s.delete(sid) == 204
        events = [e["event"] for e in s.audit_events(sid)]
        assert events == ["sandbox.create", "sandbox.failed", "sandbox.delete"]
    finally:
        s.finish()


def test_sigterm_keeps_sandboxes_destroy_on_exit_does_not(tmproot):
    s = Server(os.path.join(tmproot, "term"), "--pool", "0").start()
    try:
        sid = s.create()["id"]
        pid = s.agent_pid(sid)
        assert s.stop() == 0
        assert pid_alive(pid)
        s.extra.append("--destroy-on-exit")
        s.start()
        assert s.json("GET", "/api/v1/sandboxes/" + sid, expect=200)[1]["state"] == "running"
        assert s.stop() == 0
        assert not pid_alive(pid)
        assert s.leftovers() == {}
    finally:
        s.finish()


def test_corrupt_database_is_not_reset(tmproot):
    d = os.path.join(tmproot, "corrupt")
    os.makedirs(d)
    garbage = b"this is not an sqlite database\x00" * 200
    with open(os.path.join(d, "paddock.db"), "wb") as f:
        f.write(garbage)
    r = run_paddock("serve", "--listen", "127.0.0.1:%d" % free_port(), "--state-dir", d, timeout=30)
    assert r.returncode != 0
    assert "state database" in r.stderr and "paddock.db" in r.stderr and "not resetting" in r.stderr, r.stderr
    with open(os.path.join(d, "paddock.db"), "rb") as f:
        assert f.read() == garbage
    assert not os.path.exists(os.path.join(d, "api-key"))


def test_key_cli(tmproot):
    d = os.path.join(tmproot, "keys")
    r = run_paddock("key", "create", "--state-dir", d)
    assert r.returncode == 0 and r.stdout.strip().startswith("e2b_") and len(r.stdout.strip().splitlines()) == 1
    r = run_paddock("key", "list", "--state-dir", d)
    assert r.returncode == 0 and "default" in r.stdout
    assert run_paddock("key", "revoke", "nosuchkey", "--state-dir", d).returncode != 0
    assert run_paddock("key", "bogus", "--state-dir", d).returncode != 0


def test_template_add_cli(tmproot):
    d = os.path.join(tmproot, "tpl")
    src = os.path.join(tmproot, "tpl-src")
    os.makedirs(os.path.join(src, "etc"))
    with open(os.path.join(src, "etc", "hello"), "w") as f:
        f.write("hi\n")
    assert run_paddock("template", "add", "../x", src, "--state-dir", d).returncode != 0
    assert run_paddock("template", "add", "mini", "/", "--state-dir", d).returncode != 0
    r = run_paddock("template", "add", "mini", src, "--state-dir", d)
    assert r.returncode == 0, r.stderr
    assert os.path.isfile(os.path.join(d, "templates", "mini", "rootfs", "etc", "hello"))
    assert run_paddock("template", "add", "mini", src, "--state-dir", d).returncode != 0
    r = run_paddock("template", "list", "--state-dir", d)
    assert "base" in r.stdout and "mini" in r.stdout
