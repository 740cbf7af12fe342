"""paddock-oci with run.oci.paddock.isolation=microvm: the busybox bundle's
rootfs becomes a QEMU guest's disk, the container's pid is a host-side shim
that runs the process through the guest's agent (docs/oci.md#microvm).
Few VMs (TCG on shared cores): each test boots at most one."""
import glob
import json
import os
import signal
import subprocess
import time

import pytest

from oci_helpers import OCI, Runtime, cgroup_dirs, make_bundle, mounts_under, rootfs  # noqa: F401 (fixture)
from pdtest import pid_alive

GUEST_DIR = os.environ.get("PADDOCK_GUEST_DIR", "/var/cache/paddock/guest")
VM_TIMEOUT = 240        # a cold boot under TCG on a busy host, the root image made once
MICROVM = {"run.oci.paddock.isolation": "microvm"}

if not glob.glob(os.path.join(GUEST_DIR, "boot", "vmlinuz-*")) or not os.path.exists(
        "/usr/bin/qemu-system-x86_64"):
    # Not a hardware gap: scripts/setup.sh installs both, so their absence is a failure.
    raise RuntimeError("no guest kernel or QEMU: run scripts/setup.sh")


class VmRuntime(Runtime):
    """paddock-oci with the test session's paddock state dir (guest assets
    and root images are cached there)."""

    def __init__(self, root, state):
        super().__init__(root)
        self.env = dict(os.environ, PADDOCK_STATE_DIR=state)

    def __call__(self, *args, timeout=VM_TIMEOUT, **kw):
        kw.setdefault("env", self.env)
        return super().__call__(*args, timeout=timeout, **kw)


@pytest.fixture
def vrt(tmp_path, state_root):
    state = os.path.join(state_root, "oci-microvm")
    os.makedirs(state, exist_ok=True)
    r = VmRuntime(str(tmp_path / "root"), state)
    try:
        yield r
    finally:
        r.cleanup()


def vm_bundle(tmp_path, args, rootfs=None, edit=None, name="bundle"):
    def both(c):
        c["annotations"] = dict(MICROVM)
        if edit:
            edit(c)
    return make_bundle(str(tmp_path), args, name=name, rootfs=rootfs, edit=both)


def test_run_output_and_exit_status(tmp_path, vrt):
    """run: stdout and stderr of the guest process reach ours, its exit
    code is run's; it runs on the guest's own kernel; nothing is left."""
    b = vm_bundle(tmp_path, ["sh", "-c", "echo out $(cat /proc/sys/kernel/hostname); uname -r; "
                                        "echo err >&2; read x; echo in=$x; exit 3"])
    vrt.ids.add("r1")
    p = vrt("run", "--bundle", b, "r1", check=False, input="fromstdin\n")
    assert p.returncode == 3, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "out paddock"            # the guest's hostname, not the host's
    assert lines[1] != os.uname().release       # the guest kernel, not the host's
    assert lines[2] == "in=fromstdin"
    assert "err" in p.stderr
    assert not os.path.exists(os.path.join(vrt.root, "r1"))


def test_run_death_by_signal_is_relayed(tmp_path, vrt):
    """A guest process killed by a signal: the shim dies of the same signal."""
    b = vm_bundle(tmp_path, ["sh", "-c", "kill -TERM $$"])
    vrt.ids.add("r2")
    p = vrt("run", "--bundle", b, "r2", check=False)
    assert p.returncode == 128 + signal.SIGTERM, (p.returncode, p.stderr)


def test_lifecycle_exec_ps_pause_kill_delete(tmp_path, vrt):
    logf = str(tmp_path / "oci.log")
    script = 'trap "echo got-term; exit 7" TERM; echo started; while true; do sleep 1; done'

    def edit(c):
        c["mounts"].append({"destination": "/hostetc", "type": "bind", "source": "/etc",
                            "options": ["rbind", "ro"]})
    b = vm_bundle(tmp_path, ["sh", "-c", script], edit=edit)
    out = str(tmp_path / "init.out")
    pidf = str(tmp_path / "pid")
    vrt.ids.add("l1")
    with open(out, "w") as o:
        p = subprocess.run([OCI, "--root", vrt.root, "--log", logf, "create", "--bundle", b,
                            "--pid-file", pidf, "l1"], stdin=subprocess.DEVNULL, stdout=o,
                           stderr=subprocess.STDOUT, env=vrt.env, timeout=VM_TIMEOUT)
    assert p.returncode == 0, open(out).read()
    log = open(logf).read()
    assert "bind mount of '/etc' on '/hostetc' ignored" in log
    st = vrt.state("l1")
    assert st["status"] == "created"
    shim = int(open(pidf).read())
    assert st["pid"] == shim and pid_alive(shim)
    vm = json.load(open(os.path.join(vrt.root, "l1", "vm.json")))
    qemu = vm["qemu"]
    assert pid_alive(qemu)
    assert open("/proc/%d/comm" % qemu).read().strip().startswith("qemu")
    # QEMU runs under the config's cgroup, jailed: not root, no capabilities
    cg = "/paddock-oci/l1"
    assert any(str(qemu) in open(os.path.join(d, "cgroup.procs")).read().split() for d in cgroup_dirs(cg))
    status = dict(line.split(":\t", 1) for line in open("/proc/%d/status" % qemu).read().splitlines()
                  if ":\t" in line)
    assert status["Uid"].split()[0] != "0"
    assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0

    vrt("start", "l1")
    assert vrt.state("l1")["status"] == "running"
    # exec through the agent: output, exit code, user
    e = vrt("exec", "--user", "1000:1000", "l1", "sh", "-c", "id -u; ls /hostetc 2>&1 | head -1; exit 5",
            check=False)
    assert e.returncode == 5, e.stderr
    assert e.stdout.splitlines()[0] == "1000"
    assert "No such file" in e.stdout           # no host path entered the guest
    e = vrt("exec", "l1", "/no/such/binary", check=False)
    assert e.returncode == 127 and "no/such/binary" in e.stderr
    ps = vrt("ps", "l1").stdout
    assert "sh" in ps
    assert shim in json.loads(vrt("ps", "--format", "json", "l1").stdout)
    # pause/resume: QMP stop/cont
    vrt("pause", "l1")
    assert vrt.state("l1")["status"] == "paused"
    assert vrt("exec", "l1", "true", check=False).returncode != 0
    vrt("resume", "l1")
    assert vrt.state("l1")["status"] == "running"
    # kill: forwarded to the guest process, which traps it and exits 7
    vrt("kill", "l1", "TERM")
    deadline = 60
    t0 = time.monotonic()
    while pid_alive(shim) and time.monotonic() - t0 < deadline:
        time.sleep(0.1)
    assert not pid_alive(shim)
    assert vrt.state("l1")["status"] == "stopped"
    assert "got-term" in open(out).read()
    assert vrt("kill", "l1", "TERM", check=False).returncode != 0   # stopped: refused
    vrt("delete", "l1")
    vrt.ids.discard("l1")
    assert not pid_alive(qemu)
    assert not os.path.exists(vm["top"])
    assert not cgroup_dirs(cg)
    assert not os.path.exists(os.path.join(vrt.root, "l1"))


def test_delete_force_of_created_reaps_the_vm(tmp_path, vrt):
    """A created (never started) microvm container: kill KILL goes to the
    shim, delete --force removes QEMU, the relay, the uid slot and dirs."""
    b = vm_bundle(tmp_path, ["true"])
    vrt.create("d1", b)
    vm = json.load(open(os.path.join(vrt.root, "d1", "vm.json")))
    slot = "/run/paddock/uids/%d" % vm["slot"]
    assert os.path.exists(slot)         # QEMU's own uid range, recorded host-wide
    vrt("delete", "--force", "d1")
    vrt.ids.discard("d1")
    assert not pid_alive(vm["qemu"]) and not pid_alive(vm["relay"])
    assert not os.path.exists(vm["top"])
    assert not os.path.exists(slot)


def test_bad_input_refused_and_nothing_left(tmp_path, vrt, rootfs):
    cases = [
        (lambda c: c["process"].update(terminal=True), "terminal"),
        (lambda c: c["linux"].setdefault("resources", {}).update(memory={"limit": 1 << 20}), "memory limit"),
    ]
    for i, (edit, word) in enumerate(cases):
        b = vm_bundle(tmp_path, ["true"], rootfs=rootfs, edit=edit, name="b%d" % i)
        vrt.ids.add("x%d" % i)
        p = vrt("create", "--bundle", b, "x%d" % i, check=False, files=True)
        assert p.returncode != 0 and word in p.stderr, p.stderr
        assert not os.path.exists(os.path.join(vrt.root, "x%d" % i))
        assert not cgroup_dirs("/paddock-oci/x%d" % i)
    # a rootfs that is not a directory: a clear error from the image step
    b = vm_bundle(tmp_path, ["true"], rootfs=str(tmp_path / "missing"), name="b9")
    vrt.ids.add("x9")
    p = vrt("create", "--bundle", b, "x9", check=False, files=True)
    assert p.returncode != 0 and "missing" in p.stderr
    assert not os.path.exists(os.path.join(vrt.root, "x9"))


def test_podman_run_with_the_annotation(state_root):
    """podman --runtime paddock-oci with the annotation: the workload runs in
    the guest (its kernel), its output and exit code reach podman, and
    podman's --rm leaves nothing in the runtime root."""
    import shutil
    import tarfile
    assert shutil.which("podman"), "podman not installed: run scripts/setup.sh"
    from test_engines import IMAGE, Podman, containers_in
    import tempfile
    d = tempfile.mkdtemp(prefix="pd-ocivm-", dir="/tmp")     # podman: runroot under 50 characters
    make_rootfs_tar = os.path.join(d, "rootfs.tar")
    from oci_helpers import make_rootfs
    rootfs = make_rootfs(os.path.join(d, "rootfs"))
    with tarfile.open(make_rootfs_tar, "w") as t:
        t.add(rootfs, arcname=".")
    pm = Podman(d)
    state = os.path.join(state_root, "oci-microvm")
    # conmon clears the environment: the wrapper names the state dir
    with open(os.path.join(pm.d, "paddock-oci"), "w") as f:
        f.write('#!/bin/sh\nPADDOCK_STATE_DIR=%s exec %s --root %s "$@"\n' % (state, OCI, pm.oci_root))
    try:
        pm("import", make_rootfs_tar, IMAGE)
        p = pm("run", "--rm", "--network", "none", "--annotation", "run.oci.paddock.isolation=microvm", IMAGE,
               "sh", "-c", "echo hello $(uname -r); exit 3", check=False, timeout=VM_TIMEOUT)
        assert p.returncode == 3, p.stderr
        assert p.stdout.startswith("hello ") and p.stdout.split()[1] != os.uname().release
        assert pm("ps", "-a", "-q").stdout == ""
    finally:
        pm("rm", "--all", "--force", "--time", "0", check=False)
        pm("rmi", "--all", "--force", check=False)
        for m in reversed(mounts_under(d)):
            subprocess.run(["umount", "-l", m], check=False)
        left = containers_in(pm.oci_root)
        shutil.rmtree(d, ignore_errors=True)
    assert not left
