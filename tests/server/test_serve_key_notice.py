"""paddock serve prints an API key only when it creates one; a later start
on the same state dir says where the key is, not the key.

    /usr/bin/python3 -m pytest -q tests/server/test_serve_key_notice.py

Needs root (the container tier) and a build."""
import os

import pytest

from pdtest.server import Server

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")


def test_key_printed_once_then_its_place():
    srv = Server(None, "--pool", "0", prefix="pd-keynote-")
    try:
        srv.start()
        first = srv.logtext(tail=1 << 20)
        assert "API key (new, also in %s/api-key): %s\n" % (srv.state, srv.key) in first, first
        assert 'Bearer %s"' % srv.key in first
        srv.stop()
        mark = len(srv.logtext(tail=1 << 20))
        srv.start()
        again = srv.logtext(tail=1 << 20)[mark:]
        assert "serving on" in again, again
        assert srv.key not in again, again
        assert "API key: in %s/api-key\n" % srv.state in again, again
        assert "$(cat %s/api-key)" % srv.state in again
    finally:
        srv.finish()
