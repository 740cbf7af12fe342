"""The operator's view (issue 20): GET /metrics scraped and parsed as the
Prometheus text format (per-sandbox CPU, memory, pids, disk labelled by
sandbox and template; request latency histograms by route class; exec
counts and durations; the warm pool's sizes, hit rate and memory; network
drops); every 5xx logged with its cause; an ordinary client disconnect is
no warning."""
import json
import re
import socket
import struct

import pytest

from pdtest import wait_until
from pdtest.server import server_fixture

srv = server_fixture("--pool", "1", "--net-uplink", "none", prefix="pd-metrics-")

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse(text):
    """{family: {"type": T, "samples": [(name, {labels}, value)]}}; asserts
    the format: every sample under a TYPE line of its family, labels well
    formed, values numbers, no series twice."""
    fams, cur, seen = {}, None, set()
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in fams, "family %s declared twice" % name
            fams[name] = {"type": typ, "samples": []}
            cur = name
            continue
        if line.startswith("#"):
            assert line.startswith("# HELP "), line
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        name, labels = m.group(1), {}
        if m.group(3):
            rest = m.group(3)
            while rest:
                lm = LABEL.match(rest)
                assert lm, "bad labels in %r" % line
                labels[lm.group(1)] = lm.group(2)
                rest = rest[lm.end():]
        value = float(m.group(4))
        fam = cur
        assert fam and (name == fam or (fams[fam]["type"] == "histogram" and name in (
            fam + "_bucket", fam + "_sum", fam + "_count"))), "sample %s outside its family (%s)" % (name, fam)
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, "series twice: %s" % (key,)
        seen.add(key)
        fams[fam]["samples"].append((name, labels, value))
    return fams


def log(srv):
    with open(srv.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def scrape(srv):
    st, h, body = srv.request("GET", "/metrics", key=None)
    assert st == 200 and h.get("Content-Type", "").startswith("text/plain; version=0.0.4")
    return parse(body.decode())


def value(fams, fam, name=None, **labels):
    for n, l, v in fams[fam]["samples"]:
        if n == (name or fam) and all(l.get(k) == w for k, w in labels.items()):
            return v
    return None


def check_histograms(fams):
    for fam, f in fams.items():
        if f["type"] != "histogram":
            continue
        groups = {}
        for n, l, v in f["samples"]:
            rest = tuple(sorted((k, w) for k, w in l.items() if k != "le"))
            groups.setdefault(rest, {})[n if n != fam + "_bucket" else l["le"]] = v
        for rest, g in groups.items():
            les = sorted(((float("inf") if k == "+Inf" else float(k)), v) for k, v in g.items()
                         if k not in (fam + "_sum", fam + "_count"))
            counts = [v for _, v in les]
            assert counts == sorted(counts), (fam, rest, les)            # cumulative
            assert les[-1][0] == float("inf") and les[-1][1] == g[fam + "_count"], (fam, rest)
            assert g[fam + "_sum"] >= 0


def test_metrics_answer_operators_questions(srv):
    # the pool filled (its filler works in the background: polled)
    assert wait_until(lambda: value(scrape(srv), "paddock_pool_ready", template="base") == 1, limit=120)
    f = scrape(srv)
    # what the waiting sandbox holds: its workload's charge and its agent
    assert value(f, "paddock_pool_memory_bytes", template="base", isolation="container") > 0
    hits0 = value(f, "paddock_pool_takes_total", result="hit")
    miss0 = value(f, "paddock_pool_takes_total", result="miss")
    exits0 = value(f, "paddock_exec_total", reason="exit")
    execs0 = value(f, "paddock_exec_duration_seconds", "paddock_exec_duration_seconds_count")
    ex0 = value(f, "paddock_http_request_duration_seconds", "paddock_http_request_duration_seconds_count",
                route="exec")

    a = srv.create({})["id"]                                   # from the pool
    b = srv.create({"memory_mb": 300, "network": {"mode": "policy", "allow": ["203.0.113.1"]}})["id"]
    try:
        srv.exec(a, "head -c 3000000 /dev/zero > /tmp/fill; sleep 0.2 & wait")
        assert srv.exec(a, "exit 3")["exit_code"] == 3
        srv.json("POST", "/api/v1/sandboxes/%s/processes" % a, {"cmd": ["sleep", "600"]}, expect=201)
        f = scrape(srv)
        check_histograms(f)
        # per sandbox, labelled by id and template
        assert value(f, "paddock_sandbox_memory_bytes", sandbox=a, template="base") > 0
        assert value(f, "paddock_sandbox_memory_limit_bytes", sandbox=b, template="base") == 300 << 20
        assert value(f, "paddock_sandbox_cpu_seconds_total", sandbox=a, template="base") > 0
        assert value(f, "paddock_sandbox_pids", sandbox=a) >= 1
        assert value(f, "paddock_sandbox_disk_used_bytes", sandbox=a) >= 3000000
        assert value(f, "paddock_sandbox_disk_limit_bytes", sandbox=a) > 0
        assert value(f, "paddock_sandbox_oom_kills_total", sandbox=a) == 0
        # network drops: series for sandboxes with a network only
        assert value(f, "paddock_sandbox_network_dropped_packets_total", sandbox=b) is not None
        assert value(f, "paddock_sandbox_network_dropped_bytes_total", sandbox=b) is not None
        assert value(f, "paddock_sandbox_network_dropped_packets_total", sandbox=a) is None
        # exec counts and durations
        assert value(f, "paddock_exec_total", reason="exit") == exits0 + 2
        assert value(f, "paddock_exec_duration_seconds", "paddock_exec_duration_seconds_count") == execs0 + 2
        assert value(f, "paddock_exec_duration_seconds", "paddock_exec_duration_seconds_bucket", le="60") >= 2
        # request latency by route class (bounded: the classes, not paths)
        assert value(f, "paddock_http_request_duration_seconds", "paddock_http_request_duration_seconds_count",
                     route="exec") == ex0 + 2
        routes = {l["route"] for _, l, _ in f["paddock_http_request_duration_seconds"]["samples"]}
        assert {"lifecycle", "exec", "files", "observe", "e2b", "none"} <= routes and len(routes) <= 12, routes
        # the pool: one hit (a), one miss (b has a network: never pooled, so it does not ask)
        assert value(f, "paddock_pool_takes_total", result="hit") == hits0 + 1
        assert value(f, "paddock_pool_takes_total", result="miss") == miss0
    finally:
        assert srv.delete(a) == 204 and srv.delete(b) == 204
    f = scrape(srv)
    assert value(f, "paddock_sandbox_memory_bytes", sandbox=a) is None      # a deleted sandbox's series go


def test_5xx_logged_with_its_cause(srv):
    sid = srv.create({})["id"]
    try:
        before = log(srv)
        st, _h, body = srv.request("GET", "/api/v1/sandboxes/%s/ports/9/" % sid)
        assert st == 502, body
        new = log(srv)[len(before):]
        lines = [l for l in new.splitlines() if " error answered 502 " in l]
        assert lines and "nothing listens on port 9" in lines[0] and 'method=GET' in lines[0], new
        # a 4xx is the client's: no error line
        assert srv.request("GET", "/api/v1/sandboxes/%s/processes/99999" % sid)[0] == 404
        assert " error answered" not in log(srv)[len(before) + len(new):]
        f = scrape(srv)
        assert value(f, "paddock_http_errors_total", route="ports") >= 1
    finally:
        srv.delete(sid)


def _reset(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_client_disconnect_is_no_warning(srv):
    """A client that leaves mid-answer (a followed output stream, a big
    download), mid-request (a body shorter than announced) or mid-headers
    is ordinary: no warning line. The access log still says aborted."""
    sid = srv.create({})["id"]
    try:
        before = len(log(srv))
        pid = srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid, {"cmd": "yes | head -c 50000000"},
                       expect=201)[1]["pid"]
        srv.exec(sid, "head -c 30000000 /dev/zero > /tmp/big")
        auth = "Authorization: Bearer %s\r\n" % srv.key
        for path in ("/api/v1/sandboxes/%s/processes/%d/output?follow=1" % (sid, pid),
                     "/api/v1/sandboxes/%s/files?path=/tmp/big" % sid):
            c = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            c.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path, auth)).encode())
            assert c.recv(65536)                    # the answer started
            _reset(c)
        c = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        c.sendall(("PUT /api/v1/sandboxes/%s/files?path=/tmp/x HTTP/1.1\r\nHost: x\r\n%sContent-Length: 100000\r\n"
                   "\r\nabc" % (sid, auth)).encode())
        _reset(c)
        c = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        c.sendall(b"GET /api/v1/health HTTP/1.1\r\nHo")
        c.close()
        # the server has seen them all once a later request on a new
        # connection has its answer and the sandbox was deleted after them
        assert srv.request("GET", "/api/v1/health")[0] == 200
        assert srv.delete(sid) == 204
        sid = None
        new = log(srv)[before:]
        assert "info sandbox deleted" in new
        # (only the HTTP layer's lines: the pool filler may warn on a loaded machine)
        assert not [l for l in new.splitlines() if " warn http:" in l or " error answered" in l], new
    finally:
        if sid:
            srv.delete(sid)


def test_commands_counted_by_path(srv):
    """Every way a command starts is counted (path=exec|process|e2b), not
    only POST .../exec; a refused start is not."""
    def counts():
        f = scrape(srv)
        return {p: value(f, "paddock_commands_started_total", path=p) for p in ("exec", "process", "e2b")}
    st, _h, body = srv.request("POST", "/v2/sandboxes", {"templateID": "base"}, key=None,
                               headers={"X-API-Key": srv.key, "Content-Type": "application/json"})
    assert st == 201, (st, body)
    e2b = json.loads(body)
    sid = e2b["sandboxID"]
    try:
        c0 = counts()
        assert None not in c0.values(), c0
        assert srv.exec(sid, ["true"])["exit_code"] == 0
        srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid, {"cmd": ["true"]}, expect=201)
        h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "Content-Type": "application/json",
             "X-Access-Token": e2b["envdAccessToken"]}
        st, _h, b = srv.request("POST", "/process.Process/Start", {"process": {"cmd": "/bin/true"}}, key=None,
                                headers=h)
        assert st == 200 and b'"end"' in b, (st, b)
        assert counts() == {"exec": c0["exec"] + 1, "process": c0["process"] + 1, "e2b": c0["e2b"] + 1}
        # refused before anything ran: not counted
        srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid, {"cmd": []}, expect=400)
        st, _h, b = srv.request("POST", "/process.Process/Start", {"process": {"cmd": "/bin/true", "cwd": "a\u0000"}},
                                key=None, headers=h)
        assert st == 400, (st, b)
        assert counts() == {"exec": c0["exec"] + 1, "process": c0["process"] + 1, "e2b": c0["e2b"] + 1}
    finally:
        srv.delete(sid)
