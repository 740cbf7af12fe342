"""paddock serve --access-log and --log-level: one line per request (time,
key id, method, route, status, bytes, duration), never the key, a body or
the path as sent; the server's own lines filtered by level.

    /usr/bin/python3 -m pytest -q tests/server/test_server_access_log.py

Needs root (paddock serve's state dir) and a build."""
import os
import re

import pytest

from pdtest import wait_until
from pdtest.server import Server, run_paddock

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z access key=(\S+) method=(\S+) route=(\S+) "
                  r"status=(\d+) bytes=(\S+) ms=\d+\.\d( aborted=1)?$")


def access_lines(text):
    return [LINE.match(l).groups() for l in text.splitlines() if " access " in l]


def test_access_log_file(tmp_path):
    path = tmp_path / "access.log"
    srv = Server(None, "--pool", "0", "--access-log", str(path), "--log-level", "warn", prefix="pd-acc-")
    try:
        srv.start()
        key_id = run_paddock("key", "list", "--state-dir", srv.state).stdout.split()[3]
        assert re.fullmatch(r"[0-9a-f]{16}", key_id)
        st, _h, body = srv.request("GET", "/api/v1/sandboxes")
        assert st == 200
        assert srv.request("GET", "/api/v1/sandboxes/%s" % ("q" * 20))[0] == 404
        assert srv.request("GET", "/api/v1/sandboxes", key="pdk_wrong")[0] == 401
        assert srv.request("GET", "/api/v1/no/such/route?token=secret-in-query")[0] == 404
        st, _h, _b = srv.request("POST", "/api/v1/sandboxes", {"bogus_field_marker": "body-secret"})
        assert st == 400
        # a line is written once the answer has gone out: after the client read it
        assert wait_until(lambda: " method=POST " in path.read_text(), 10, 0.02), path.read_text()
        text = path.read_text()
        got = access_lines(text)
        assert len(got) == len(text.splitlines()), text
        want = [
            (key_id, "GET", "/api/v1/sandboxes", "200", str(len(body))),
            (key_id, "GET", "/api/v1/sandboxes/{id}", "404"),
            ("-", "GET", "/api/v1/sandboxes", "401"),
            ("-", "GET", "-", "404"),
            (key_id, "POST", "/api/v1/sandboxes", "400"),
        ]
        tail = [g[:len(w)] for g, w in zip(got[-5:], want)]
        assert tail == want, text
        for secret in (srv.key, "secret-in-query", "body-secret", "q" * 20, "pdk_wrong"):
            assert secret not in text
        # --log-level warn: the server's info lines are not written
        assert " info " not in srv.logtext(1 << 20)
    finally:
        srv.finish()


def test_default_no_access_lines_debug_has_them():
    srv = Server(None, "--pool", "0", prefix="pd-acc-")
    try:
        srv.start()
        srv.request("GET", "/api/v1/sandboxes")
        srv.stop()
        assert access_lines(srv.logtext(1 << 20)) == []
        assert " info starting " in srv.logtext(1 << 20)
        srv.extra += ["--log-level", "debug"]
        srv.start()
        srv.request("GET", "/api/v1/sandboxes")
        srv.stop()      # its lines are all out once it has exited
        assert ("GET", "/api/v1/sandboxes", "200") in [g[1:4] for g in access_lines(srv.logtext(1 << 20))]
    finally:
        srv.finish()


def test_bad_options_refused():
    r = run_paddock("serve", "--log-level", "chatty")
    assert r.returncode == 125 and "--log-level 'chatty': expected error, warn, info or debug" in r.stderr
    r = run_paddock("serve", "--access-log", "/nonexistent-dir/x.log", "--listen", "127.0.0.1:1",
                    "--state-dir", "/nonexistent-dir/state")
    assert r.returncode == 125 and "--access-log: open '/nonexistent-dir/x.log'" in r.stderr
