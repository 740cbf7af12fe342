"""Bad input to paddock template: each a clear error, exit 125, and nothing
left behind (no template, no half-made directory, no layer)."""
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt
import os
import subprocess

import pytest

from _reg import Registry, free_port
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)


def refused(tp, args, want, name=None):
    before_t, before_l = tp.template_dirs(), tp.layer_dirs()
    r = tp.tpl(*args)
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert want in r.stderr, r.stderr
    assert tp.template_dirs() == before_t
    assert tp.layer_dirs() == before_l
    assert tp.debris() == []
    return r


def test_unknown_image(tp, registry):
    refused(tp, ["pull", "nope", registry.host + "/does-not-exist:1"], "skopeo failed")


def test_unknown_tag(tp, registry, bb_image):
    refused(tp, ["pull", "nope", bb_image.rsplit(":", 1)[0] + ":no-such-tag"], "manifest unknown")


def test_unreachable_registry(tp, regenv):
    # a port nothing listens on (bound then closed by us)
    port = free_port()
    with open(regenv["CONTAINERS_REGISTRIES_CONF"], "a") as f:
        f.write('[[registry]]\nlocation = "127.0.0.1:%d"\ninsecure = true\n' % port)
    r = refused(tp, ["pull", "nope", "127.0.0.1:%d/x:1" % port], "skopeo failed")
    assert "connection refused" in r.stderr


def test_wrong_credentials(tp, work, regenv, bb_image):
    pytest.importorskip("crypt")
    root = os.path.join(work, "authreg")
    os.makedirs(root, exist_ok=True)
    htpasswd = os.path.join(root, "htpasswd")
    with open(htpasswd, "w") as f:
        f.write("alice:%s\n" % crypt.crypt("right", crypt.mksalt(crypt.METHOD_BLOWFISH)))
    reg = Registry(root, htpasswd=htpasswd)
    try:
        conf = os.path.join(root, "registries.conf")
        with open(conf, "w") as f:
            f.write('[[registry]]\nlocation = "%s"\ninsecure = true\n' % reg.host)
        auth = os.path.join(root, "auth.json")
        import base64
        import json
        with open(auth, "w") as f:
            json.dump({"auths": {reg.host: {"auth": base64.b64encode(b"alice:wrong").decode()}}}, f)
        env = dict(tp.env, CONTAINERS_REGISTRIES_CONF=conf, REGISTRY_AUTH_FILE=auth)
        before = tp.template_dirs()
        r = tp.run(["pull", "authed", reg.host + "/bb:1"], verb="template", env=env, timeout=120)
        assert r.returncode == 125, r.stderr
        assert "unauthorized" in r.stderr.lower() or "authentication" in r.stderr.lower(), r.stderr
        assert tp.template_dirs() == before and tp.debris() == []
    finally:
        reg.stop()


@pytest.mark.parametrize("name,want", [
    ("../evil", "looks like a path"),
    ("/tmp/x", "looks like a path"),
    ("Upper", "invalid template name"),
    ("a" * 65, "invalid template name"),
    ("base", "built-in"),
    ("paddock-build-1", "reserved"),
])
def test_bad_names(tp, bb_image, name, want):
    refused(tp, ["pull", name, bb_image], want)


def test_bad_refs(tp):
    refused(tp, ["pull", "x", "--", "-rf"], "invalid image reference")
    refused(tp, ["pull", "x", "http://example.invalid/x"], "unsupported image transport")


def test_existing_name_needs_replace(tp, bb_image):
    assert tp.tpl("pull", "dup", bb_image, "--replace").returncode == 0
    refused(tp, ["pull", "dup", bb_image], "exists already")
    assert tp.tpl("rm", "dup").returncode == 0


def test_rm_refused_while_in_use(tp, bb_image):
    assert tp.tpl("pull", "busy", bb_image, "--replace").returncode == 0
    p = tp.popen(["--template", "busy", "--", "sh", "-c", "echo up; read x"], stdin=subprocess.PIPE)
    assert p.stdout.readline() == b"up\n"
    try:
        r = tp.tpl("rm", "busy")
        assert r.returncode == 125 and "in use by sandbox" in r.stderr, r.stderr
        r = tp.tpl("pull", "busy", bb_image, "--replace")
        assert r.returncode == 125 and "in use" in r.stderr, r.stderr
        ls = {t["name"]: t for t in __import__("json").loads(tp.tpl("ls", "--json", check=True).stdout)}
        assert ls["busy"]["used_by"] == 1
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    assert tp.tpl("rm", "busy").returncode == 0
    assert "busy" not in tp.template_dirs()


def test_unknown_subcommand_and_missing_args(tp):
    r = tp.tpl("frobnicate")
    assert r.returncode == 125 and "expected ls, pull" in r.stderr
    r = tp.tpl("pull", "onlyname")
    assert r.returncode == 125 and "expected 2 arguments" in r.stderr
