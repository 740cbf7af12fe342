"""Hostile layers (docs/security.md "Templates from images"): every one is
refused (or its entry dropped) and leaves nothing registered, nothing half
made, and nothing written outside the store. They come from OCI layouts on
the host (oci:DIR, the local CLI's source), so no registry is involved."""
import os
import shutil
import tarfile

import pytest

import _oci
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)


@pytest.fixture
def bait(work):
    """A host directory an escaping entry would write into."""
    d = os.path.join(work, "bait")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    yield d
    assert os.listdir(d) == [], "a layer wrote outside the store: %s" % os.listdir(d)


def pull_refused(tp, work, name, layers, want, **kw):
    lay = os.path.join(work, "evil-" + name)
    shutil.rmtree(lay, ignore_errors=True)
    _oci.write_layout(lay, layers, **kw)
    before = set(tp.layer_dirs())
    r = tp.tpl("pull", name, "oci:%s:latest" % lay)
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert want in r.stderr, r.stderr
    assert name not in tp.template_dirs()
    assert tp.debris() == []
    # the layer that failed is not in the store (earlier good ones may be)
    assert all(os.path.exists(os.path.join(tp.state, "layers", n, "info")) for n in set(tp.layer_dirs()) - before)
    return r


def test_dotdot_path_refused(tp, work, bait):
    rel = os.path.relpath(bait, "/")
    evil = _oci.Layer().file("../" * 12 + rel + "/pwned", "x")
    pull_refused(tp, work, "dotdot", [_oci.busybox_layer().bytes(), evil.bytes()], "'..' component")


def test_absolute_path_refused(tp, work, bait):
    evil = _oci.Layer().file(bait + "/pwned", "x")
    pull_refused(tp, work, "absolute", [_oci.busybox_layer().bytes(), evil.bytes()], "absolute path")


def test_symlink_then_write_refused(tp, work, bait):
    evil = _oci.Layer().symlink("link", bait).file("link/pwned", "x")
    pull_refused(tp, work, "symwrite", [_oci.busybox_layer().bytes(), evil.bytes()], "symlink")


def test_symlinked_parent_dir_refused(tp, work, bait):
    evil = _oci.Layer().dir("a").symlink("a/b", bait).dir("a/b/c").file("a/b/c/pwned", "x")
    pull_refused(tp, work, "symdir", [_oci.busybox_layer().bytes(), evil.bytes()], "symlink")


def test_symlink_of_a_lower_layer_is_not_followed(tp, work, bait):
    """The lower layer plants link -> bait; the upper writes link/pwned: it
    lands in a directory of the upper layer itself, never in bait."""
    low = _oci.busybox_layer().symlink("link", bait)
    up = _oci.Layer().dir("link").file("link/pwned", "x")
    lay = os.path.join(work, "evil-lowerlink")
    shutil.rmtree(lay, ignore_errors=True)
    _oci.write_layout(lay, [low.bytes(), up.bytes()])
    r = tp.tpl("pull", "lowerlink", "oci:%s:latest" % lay, "--replace")
    assert r.returncode == 0, r.stderr
    r = tp.sandbox("lowerlink", "cat", "/link/pwned")
    assert r.stdout == "x"
    assert tp.tpl("rm", "lowerlink").returncode == 0


def test_hardlink_escapes_refused(tp, work, bait):
    evil = _oci.Layer().hardlink("h", "../../../../../etc/passwd")
    pull_refused(tp, work, "hlout", [_oci.busybox_layer().bytes(), evil.bytes()], "'..' component")
    evil = _oci.Layer().hardlink("h", "/etc/passwd")
    pull_refused(tp, work, "hlabs", [_oci.busybox_layer().bytes(), evil.bytes()], "absolute path")
    evil = _oci.Layer().symlink("s", "/etc").hardlink("h", "s/passwd")
    pull_refused(tp, work, "hlsym", [_oci.busybox_layer().bytes(), evil.bytes()], "symlink")


def test_device_nodes_are_not_created(tp, work):
    dev = _oci.Layer().dir("dev").add("dev/mem", type=tarfile.CHRTYPE, mode=0o666, devmajor=1, devminor=1)
    dev.add("dev/sda", type=tarfile.BLKTYPE, mode=0o666, devmajor=8, devminor=0)
    lay = os.path.join(work, "devs")
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), dev.bytes()])
    r = tp.tpl("pull", "devs", "oci:%s:latest" % lay, "--replace")
    assert r.returncode == 0, r.stderr
    assert "device nodes or sockets not created" in r.stderr
    for n in tp.layer_dirs():
        for dirpath, dirs, files in os.walk(os.path.join(tp.state, "layers", n, "tree")):
            for f in files:
                st = os.lstat(os.path.join(dirpath, f))
                assert not (os.path.basename(f) in ("mem", "sda")), "a device node reached the store"
    assert tp.tpl("rm", "devs").returncode == 0


def test_forged_overlay_xattrs_are_dropped(tp, work):
    """user.overlay.opaque from the tar would hide the lower layer's files:
    only the OCI form (.wh..wh..opq) may do that."""
    low = _oci.busybox_layer().dir("keep").file("keep/file", "still here")
    up = _oci.Layer().dir("keep", xattrs={"user.overlay.opaque": "y"})
    lay = os.path.join(work, "forged")
    _oci.write_layout(lay, [low.bytes(), up.bytes()])
    r = tp.tpl("pull", "forged", "oci:%s:latest" % lay, "--replace")
    assert r.returncode == 0, r.stderr
    r = tp.sandbox("forged", "cat", "/keep/file")
    assert r.stdout == "still here", r.stderr
    assert tp.tpl("rm", "forged").returncode == 0


def test_owner_outside_the_id_range_refused(tp, work):
    evil = _oci.Layer().file("big-uid", "x", uid=70000)
    pull_refused(tp, work, "bigid", [_oci.busybox_layer().bytes(), evil.bytes()], "owned by 70000")


def test_corrupt_layer_refused(tp, work):
    def flip(i, blob):
        if i == 1:
            b = bytearray(blob)
            b[len(b) // 2] ^= 0xff
            return bytes(b)
        return blob
    layers = [_oci.busybox_layer().bytes(), _oci.Layer().file("f", "some data " * 1000).bytes()]
    r = pull_refused(tp, work, "corrupt", layers, "", tamper=flip)
    assert "digest" in r.stderr.lower() or "mismatch" in r.stderr.lower(), r.stderr


def test_wrong_diff_id_refused(tp, work):
    """The blob is what the manifest says, but the config lies about the
    uncompressed tar: refused before anything is registered (the store is
    keyed by diff_id: a lie would poison other images)."""
    layers = [_oci.busybox_layer().bytes(), _oci.Layer().file("f", "data").bytes()]
    pull_refused(tp, work, "liar", layers, "diff_id mismatch", lie_diff=True)


def test_oversized_path_refused(tp, work):
    evil = _oci.Layer().file("a/" * 2100 + "f", "x")
    pull_refused(tp, work, "longpath", [_oci.busybox_layer().bytes(), evil.bytes()], "bytes long")


def test_deep_tree_is_removed_with_its_layer(tp, work):
    """A layer 300 directories deep (under the limit: PD_TREE_DEPTH_MAX) is
    pulled, and its template's removal and the prune take all of it away
    (pd_rm_rf goes as deep as an unpack may make)."""
    lay = os.path.join(work, "deep300")
    shutil.rmtree(lay, ignore_errors=True)
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), _oci.Layer().file("d/" * 300 + "f", "deep\n").bytes()])
    before = set(tp.layer_dirs())
    tp.tpl("pull", "deep300", "oci:%s:latest" % lay, check=True)
    new = set(tp.layer_dirs()) - before
    assert new, tp.layer_dirs()
    r = tp.sandbox("deep300", "cat", "/" + "d/" * 300 + "f")
    assert r.returncode == 0 and r.stdout == "deep\n", (r.returncode, r.stdout, r.stderr)
    tp.tpl("rm", "deep300", check=True)
    tp.tpl("prune", check=True)
    assert "deep300" not in tp.template_dirs()
    assert not new & set(tp.layer_dirs()), tp.layer_dirs()
    assert tp.debris() == []
    gone = [n for n in os.listdir(os.path.join(tp.state, "layers")) if n.startswith(".")
            and not n.endswith(".lock")]
    assert gone == [], gone


def test_too_deep_tree_refused(tp, work):
    """Deeper than PD_TREE_DEPTH_MAX: refused with the depth said, nothing
    registered and nothing half made left."""
    evil = _oci.Layer().file("d/" * 600 + "f", "x")
    pull_refused(tp, work, "deep600", [_oci.busybox_layer().bytes(), evil.bytes()],
                 "is nested 601 levels deep (at most 512)")
