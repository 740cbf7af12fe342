"""A gvisor sandbox's root from an image template or from a container
tier's snapshot (issue 17; src/tiers/gvisor_root.c): the layers as an
overlay in runsc's own mount namespace, the writes in the Sentry's memory.
The image's Env, WorkingDir and User apply as on the container tier; a
container sandbox's file is there in a gvisor sandbox from its snapshot;
what cannot be a gvisor root is refused with the reason."""
import json
import os
import shutil
import sys
import tempfile

import pytest

from pdtest import Paddock
from pdtest.server import Server, tmproot  # noqa: F401 (fixture)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "templates"))
import _oci  # noqa: E402

T = 180
CHECK = "id -u; pwd; echo $GREETING; cat /etc/motd; stat -c %u /app; echo w > /app/new && cat /app/new"


@pytest.fixture(scope="module")
def srv(tmproot):
    s = Server(os.path.join(tmproot, "gvisor-tpl"), "--pool", "0").start()
    work = tempfile.mkdtemp(prefix="pd-gv-tpl-", dir="/tmp")
    s.work = work
    try:
        yield s
    finally:
        shutil.rmtree(work, ignore_errors=True)
        s.finish()
    assert not [l for l in open("/proc/self/mountinfo") if "paddock-gvisor" in l and s.instance in l]


@pytest.fixture(scope="module")
def image(srv):
    """A two-layer busybox image with an Env, WorkingDir, User and Cmd,
    pulled from an OCI layout on disk (no registry, no network)."""
    lay = os.path.join(srv.work, "img")
    base = _oci.busybox_layer(passwd="root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:app:/app:/bin/sh\n",
                              group="root:x:0:\napp:x:1234:\n")
    top = _oci.Layer()
    top.dir("app", uid=1234, gid=1234).file("etc/motd", "from the image\n")
    _oci.write_layout(lay, [base.bytes(), top.bytes()],
                      config={"Env": ["PATH=/bin", "GREETING=hello"], "WorkingDir": "/app", "User": "app",
                              "Cmd": ["/bin/sh", "-c", "echo default"]})
    r = srv.cli("template", "pull", "--state-dir", srv.state, "gvimg", "oci:%s:latest" % lay, timeout=T)
    assert r.returncode == 0, r.stderr
    yield "gvimg"
    srv.cli("template", "rm", "--state-dir", srv.state, "gvimg", timeout=T)


def test_run_from_an_image_template(srv, image):
    """`paddock run`: the image's files, owners, Env, WorkingDir and User;
    its default command; -u and -w still win; the image stays unwritten."""
    p = Paddock(srv.state)
    r = p.run(["--isolation", "gvisor", "--template", image, "--", "sh", "-c", CHECK], timeout=T)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:6] == ["1234", "/app", "hello", "from the image", "1234", "w"], r.stdout
    r = p.run(["--isolation", "gvisor", "--template", image], timeout=T)
    assert (r.returncode, r.stdout) == (0, "default\n"), r.stderr
    r = p.run(["--isolation", "gvisor", "--template", image, "-u", "user", "-w", "/tmp", "--", "sh", "-c",
               "id -u; pwd"], timeout=T)
    assert r.stdout.split() == ["1000", "/tmp"], r.stderr
    for d in os.listdir(os.path.join(srv.state, "layers")):
        assert not os.path.exists(os.path.join(srv.state, "layers", d, "tree", "app", "new"))


def test_server_sandbox_from_an_image_template(srv, image):
    """Through the API, with the image's Env and User for its processes."""
    sb = srv.create({"isolation": "gvisor", "template": image}, timeout=T)
    try:
        assert sb["isolation"] == "gvisor"
        j = srv.exec(sb["id"], ["sh", "-c", "id -u; pwd; echo $GREETING"])
        assert (j["exit_code"], j["stdout"]) == (0, "1234\n/app\nhello\n"), j
        # in use: the template cannot go meanwhile
        r = srv.cli("template", "rm", "--state-dir", srv.state, image, timeout=T)
        assert r.returncode != 0 and sb["id"] in r.stderr, (r.returncode, r.stderr)
    finally:
        assert srv.delete(sb["id"]) == 204


def test_gvisor_snapshot_over_an_image_keeps_the_image(srv, image):
    """A gvisor snapshot (a checkpoint) of a sandbox whose root is an image
    template restores over that image: the image cannot be removed while
    the snapshot exists, even with its source gone (it names the snapshot),
    and nothing holds it once the snapshot is gone."""
    sb = srv.create({"isolation": "gvisor", "template": image}, timeout=T)
    made = None
    try:
        assert srv.exec(sb["id"], ["sh", "-c", "echo mine > /app/kept"])["exit_code"] == 0
        st, j = srv.json("POST", "/api/v1/sandboxes/%s/snapshots" % sb["id"], {"name": "gv-img-snap"})
        assert st == 201 and j["isolation"] == "gvisor", j
        assert srv.delete(sb["id"]) == 204
        sb = None
        r = srv.cli("template", "rm", "--state-dir", srv.state, image, timeout=T)
        assert r.returncode != 0 and "gv-img-snap" in r.stderr, (r.returncode, r.stderr)
        made = srv.create({"template": "gv-img-snap"}, timeout=T)
        j = srv.exec(made["id"], ["sh", "-c", "cat /app/kept /etc/motd; echo $GREETING"])
        assert (j["exit_code"], j["stdout"]) == (0, "mine\nfrom the image\nhello\n"), j
    finally:
        if made:
            assert srv.delete(made["id"]) == 204
        if sb:
            assert srv.delete(sb["id"]) == 204
    assert srv.request("DELETE", "/api/v1/snapshots/gv-img-snap")[0] == 204
    # nothing holds the image any more (its fixture removes it)
    assert os.listdir(os.path.join(srv.state, "templates", image, "users")) == []


def test_snapshot_of_a_container_sandbox_on_gvisor(srv):
    """A container sandbox's snapshot (filesystem layers over base, /usr
    included) starts on gvisor: the files written before the snapshot are
    there, the snapshot's own layers unchanged by what the gvisor sandbox
    writes; the snapshot cannot be deleted while the gvisor sandbox uses it."""
    ct = srv.create({"isolation": "container"}, timeout=T)
    gv = None
    try:
        j = srv.exec(ct["id"], ["sh", "-c", "mkdir -p /usr/local/gvt && echo usr > /usr/local/gvt/f"], user="root")
        assert j["exit_code"] == 0, j
        j = srv.exec(ct["id"], ["sh", "-c", "echo before > /home/user/mark"])
        assert j["exit_code"] == 0, j
        st, j = srv.json("POST", "/api/v1/sandboxes/%s/snapshots" % ct["id"], {"name": "gv-from-ct"})
        assert st == 201, j
        gv = srv.create({"isolation": "gvisor", "template": "gv-from-ct"}, timeout=T)
        assert gv["isolation"] == "gvisor"
        j = srv.exec(gv["id"], ["sh", "-c", "cat /home/user/mark /usr/local/gvt/f; echo after > /home/user/mark; "
                                "cat /home/user/mark"])
        assert (j["exit_code"], j["stdout"], j["stderr"]) == (0, "before\nusr\nafter\n", ""), j
        st, _h, data = srv.request("DELETE", "/api/v1/snapshots/gv-from-ct")
        assert st == 409 and gv["id"].encode() in data, (st, data)
        layer = os.path.join(srv.state, "templates", "gv-from-ct", "rootfs", "home", "user", "mark")
        assert open(layer).read() == "before\n"
    finally:
        if gv:
            assert srv.delete(gv["id"]) == 204
        assert srv.delete(ct["id"]) == 204
    assert srv.request("DELETE", "/api/v1/snapshots/gv-from-ct")[0] == 204


def test_memory_snapshot_of_another_tier_is_refused(srv):
    """A snapshot that is another tier's memory image (microvm's) cannot be a
    gvisor root: refused with the reason, nothing made. (A stand-in record:
    a microvm snapshot needs a guest boot.)"""
    tdir = os.path.join(srv.state, "templates", "gv-vm-snap")
    os.makedirs(os.path.join(tdir, "rootfs"))
    os.makedirs(os.path.join(tdir, "users"))
    with open(os.path.join(tdir, "snapshot"), "w") as f:
        f.write("parent=base\nsource=x\nisolation=microvm\ncreated=1\n")
    try:
        p = Paddock(srv.state)
        r = p.run(["--isolation", "gvisor", "--template", "gv-vm-snap", "--", "true"], timeout=T)
        assert r.returncode == 125, (r.returncode, r.stderr)
        assert "snapshot 'gv-vm-snap' was taken on the microvm tier" in r.stderr, r.stderr
        assert "the gvisor tier starts from its own snapshots and from container and supervised ones" in r.stderr
        assert os.listdir(os.path.join(tdir, "users")) == []
        assert p.leftovers() == {}
    finally:
        shutil.rmtree(tdir)
