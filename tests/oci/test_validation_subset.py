"""A subset of the OCI runtime validation suite (opencontainers/runtime-tools,
validation/*), restated without runtime-tools: the same lifecycle, state,
pid-file, kill, delete, hook-stdin and config assertions, on a busybox-static
bundle, against paddock-oci (docs/oci.md, "Validation suite").

Environment: PADDOCK_OCI (the runtime binary; default paddock-oci beside
PADDOCK_BIN). Each test uses its own --root under a temp dir and deletes what
it created, even when it fails.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from pdtest import PADDOCK_BIN

OCI = os.path.abspath(os.environ.get("PADDOCK_OCI")
                      or os.path.join(os.path.dirname(PADDOCK_BIN), "paddock-oci"))
BUSYBOX = "/bin/busybox"  # Debian busybox-static
TIMEOUT = 30
CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
        "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
        "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]


def default_config(args):
    """runtime-tools' default generator (validation/util GetDefaultGenerator),
    without its seccomp profile: paddock's default applies instead."""
    return {
        "ociVersion": "1.1.0",
        "process": {
            "user": {"uid": 0, "gid": 0},
            "args": args,
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "TERM=xterm"],
            "cwd": "/",
            "capabilities": {k: list(CAPS) for k in
                             ("bounding", "effective", "inheritable", "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
        },
        "root": {"path": "rootfs"},
        "hostname": "mrsdalloway",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620",
                         "gid=5"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
        ],
        "linux": {
            "resources": {"devices": [{"allow": False, "access": "rwm"}]},
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
        },
    }


class Bundle:
    """A bundle dir (busybox rootfs + config.json) and a private --root, as
    validation/util's PrepareBundle and Runtime do: create's stdout and
    stderr go to files in the bundle, and the container inherits them."""

    def __init__(self, base, args):
        self.dir = os.path.join(base, "bundle")
        self.root = os.path.join(base, "state")
        self.rootfs = os.path.join(self.dir, "rootfs")
        os.makedirs(os.path.join(self.rootfs, "bin"))
        for d in ("proc", "sys", "dev", "tmp", "etc"):
            os.mkdir(os.path.join(self.rootfs, d))
        shutil.copy2(BUSYBOX, os.path.join(self.rootfs, "bin", "busybox"))
        applets = subprocess.run([BUSYBOX, "--list"], check=True, capture_output=True,
                                 text=True).stdout.split()
        for a in applets:
            if a != "busybox":
                os.symlink("busybox", os.path.join(self.rootfs, "bin", a))
        self.config = default_config(args)
        self.id = str(uuid.uuid4())
        self.created = []
        self.stdout = os.path.join(self.dir, "stdout")
        self.stderr = os.path.join(self.dir, "stderr")

    def save(self, config=None):
        with open(os.path.join(self.dir, "config.json"), "w") as f:
            json.dump(self.config if config is None else config, f)

    def oci(self, *args, timeout=TIMEOUT, **kw):
        return subprocess.run([OCI, "--root", self.root, *args], capture_output=True,
                              text=True, timeout=timeout, **kw)

    def create(self, cid=None, pid_file=None):
        cid = cid or self.id
        self.save()
        argv = [OCI, "--root", self.root, "create", "--bundle", self.dir]
        if pid_file:
            argv += ["--pid-file", pid_file]
        argv.append(cid)
        self.created.append(cid)
        with open(self.stdout, "ab") as out, open(self.stderr, "ab") as err:
            return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                  timeout=TIMEOUT)

    def create_ok(self, **kw):
        r = self.create(**kw)
        assert r.returncode == 0, "create failed: %s" % self.read(self.stderr)
        return r

    def state(self, cid=None):
        r = self.oci("state", cid or self.id)
        assert r.returncode == 0, "state failed: %s" % r.stderr
        return json.loads(r.stdout)

    def wait_status(self, status, deadline_s=TIMEOUT):
        """Poll `state` until it reports status (the suite polls the same way)."""
        end = time.monotonic() + deadline_s
        while True:
            st = self.state()
            if st["status"] == status:
                return st
            assert time.monotonic() < end, "still %r, expected %r" % (st["status"], status)
            time.sleep(0.01)

    @staticmethod
    def read(path):
        with open(path, errors="replace") as f:
            return f.read()

    def cleanup(self):
        for cid in self.created:
            self.oci("delete", "--force", cid)


@pytest.fixture
def bundle():
    assert os.access(OCI, os.X_OK), "paddock-oci not built: %s" % OCI
    base = tempfile.mkdtemp(prefix="pd-ociv-")
    made = []

    def make(args=("true",)):
        b = Bundle(base if not made else tempfile.mkdtemp(dir=base), list(args))
        made.append(b)
        return b
    try:
        yield make
    finally:
        for b in made:
            b.cleanup()
        for b in made:
            left = b.oci("list", "-q").stdout.split() if os.path.isdir(b.root) else []
            assert not left, "containers left under --root: %s" % left
        shutil.rmtree(base, ignore_errors=True)


# ---- validation/state, validation/create, validation/pidfile ----

def test_state_of_created_container(bundle):
    b = bundle(["true"])
    b.create_ok()
    st = b.state()
    assert st["ociVersion"].startswith("1.")
    assert st["id"] == b.id
    assert st["status"] == "created"
    assert isinstance(st["pid"], int) and st["pid"] > 0
    assert st["bundle"] == b.dir  # the absolute path of the bundle
    assert os.path.exists("/proc/%d" % st["pid"])


def test_create_without_id_fails(bundle):
    b = bundle()
    b.save()
    r = b.oci("create", "--bundle", b.dir)
    assert r.returncode != 0 and r.stderr.strip()


def test_create_duplicate_id_fails_and_leaves_first(bundle):
    b = bundle(["sleep", "100"])
    b.create_ok()
    first = b.state()
    r = b.create()
    assert r.returncode != 0
    assert b.state() == first  # the first container is untouched


def test_pid_file_is_state_pid(bundle):
    b = bundle(["true"])
    pid_file = os.path.join(os.path.dirname(b.dir), "pidfile")
    b.create_ok(pid_file=pid_file)
    with open(pid_file) as f:
        assert int(f.read()) == b.state()["pid"]


def test_state_of_unknown_id_fails(bundle):
    b = bundle()
    r = b.oci("state", str(uuid.uuid4()))
    assert r.returncode != 0 and r.stderr.strip()


# ---- validation/start, validation/kill, validation/killsig, validation/delete ----

def test_start_runs_process_to_stopped(bundle):
    b = bundle(["sh", "-c", "echo started"])
    b.create_ok()
    assert not b.read(b.stdout)  # create does not run the user's process
    r = b.oci("start", b.id)
    assert r.returncode == 0, r.stderr
    b.wait_status("stopped")
    assert b.read(b.stdout) == "started\n"
    r = b.oci("start", b.id)  # start of a stopped container is an error
    assert r.returncode != 0


def test_start_without_id_fails(bundle):
    b = bundle()
    r = b.oci("start")
    assert r.returncode != 0


def test_kill_errors_and_signal(bundle):
    b = bundle(["sleep", "100"])
    assert b.oci("kill").returncode != 0  # no id
    b.create_ok()
    assert b.oci("start", b.id).returncode == 0
    b.wait_status("running")
    r = b.oci("kill", b.id, "KILL")
    assert r.returncode == 0, r.stderr
    b.wait_status("stopped")
    # kill of a stopped container is an error
    assert b.oci("kill", b.id, "KILL").returncode != 0


@pytest.mark.parametrize("sig", ["TERM", "SIGUSR1", "9"])
def test_kill_signal_names(bundle, sig):
    # A shell that traps the signal reports it, so delivery is observed, not assumed.
    script = "trap 'echo got; exit 0' TERM USR1; echo ready; while :; do sleep 0.05; done"
    b = bundle(["sh", "-c", script])
    b.create_ok()
    assert b.oci("start", b.id).returncode == 0
    end = time.monotonic() + TIMEOUT
    while "ready" not in b.read(b.stdout):
        assert time.monotonic() < end, "container never ready"
        time.sleep(0.01)
    r = b.oci("kill", b.id, sig)
    assert r.returncode == 0, r.stderr
    b.wait_status("stopped")
    if sig != "9":
        assert "got" in b.read(b.stdout)


def test_delete_of_running_fails_without_effect(bundle):
    b = bundle(["sleep", "100"])
    b.create_ok()
    assert b.oci("start", b.id).returncode == 0
    st = b.wait_status("running")
    r = b.oci("delete", b.id)
    assert r.returncode != 0
    assert b.state()["status"] == "running"
    assert os.path.exists("/proc/%d" % st["pid"])
    r = b.oci("delete", "--force", b.id)
    assert r.returncode == 0, r.stderr
    assert b.oci("state", b.id).returncode != 0


def test_delete_removes_stopped(bundle):
    b = bundle(["true"])
    b.create_ok()
    assert b.oci("start", b.id).returncode == 0
    b.wait_status("stopped")
    r = b.oci("delete", b.id)
    assert r.returncode == 0, r.stderr
    assert b.oci("state", b.id).returncode != 0
    assert b.id not in b.oci("list", "-q").stdout.split()


# ---- validation/hooks_stdin ----

def test_hooks_get_state_on_stdin(bundle):
    b = bundle(["true"])
    out = b.rootfs
    sh = os.path.join(b.rootfs, "bin", "sh")
    b.config["annotations"] = {"org.opencontainers.runtime-tools": "hook stdin test"}
    b.config["hooks"] = {
        name: [{"path": sh, "args": ["sh", "-c", "cat > %s/%s" % (out, name)], "timeout": 5}]
        for name in ("prestart", "createRuntime", "poststart", "poststop")}
    b.create_ok()
    pid = b.state()["pid"]
    assert b.oci("start", b.id).returncode == 0
    b.wait_status("stopped")
    assert b.oci("delete", b.id).returncode == 0
    for name in ("prestart", "createRuntime", "poststart", "poststop"):
        with open(os.path.join(out, name)) as f:
            st = json.load(f)
        assert st["id"] == b.id, name
        if name != "poststop":  # the process is gone by then (as the suite allows)
            assert st["pid"] == pid, name
        assert st["bundle"] == b.dir, name
        assert st["annotations"] == {"org.opencontainers.runtime-tools": "hook stdin test"}
        want = {"prestart": "created", "poststart": "running"}.get(name)
        assert st["status"] == want if want else st["status"], name


# ---- validation/misc_props, validation/config_updates_without_affect ----

def test_unknown_annotation_and_property_accepted(bundle):
    b = bundle(["true"])
    b.config["annotations"] = {"org.%s" % b.id: ""}
    b.config["unknown"] = "unknown"
    b.create_ok()
    assert b.oci("start", b.id).returncode == 0
    b.wait_status("stopped")


def test_invalid_version_rejected_and_nothing_created(bundle):
    b = bundle(["true"])
    b.config["ociVersion"] = "invalid"
    b.save()
    r = b.create()
    assert r.returncode != 0
    assert b.oci("state", b.id).returncode != 0
    assert not os.listdir(b.root) if os.path.isdir(b.root) else True


def test_config_update_after_create_has_no_effect(bundle):
    b = bundle(["hostname"])
    b.create_ok()
    changed = json.loads(json.dumps(b.config))
    changed["hostname"] = "changed"
    changed["process"]["args"] = ["echo", "changed"]
    b.save(changed)
    assert b.oci("start", b.id).returncode == 0
    b.wait_status("stopped")
    assert b.read(b.stdout) == "mrsdalloway\n"


# ---- runtimetest's inside checks (cmd/runtimetest), done with busybox ----

def run_inside(b, script):
    """Run script in the container; its KEY=VALUE lines as a dict."""
    b.config["process"]["args"] = ["sh", "-c", script]
    b.create_ok()
    assert b.oci("start", b.id).returncode == 0
    b.wait_status("stopped")
    out = b.read(b.stdout)
    return dict(l.split("=", 1) for l in out.splitlines() if "=" in l), out + b.read(b.stderr)


LINUX = r"""
echo "hostname=$(hostname)"
echo "ipfwd=$(cat /proc/sys/net/ipv4/ip_forward)"
if cat /proc/kcore >/dev/null 2>&1; then echo kcore=readable; else echo kcore=masked; fi
if [ -z "$(ls -A /proc/scsi 2>/dev/null)" ]; then echo scsi=masked; else echo scsi=visible; fi
if echo x > /proc/sys/kernel/domainname 2>/dev/null; then echo ro=writable; else echo ro=readonly; fi
if touch /newfile 2>/dev/null; then echo root=writable; else echo root=readonly; fi
if touch /tmp/newfile 2>/dev/null; then echo tmp=writable; else echo tmp=readonly; fi
"""


def test_linux_settings_inside(bundle):
    b = bundle()
    b.config["hostname"] = "validation-subset"
    b.config["root"]["readonly"] = True
    b.config["mounts"].append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                               "options": ["nosuid", "nodev", "size=1m"]})
    b.config["linux"]["sysctl"] = {"net.ipv4.ip_forward": "1"}
    b.config["linux"]["maskedPaths"] = ["/proc/kcore", "/proc/scsi"]
    b.config["linux"]["readonlyPaths"] = ["/proc/sys"]
    got, out = run_inside(b, LINUX)
    assert got == {"hostname": "validation-subset", "ipfwd": "1", "kcore": "masked",
                   "scsi": "masked", "ro": "readonly", "root": "readonly",
                   "tmp": "writable"}, out


PROCESS = r"""
echo "nofile=$(ulimit -n)"
echo "oom=$(cat /proc/self/oom_score_adj)"
echo "cwd=$(pwd)"
echo "id=$(id -u):$(id -g):$(id -G)"
echo "env=$FOO"
"""


def test_process_settings_inside(bundle):
    b = bundle()
    p = b.config["process"]
    p["cwd"] = "/tmp"
    p["env"].append("FOO=bar")
    p["user"] = {"uid": 1, "gid": 2, "additionalGids": [3, 4]}
    p["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": 512, "soft": 256}]
    p["oomScoreAdj"] = 100
    got, out = run_inside(b, PROCESS)
    assert got == {"nofile": "256", "oom": "100", "cwd": "/tmp", "id": "1:2:2 3 4",
                   "env": "bar"}, out


# ---- validation/start (the process runs when start returns), killsig ----

def test_start_returns_once_the_workload_runs(bundle):
    """The suite's killsig sends a signal right after `start`: a workload
    that was not yet exec'd would miss it. When start returns, the init
    must already be the workload (busybox), not paddock-oci."""
    b = bundle(["sleep", "100"])
    # A slow startContainer hook (it runs in the init between the start
    # signal and the exec) makes a start that returns early visible.
    b.config["hooks"] = {"startContainer": [{"path": "/bin/sleep", "args": ["sleep", "0.3"]}]}
    b.create_ok()
    pid = b.state()["pid"]
    busybox = os.stat(os.path.join(b.rootfs, "bin", "busybox"))
    assert os.stat("/proc/%d/exe" % pid).st_ino != busybox.st_ino  # not yet
    assert b.oci("start", b.id).returncode == 0
    exe = os.stat("/proc/%d/exe" % pid)
    assert (exe.st_dev, exe.st_ino) == (busybox.st_dev, busybox.st_ino)


# ---- validation/linux_rootfs_propagation ----

PROPAGATION = r"""
mkdir /target /mnt1 /src
touch /src/file
mount --rbind / /target 2>/dev/null && echo rbind=ok || echo rbind=refused
mount --bind /src /mnt1 2>/dev/null
[ -e /target/mnt1/file ] && echo seen=yes || echo seen=no
"""


@pytest.mark.parametrize("prop,want", [
    ("shared", {"rbind": "ok", "seen": "yes"}),
    ("slave", {"rbind": "ok", "seen": "no"}),
    ("private", {"rbind": "ok", "seen": "no"}),
    ("unbindable", {"rbind": "refused", "seen": "no"}),
])
def test_rootfs_propagation(bundle, prop, want):
    b = bundle()
    b.config["linux"]["rootfsPropagation"] = prop
    # The workload mounts, as runtimetest does: it needs CAP_SYS_ADMIN and a
    # seccomp profile that allows mount (the config's, not paddock's default).
    b.config["linux"]["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW"}
    for k in ("bounding", "effective", "permitted"):
        b.config["process"]["capabilities"][k].append("CAP_SYS_ADMIN")
    host_mounts = open("/proc/self/mountinfo").read()
    got, out = run_inside(b, PROPAGATION)
    assert got == want, out
    if prop == "shared":  # shared within the container, never with the host
        assert "shared within the container only" in b.read(b.stderr)
    assert open("/proc/self/mountinfo").read().count(b.rootfs) == host_mounts.count(b.rootfs) == 0


# ---- validation/linux_cgroups_memory (kernelTCP) ----

def memory_v1_mount():
    for line in open("/proc/self/mountinfo"):
        left, _, right = line.partition(" - ")
        fstype, _, opts = right.split()[:3]
        if fstype == "cgroup" and "memory" in opts.split(","):
            return left.split()[4]
    return None


def test_memory_kernel_tcp(bundle):
    b = bundle(["sleep", "100"])
    path = "/pd-ociv-%s" % b.id
    b.config["linux"]["cgroupsPath"] = path
    b.config["linux"]["resources"]["memory"] = {"limit": 100 << 20, "kernelTCP": 50593792}
    b.create_ok()
    mnt = memory_v1_mount()
    if mnt:  # cgroup v1: the limit is in the memory hierarchy
        with open(os.path.join(mnt + path, "memory.kmem.tcp.limit_in_bytes")) as f:
            assert int(f.read()) == 50593792
    else:  # cgroup v2 has no separate TCP limit; the container still runs
        assert b.state()["status"] == "created"
    assert b.oci("delete", "--force", b.id).returncode == 0
    if mnt:
        assert not os.path.exists(mnt + path)


# ---- validation/linux_process_apparmor_profile (and selinuxLabel) ----

def lsm_active(name):
    try:
        return name in open("/sys/kernel/security/lsm").read().strip().split(",")
    except OSError:
        pass
    if name == "apparmor":
        try:
            return open("/sys/module/apparmor/parameters/enabled").read().startswith("Y")
        except OSError:
            return False
    return os.path.exists("/sys/fs/selinux/enforce")


def test_features_report_lsm_support(bundle):
    f = json.loads(subprocess.run([OCI, "features"], capture_output=True, text=True,
                                  check=True).stdout)
    assert f["linux"]["apparmor"]["enabled"] is True
    assert f["linux"]["selinux"]["enabled"] is True


def test_apparmor_profile(bundle):
    b = bundle(["sleep", "100"])
    b.config["process"]["apparmorProfile"] = "unconfined"
    b.create_ok()
    assert b.oci("start", b.id).returncode == 0
    pid = b.wait_status("running")["pid"]
    if lsm_active("apparmor"):
        for attr in ("/proc/%d/attr/apparmor/current" % pid, "/proc/%d/attr/current" % pid):
            if os.path.exists(attr):
                assert open(attr).read().startswith("unconfined")
                break
    else:  # nothing can enforce it here: said in the log, not silently dropped
        assert ("apparmorProfile 'unconfined' not applied: AppArmor is not enabled"
                in b.read(b.stderr))


def test_selinux_label(bundle):
    b = bundle(["true"])
    b.config["process"]["selinuxLabel"] = "no_such_user:no_such_role:no_such_type:s0"
    r = b.create()
    if lsm_active("selinux"):  # an invalid label is refused, not ignored
        assert r.returncode != 0 and "selinux" in b.read(b.stderr)
    else:
        assert r.returncode == 0
        assert "selinuxLabel 'no_such_user:no_such_role:no_such_type:s0' not applied" in b.read(b.stderr)


# ---- validation/linux_cgroups_{blkio,hugetlb,network}: applied, or logged ----

def v1_mount(ctrl):
    for line in open("/proc/self/mountinfo"):
        left, _, right = line.partition(" - ")
        fstype, _, opts = right.split()[:3]
        if fstype == "cgroup" and ctrl in opts.split(","):
            return left.split()[4]
    return None


def a_block_device():
    for name in sorted(os.listdir("/sys/block")):
        if not name.startswith(("loop", "ram", "zram")) and os.path.exists("/sys/block/%s/dev" % name):
            return tuple(int(x) for x in open("/sys/block/%s/dev" % name).read().split(":"))
    return None


def test_block_io_throttle(bundle):
    dev = a_block_device()
    assert dev, "this test needs a block device (hardware)"
    b = bundle(["sleep", "100"])
    path = "/pd-ociv-%s" % b.id
    b.config["linux"]["cgroupsPath"] = path
    b.config["linux"]["resources"]["blockIO"] = {
        "throttleReadBpsDevice": [{"major": dev[0], "minor": dev[1], "rate": 1048576}],
        "throttleWriteIOPSDevice": [{"major": dev[0], "minor": dev[1], "rate": 300}]}
    b.create_ok()
    mnt = v1_mount("blkio")
    if mnt:
        d = mnt + path
        assert open(d + "/blkio.throttle.read_bps_device").read() == "%d:%d 1048576\n" % dev
        assert open(d + "/blkio.throttle.write_iops_device").read() == "%d:%d 300\n" % dev
    else:  # cgroup v2: one io.max line for the device
        line = open("/sys/fs/cgroup%s/io.max" % path).read()
        assert "rbps=1048576" in line and "wiops=300" in line
    assert b.oci("delete", "--force", b.id).returncode == 0
    assert not mnt or not os.path.exists(mnt + path)


def test_hugetlb_and_network_applied_or_logged(bundle):
    b = bundle(["true"])
    path = "/pd-ociv-%s" % b.id
    b.config["linux"]["cgroupsPath"] = path
    b.config["linux"]["resources"]["hugepageLimits"] = [{"pageSize": "2MB", "limit": 4194304}]
    b.config["linux"]["resources"]["network"] = {"classID": 1048577}
    b.create_ok()
    log = b.read(b.stderr)
    for ctrl, file, want, what in (
            ("hugetlb", "hugetlb.2MB.limit_in_bytes", "4194304", "hugepageLimits"),
            ("net_cls", "net_cls.classid", "1048577", "network.classID")):
        mnt = v1_mount(ctrl)
        if mnt:
            assert open("%s%s/%s" % (mnt, path, file)).read().strip() == want
        else:  # this host has no such controller (v1) or no net_cls at all (v2)
            assert "linux.resources.%s not applied" % what in log, log


@pytest.mark.parametrize("res", [
    {"hugepageLimits": [{"pageSize": "../../2MB", "limit": 1}]},
    {"network": {"priorities": [{"name": "eth0/../x", "priority": 1}]}},
    {"blockIO": {"throttleReadBpsDevice": [{"major": 8, "rate": 1}]}},
])
def test_malformed_resources_refused_and_nothing_left(bundle, res):
    b = bundle(["true"])
    path = "/pd-ociv-%s" % b.id
    b.config["linux"]["cgroupsPath"] = path
    b.config["linux"]["resources"].update(res)
    r = b.create()
    assert r.returncode != 0 and "config.json: " in b.read(b.stderr)
    assert b.oci("state", b.id).returncode != 0
    for ctrl in ("memory", "pids", "blkio", "devices"):
        mnt = v1_mount(ctrl)
        assert not mnt or not os.path.exists(mnt + path), ctrl
    assert not os.path.exists("/sys/fs/cgroup" + path)
