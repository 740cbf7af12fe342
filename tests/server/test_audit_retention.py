"""Audit logs of deleted sandboxes are kept `--audit-retention DAYS`
(default 7) after their last line, then removed by the server (at its
start, then hourly); a live sandbox's log stays however old; `paddock gc`
keeps them and says so. Also /healthz, the alias of /api/v1/health.

    /usr/bin/python3 -m pytest -q tests/server/test_audit_retention.py

Needs root (the container tier) and a build."""
import json
import os
import time

import pytest

from pdtest.server import Server, run_paddock

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

DAY = 86400


def _age(path, days):
    t = time.time() - days * DAY
    os.utime(path, (t, t))


def test_deleted_sandboxes_logs_removed_after_retention_live_kept():
    srv = Server(None, "--pool", "0", "--audit-retention", "30", prefix="pd-auditret-")
    gc = None
    try:
        srv.start()
        old = srv.create()["id"]
        recent = srv.create()["id"]
        live = srv.create()["id"]
        assert srv.delete(old) == 204
        assert srv.delete(recent) == 204
        srv.stop()
        audit = os.path.join(srv.state, "audit")
        log = lambda sid: os.path.join(audit, sid + ".jsonl")
        for sid in (old, recent, live):
            assert os.path.exists(log(sid)), os.listdir(audit)
        _age(log(old), 8)
        _age(log(live), 400)        # a quiet live sandbox: never removed

        # 8 days old, retention 30: kept
        srv.start()
        assert os.path.exists(log(old))
        assert srv.audit_events(old)[-1]["event"] == "sandbox.delete"
        srv.stop()

        # the default retention (7 days): removed at the start
        srv.extra = ["--pool", "0"]
        srv.start()
        assert not os.path.exists(log(old)), os.listdir(audit)
        assert os.path.exists(log(recent))
        assert os.path.exists(log(live))
        assert srv.request("GET", "/api/v1/sandboxes/%s/audit" % old)[0] == 404
        assert srv.audit_events(recent)[-1]["event"] == "sandbox.delete"
        assert srv.api("GET", "/sandboxes/" + live, expect=200)[1]["id"] == live
        assert "audit logs removed after their retention removed=1 kept=2 retention_days=7" in \
            srv.logtext(tail=1 << 20)
        srv.exec(live, ["true"])
    finally:
        gc = srv.finish()
    # gc destroyed the live sandbox; both logs stay and gc says so
    out = gc.stdout.decode() if isinstance(gc.stdout, bytes) else gc.stdout
    err = gc.stderr.decode() if isinstance(gc.stderr, bytes) else gc.stderr
    assert out.strip() == "removed 1 sandbox", out          # stdout: the line scripts read
    lines = err.strip().splitlines()
    assert lines[0].startswith("kept 2 audit logs ("), err
    assert "/audit: paddock serve removes each one" in lines[0], err


def test_audit_retention_bad_value_refused(tmp_path):
    state = tmp_path / "state"
    for bad in ("x", "-1", "36501", ""):
        r = run_paddock("serve", "--listen", "127.0.0.1:1", "--state-dir", str(state), "--audit-retention", bad)
        err = r.stderr.decode() if isinstance(r.stderr, bytes) else r.stderr
        assert r.returncode != 0, (bad, err)
        assert "--audit-retention: invalid value '%s' (0 to 36500)" % bad in err, (bad, err)
        assert not state.exists()


def test_healthz_is_health_without_a_key():
    srv = Server(None, "--pool", "0", prefix="pd-healthz-")
    try:
        srv.start()
        st, _h, body = srv.request("GET", "/healthz", key=None)
        assert st == 200, body
        j = json.loads(body)
        assert j["status"] == "ok" and j == srv.json("GET", "/api/v1/health", key=None, expect=200)[1]
        assert srv.request("POST", "/healthz", key=None)[0] == 405
    finally:
        srv.finish()
