"""A sandbox from an image template on every tier: the image's Env,
WorkingDir and User in effect on container, supervised and microvm; the
process tier refuses with its reason; the server starts one by name."""
import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest

import _oci
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)

CHECK = "id -u; pwd; echo $GREETING; cat /etc/motd"


@pytest.fixture(scope="module")
def cfg_image(tp, work):
    lay = os.path.join(work, "cfgimg")
    base = _oci.busybox_layer(passwd="root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:app:/app:/bin/sh\n",
                              group="root:x:0:\napp:x:1234:\n")
    base.dir("app", uid=1234, gid=1234).file("etc/motd", "from the image\n")
    _oci.write_layout(lay, [base.bytes()], config={"Env": ["PATH=/bin", "GREETING=hello"], "WorkingDir": "/app",
                                                   "User": "app", "Cmd": ["/bin/sh", "-c", "echo default"]})
    r = tp.tpl("pull", "cfgimg", "oci:%s:latest" % lay, "--replace")
    assert r.returncode == 0, r.stderr
    yield "cfgimg"
    tp.tpl("rm", "cfgimg")


@pytest.mark.parametrize("tier", ["container", "supervised"])
def test_image_config_in_effect(tp, cfg_image, tier):
    r = tp.sandbox(cfg_image, "sh", "-c", CHECK, opts=["--isolation", tier])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:4] == ["1234", "/app", "hello", "from the image"]
    r = tp.sandbox(cfg_image, opts=["--isolation", tier])
    assert r.stdout == "default\n"
    # -u and -w still win; `user` and root exist in every image
    r = tp.sandbox(cfg_image, "sh", "-c", "id -u; pwd", opts=["--isolation", tier, "-u", "user", "-w", "/tmp"])
    assert r.stdout.split() == ["1000", "/tmp"], r.stderr


def test_process_tier_refuses_with_reason(tp, cfg_image):
    r = tp.sandbox(cfg_image, "true", opts=["--isolation", "process"])
    assert r.returncode == 125
    assert "needs the namespaces this tier does without" in r.stderr, r.stderr


def test_microvm(tp, cfg_image):
    if not os.path.exists("/var/cache/paddock/guest") and not os.environ.get("PADDOCK_GUEST_DIR"):
        pytest.skip("no guest kernel (scripts/setup.sh unpacks it): the microvm tier cannot boot")
    r = tp.sandbox(cfg_image, "sh", "-c", CHECK + "; stat -c %u /app", opts=["--isolation", "microvm"],
                   timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:5] == ["1234", "/app", "hello", "from the image", "1234"]
    # its root image is cached beside the template
    vm = os.path.join(tp.state, "templates", cfg_image, "vm")
    assert [n for n in os.listdir(vm) if n.endswith(".erofs")]


def test_server_starts_a_template_by_name(tp, cfg_image):
    """The API takes the name (never a path) of a template the CLI pulled,
    on the container and microvm tiers alike (the API's own template
    routes, and the image's Env/User for API processes, come with the API
    phase of templates: docs/templates.md)."""
    import http.client
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen(tp.argv(["--listen", "127.0.0.1:%d" % port], verb="serve"), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tp.env))

    def call(method, path, body=None, key=None):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        h = {"Authorization": "Bearer " + key} if key else {}
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
            r = conn.getresponse()
            data = r.read()
            return r.status, (json.loads(data) if data.strip() else None)
        finally:
            conn.close()
    try:
        deadline = time.monotonic() + 30
        while True:
            assert srv.poll() is None, "paddock serve exited"
            try:
                if call("GET", "/api/v1/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "paddock serve did not answer"
            time.sleep(0.1)
        with open(os.path.join(tp.state, "api-key")) as f:
            key = f.read().strip()
        st, sb = call("POST", "/api/v1/sandboxes", {"template": cfg_image}, key)
        assert st == 201, sb
        try:
            st, out = call("POST", "/api/v1/sandboxes/%s/exec" % sb["id"], {"cmd": ["cat", "/etc/motd"]}, key)
            assert st == 200 and out["stdout"] == "from the image\n", out
            # while it runs, the template is in use
            r = tp.tpl("rm", cfg_image)
            assert r.returncode == 125 and "in use by sandbox" in r.stderr, r.stderr
            # a snapshot of it stacks on the image template
            assert call("POST", "/api/v1/sandboxes/%s/exec" % sb["id"],
                        {"cmd": ["sh", "-c", "echo mine > /app/state"], "user": "root"}, key)[0] == 200
            st, j = call("POST", "/api/v1/sandboxes/%s/snapshots" % sb["id"], {"name": "cfgsnap"}, key)
            assert st in (200, 201), j
        finally:
            call("DELETE", "/api/v1/sandboxes/%s" % sb["id"], None, key)
        st, sb2 = call("POST", "/api/v1/sandboxes", {"template": "cfgsnap"}, key)
        assert st == 201, sb2
        try:
            st, out = call("POST", "/api/v1/sandboxes/%s/exec" % sb2["id"],
                           {"cmd": ["cat", "/app/state", "/etc/motd"]}, key)
            assert out["stdout"] == "mine\nfrom the image\n", out
        finally:
            call("DELETE", "/api/v1/sandboxes/%s" % sb2["id"], None, key)
        ls = {t["name"]: t for t in json.loads(tp.tpl("ls", "--json", check=True).stdout)}
        assert ls["cfgsnap"]["kind"] == "snapshot" and ls["cfgsnap"]["source"] == cfg_image
        r = tp.tpl("rm", cfg_image)
        assert r.returncode == 125 and "snapshot 'cfgsnap' stacks on it" in r.stderr, r.stderr
        assert call("DELETE", "/api/v1/snapshots/cfgsnap", None, key)[0] == 204
        st, err = call("POST", "/api/v1/sandboxes", {"template": "/tmp"}, key)
        assert st == 400
    finally:
        srv.terminate()
        srv.wait(timeout=60)


def _env(e):
    return _oci_child_env(e)


def _oci_child_env(e):
    env = dict(os.environ)
    env.update(e)
    env["PADDOCK_AGENT"] = os.path.abspath(os.environ.get("PADDOCK_AGENT") or "build/src/agent/paddock-agent")
    env.pop("PADDOCK_STATE_DIR", None)
    return env
