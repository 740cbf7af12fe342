"""Real engines over paddock-oci (issue 8): podman (`--runtime`, private
root/runroot/storage under a temp dir, cgroupfs, no network, lowered
ulimits) and containerd (its own root/state/socket, `ctr run --rm` with the
runc shim pointed at paddock-oci). Both are started by the tests and torn
down even when a test fails; the image is a busybox rootfs imported from a
tar (nothing is pulled)."""
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time

import pytest

from oci_helpers import OCI, make_rootfs, mounts_under

TIMEOUT = 120
IMAGE = "localhost/pd-oci-busybox:latest"


def containers_in(root):
    """Container state dirs in a runtime root (its seccomp cache aside)."""
    return [x for x in os.listdir(root) if x != ".seccomp-cache"] if os.path.isdir(root) else []


@pytest.fixture(scope="module")
def work():
    d = tempfile.mkdtemp(prefix="pd-oci-engines-")
    rootfs = make_rootfs(os.path.join(d, "rootfs"))
    with tarfile.open(os.path.join(d, "rootfs.tar"), "w") as t:
        t.add(rootfs, arcname=".")
    try:
        yield d
    finally:
        for m in reversed(mounts_under(d)):
            subprocess.run(["umount", "-l", m], check=False)
        shutil.rmtree(d, ignore_errors=True)


class Podman:
    def __init__(self, d):
        self.d = os.path.join(d, "podman")
        self.oci_root = os.path.join(self.d, "oci-root")
        os.makedirs(self.d)
        # A private runtime root for every runtime call podman makes: its
        # cleanup process (conmon's exit command) passes no --runtime-flag
        # and conmon clears the environment, so a two-line wrapper it is.
        runtime = os.path.join(self.d, "paddock-oci")
        with open(runtime, "w") as f:
            f.write('#!/bin/sh\nexec %s --root %s "$@"\n' % (OCI, self.oci_root))
        os.chmod(runtime, 0o755)
        conf = os.path.join(self.d, "containers.conf")
        with open(conf, "w") as f:
            # nproc and nofile below this machine's hard limits (no CAP_SYS_RESOURCE).
            f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
                    'netns = "none"\n[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
                    '[engine.runtimes]\npaddock = ["%s"]\n' % runtime)
        storage = os.path.join(self.d, "storage.conf")
        with open(storage, "w") as f:
            f.write('[storage]\ndriver = "vfs"\nrunroot = "%s/runroot"\ngraphroot = "%s/root"\n'
                    % (self.d, self.d))
        self.env = dict(os.environ, CONTAINERS_CONF=conf, CONTAINERS_STORAGE_CONF=storage)

    def base(self):
        return ["podman", "--root", self.d + "/root", "--runroot", self.d + "/runroot",
                "--tmpdir", self.d + "/tmp", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
                "--storage-driver", "vfs", "--runtime", "paddock"]

    def __call__(self, *args, check=True, timeout=TIMEOUT):
        p = subprocess.run(self.base() + list(args), capture_output=True, text=True, env=self.env,
                           stdin=subprocess.DEVNULL, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError("podman %s: rc %d\n%s\n%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        return p


@pytest.fixture(scope="module")
def podman(work):
    pm = Podman(work)
    try:
        pm("import", os.path.join(work, "rootfs.tar"), IMAGE)
        yield pm
    finally:
        pm("rm", "--all", "--force", "--time", "0", check=False)
        pm("rmi", "--all", "--force", check=False)
        left = containers_in(pm.oci_root)
        assert not left, "paddock-oci state left by podman: %r" % left


def test_podman_run_rm(podman):
    p = podman("run", "--rm", "--network", "none", IMAGE, "sh", "-c", "echo hello; exit 3", check=False)
    assert p.returncode == 3, p.stderr
    assert p.stdout == "hello\n"
    # It ran under paddock-oci: podman's state names our runtime.
    assert podman("ps", "-a", "-q").stdout == ""


def test_podman_exec_stop_rm(podman):
    name = "pd-oci-t1"
    podman("run", "-d", "--name", name, "--network", "none", IMAGE,
           "sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done")
    try:
        assert podman("inspect", "--format", "{{.OCIRuntime}}", name).stdout.strip() == "paddock"
        # Its state is in our private runtime root while it runs.
        assert containers_in(podman.oci_root) == [podman("inspect", "--format", "{{.Id}}", name).stdout.strip()]
        p = podman("exec", name, "sh", "-c", "echo in-$(cat /proc/1/comm); exit 7", check=False)
        assert p.returncode == 7 and p.stdout == "in-sh\n", p.stderr
        p = podman("exec", "-t", name, "tty")
        assert p.stdout.strip().startswith("/dev/pts/")
        start = time.monotonic()
        podman("stop", "--time", "20", name)
        # The workload's TERM trap ran: no fall back to KILL after the timeout.
        assert time.monotonic() - start < 15
        st = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name).stdout.split()
        assert st == ["exited", "0"]
        podman("rm", name)
        assert not containers_in(podman.oci_root)
    finally:
        podman("rm", "--force", "--time", "0", name, check=False)


def test_podman_tty_run(podman):
    p = podman("run", "--rm", "-t", "--network", "none", IMAGE, "sh", "-c", "tty; exit 4", check=False)
    assert p.returncode == 4 and "/dev/pts/0" in p.stdout


@pytest.fixture(scope="module")
def containerd(work):
    d = os.path.join(work, "containerd")
    os.makedirs(d)
    sock = os.path.join(d, "containerd.sock")
    conf = os.path.join(d, "config.toml")
    with open(conf, "w") as f:
        f.write('version = 2\nroot = "%s/root"\nstate = "%s/state"\n'
                'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                '[grpc]\n  address = "%s"\n[ttrpc]\n  address = "%s.ttrpc"\n' % (d, d, sock, sock))
    log = open(os.path.join(d, "log"), "w")
    proc = subprocess.Popen(["containerd", "--config", conf], stdout=log, stderr=log,
                            start_new_session=True)
    try:
        end = time.monotonic() + 30
        while not os.path.exists(sock):
            assert proc.poll() is None, open(os.path.join(d, "log")).read()
            assert time.monotonic() < end, "containerd did not start"
            time.sleep(0.05)
        ctr = ["ctr", "--address", sock]
        # ctr imports image archives: save the podman-free way, via a docker
        # archive built by podman from the same rootfs tar.
        img = tempfile.mkdtemp(prefix="pdi-")  # podman wants a runroot under 50 characters
        pm = Podman(img)
        pm("import", os.path.join(work, "rootfs.tar"), IMAGE)
        pm("save", "--format", "docker-archive", "-o", os.path.join(d, "image.tar"), IMAGE)
        pm("rmi", "--all", "--force", check=False)
        shutil.rmtree(img, ignore_errors=True)
        subprocess.run(ctr + ["image", "import", os.path.join(d, "image.tar")], check=True,
                       capture_output=True, timeout=TIMEOUT)
        yield ctr
    finally:
        subprocess.run(["ctr", "--address", sock, "tasks", "kill", "-a", "-s", "KILL", "pd-oci-c1"],
                       capture_output=True)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        for m in reversed(mounts_under(d)):
            subprocess.run(["umount", "-l", m], check=False)


def test_ctr_run_rm(containerd, work):
    oci_root = os.path.join(work, "ctr-oci-root")
    p = subprocess.run(containerd + ["run", "--rm", "--runc-binary", OCI, "--runc-root", oci_root, IMAGE,
                                     "pd-oci-c1", "sh", "-c", "echo from-ctr $(cat /proc/1/comm); exit 6"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 6, p.stderr
    assert p.stdout == "from-ctr sh\n"
    # The shim used our root (one directory per containerd namespace) and
    # its delete left nothing in it.
    assert os.listdir(oci_root) == ["default"]
    assert containers_in(os.path.join(oci_root, "default")) == []
    assert subprocess.run(containerd + ["containers", "ls", "-q"], capture_output=True,
                          text=True).stdout == ""
