"""Shared fixtures for paddock's integration and security tests.

    /usr/bin/python3 -m pytest -q tests/integration tests/security

Environment:
  PADDOCK_BIN         the paddock binary (default build/src/paddock)
  PADDOCK_AGENT       the agent binary (default build/src/agent/paddock-agent)
  PADDOCK_TEST_STATE  the state directory for this session (default: a new
                      temporary directory under /tmp). Never /var/lib/paddock.

Every test that runs paddock passes --state-dir; at the end of the session
`paddock gc` runs on that state dir and must find nothing left to remove.
The helpers (the CLI runner, leftover checks, the server harness, the agent
protocol client) are in tests/pdtest/.
"""
import glob
import os
import shutil
import sys
import tempfile

import pytest

# tests/ on the path: the fixture module every suite imports (pdtest/).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Re-exported for suites that still take these from here.
from pdtest import (DEFAULT_TIMEOUT, PADDOCK_AGENT, PADDOCK_BIN, REPO, UID_BASE, UID_REGISTRY,  # noqa: E402,F401
                    Paddock, child_env, instance_of, leftovers, parse_json_result, runtime_dir, sandbox_dirs)


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


# ---- sanitizer reports (scripts/test.sh runs some suites on build-san/) ----
#
# In the sanitizer build every ASan/UBSan/LSan report goes to a file under
# $PADDOCK_SAN_LOG_DIR (ASAN_OPTIONS/UBSAN_OPTIONS log_path, set by
# scripts/sanitize-env.sh), whichever process wrote it: the server, netd, the
# supervisor, paddock-oci, a forked helper. A report fails the test during
# which it appeared (its call or its teardown, where a module's server is
# stopped and LSan runs at its exit), and the failure names and shows it.
SAN_LOG_DIR = os.environ.get("PADDOCK_SAN_LOG_DIR")
_san_seen = set()


def san_reports():
    """The sanitizer reports not seen before, oldest first, as (path, text).
    Each is renamed to *.reported, so scripts/san-junit.py (which fails the
    suite for reports no test claimed) does not count it twice."""
    if not SAN_LOG_DIR or not os.path.isdir(SAN_LOG_DIR):
        return []
    new = []
    for name in sorted(os.listdir(SAN_LOG_DIR)):
        path = os.path.join(SAN_LOG_DIR, name)
        if name.endswith(".reported") or path in _san_seen or not os.path.isfile(path):
            continue
        _san_seen.add(path)
        with open(path, errors="replace") as f:
            text = f.read()
        if text.strip():
            os.rename(path, path + ".reported")
            new.append((path, text))
    return new


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    found = san_reports()
    if not found:
        return
    rep = outcome.get_result()
    msg = "\n".join("sanitizer report %s:\n%s" % (p, t[-6000:]) for p, t in found)
    if rep.failed and rep.longrepr is not None:
        msg = "%s\n\n%s" % (rep.longreprtext, msg)
    rep.outcome = "failed"
    rep.longrepr = msg


# Tests that only mean something on one user-mode uplink (tests/network/
# test_uplink.py runs its module once per uplink through the `fn` fixture):
# `@pytest.mark.uplink_only("slirp4netns")` leaves the other uplinks' copies
# out of the run (deselected, not skipped: they are not checks of this host).
def pytest_configure(config):
    config.addinivalue_line("markers", "uplink_only(*kinds): run only with these user-mode uplinks")


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        m = item.get_closest_marker("uplink_only")
        cs = getattr(item, "callspec", None)
        if m and cs is not None and "fn" in cs.params and cs.params["fn"] not in m.args:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
