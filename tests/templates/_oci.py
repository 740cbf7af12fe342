"""OCI images made by the tests, byte by byte: layers are tar files written
with Python's tarfile (whiteouts, opaque dirs, hard links, setuid files,
xattrs, and the hostile entries an attacker would put there), assembled
into an OCI layout that skopeo reads (oci:DIR) or pushes to the local
registry. Nothing is downloaded: the one binary inside is the host's
busybox (Debian's busybox-static)."""
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile

STORE_UID_BASE = 3621440000
BUSYBOX = "/bin/busybox"
TOOLS = ["sh", "ls", "cat", "echo", "id", "env", "pwd", "stat", "test", "mkdir", "rm", "touch", "grep",
         "sleep", "true", "false", "wc", "head", "readlink", "chmod", "find", "dd"]


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Layer:
    """A tar layer being written."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)

    def add(self, name, data=None, mode=0o644, uid=0, gid=0, type=tarfile.REGTYPE, linkname="", xattrs=None,
            devmajor=0, devminor=0, size=None):
        ti = tarfile.TarInfo(name)
        ti.type = type
        ti.mode = mode
        ti.uid, ti.gid = uid, gid
        ti.mtime = 1700000000
        ti.linkname = linkname
        ti.devmajor, ti.devminor = devmajor, devminor
        if xattrs:
            ti.pax_headers = {"SCHILY.xattr." + k: v for k, v in xattrs.items()}
        if type == tarfile.REGTYPE:
            data = data if data is not None else b""
            ti.size = len(data) if size is None else size
            self.tar.addfile(ti, io.BytesIO(data))
        else:
            self.tar.addfile(ti)
        return self

    def dir(self, name, mode=0o755, **kw):
        return self.add(name, type=tarfile.DIRTYPE, mode=mode, **kw)

    def symlink(self, name, target, **kw):
        return self.add(name, type=tarfile.SYMTYPE, linkname=target, mode=0o777, **kw)

    def hardlink(self, name, target, **kw):
        return self.add(name, type=tarfile.LNKTYPE, linkname=target, **kw)

    def file(self, name, data, mode=0o644, **kw):
        return self.add(name, data=data if isinstance(data, bytes) else data.encode(), mode=mode, **kw)

    def bytes(self):
        self.tar.close()
        return self.buf.getvalue()


def busybox_layer(passwd="root:x:0:0:root:/root:/bin/sh\n", group="root:x:0:\n"):
    l = Layer()
    for d in ("bin", "etc", "root", "tmp"):
        l.dir(d, mode=0o1777 if d == "tmp" else 0o755)
    with open(BUSYBOX, "rb") as f:
        l.file("bin/busybox", f.read(), mode=0o755)
    for t in TOOLS:
        l.symlink("bin/" + t, "busybox")
    l.file("etc/passwd", passwd)
    l.file("etc/group", group)
    return l


def write_layout(path, layers, config=None, gzip_layers=True, tamper=None, lie_diff=False):
    """An OCI layout at path with these layers (tar bytes, bottom first) and
    image config ({"Env": [...], ...}). tamper(i, blob) -> blob changes a
    layer's bytes after its digest was taken; lie_diff gives the config a
    wrong diff_id for the last layer. Returns the manifest digest."""
    blobs = os.path.join(path, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)

    def put(b):
        d = sha(b)
        with open(os.path.join(blobs, d), "wb") as f:
            f.write(b)
        return d

    descs, diffs = [], []
    for i, tar in enumerate(layers):
        diffs.append("sha256:" + sha(tar))
        blob = gzip.compress(tar, mtime=0) if gzip_layers else tar
        d = sha(blob)
        if tamper:
            blob = tamper(i, blob)
        with open(os.path.join(blobs, d), "wb") as f:
            f.write(blob)
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if gzip_layers else ""),
                      "digest": "sha256:" + d, "size": len(blob)})
    if lie_diff:
        diffs[-1] = "sha256:" + "0" * 64
    cfg = {"architecture": "amd64", "os": "linux", "config": config or {},
           "rootfs": {"type": "layers", "diff_ids": diffs}}
    cb = json.dumps(cfg).encode()
    cd = put(cb)
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + cd,
                      "size": len(cb)},
           "layers": descs}
    mb = json.dumps(man).encode()
    md = put(mb)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + md, "size": len(mb),
             "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}, f)
    return "sha256:" + md


def push(layout, dest_ref, env):
    """skopeo copy oci:layout docker://dest_ref (the test registry)."""
    r = subprocess.run(["skopeo", "--registries-conf", env["CONTAINERS_REGISTRIES_CONF"], "copy", "--quiet",
                        "oci:%s:latest" % layout, "docker://" + dest_ref],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr


def store_owned_by_root(root):
    """Paths below root that host root owns, or that are setuid to it."""
    bad = []
    st = os.lstat(root)
    if st.st_uid < 65536:
        bad.append((root, st.st_uid, st.st_gid))
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if st.st_uid < 65536 or st.st_gid < 65536:
                bad.append((p, st.st_uid, st.st_gid))
    return bad
