"""Image archive uploads (docs/templates.md "Templates over HTTP"): POST
/api/v1/templates/{name}/image with an oci-archive or a docker-archive
tarball as the body, streamed to disk under a size limit and pulled by the
same machinery as a registry image. A body that is not an image archive, or
has entries that climb out, is refused before anything is kept; one over
the limit is 413; an archive whose blobs lie fails its build and leaves no
template, no layer and no copy of itself."""
import io
import json
import os
import subprocess
import tarfile

import pytest

import _oci
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest.server import Server
from test_api import _start, builds, layers, templates, wait_built

LIMIT = 8 << 20


@pytest.fixture(scope="module")
def srv(regenv):
    s = Server(None, "--pool", "0", "--template-upload-max", "8M", prefix="pd-tplup-")
    try:
        _start(s, regenv)
        yield s
    finally:
        s.finish()


def tar_dir(path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for n in sorted(os.listdir(path)):
            t.add(os.path.join(path, n), arcname=n)
    return buf.getvalue()


def upload(srv, name, body, query=None, key="default"):
    st, _h, data = srv.request("POST", "/api/v1/templates/%s/image" % name, body, key=key,
                               headers={"Content-Type": "application/x-tar"}, query=query, timeout=120)
    return st, (json.loads(data) if data.strip() else None)


def kept(srv):
    """Everything under template-builds (records, and any file an upload
    might leave)."""
    out = []
    d = os.path.join(srv.state, "template-builds")
    for dirpath, dirnames, filenames in os.walk(d):
        out += [os.path.relpath(os.path.join(dirpath, n), d) for n in dirnames + filenames]
    return sorted(out)


@pytest.fixture(scope="module")
def layout(work):
    lay = os.path.join(work, "upl")
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), _oci.Layer().file("from-upload", "up\n").bytes()],
                      config={"Env": ["PATH=/bin", "UPLOADED=yes"], "WorkingDir": "/tmp"})
    return lay


def check_sandbox(srv, name):
    sid = srv.create({"template": name})["id"]
    try:
        out = srv.exec(sid, ["sh", "-c", "echo $UPLOADED; pwd; cat /from-upload"])
        assert out["stdout"] == "yes\n/tmp\nup\n", out
    finally:
        srv.delete(sid)


def test_oci_archive(srv, layout):
    st, j = upload(srv, "upoci", tar_dir(layout))
    assert st == 202 and j["format"] == "oci-archive" and j["status"] == "queued", j
    t, log = wait_built(srv, "upoci")
    assert t["source"] == "upload (oci-archive)" and "path" not in t, t
    assert srv.state not in json.dumps(t), "no host path over HTTP"
    check_sandbox(srv, "upoci")
    assert not os.path.exists(os.path.join(srv.state, "template-builds", "upoci", "image.tar")), \
        "the archive goes once pulled"
    assert srv.api("DELETE", "/templates/upoci")[0] == 204


def test_docker_archive(srv, layout, work, regenv):
    path = os.path.join(work, "upl-docker.tar")
    r = subprocess.run(["skopeo", "--registries-conf", regenv["CONTAINERS_REGISTRIES_CONF"], "copy", "--quiet",
                        "oci:%s:latest" % layout, "docker-archive:%s:upl:1" % path],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    with open(path, "rb") as f:
        body = f.read()
    st, j = upload(srv, "updocker", body)
    assert st == 202 and j["format"] == "docker-archive", j
    t, _log = wait_built(srv, "updocker")
    assert t["source"] == "upload (docker-archive)", t
    check_sandbox(srv, "updocker")
    assert srv.api("DELETE", "/templates/updocker")[0] == 204


def _tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, kind, data in entries:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                t.addfile(ti)
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, data
                t.addfile(ti)
            elif kind == "dev":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
                t.addfile(ti)
    return buf.getvalue()


LAYOUT = ("oci-layout", "file", b'{"imageLayoutVersion": "1.0.0"}')


@pytest.mark.parametrize("body,why", [
    (b"this is not a tar archive at all" * 40, "tar"),
    (_tar([("hello.txt", "file", b"hi")]), "not an image archive"),
    (_tar([LAYOUT, ("../escape", "file", b"x")]), "'..'"),
    (_tar([LAYOUT, ("/etc/cron.d/x", "file", b"x")]), "absolute"),
    (_tar([LAYOUT, ("blobs", "symlink", "/etc")]), "symlink out"),
    (_tar([LAYOUT, ("blobs/x", "symlink", "../../etc/passwd")]), "symlink out"),
    (_tar([LAYOUT, ("index.json", "hardlink", "oci-layout")]), "hard link"),
    (_tar([LAYOUT, ("null", "dev", None)]), "only files"),
    # deeper than paddock makes trees (PD_TREE_DEPTH_MAX): refused before
    # anything is unpacked, so nothing is left that rm -rf could not take
    (_tar([LAYOUT, ("d/" * 600 + "f", "file", b"x")]), "is nested 601 levels deep (at most 512)"),
    (b"", "empty"),
])
def test_bad_archives_refused(srv, body, why):
    before = (kept(srv), templates(srv), layers(srv))
    st, j = upload(srv, "upbad", body)
    assert st == 400 and why in json.dumps(j), (st, j)
    assert (kept(srv), templates(srv), layers(srv)) == before


def test_over_the_limit(srv):
    before = (kept(srv), templates(srv), layers(srv))
    body = _tar([LAYOUT, ("big", "file", b"\0" * (LIMIT + 4096))])
    st, j = upload(srv, "upbig", body)
    assert st == 413 and "--template-upload-max" in json.dumps(j), j

    def chunks():
        yield _tar([LAYOUT])[:512]
        for _ in range(LIMIT // 65536 + 2):
            yield b"\0" * 65536
    st, _h, data = srv.request("POST", "/api/v1/templates/upbig/image", chunks(),
                               headers={"Content-Type": "application/x-tar"}, timeout=120)
    assert st == 413, data
    assert (kept(srv), templates(srv), layers(srv)) == before


def test_shared_upload_needs_an_admin_key(srv, layout):
    before = (kept(srv), templates(srv))
    st, j = upload(srv, "upshared", tar_dir(layout), query={"shared": "1"})
    assert st == 403 and "admin key" in json.dumps(j), j
    assert (kept(srv), templates(srv)) == before


def test_lying_archive_fails_and_leaves_nothing(srv, work):
    lay = os.path.join(work, "upl-lie")

    def flip(i, blob):
        # a layer of its own (a blob of that digest in the download cache
        # would be used instead of the archive's)
        if i == 1:
            b = bytearray(blob)
            b[len(b) // 2] ^= 0xff
            return bytes(b)
        return blob
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), _oci.Layer().file("lie", "upload lie " * 1000).bytes()],
                      tamper=flip)
    before = layers(srv)
    st, j = upload(srv, "uplie", tar_dir(lay))
    assert st == 202, j
    t, log = wait_built(srv, "uplie", want="failed")
    assert t.get("error"), t
    assert "uplie" not in templates(srv) and layers(srv) == before
    rec = os.path.join(srv.state, "template-builds", "uplie")
    assert not os.path.exists(os.path.join(rec, "image.tar"))
    leftovers = [n for n in os.listdir(rec) if n not in ("owner", "status", "log", "source", "pid")]
    assert leftovers == [], leftovers
    assert srv.api("DELETE", "/templates/uplie")[0] == 204
    assert "uplie" not in builds(srv)
