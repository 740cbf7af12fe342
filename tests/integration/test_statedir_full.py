"""A state directory on a full disk: a clear error, exit 125, nothing left.

The state dir is a tiny tmpfs this test mounts (and always unmounts); the
first run there must build the base template, which cannot fit."""
import os
import subprocess
import tempfile

from pdtest import PADDOCK_BIN, child_env, instance_of, runtime_dir


def test_full_state_dir_disk():
    top = tempfile.mkdtemp(prefix="paddock-full-")
    state = os.path.join(top, "state")
    os.mkdir(state)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=64", "tmpfs", state], check=True)
    try:
        # Fill what is left of the disk.
        fd = os.open(os.path.join(state, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        r = subprocess.run([PADDOCK_BIN, "run", "--state-dir", state, "--", "true"], env=child_env(),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 125, (r.returncode, r.stderr)
        assert r.stderr.startswith("paddock: "), r.stderr
        assert "No space left on device" in r.stderr or "Too many" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        # Nothing half-built left in the state dir, no sandbox, no cgroup.
        leftovers = sorted(os.listdir(state))
        assert "sandboxes" not in leftovers
        for entry in leftovers:
            assert entry in ("filler", "templates", "cache"), leftovers
        assert os.listdir(os.path.join(state, "templates")) in ([], [".base.lock"]), \
            os.listdir(os.path.join(state, "templates"))
        inst = instance_of(state)
        sb = os.path.join(runtime_dir(state), "sandboxes")
        assert not os.path.isdir(sb) or os.listdir(sb) == []
        for ctrl in ("memory", "pids"):
            d = "/sys/fs/cgroup/%s/paddock-%s" % (ctrl, inst)
            assert not os.path.isdir(d) or [e for e in os.listdir(d) if os.path.isdir(os.path.join(d, e))] == []
    finally:
        subprocess.run([PADDOCK_BIN, "gc", "--state-dir", state], env=child_env(), capture_output=True, timeout=60)
        subprocess.run(["umount", state], check=False)
        subprocess.run(["rm", "-rf", top], check=False)
