"""Admin keys and shared templates (docs/templates.md "Who sees what"):
`paddock key create --admin` makes a key that may create, replace and
delete shared templates (the operator's from the local CLI, and its own
shared builds); any other key gets 403 with a clear message, and nothing
changes. `base` is built in: nobody removes it."""
import json
import os

import pytest

import _oci
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest.server import Server
from test_api import _start, builds, templates, wait_built


@pytest.fixture(scope="module")
def srv(registry, regenv):
    s = Server(None, "--pool", "0", "--template-registry", registry.host, prefix="pd-tpladm-")
    try:
        _start(s, regenv)
        yield s
    finally:
        s.finish()


@pytest.fixture(scope="module")
def admin(srv):
    r = srv.cli("key", "create", "--admin", "--name", "ops", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture(scope="module")
def plain(srv):
    r = srv.cli("key", "create", "--name", "plain", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_key_list_shows_the_role(srv, admin, plain):
    r = srv.cli("key", "list", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    rows = {line.split()[1]: line.split()[3:] for line in r.stdout.splitlines()[1:]}
    assert rows["ops"] == ["admin"] and rows["plain"] == [] and rows["default"] == [], r.stdout
    # --admin is a create option only
    r = srv.cli("key", "list", "--admin", "--state-dir", srv.state)
    assert r.returncode != 0 and "--admin" in r.stderr, r.stderr


def test_operator_template_is_managed_by_admin_keys_only(srv, admin, plain, regenv, work):
    lay = os.path.join(work, "adm-op")
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), _oci.Layer().file("op", "operator\n").bytes()])
    r = srv.cli("template", "pull", "--state-dir", srv.state, "opshared", "oci:%s:latest" % lay, env=regenv,
                timeout=180)
    assert r.returncode == 0, r.stderr
    for key in ("default", plain):
        names = {t["name"]: t for t in srv.api("GET", "/templates", key=key, expect=200)[1]["templates"]}
        assert names["opshared"]["shared"] is True, names
        st, j = srv.api("DELETE", "/templates/opshared", key=key)
        assert st == 403 and "admin key" in json.dumps(j) and "paddock key create --admin" in json.dumps(j), j
        assert "opshared" in templates(srv)
    assert srv.api("DELETE", "/templates/opshared", key=admin)[0] == 204
    assert "opshared" not in templates(srv) and "opshared" not in builds(srv)


def test_nobody_removes_base(srv, admin):
    st, j = srv.api("DELETE", "/templates/base", key=admin)
    assert st == 403 and "built in" in json.dumps(j), j
    st, j = srv.api("POST", "/templates", {"name": "base", "image": "x/y:1", "shared": True}, key=admin)
    assert st == 400, j


def test_shared_create_needs_an_admin_key(srv, plain, bb_image):
    before = (builds(srv), templates(srv))
    for key in ("default", plain):
        st, j = srv.api("POST", "/templates", {"name": "plainshared", "image": bb_image, "shared": True}, key=key)
        assert st == 403 and "admin key" in json.dumps(j), j
        st, _h, body = srv.request("POST", "/api/v1/templates/plainshared/build", b"", key=key,
                                   headers={"Content-Type": "application/x-tar"}, query={"shared": "1"})
        assert st == 403 and b"admin key" in body, body
    st, j = srv.api("POST", "/templates", {"name": "plainshared", "image": bb_image, "shared": "yes"})
    assert st == 400, j
    assert (builds(srv), templates(srv)) == before


def test_admin_shared_build_is_everyones(srv, admin, plain, bb_image):
    st, j = srv.api("POST", "/templates", {"name": "admbb", "image": bb_image, "shared": True}, key=admin)
    assert st == 202 and j["shared"] is True, j
    _h, log = _follow(srv, "admbb", admin)
    t = srv.api("GET", "/templates/admbb", key=plain, expect=200)[1]
    assert t["status"] == "ready" and t["shared"] is True, (t, log)
    # another key uses it, cannot delete it or build over it
    sid = srv.create({"template": "admbb"}, key=plain)["id"]
    try:
        out = srv.api("POST", "/sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c", "echo $FROM_IMAGE"]}, key=plain,
                      expect=200)[1]
        assert out["stdout"] == "yes\n", out
    finally:
        assert srv.delete(sid, key=plain) == 204
    st, j = srv.api("DELETE", "/templates/admbb", key=plain)
    assert st == 403 and "admin key" in json.dumps(j), j
    st, j = srv.api("POST", "/templates", {"name": "admbb", "recipe": "FROM scratch\n"}, key=plain)
    assert st == 409 and "taken" in json.dumps(j), j
    # the admin key replaces it (shared again), then removes it
    st, j = srv.api("POST", "/templates", {"name": "admbb", "image": bb_image, "shared": True}, key=admin)
    assert st == 202, j
    _follow(srv, "admbb", admin)
    assert srv.api("GET", "/templates/admbb", key=plain, expect=200)[1]["status"] == "ready"
    assert srv.api("DELETE", "/templates/admbb", key=admin)[0] == 204
    assert "admbb" not in templates(srv) and "admbb" not in builds(srv)


def test_admin_key_own_templates_stay_its_own(srv, admin, plain, bb_image):
    st, j = srv.api("POST", "/templates", {"name": "admown", "image": bb_image}, key=admin)
    assert st == 202 and j["shared"] is False, j
    _follow(srv, "admown", admin)
    assert srv.api("GET", "/templates/admown", key=plain)[0] == 404
    # a shared build cannot take over a key's own template
    st, j = srv.api("POST", "/templates", {"name": "admown", "image": bb_image, "shared": True}, key=admin)
    assert st == 409, j
    assert srv.api("DELETE", "/templates/admown", key=admin)[0] == 204


def test_revoked_admin_key_is_refused(srv, bb_image):
    r = srv.cli("key", "create", "--admin", "--name", "gone", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    key = r.stdout.strip()
    ids = [line.split()[0] for line in srv.cli("key", "list", "--state-dir", srv.state).stdout.splitlines()
           if " gone " in line]
    assert len(ids) == 1
    assert srv.cli("key", "revoke", ids[0], "--state-dir", srv.state).returncode == 0
    st, j = srv.api("POST", "/templates", {"name": "goneshared", "image": bb_image, "shared": True}, key=key)
    assert st == 401, j


def _follow(srv, name, key):
    st, h, body = srv.request("GET", "/api/v1/templates/%s/log" % name, key=key, query={"follow": 1}, timeout=300)
    assert st == 200, body
    return h, body.decode()
