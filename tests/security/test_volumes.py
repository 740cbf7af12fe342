"""Volumes never hand host root to the sandbox (docs/security.md, "Volumes").

Each attack runs inside a sandbox of every tier that has volumes (container,
supervised), as `-u root` and as `user` through `sudo`; what it left is then
looked at from the host (owners, mode bits, security.capability). The
volume's owner is a made-up host account (OWNER) outside every sandbox
range, so "the owner" and "host root" are never confused.
"""
import errno
import json
import os
import shutil
import stat
import struct
import tempfile

import pytest

from pdtest import UID_BASE

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="volumes need root (uid ranges, idmapped mounts)")

TIERS = ["container", "supervised"]
OWNER, OWNER_GID = 4242, 4243          # the volume directory's owner on the host
OTHER, OTHER_GID = 4300, 4301          # another host account, for :uid=/:gid=
RANGE = 65536
RANGES_END = UID_BASE + 40000 * RANGE  # PD_UID_BASE + PD_UID_SLOTS * PD_UID_RANGE

CAP_SETUID = 7
VFS_CAP_REVISION_2 = 0x02000000
VFS_CAP_REVISION_3 = 0x03000000
VFS_CAP_FLAGS_EFFECTIVE = 1

# Runs inside; prints one JSON object: the result of every step (an errno
# name or "ok"), plus what the sandbox's root is on the host.
PRELUDE = r'''
import errno, json, os, shutil, struct, sys
out = {"uid": os.getuid(), "base": int(open("/proc/self/uid_map").read().split()[1])}
def tryit(name, f):
    try:
        r = f()
        out[name] = "ok" if r is None else r
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
def read(p):
    with open(p) as f:
        return "read:" + f.read()
def append(p):
    with open(p, "a") as f:
        f.write("appended by the sandbox\n")
def create(p, mode=0o644):
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, mode))
def suid(p, owner=None):
    shutil.copy("/bin/true", p)
    if owner is not None:
        os.chown(p, owner, owner)
    os.chmod(p, 0o6755)
CAP = 1 << 7       # CAP_SETUID
V2 = struct.pack("<5I", 0x02000000 | 1, CAP, 0, 0, 0)
def v3(rootid):
    return struct.pack("<6I", 0x03000000 | 1, CAP, 0, 0, 0, rootid)
def setcap(p, blob):
    shutil.copy("/bin/true", p)
    os.setxattr(p, "security.capability", blob)
'''

ROOT_ATTACKS = PRELUDE + r'''
tryit("ro_root_secret", lambda: read("/ro/root-secret"))
tryit("rootro_root_secret", lambda: read("/rootro/root-secret"))
tryit("rootro_public", lambda: read("/rootro/public"))
tryit("rw_root_secret", lambda: read("/rw/root-secret"))
tryit("rw_root_append", lambda: append("/rw/root-append"))
tryit("rw_root_chmod", lambda: os.chmod("/rw/root-append", 0o4777))
tryit("rw_root_chown", lambda: os.chown("/rw/root-append", 0, 0))
tryit("rw_root_link", lambda: os.link("/rw/root-append", "/rw/root-append-link"))
tryit("rw_root_unlink", lambda: os.unlink("/rw/root-secret"))
tryit("rw_root_replace", lambda: (create("/rw/replacement"), os.rename("/rw/replacement", "/rw/root-append")))
tryit("create", lambda: create("/rw/made-by-root"))
tryit("suid_root", lambda: suid("/rw/suid-root"))
tryit("suid_user", lambda: suid("/rw/suid-user", 1000))
tryit("creat_suid", lambda: create("/rw/creat-suid", 0o6755))
tryit("cap_v2", lambda: setcap("/rw/cap-v2", V2))
tryit("cap_v3_root", lambda: setcap("/rw/cap-v3-root", v3(0)))
tryit("cap_v3_user", lambda: setcap("/rw/cap-v3-user", v3(1000)))
print(json.dumps(out))
'''

USER_STEPS = PRELUDE + r'''
tryit("owner_read", lambda: read("/rw/owner-file"))
tryit("owner_append", lambda: append("/rw/owner-file"))
tryit("create", lambda: create("/rw/made-by-user"))
tryit("mkdir", lambda: os.mkdir("/rw/dir-by-user"))
tryit("suid_own", lambda: suid("/rw/suid-own"))
tryit("setcap_own", lambda: setcap("/rw/cap-own", V2))
tryit("rw_root_secret", lambda: read("/rw/root-secret"))
tryit("rw_root_append", lambda: append("/rw/root-append"))
tryit("ro_root_secret", lambda: read("/ro/root-secret"))
print(json.dumps(out))
'''


def _write(path, text, uid, gid, mode):
    with open(path, "w") as f:
        f.write(text)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def _mkdir(path, uid, gid, mode=0o755):
    os.mkdir(path)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


@pytest.fixture
def vols():
    """rw/ and ro/ owned by OWNER, with host-root bait inside; rootro/ owned by root."""
    top = tempfile.mkdtemp(prefix="pd-vols-", dir="/tmp")
    os.chmod(top, 0o755)
    d = {k: os.path.join(top, k) for k in ("rw", "ro", "rootro")}
    _mkdir(d["rw"], OWNER, OWNER_GID)
    _mkdir(d["ro"], OWNER, OWNER_GID)
    _mkdir(d["rootro"], 0, 0)
    _write(os.path.join(d["rw"], "root-secret"), "host root's secret\n", 0, 0, 0o600)
    _write(os.path.join(d["rw"], "root-append"), "host root's file\n", 0, 0, 0o644)
    _write(os.path.join(d["rw"], "owner-file"), "the owner's file\n", OWNER, OWNER_GID, 0o600)
    _write(os.path.join(d["ro"], "root-secret"), "host root's secret\n", 0, 0, 0o600)
    _write(os.path.join(d["rootro"], "root-secret"), "host root's secret\n", 0, 0, 0o600)
    _write(os.path.join(d["rootro"], "public"), "public\n", 0, 0, 0o644)
    d["top"] = top
    yield d
    shutil.rmtree(top, ignore_errors=True)


def _volume_args(d):
    return ["-v", "%s:/rw" % d["rw"], "-v", "%s:/ro:ro" % d["ro"], "-v", "%s:/rootro:ro" % d["rootro"]]


def _run(paddock, tier, who, code, d, extra=()):
    """who: root (-u root), sudo (user, then sudo) or user."""
    args = ["--isolation", tier] + _volume_args(d) + list(extra)
    if who == "root":
        args += ["-u", "root", "--", "python3", "-c", code]
    elif who == "sudo":
        args += ["--", "sudo", "python3", "-c", code]
    else:
        args += ["--", "python3", "-c", code]
    r = paddock.run(args, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _in_range(uid, base):
    return base <= uid < base + RANGE


def _cap_xattr(path):
    try:
        return os.getxattr(path, "security.capability", follow_symlinks=False)
    except OSError as e:
        assert e.errno == errno.ENODATA, e
        return None


def _host_effective_cap(blob):
    """Would the host kernel honour this security.capability for a program
    run on the host? v2 (no rootid) yes; v3 only with rootid 0."""
    magic = struct.unpack_from("<I", blob)[0] & 0xff000000
    if magic == VFS_CAP_REVISION_2:
        return True
    assert magic == VFS_CAP_REVISION_3, blob
    return struct.unpack_from("<I", blob, 20)[0] == 0


def _host_files(d):
    out = {}
    for name in os.listdir(d):
        out[name] = os.lstat(os.path.join(d, name))
    return out


@pytest.mark.parametrize("who", ["root", "sudo"])
@pytest.mark.parametrize("tier", TIERS)
def test_root_inside_is_not_host_root_on_volumes(paddock, no_leak, vols, tier, who):
    res = _run(paddock, tier, who, ROOT_ATTACKS, vols)
    base = res["base"]
    assert res["uid"] == 0
    assert UID_BASE <= base < RANGES_END
    # host root's files: neither readable nor writable through any volume
    assert res["ro_root_secret"] == "EACCES", res
    assert res["rootro_root_secret"] == "EACCES", res
    assert res["rootro_public"] == "read:public\n", res       # others' bits still apply
    assert res["rw_root_secret"] == "EACCES", res
    assert res["rw_root_append"] == "EACCES", res
    # (EOVERFLOW: the kernel refuses to change an inode whose owner the
    # mount's idmapping does not map)
    assert res["rw_root_chmod"] in ("EPERM", "EOVERFLOW"), res
    assert res["rw_root_chown"] in ("EPERM", "EOVERFLOW"), res
    assert res["rw_root_link"] in ("EPERM", "EOVERFLOW"), res
    assert res["rw_root_unlink"] in ("EPERM", "EOVERFLOW"), res
    assert res["rw_root_replace"] in ("EPERM", "EOVERFLOW"), res
    with open(os.path.join(vols["rw"], "root-secret")) as f:
        assert f.read() == "host root's secret\n"
    with open(os.path.join(vols["rw"], "root-append")) as f:
        assert f.read() == "host root's file\n"
    st = os.stat(os.path.join(vols["rw"], "root-append"))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o644)
    # what root inside creates belongs to the sandbox's range on the host
    assert res["create"] == "ok", res
    st = os.stat(os.path.join(vols["rw"], "made-by-root"))
    assert (st.st_uid, st.st_gid) == (base, base)
    # setuid/setgid: whatever the sandbox made, never setuid-root on the host
    assert res["suid_root"] == "ok" and res["creat_suid"] == "ok", res
    files = _host_files(vols["rw"])
    for name, st in files.items():
        assert st.st_uid != 0 or name in ("root-secret", "root-append"), (name, st)
        assert st.st_gid != 0 or name in ("root-secret", "root-append"), (name, st)
        assert st.st_uid == OWNER or _in_range(st.st_uid, base) or st.st_uid == 0, (name, st.st_uid)
    assert files["suid-root"].st_uid == base and files["suid-root"].st_mode & stat.S_ISUID
    assert files["creat-suid"].st_uid == base
    # the documented residue: root inside may hand a file to `user`, i.e.
    # to the volume's owner, and make it setuid-owner (never setuid-root)
    assert res["suid_user"] == "ok", res
    assert files["suid-user"].st_uid == OWNER
    # file capabilities: stored, if at all, as v3 with a rootid of the
    # range (or the owner's): never effective on the host
    for name in ("cap-v2", "cap-v3-root", "cap-v3-user"):
        key = "cap_" + name[4:].replace("-", "_")
        blob = _cap_xattr(os.path.join(vols["rw"], name)) if name in files else None
        if res[key] != "ok":
            assert res[key] in ("EPERM", "EINVAL"), res
            continue
        assert blob is not None, name
        assert not _host_effective_cap(blob), (name, blob.hex())
        rootid = struct.unpack_from("<I", blob, 20)[0]
        assert rootid == (OWNER if name == "cap-v3-user" else base), (name, rootid)
    assert res["cap_v2"] == "ok" and res["cap_v3_root"] == "ok", res


@pytest.mark.parametrize("tier", TIERS)
def test_user_is_the_volume_owner(paddock, no_leak, vols, tier):
    res = _run(paddock, tier, "user", USER_STEPS, vols)
    assert res["uid"] == 1000
    assert res["owner_read"] == "read:the owner's file\n", res
    assert res["owner_append"] == "ok", res
    assert res["create"] == "ok" and res["mkdir"] == "ok", res
    with open(os.path.join(vols["rw"], "owner-file")) as f:
        assert f.read() == "the owner's file\nappended by the sandbox\n"
    for name in ("made-by-user", "dir-by-user", "owner-file"):
        st = os.stat(os.path.join(vols["rw"], name))
        assert (st.st_uid, st.st_gid) == (OWNER, OWNER_GID), name
    assert res["rw_root_secret"] == "EACCES" and res["rw_root_append"] == "EACCES", res
    assert res["ro_root_secret"] == "EACCES", res
    # user's own setuid file is the owner's (the residue docs/security.md names)
    assert res["suid_own"] == "ok", res
    st = os.stat(os.path.join(vols["rw"], "suid-own"))
    assert st.st_uid == OWNER and st.st_mode & stat.S_ISUID
    # no capability for user at all
    assert res["setcap_own"] == "EPERM", res
    assert _cap_xattr(os.path.join(vols["rw"], "cap-own")) is None


@pytest.mark.parametrize("tier", TIERS)
def test_root_owned_rw_volume_is_refused(paddock, no_leak, tier):
    d = tempfile.mkdtemp(prefix="pd-vol-root-", dir="/tmp")
    try:
        os.chmod(d, 0o777)
        r = paddock.run(["--isolation", tier, "-u", "root", "-v", "%s:/d" % d, "--", "touch", "/d/x"])
        assert r.returncode == 125, (r.stdout, r.stderr)
        msg = r.stderr.strip()
        assert len(msg.splitlines()) == 1, msg
        assert msg.startswith("paddock: ") and "'%s' is owned by root" % d in msg, msg
        assert "chown it" in msg and ":ro" in msg and ":uid=N" in msg, msg
        assert os.listdir(d) == []
        # read-only, the same directory is fine: the sandbox's own range,
        # its permission bits for "others" apply
        with open(os.path.join(d, "public"), "w") as f:
            f.write("public\n")
        r = paddock.run(["--isolation", tier, "-u", "root", "-v", "%s:/d:ro" % d, "--",
                         "bash", "-c", "cat /d/public; stat -c '%U %G' /d /d/public"])
        assert r.returncode == 0, r.stderr
        assert r.stdout == "public\nnobody nogroup\nnobody nogroup\n"
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("tier", TIERS)
def test_explicit_uid_gid(paddock, no_leak, tier):
    """:uid=N,gid=M names `user`'s account: here a root-owned directory with a
    subdirectory of that account's (the top stays host root's)."""
    d = tempfile.mkdtemp(prefix="pd-vol-uid-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        _mkdir(os.path.join(d, "sub"), OTHER, OTHER_GID)
        code = PRELUDE + r'''
tryit("sub", lambda: create("/d/sub/new"))
tryit("top", lambda: create("/d/new"))
tryit("owner", lambda: os.stat("/d/sub").st_uid)
print(json.dumps(out))
'''
        r = paddock.run(["--isolation", tier, "-v", "%s:/d:uid=%d,gid=%d" % (d, OTHER, OTHER_GID), "--",
                         "python3", "-c", code])
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["sub"] == "ok" and res["top"] == "EACCES" and res["owner"] == 1000, res
        st = os.stat(os.path.join(d, "sub", "new"))
        assert (st.st_uid, st.st_gid) == (OTHER, OTHER_GID)
        assert not os.path.exists(os.path.join(d, "new"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("tier", TIERS)
def test_map_sandbox(paddock, no_leak, tier):
    """:ro,map=sandbox: no host account; the owner's files are nobody's
    inside and only their bits for others apply."""
    d = tempfile.mkdtemp(prefix="pd-vol-sb-", dir="/tmp")
    try:
        os.chown(d, OWNER, OWNER_GID)
        os.chmod(d, 0o755)
        _write(os.path.join(d, "owner-file"), "x\n", OWNER, OWNER_GID, 0o600)
        _write(os.path.join(d, "public"), "public\n", OWNER, OWNER_GID, 0o644)
        code = PRELUDE + r'''
tryit("owner_read", lambda: read("/d/owner-file"))
tryit("public_read", lambda: read("/d/public"))
tryit("create", lambda: create("/d/by-user"))
tryit("stat", lambda: [os.stat("/d").st_uid, os.stat("/d/owner-file").st_gid])
print(json.dumps(out))
'''
        r = paddock.run(["--isolation", tier, "-v", "%s:/d:ro,map=sandbox" % d, "--", "python3", "-c", code])
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["owner_read"] == "EACCES" and res["public_read"] == "read:public\n", res
        assert res["create"] == "EROFS", res
        assert res["stat"] == [65534, 65534], res
        # the same directory without map=sandbox: user is its owner
        r = paddock.run(["--isolation", tier, "-v", "%s:/d:ro" % d, "--", "python3", "-c", code])
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["owner_read"] == "read:x\n" and res["stat"] == [1000, 1000], res
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("tier", TIERS)
def test_root_group_rw_volume_is_refused(paddock, no_leak, tier):
    d = tempfile.mkdtemp(prefix="pd-vol-grp-", dir="/tmp")
    try:
        os.chown(d, OWNER, 0)
        r = paddock.run(["--isolation", tier, "-v", "%s:/d" % d, "--", "touch", "/d/x"])
        assert r.returncode == 125, (r.stdout, r.stderr)
        msg = r.stderr.strip()
        assert len(msg.splitlines()) == 1 and "'%s' has group root" % d in msg and "chgrp it" in msg, msg
        assert os.listdir(d) == []
        os.chown(d, OWNER, OWNER_GID)       # what the message says to do
        r = paddock.run(["--isolation", tier, "-v", "%s:/d" % d, "--", "touch", "/d/x"])
        assert r.returncode == 0, r.stderr
        st = os.stat(os.path.join(d, "x"))
        assert (st.st_uid, st.st_gid) == (OWNER, OWNER_GID)
    finally:
        shutil.rmtree(d, ignore_errors=True)


BAD = {
    "uid-zero": ("uid=0", "paddock never maps a sandbox id to host root"),
    "gid-zero": ("gid=0", "paddock never maps a sandbox id to host root"),
    "uid-range": ("uid=%d" % (UID_BASE + 5), "sandbox uid ranges"),
    "uid-not-number": ("uid=alice", "expected a number"),
    "unknown": ("suid", "unknown volume option 'suid'"),
    "ro-and-rw": ("ro,rw", "given twice"),
    "sandbox-and-uid": ("ro,map=sandbox,uid=1001", "contradict"),
    "sandbox-rw": ("map=sandbox", "map=sandbox needs ro"),
    "map-unknown": ("map=host", "map=owner or map=sandbox"),
    "empty": ("ro,", "empty volume option"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_volume_options(paddock, no_leak, vols, name):
    opt, want = BAD[name]
    before = _host_files(vols["rw"])
    r = paddock.run(["-v", "%s:/rw:%s" % (vols["rw"], opt), "--", "touch", "/rw/x"])
    assert r.returncode == 125, (r.stdout, r.stderr)
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1 and msg.startswith("paddock: -v: ") and want in msg, msg
    assert _host_files(vols["rw"]) == before


@pytest.mark.parametrize("tier,want", [("process", "the process tier has no volumes"),
                                       ("microvm", "no --template DIR or volumes")])
def test_tiers_without_volumes_refuse_them(paddock, no_leak, vols, tier, want):
    r = paddock.run(["--isolation", tier, "-v", "%s:/rw" % vols["rw"], "--", "touch", "/rw/x"])
    assert r.returncode == 125, (r.stdout, r.stderr)
    assert want in r.stderr, r.stderr
    assert sorted(os.listdir(vols["rw"])) == ["owner-file", "root-append", "root-secret"]
