"""paddock template pull from a local registry: by tag and by digest,
multi-layer images with whiteouts, opaque dirs, hard links, setuid files
and xattrs; the store's owners; shared layers; concurrent pulls; a crash
mid-pull; a large sparse layer with bounded memory."""
import json
import os
import resource
import signal
import subprocess
import tarfile

import _oci
from _oci import STORE_UID_BASE, store_owned_by_root
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)


def test_pull_by_tag_runs_and_store_has_no_root_files(tp, bb_image):
    r = tp.tpl("pull", "bb", bb_image, "--replace")
    assert r.returncode == 0, r.stderr
    assert "pulled bb" in r.stdout
    r = tp.sandbox("bb", "sh", "-c", "id -u; echo $FROM_IMAGE; cat /etc/passwd; ls /bin/busybox")
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert out[0] == "1000"                       # paddock's user: the image has none
    assert out[1] == "yes"                        # the image's Env
    assert "user:x:1000:1000" in r.stdout         # added by the template's own layer
    # no file in the store or the template's own layer is host root's
    for n in tp.layer_dirs():
        # the store's own directories and records are root's; the trees not
        assert store_owned_by_root(os.path.join(tp.state, "layers", n, "tree")) == []
    assert store_owned_by_root(os.path.join(tp.state, "templates", "bb", "rootfs")) == []
    st = os.stat(os.path.join(tp.state, "layers"))
    assert st.st_mode & 0o777 == 0o700
    ls = tp.tpl("ls", "--json", check=True)
    names = {t["name"]: t for t in json.loads(ls.stdout)}
    assert names["bb"]["kind"] == "image" and names["bb"]["layers"] == 1


def test_pull_by_digest(tp, bb_image, regenv):
    r = subprocess.run(["skopeo", "--registries-conf", regenv["CONTAINERS_REGISTRIES_CONF"], "inspect",
                        "--format", "{{.Digest}}", "docker://" + bb_image], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    digest = r.stdout.strip()
    assert digest.startswith("sha256:")
    ref = bb_image.rsplit(":", 1)[0] + "@" + digest
    r = tp.tpl("pull", "bb-digest", ref, "--replace")
    assert r.returncode == 0, r.stderr
    r = tp.sandbox("bb-digest", "echo", "ok")
    assert r.stdout == "ok\n", r.stderr
    assert tp.tpl("rm", "bb-digest").returncode == 0


def fancy_layers():
    base = _oci.busybox_layer()
    base.dir("d").file("d/a", "a").file("d/b", "b")
    base.dir("o").file("o/old1", "1").file("o/old2", "2")
    base.file("hl1", "linked", mode=0o644)
    # a setuid-root file (busybox itself: `id` through it)
    with open(_oci.BUSYBOX, "rb") as f:
        base.dir("suid").file("suid/id", f.read(), mode=0o4755)
    base.file("x", "with xattrs", xattrs={"user.test": "v1", "security.capability": "\x01\x00\x00\x02",
                                          "trusted.overlay.opaque": "y"})
    top = _oci.Layer()
    top.file("d/.wh.a", "")                      # whiteout of d/a
    top.dir("o").file("o/.wh..wh..opq", "").file("o/new", "n")   # opaque o, with a new file
    top.hardlink("hl2", "hl1")                   # a hard link to a file of the layer below: refused, so:
    return base, top


def test_multilayer_whiteouts_opaque_hardlinks_setuid_xattrs(tp, work, registry, regenv):
    base, _ = fancy_layers()
    top = _oci.Layer()
    top.dir("d").file("d/.wh.a", "")
    top.dir("o").file("o/.wh..wh..opq", "").file("o/new", "n")
    top.file("t1", "same inode").hardlink("t2", "t1")
    lay = os.path.join(work, "fancy")
    _oci.write_layout(lay, [base.bytes(), top.bytes()], config={"WorkingDir": "/o"})
    _oci.push(lay, registry.host + "/fancy:1", regenv)
    r = tp.tpl("pull", "fancy", registry.host + "/fancy:1", "--replace")
    assert r.returncode == 0, r.stderr
    r = tp.sandbox("fancy", "sh", "-c",
                   "ls /d; echo --; ls /o; echo --; pwd; stat -c %i /t1 /t2; stat -c %a:%u /suid/id; /suid/id -u",
                   opts=["-u", "user"])
    assert r.returncode == 0, r.stderr
    parts = r.stdout.split("--\n")
    assert parts[0].split() == ["b"]                  # d/a whited out
    assert parts[1].split() == ["new"]                # o opaque: the old files gone
    lines = parts[2].split()
    assert lines[0] == "/o"                           # WorkingDir
    assert lines[1] == lines[2]                       # t1 and t2: one inode
    assert lines[3] == "4755:0"                       # setuid root inside the sandbox...
    assert lines[4] == "1000"                         # ...and inert: no_new_privs
    # on the host: the setuid file is the store range's, never root's
    found = []
    for dirpath, _, files in os.walk(os.path.join(tp.state, "layers")):
        if "id" in files and os.path.basename(dirpath) == "suid":
            found.append(os.lstat(os.path.join(dirpath, "id")))
        if "x" in files and os.path.basename(dirpath) == "tree":
            xp = os.path.join(dirpath, "x")
            names = os.listxattr(xp, follow_symlinks=False)
            assert "user.test" in names
            assert not [n for n in names if n.startswith(("security.", "trusted."))], names
    assert found and all(s.st_uid == STORE_UID_BASE and s.st_mode & 0o4000 for s in found)


def test_hardlink_to_a_lower_layer_is_refused(tp, work):
    base, top = fancy_layers()
    lay = os.path.join(work, "crosslink")
    _oci.write_layout(lay, [base.bytes(), top.bytes()])
    r = tp.tpl("pull", "crosslink", "oci:%s:latest" % lay)
    assert r.returncode != 0
    assert "not in this layer" in r.stderr, r.stderr
    assert "crosslink" not in tp.template_dirs()
    assert tp.debris() == []


def test_layers_are_shared(tp, work, registry, regenv, bb_image):
    assert tp.tpl("pull", "bb", bb_image, "--replace").returncode == 0
    extra = _oci.Layer().file("etc/extra", "x")
    lay = os.path.join(work, "bbplus")
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), extra.bytes()])
    _oci.push(lay, registry.host + "/bbplus:1", regenv)
    before = set(tp.layer_dirs())
    r = tp.tpl("pull", "bbplus", registry.host + "/bbplus:1", "--replace", "--json")
    assert r.returncode == 0, r.stderr
    events = [json.loads(l) for l in r.stderr.splitlines() if l.startswith("{")]
    assert any(e["event"] == "cached" for e in events)   # the busybox layer: already there
    assert len(set(tp.layer_dirs()) - before) <= 1         # one new layer only
    ls = {t["name"]: t for t in json.loads(tp.tpl("ls", "--json", check=True).stdout)}
    assert ls["bbplus"]["bytes_shared"] > 0 and ls["bbplus"]["layers"] == 2


def test_concurrent_pulls_of_one_image(tp, work, registry, regenv):
    lay = os.path.join(work, "conc")
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), _oci.Layer().file("c", "c" * 100000).bytes()])
    _oci.push(lay, registry.host + "/conc:1", regenv)
    procs = [tp.popen(["pull", "conc%d" % i, registry.host + "/conc:1"], verb="template", env=tp.env)
             for i in range(3)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    for i in range(3):
        r = tp.sandbox("conc%d" % i, "wc", "-c", "/c")
        assert r.stdout.split()[0] == "100000"
        assert tp.tpl("rm", "conc%d" % i).returncode == 0
    assert tp.debris() == []


def test_crash_mid_pull_leaves_no_half_layer(tp, work):
    """kill -9 while a big layer unpacks: no layer appears, prune cleans."""
    lay = os.path.join(work, "big")
    big = _oci.Layer()
    big.file("big", b"\0" * (96 << 20))
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), big.bytes()])
    p = tp.popen(["pull", "big", "oci:%s:latest" % lay, "--json"], verb="template", env=tp.env)
    seen = False
    for line in p.stderr:
        ev = json.loads(line) if line.startswith(b"{") else {}
        if ev.get("event") == "layer" and ev.get("total", 0) > (50 << 10) and 0 < ev.get("done", 0) < ev["total"]:
            seen = True
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=60)
    if not seen:
        # it finished before we saw a half-way event (a fast host): then
        # it must be whole
        assert "big" in tp.template_dirs()
        assert tp.tpl("rm", "big").returncode == 0
        return
    assert "big" not in tp.template_dirs()
    half = [n for n in tp.layer_dirs() if n.startswith(".tmp")]
    assert half, "the unpack was interrupted, its temp dir should be there"
    for n in tp.layer_dirs():
        if not n.startswith("."):
            assert os.path.exists(os.path.join(tp.state, "layers", n, "info"))   # whole layers only
    r = tp.tpl("prune", "--json", check=True)
    assert [n for n in tp.layer_dirs() if n.startswith(".tmp")] == []
    assert json.loads(r.stdout)["blobs"] >= 0


def test_large_sparse_layer_streams_in_bounded_memory(tp, work):
    src = os.path.join(work, "sparse-src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "sparse"), "wb") as f:
        f.truncate(1 << 30)
        f.seek(512 << 20)
        f.write(b"middle")
    tarpath = os.path.join(work, "sparse.tar")
    subprocess.run(["tar", "--sparse", "--format=posix", "-C", src, "-cf", tarpath, "sparse"], check=True)
    with open(tarpath, "rb") as f:
        layer = f.read()
    assert len(layer) < (1 << 20)
    lay = os.path.join(work, "sparse")
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), layer])
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = tp.tpl("pull", "sparse", "oci:%s:latest" % lay, "--replace")
    assert r.returncode == 0, r.stderr
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # skopeo's and ours; a 1 GiB file buffered anywhere would show
    assert max(peak_kib, before) < 300 * 1024, peak_kib
    r = tp.sandbox("sparse", "sh", "-c", "stat -c %s /sparse; dd if=/sparse bs=1 skip=536870912 count=6 2>/dev/null")
    assert r.stdout.split("\n")[0] == str(1 << 30)
    assert r.stdout.split("\n")[1] == "middle"
    for dirpath, _, files in os.walk(os.path.join(tp.state, "layers")):
        if "sparse" in files:
            st = os.lstat(os.path.join(dirpath, "sparse"))
            assert st.st_blocks * 512 < (16 << 20)          # holes stayed holes
    assert tp.tpl("rm", "sparse").returncode == 0


def test_images_from_podman_and_buildah(tp, work, registry):
    """Images the usual tools make: podman import of a busybox rootfs, then
    buildah (RUN with --isolation chroot) deleting a file (a whiteout it
    writes) and adding one; both pushed to the registry and pulled."""
    import shutil as sh
    if not sh.which("podman") or not sh.which("buildah"):
        import pytest
        pytest.skip("podman or buildah (Debian packages) is not installed")
    st = os.path.join(work, "containers")
    common = ["--root", st + "/g", "--runroot", st + "/rr", "--storage-driver", "vfs"]
    env = dict(os.environ, CONTAINERS_REGISTRIES_CONF=tp.env["CONTAINERS_REGISTRIES_CONF"])
    tarp = os.path.join(work, "bbroot.tar")
    with open(tarp, "wb") as f:
        f.write(_oci.busybox_layer().bytes())

    def run(argv):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, (argv, r.stderr)
        return r.stdout.strip()
    try:
        run(["podman"] + common + ["import", "--quiet", "--change", "ENV TOOL=podman", tarp, "localhost/bbimp:1"])
        run(["podman"] + common + ["push", "--quiet", "--tls-verify=false", "localhost/bbimp:1",
                                   registry.host + "/bbimp:1"])
        c = run(["buildah"] + common + ["from", "--quiet", "localhost/bbimp:1"])
        run(["buildah"] + common + ["run", "--isolation", "chroot", c, "--", "/bin/rm", "/bin/echo"])
        run(["buildah"] + common + ["run", "--isolation", "chroot", c, "--", "/bin/sh", "-c",
                                    "mkdir /made && echo by-buildah > /made/f"])
        run(["buildah"] + common + ["config", "--env", "TOOL=buildah", "--workingdir", "/made", c])
        run(["buildah"] + common + ["commit", "--quiet", c, "localhost/bbbuilt:1"])
        run(["buildah"] + common + ["push", "--quiet", "--tls-verify=false", "localhost/bbbuilt:1",
                                    "docker://" + registry.host + "/bbbuilt:1"])
    finally:
        subprocess.run(["buildah"] + common + ["rm", "--all"], capture_output=True, env=env)
        subprocess.run(["podman"] + common + ["rmi", "--all", "--force"], capture_output=True, env=env)
        subprocess.run(["buildah"] + common + ["rmi", "--all", "--force"], capture_output=True, env=env)
    r = tp.tpl("pull", "bbimp", registry.host + "/bbimp:1", "--replace")
    assert r.returncode == 0, r.stderr
    assert tp.sandbox("bbimp", "sh", "-c", "echo $TOOL").stdout == "podman\n"
    r = tp.tpl("pull", "bbbuilt", registry.host + "/bbbuilt:1", "--replace")
    assert r.returncode == 0, r.stderr
    r = tp.sandbox("bbbuilt", "sh", "-c", "test -e /bin/echo && echo present; cat f; echo $TOOL; pwd")
    assert r.stdout.split() == ["by-buildah", "buildah", "/made"], (r.stdout, r.stderr)
    for n in ("bbimp", "bbbuilt"):
        assert tp.tpl("rm", n).returncode == 0
