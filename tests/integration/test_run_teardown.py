"""`paddock run` reports the command's result before the sandbox's teardown
(issue 19, target 1): the teardown goes on in a child of paddock that holds
<state>/teardown.lock; `paddock gc --wait` (and pdtest.wait_teardowns) is
the event that says it is done, and after it nothing is left."""
import fcntl
import json
import os
import subprocess
import sys

from pdtest import PADDOCK_BIN, child_env, parse_json_result, wait_teardowns, wait_until

# A subreaper runs paddock: what paddock leaves running when it exits is
# reparented to it, so the test can see it (and reaps it). Prints one JSON
# line: paddock's exit status and stderr, and how many processes it left.
SUBREAPER = r"""
import ctypes, json, os, subprocess, sys
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out, err = p.communicate(timeout=60)
left = set()
for tid in os.listdir("/proc/self/task"):
    with open("/proc/self/task/%s/children" % tid) as f:
        left.update(int(x) for x in f.read().split())
for pid in left:                        # they are ours to reap now
    os.waitpid(pid, 0)
print(json.dumps({"rc": p.returncode, "out": out.decode(), "err": err.decode(), "left": len(left)}))
"""


def _run_as_subreaper(p, args, env=None):
    r = subprocess.run([sys.executable, "-c", SUBREAPER, PADDOCK_BIN, "run", "--state-dir", p.state] + args,
                       capture_output=True, text=True, timeout=120, env=child_env(env))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_result_comes_before_the_teardown(fresh_paddock):
    p = fresh_paddock
    res = _run_as_subreaper(p, ["--json", "--", "sh", "-c", "echo hi; sleep 1000 &"])
    assert res["rc"] == 0, res["err"]
    assert res["out"] == "hi\n"
    assert parse_json_result(res["err"])["exit_code"] == 0
    # paddock exited with its teardown (and the sandbox's PID 1) still to
    # reap: both were handed to the subreaper, which waited for them
    assert res["left"] >= 1, res
    wait_teardowns(p.state)
    assert p.leftovers() == {}
    assert not os.path.exists(os.path.join(p.state, "teardown.log"))


def test_sync_teardown_leaves_nothing_running(fresh_paddock):
    p = fresh_paddock
    res = _run_as_subreaper(p, ["--", "true"], env={"PADDOCK_TEARDOWN": "sync"})
    assert res["rc"] == 0, res["err"]
    assert res["left"] == 0, res
    assert p.leftovers() == {}


def test_output_reader_does_not_wait_for_the_teardown(fresh_paddock):
    """stdout and stderr reach EOF when paddock exits: the teardown child
    holds neither (a caller reading them to the end would wait for it)."""
    p = fresh_paddock
    r = p.run(["--", "sh", "-c", "echo out; echo err >&2"])
    assert r.returncode == 0
    assert r.stdout == "out\n" and r.stderr == "err\n"
    assert p.leftovers() == {}


def _blocked_on(pid):
    """pid waits for a flock (a `->` line of /proc/locks names it)."""
    with open("/proc/locks") as f:
        return any("->" in l and l.split()[l.split().index("->") + 4] == str(pid) for l in f)


def test_gc_wait_waits_for_a_teardown_in_flight(fresh_paddock):
    p = fresh_paddock
    assert p.run(["--", "true"]).returncode == 0
    # stand in for a teardown in flight: its shared lock
    fd = os.open(os.path.join(p.state, "teardown.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        g = subprocess.Popen([PADDOCK_BIN, "gc", "--wait", "--state-dir", p.state], env=child_env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # gc queued on the lock (the kernel's lock table says so; the
            # product gives no event of its own for "I am waiting")
            assert wait_until(lambda: _blocked_on(g.pid) or g.poll() is not None, limit=60, step=0.01)
            assert g.poll() is None, "gc --wait returned while a teardown held the lock: %r" % (g.communicate(),)
            fcntl.flock(fd, fcntl.LOCK_UN)
            out, err = g.communicate(timeout=60)
        finally:
            if g.poll() is None:
                g.kill()
                g.wait()
    finally:
        os.close(fd)
    assert g.returncode == 0, err
    assert out == "" and err == ""
    assert p.leftovers() == {}


def test_bad_input_is_refused(fresh_paddock):
    p = fresh_paddock
    r = p.run(["--json", "--wait"], verb="gc")
    assert r.returncode != 0
    assert "--wait" in r.stderr and "--json" in r.stderr
    r = p.run(["--", "true"], env={"PADDOCK_TEARDOWN": "later"})
    assert r.returncode != 0
    assert "PADDOCK_TEARDOWN='later': expected sync or async" in r.stderr
    assert p.leftovers() == {}
