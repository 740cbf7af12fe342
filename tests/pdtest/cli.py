"""The CLI runner: `paddock run` (and other verbs) against one state dir."""
import json
import subprocess

from .env import DEFAULT_TIMEOUT, PADDOCK_AGENT, PADDOCK_BIN, child_env, instance_of, leftovers, new_leftovers


def parse_json_result(stderr):
    """The --json result: one JSON object on the last line of stderr."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", "replace")
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert lines, "no --json line on stderr"
    return json.loads(lines[-1])


# The network namespace paddock runs in, when a test stands a namespace of
# its own in for the host (tests/network/_fakenet.py, user-mode uplinks: the
# uplink process's sockets must meet the fake internet, never the real
# one). Empty: the test's own namespace. Changed in place (NETNS[:] = ...).
NETNS = []
# Or a whole argv prefix (nsenter into several namespaces), when set.
WRAP = []


def netns_prefix():
    """The argv prefix that runs paddock where NETNS/WRAP say (none: [])."""
    if WRAP:
        return list(WRAP)
    return ["nsenter", "--net=" + NETNS[0]] if NETNS else []


class Paddock:
    """Runs paddock against one state directory (in NETNS/WRAP when set)."""

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
        return new_leftovers(self.state, baseline)
