"""Shared fixtures for paddock's integration and security tests.

    /usr/bin/python3 -m pytest -q tests/integration tests/security

Environment:
  PADDOCK_BIN         the paddock binary (default build/src/paddock)
  PADDOCK_AGENT       the agent binary (default build/src/agent/paddock-agent)
  PADDOCK_TEST_STATE  the state directory for this session (default: a new
                      temporary directory under /tmp). Never /var/lib/paddock.

Every test that runs paddock passes --state-dir; at the end of the session
`paddock gc` runs on that state dir and must find nothing left to remove.
"""
import glob
import json
import os
import shutil
import subprocess
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PADDOCK_BIN = os.path.abspath(os.environ.get("PADDOCK_BIN") or os.path.join(REPO, "build/src/paddock"))
PADDOCK_AGENT = os.path.abspath(os.environ.get("PADDOCK_AGENT")
                                or os.path.join(REPO, "build/src/agent/paddock-agent"))
UID_REGISTRY = "/run/paddock/uids"
UID_BASE = 1000000000
DEFAULT_TIMEOUT = 60


def instance_of(state_dir):
    """The instance id paddock derives from a state dir (src/lib/state.c):
    FNV-1a 64 of the real path, folded to 32 bits, as 8 hex digits."""
    h = 0xcbf29ce484222325
    for b in os.path.realpath(state_dir).encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return "%08x" % ((h ^ (h >> 32)) & 0xffffffff)


def child_env(extra=None):
    env = dict(os.environ)
    env["PADDOCK_AGENT"] = PADDOCK_AGENT
    env.pop("PADDOCK_STATE_DIR", None)
    if extra:
        env.update(extra)
    return env


def parse_json_result(stderr):
    """The --json result: one JSON object on the last line of stderr."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", "replace")
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert lines, "no --json line on stderr"
    return json.loads(lines[-1])


def runtime_dir(state_dir):
    """Where the product keeps a state dir's live sandboxes (src/lib/state.c):
    $PADDOCK_RUNTIME_DIR/<instance>, else /run/paddock/<instance> (tmpfs), else
    /dev/shm/paddock/<instance>."""
    inst = instance_of(state_dir)
    env = os.environ.get("PADDOCK_RUNTIME_DIR")
    if env:
        return os.path.join(env, inst)
    for base in ("/run/paddock", "/dev/shm/paddock"):
        if os.path.isdir(os.path.join(base, inst)):
            return os.path.join(base, inst)
    return os.path.join("/run/paddock", inst)


def sandbox_dirs(state_dir):
    """Every sandbox directory a state dir has: <state>/sandboxes/* (DESIGN)
    and <runtime dir>/sandboxes/* (where the live parts are kept)."""
    out = []
    for base in (state_dir, runtime_dir(state_dir)):
        d = os.path.join(base, "sandboxes")
        if os.path.isdir(d):
            out += [os.path.join(d, n) for n in os.listdir(d)]
    return sorted(out)


def leftovers(state_dir):
    """Everything a state dir's instance still holds on the host, besides the
    state dir's own skeleton and the (empty) per-instance cgroup parents."""
    inst = instance_of(state_dir)
    out = {}
    left = sandbox_dirs(state_dir)
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


# The network namespace paddock runs in, when a test stands a namespace of
# its own in for the host (tests/network/_fakenet.py, user-mode uplinks: the
# uplink process's sockets must meet the fake internet, never the real
# one). Empty: the test's own namespace.
NETNS = []
# Or a whole argv prefix (nsenter into several namespaces), when set.
WRAP = []


def netns_prefix():
    if WRAP:
        return list(WRAP)
    return ["nsenter", "--net=" + NETNS[0]] if NETNS else []


class Paddock:
    """Runs paddock against one state directory."""

    def __init__(self, state_dir):
        self.bin = PADDOCK_BIN
        self.agent = PADDOCK_AGENT
        self.state = state_dir
        self.instance = instance_of(state_dir)

    def argv(self, args, verb="run", state=True):
        a = netns_prefix() + [self.bin, verb]
        if state:
            a += ["--state-dir", self.state]
        return a + list(args)

    def run(self, args, input=None, timeout=DEFAULT_TIMEOUT, verb="run", state=True, text=True, **kw):
        """`paddock run [--state-dir S] ARGS`; returns a CompletedProcess.
        A hang becomes a test failure (TimeoutExpired), never a hung suite."""
        if input is None and "stdin" not in kw:
            kw["stdin"] = subprocess.DEVNULL
        return subprocess.run(self.argv(args, verb, state), input=input, capture_output=True,
                              timeout=timeout, env=child_env(kw.pop("env", None)), text=text, **kw)

    def sh(self, script, *opts, **kw):
        """Run a bash script in a fresh sandbox."""
        return self.run(list(opts) + ["--", "bash", "-c", script], **kw)

    def py(self, code, *opts, **kw):
        """Run a python3 program in a fresh sandbox."""
        return self.run(list(opts) + ["--", "python3", "-c", code], **kw)

    def popen(self, args, verb="run", **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(self.argv(args, verb), env=child_env(kw.pop("env", None)), **kw)

    def gc(self, timeout=DEFAULT_TIMEOUT):
        return subprocess.run(netns_prefix() + [self.bin, "gc", "--state-dir", self.state], capture_output=True, text=True,
                              timeout=timeout, env=child_env(), stdin=subprocess.DEVNULL)

    def leftovers(self):
        return leftovers(self.state)

    def new_leftovers(self, baseline):
        """What leftovers() holds now that was not in baseline (taken before)."""
        now = self.leftovers()
        out = {}
        for k, v in now.items():
            extra = [x for x in v if x not in baseline.get(k, [])]
            if extra:
                out[k] = extra
        return out


@pytest.fixture(scope="session")
def state_root():
    """The per-session state directory (never /var/lib/paddock)."""
    env = os.environ.get("PADDOCK_TEST_STATE")
    if env:
        assert os.path.realpath(env) != "/var/lib/paddock"
        os.makedirs(env, exist_ok=True)
        path, owned = env, False
    else:
        path, owned = tempfile.mkdtemp(prefix="paddock-test-", dir="/tmp"), True
    yield path
    if owned:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def paddock(state_root):
    assert os.access(PADDOCK_BIN, os.X_OK), "PADDOCK_BIN %s is not executable (build first)" % PADDOCK_BIN
    assert os.access(PADDOCK_AGENT, os.X_OK), "PADDOCK_AGENT %s is not executable" % PADDOCK_AGENT
    p = Paddock(os.path.join(state_root, "main"))
    os.makedirs(p.state, exist_ok=True)
    yield p
    # Session end: gc must find nothing to remove, and nothing may remain.
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "removed 0 sandboxes", "gc removed leftovers: %r %r" % (r.stdout, r.stderr)
    assert p.leftovers() == {}


@pytest.fixture
def no_leak(paddock):
    """Asserts the test left nothing new behind (compared with its start, so
    one leak is reported by the test that caused it, not by every later one)."""
    before = paddock.leftovers()
    yield
    assert paddock.new_leftovers(before) == {}


@pytest.fixture
def fresh_paddock(state_root):
    """A Paddock on its own new state dir (for tests that must not share one);
    gc'd when the test ends."""
    d = tempfile.mkdtemp(prefix="st-", dir=state_root)
    p = Paddock(d)
    yield p
    p.gc()
    for parent in glob.glob("/sys/fs/cgroup/*/paddock-%s" % p.instance):
        try:
            os.rmdir(parent)
        except OSError:
            pass
