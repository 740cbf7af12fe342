"""API keys in E2B's form: `paddock key create` and the first `paddock
serve` issue "e2b_" + 40 hex digits (what the stock E2B SDKs accept),
and keys of the older "pdk_" form, made by earlier paddocks, keep working.

    /usr/bin/python3 -m pytest -q tests/server/test_api_keys.py
"""
import hashlib
import os
import re
import sqlite3
import time

import pytest

from pdtest.server import Server, run_paddock, tmproot  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

E2B_KEY = re.compile(r"^e2b_[0-9a-f]{40}$")


def test_issued_keys_have_e2bs_form_and_old_keys_still_work(tmproot):
    state = os.path.join(tmproot, "keys")
    r = run_paddock("key", "create", "--name", "first", "--state-dir", state)
    assert r.returncode == 0, r.stderr
    key = r.stdout.strip()
    assert E2B_KEY.match(key), key
    r = run_paddock("key", "create", "--state-dir", state)
    assert r.returncode == 0 and E2B_KEY.match(r.stdout.strip()) and r.stdout.strip() != key

    # a key an earlier paddock made ("pdk_" + 48 hex), as its store holds it
    old = "pdk_" + "3c" * 24
    digest = hashlib.sha256(old.encode()).hexdigest()
    with sqlite3.connect(os.path.join(state, "paddock.db")) as db:
        db.execute("INSERT INTO keys(id, name, hash, created) VALUES(?,?,?,?)",
                   (digest[:16], "old", digest, int(time.time() * 1000)))

    # the harness reads its key from <state>/api-key, which only a serve on
    # a state dir without keys writes
    fd = os.open(os.path.join(state, "api-key"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, key.encode() + b"\n")
    os.close(fd)
    srv = Server(state, "--pool", "0").start()
    try:
        for k in (key, old):
            st, _, _ = srv.request("GET", "/api/v1/sandboxes", key=k)
            assert st == 200, k
            st, _, _ = srv.request("GET", "/v2/sandboxes", key=None, headers={"X-API-Key": k})
            assert st == 200, k
        # a key of the right shape that was never issued is refused
        st, _, _ = srv.request("GET", "/v2/sandboxes", key=None, headers={"X-API-Key": "e2b_" + "0" * 40})
        assert st == 401
    finally:
        srv.finish()


def test_first_serve_key_has_e2bs_form(tmproot):
    srv = Server(os.path.join(tmproot, "fresh"), "--pool", "0").start()
    try:
        assert E2B_KEY.match(srv.key), srv.key
        st, _, _ = srv.request("GET", "/api/v1/sandboxes")
        assert st == 200
    finally:
        srv.finish()
