"""The console's sign-in limit (docs/console.md "Sign-in"): ten wrong keys
from one address in a minute, then 429 with Retry-After for that address,
even with the right key; other addresses and the API's bearer keys are not
affected. A server of its own: the limit would hold the other tests'
sign-ins from 127.0.0.1 for a minute."""
import http.client
import json
import os

import pytest

from pdtest.server import Server

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

FAILS = 10      # PD_SIGNIN_FAILS


def sign_in(srv, key, source="127.0.0.1"):
    h = {"Origin": "http://127.0.0.1:%d" % srv.port, "X-Paddock-Console": "1", "Content-Type": "application/json"}
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30, source_address=(source, 0))
    try:
        c.request("POST", "/api/v1/console/session", json.dumps({"key": key}), headers=h)
        r = c.getresponse()
        return r.status, r.getheader("Retry-After"), r.getheader("Set-Cookie"), r.read()
    finally:
        c.close()


def test_wrong_keys_then_429():
    srv = Server(None, "--pool", "0", prefix="pd-signin-")
    try:
        srv.start()
        for i in range(FAILS):
            st, _ra, cookie, body = sign_in(srv, "e2b_" + "0" * 40)
            assert st == 401 and cookie is None, (i, st, body)
        for key in ("e2b_" + "1" * 40, srv.key):
            st, ra, cookie, body = sign_in(srv, key)
            assert st == 429 and cookie is None, (st, body)
            assert ra and 1 <= int(ra) <= 60, ra
            assert b"too many wrong API keys" in body, body
        # another address signs in; bearer keys work as before
        st, _ra, cookie, body = sign_in(srv, srv.key, source="127.0.0.2")
        assert st == 200 and cookie.startswith("pd_session="), body
        assert srv.request("GET", "/api/v1/sandboxes")[0] == 200
    finally:
        srv.finish()
