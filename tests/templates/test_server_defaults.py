"""Sandboxes the server starts from an image template run their commands
with the image's Env, WorkingDir and User, as `paddock run` does
(docs/templates.md "What runs"): POST /exec, POST /processes and E2B's
envd Start alike; the request's own user, cwd and env still win."""
import base64
import json
import os

import pytest

import _oci
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest.server import Server

CHECK = "id -u; pwd; echo $GREETING; echo $HOME"
ENVD = {"E2b-Sandbox-Port": "49983", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def srv(work, regenv):
    s = Server(None, "--pool", "0", prefix="pd-tplsrv-")
    lay = os.path.join(work, "srvcfg")
    base = _oci.busybox_layer(passwd="root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:app:/app:/bin/sh\n",
                              group="root:x:0:\napp:x:1234:\n")
    base.dir("app", uid=1234, gid=1234)
    _oci.write_layout(lay, [base.bytes()], config={"Env": ["PATH=/bin", "GREETING=hello"], "WorkingDir": "/app",
                                                   "User": "app"})
    try:
        s.start()
        r = s.cli("template", "pull", "--state-dir", s.state, "srvcfg", "oci:%s:latest" % lay, env=regenv,
                  timeout=180)
        assert r.returncode == 0, r.stderr
        yield s
    finally:
        s.finish()


@pytest.fixture(scope="module")
def sb(srv):
    sid = srv.create({"template": "srvcfg", "env": {"FROM_SANDBOX": "1"}})["id"]
    yield sid
    srv.delete(sid)


def sh(cmd):
    return ["sh", "-c", cmd]


def test_exec_has_image_env_workdir_user(srv, sb):
    out = srv.exec(sb, sh(CHECK + "; echo $FROM_SANDBOX; echo $PATH"))
    assert out["exit_code"] == 0, out
    assert out["stdout"].split("\n")[:6] == ["1234", "/app", "hello", "/app", "1", "/bin"], out


def test_request_wins(srv, sb):
    # user root: root's id and home; the image's WorkingDir still (as Docker's)
    out = srv.exec(sb, sh(CHECK), user="root")
    assert out["stdout"].split() == ["0", "/app", "hello", "/root"], out
    out = srv.exec(sb, sh(CHECK), user="user", cwd="/tmp", env={"GREETING": "mine"})
    assert out["stdout"].split() == ["1000", "/tmp", "mine", "/home/user"], out
    # the image's user by name
    out = srv.exec(sb, sh("id -u"), user="app")
    assert out["stdout"] == "1234\n", out


def test_unknown_user_names_the_image_user(srv, sb):
    st, j = srv.api("POST", "/sandboxes/%s/exec" % sb, {"cmd": ["true"], "user": "nobody"})
    assert st == 400 and "app" in json.dumps(j), j


def test_processes_route(srv, sb):
    st, j = srv.api("POST", "/sandboxes/%s/processes" % sb, {"cmd": sh(CHECK)}, expect=201)
    _h, body = srv.v1.output(sb, j["pid"], follow=1)
    assert body.split() == [b"1234", b"/app", b"hello", b"/app"], body


def test_base_unchanged(srv):
    sid = srv.create({})["id"]
    try:
        out = srv.exec(sid, sh("id -u; pwd"))
        assert out["stdout"].split() == ["1000", "/home/user"], out
    finally:
        srv.delete(sid)


def _stdout(stream):
    out, i = b"", 0
    while i + 5 <= len(stream):
        n = int.from_bytes(stream[i + 1:i + 5], "big")
        msg = json.loads(stream[i + 5:i + 5 + n] or b"{}")
        data = msg.get("event", {}).get("data", {})
        if "stdout" in data:
            out += base64.b64decode(data["stdout"])
        i += 5 + n
    return out


def test_e2b_envd_start(srv):
    st, _h, body = srv.request("POST", "/v2/sandboxes", {"templateID": "srvcfg"}, key=None,
                               headers={"X-API-Key": srv.key, "Content-Type": "application/json"})
    assert st == 201, body
    e = json.loads(body)
    h = dict(ENVD, **{"E2b-Sandbox-Id": e["sandboxID"], "X-Access-Token": e["envdAccessToken"]})
    try:
        # no user named (the SDK's default from envd 0.4.0 on): the image's
        body = {"process": {"cmd": "/bin/sh", "args": ["-c", CHECK]}}
        st, _h, b = srv.request("POST", "/process.Process/Start", body, key=None, headers=h)
        assert st == 200 and _stdout(b).split() == [b"1234", b"/app", b"hello", b"/app"], (st, b)
        # the SDK's user header, and the image's user by name
        for user, want in (("user", [b"1000", b"/app", b"hello", b"/home/user"]),
                           ("app", [b"1234", b"/app", b"hello", b"/app"])):
            hu = dict(h, Authorization="Basic " + base64.b64encode(user.encode() + b":").decode())
            st, _h, b = srv.request("POST", "/process.Process/Start", body, key=None, headers=hu)
            assert st == 200 and _stdout(b).split() == want, (user, st, b)
        hu = dict(h, Authorization="Basic " + base64.b64encode(b"nobody:").decode())
        st, _h, b = srv.request("POST", "/process.Process/Start", body, key=None, headers=hu)
        assert st == 400 and b"app" in b, (st, b)
    finally:
        srv.request("DELETE", "/api/v1/sandboxes/" + e["sandboxID"])
