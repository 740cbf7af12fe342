"""Helpers for paddock-oci's tests: busybox bundles under a temp dir and a
runtime wrapper with its own --root that deletes what it created."""
import copy
import json
import os
import subprocess
import tempfile

from pdtest import PADDOCK_BIN

OCI = os.path.abspath(os.environ.get("PADDOCK_OCI")
                      or os.path.join(os.path.dirname(PADDOCK_BIN), "paddock-oci"))
BUSYBOX = "/bin/busybox"  # Debian busybox-static
TIMEOUT = 30
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def make_rootfs(path):
    """A busybox-static rootfs: /bin/busybox and one relative symlink per
    applet (`busybox --install -s` would point at the host's path)."""
    os.makedirs(os.path.join(path, "bin"), exist_ok=True)
    for d in ("proc", "sys", "dev", "tmp", "etc", "root"):
        os.makedirs(os.path.join(path, d), exist_ok=True)
    bb = os.path.join(path, "bin", "busybox")
    if not os.path.exists(bb):
        with open(BUSYBOX, "rb") as src, open(bb, "wb") as dst:
            dst.write(src.read())
        os.chmod(bb, 0o755)
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for a in applets:
        link = os.path.join(path, "bin", a)
        if a != "busybox" and not os.path.lexists(link):
            os.symlink("busybox", link)
    with open(os.path.join(path, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/tmp:/bin/sh\n")
    with open(os.path.join(path, "etc", "group"), "w") as f:
        f.write("root:x:0:\nwheel:x:10:\nuser:x:1000:\n")
    return path


BASE_CONFIG = {
    "ociVersion": "1.0.2",
    "process": {
        "terminal": False,
        "user": {"uid": 0, "gid": 0},
        "args": ["true"],
        "env": [PATH_ENV, "TERM=xterm"],
        "cwd": "/",
        "capabilities": {k: ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_CHOWN",
                             "CAP_SETUID", "CAP_SETGID", "CAP_DAC_OVERRIDE", "CAP_FOWNER"]
                         for k in ("bounding", "effective", "permitted")},
        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
        "noNewPrivileges": True,
    },
    "root": {"path": "rootfs", "readonly": False},
    "hostname": "paddock-test",
    "mounts": [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev", "ro"]},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev"]},
    ],
    "linux": {
        "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
        "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
        "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger"],
    },
}


def make_bundle(parent, args, name="bundle", rootfs=None, edit=None):
    """A bundle dir with config.json; rootfs shared when given (a path)."""
    b = os.path.join(parent, name)
    os.makedirs(b, exist_ok=True)
    cfg = copy.deepcopy(BASE_CONFIG)
    cfg["process"]["args"] = list(args)
    if rootfs:
        cfg["root"]["path"] = rootfs
    else:
        make_rootfs(os.path.join(b, "rootfs"))
    if edit:
        edit(cfg)
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return b


def mounts_under(path):
    """Mount points (this mount namespace) under path."""
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(path)]


def cgroup_dirs(cgpath):
    """Every hierarchy's directory for a cgroup path that exists now."""
    out = []
    for h in os.listdir("/sys/fs/cgroup"):
        d = os.path.join("/sys/fs/cgroup", h) + cgpath
        if os.path.isdir(d):
            out.append(d)
    return out


class Runtime:
    def __init__(self, root):
        self.root = root
        self.ids = set()

    def __call__(self, *args, check=True, timeout=TIMEOUT, files=False, **kw):
        argv = [OCI, "--root", self.root] + [str(a) for a in args]
        if files:
            # The container's init (create, exec --detach) inherits the
            # runtime's stdio: pipes would stay open after the runtime exits.
            with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
                p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                   timeout=timeout, **kw)
                out.seek(0)
                err.seek(0)
                p.stdout, p.stderr = out.read(), err.read()
        else:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
        if check and p.returncode != 0:
            raise AssertionError("paddock-oci %s: rc %d\nstdout: %s\nstderr: %s"
                                 % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
        return p

    def create(self, cid, bundle, *extra, check=True):
        self.ids.add(cid)
        return self("create", "--bundle", bundle, *extra, cid, check=check, files=True)

    def state(self, cid):
        return json.loads(self("state", cid).stdout)

    def cleanup(self):
        for cid in list(self.ids):
            self("delete", "--force", cid, check=False)
        left = os.listdir(self.root) if os.path.isdir(self.root) else []
        left = [x for x in left if x != ".seccomp-cache"]
        for cid in self.ids:
            assert not cgroup_dirs("/paddock-oci/" + cid), "cgroup of %s left behind" % cid
        assert not left, "left in the runtime root: %r" % left


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory):
    return make_rootfs(str(tmp_path_factory.mktemp("rootfs") / "rootfs"))


@pytest.fixture
def rt(tmp_path):
    r = Runtime(str(tmp_path / "root"))
    try:
        yield r
    finally:
        r.cleanup()
