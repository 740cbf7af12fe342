"""Where the binaries are, how paddock names a state dir's instance, and
what an instance may still hold on the host (the leftover checks every
suite ends with).

Environment:
  PADDOCK_BIN         the paddock binary (default build/src/paddock)
  PADDOCK_AGENT       the agent binary (default build/src/agent/paddock-agent)
  PADDOCK_TEST_KEEP   keep servers' state and logs for a post-mortem
"""
import glob
import os
import signal
import socket
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PADDOCK_BIN = os.path.abspath(os.environ.get("PADDOCK_BIN") or os.path.join(REPO, "build/src/paddock"))
PADDOCK_AGENT = os.path.abspath(os.environ.get("PADDOCK_AGENT")
                                or os.path.join(REPO, "build/src/agent/paddock-agent"))
UID_REGISTRY = "/run/paddock/uids"
UID_BASE = 1000000000
DEFAULT_TIMEOUT = 60


def keep():
    """PADDOCK_TEST_KEEP set: leave state dirs and logs behind."""
    return bool(os.environ.get("PADDOCK_TEST_KEEP"))


def instance_of(state_dir):
    """The instance id paddock derives from a state dir (src/lib/state.c):
    FNV-1a 64 of the real path, folded to 32 bits, as 8 hex digits."""
    h = 0xcbf29ce484222325
    for b in os.path.realpath(state_dir).encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return "%08x" % ((h ^ (h >> 32)) & 0xffffffff)


def child_env(extra=None):
    """The environment paddock runs with: our agent, no inherited state dir."""
    env = dict(os.environ)
    env["PADDOCK_AGENT"] = PADDOCK_AGENT
    env.pop("PADDOCK_STATE_DIR", None)
    if extra:
        env.update(extra)
    return env


def runtime_dir(state_dir, runtime_root=None):
    """Where the product keeps a state dir's live sandboxes (src/lib/state.c):
    $PADDOCK_RUNTIME_DIR/<instance>, else /run/paddock/<instance> (tmpfs), else
    /dev/shm/paddock/<instance>. runtime_root: the PADDOCK_RUNTIME_DIR that
    paddock was given (a server's), when not this process's own."""
    inst = instance_of(state_dir)
    root = runtime_root or os.environ.get("PADDOCK_RUNTIME_DIR")
    if root:
        return os.path.join(root, inst)
    for base in ("/run/paddock", "/dev/shm/paddock"):
        if os.path.isdir(os.path.join(base, inst)):
            return os.path.join(base, inst)
    return os.path.join("/run/paddock", inst)


def sandbox_dirs(state_dir, runtime_root=None):
    """Every sandbox directory a state dir has: <state>/sandboxes/* (DESIGN)
    and <runtime dir>/sandboxes/* (where the live parts are kept)."""
    out = []
    for base in (state_dir, runtime_dir(state_dir, runtime_root)):
        d = os.path.join(base, "sandboxes")
        if os.path.isdir(d):
            out += [os.path.join(d, n) for n in os.listdir(d)]
    return sorted(out)


# The lock each teardown `paddock run` leaves running after it reported the
# command's exit holds (shared) until it is done (src/lib/teardown.h).
TEARDOWN_LOCK = "teardown.lock"


def wait_teardowns(state_dir, timeout=DEFAULT_TIMEOUT):
    """Block until no teardown of state_dir is in flight: an exclusive flock
    on its teardown lock (what `paddock gc --wait` does), the completion
    event; a teardown that holds it past timeout fails the test."""
    path = os.path.join(state_dir, TEARDOWN_LOCK)
    if not os.path.exists(path):
        return
    # util-linux flock(1): a deadline without SIGALRM (any thread may call us)
    r = subprocess.run(["flock", "-x", "-w", str(timeout), path, "true"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    assert r.returncode == 0, "a teardown of %s held %s for over %ss (flock: %s)" % (
        state_dir, TEARDOWN_LOCK, timeout, r.stderr.strip())


def leftovers(state_dir, runtime_root=None):
    """Everything a state dir's instance still holds on the host, besides the
    state dir's own skeleton and the (empty) per-instance cgroup parents:
    sandbox directories, cgroups, uid ranges in the host-wide registry.
    Teardowns still in flight are waited for first (wait_teardowns)."""
    wait_teardowns(state_dir)
    inst = instance_of(state_dir)
    out = {}
    left = sandbox_dirs(state_dir, runtime_root)
    if left:
        out["sandboxes"] = left
    cgs = []
    for parent in glob.glob("/sys/fs/cgroup/*/paddock-%s" % inst):
        for root, dirs, _files in os.walk(parent):
            cgs.extend(os.path.join(root, d) for d in dirs)
    if cgs:
        out["cgroups"] = sorted(cgs)
    uids = []
    if os.path.isdir(UID_REGISTRY):
        for name in os.listdir(UID_REGISTRY):
            try:
                with open(os.path.join(UID_REGISTRY, name)) as f:
                    owner = f.read()
            except OSError:
                continue
            if owner.startswith(inst + ":"):
                uids.append("%s=%s" % (name, owner))
    if uids:
        out["uid_ranges"] = sorted(uids)
    return out


def new_leftovers(state_dir, baseline, runtime_root=None):
    """What leftovers() holds now that was not in baseline (taken before)."""
    out = {}
    for k, v in leftovers(state_dir, runtime_root).items():
        extra = [x for x in v if x not in baseline.get(k, [])]
        if extra:
            out[k] = extra
    return out


def remove_cgroup_parents(state_dir):
    """rmdir the instance's (empty) per-controller cgroup parents."""
    for parent in glob.glob("/sys/fs/cgroup/*/paddock-%s" % instance_of(state_dir)):
        try:
            os.rmdir(parent)
        except OSError:
            pass


def free_port():
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid):
    """The process exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def procs_with(marker):
    """Pids of the processes whose command line contains marker (a str)."""
    out = []
    for f in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(f, "rb") as fh:
                if marker.encode() in fh.read():
                    out.append(int(f.split("/")[2]))
        except (OSError, ValueError):
            pass
    return out


def wait_until(pred, limit=30, step=0.1):
    """Poll pred until it returns something true (returned) or limit seconds
    pass (None). Only for state that gives no event to wait on from outside
    the product (a server's reaper, its pool filler)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def kill_by_cmdline(needle):
    """SIGKILL every process (but us) whose command line contains needle
    (bytes, NULs between arguments): for our own children that a test must
    end by pid, found by what they were started with."""
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if needle in f.read():
                    os.kill(int(d), signal.SIGKILL)
        except OSError:
            pass
