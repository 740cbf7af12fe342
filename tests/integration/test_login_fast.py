"""The agent's login fast path (src/agent/login_fast.c, docs/templates.md
"The login fast path"): `/bin/bash -l -c CMD` (every E2B command, every
string `cmd`) runs CMD without starting bash when CMD is a plain simple
command and the login files are the base template's. What the program sees
must be what real bash gives it: each command of the corpus runs both as
`/bin/bash -l -c CMD` (the fast path's form) and as `/bin/bash --login -c
CMD` (the same to bash, never taken by the fast path), in the same sandbox,
and the answers must be equal: output, exit status, the environment in its
order, argv, cwd, ids, signal dispositions.

    /usr/bin/python3 -m pytest -q tests/integration/test_login_fast.py

Needs root (paddock serve's container tier) and a build."""
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from pdtest.server import Server

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

CORPUS = [
    "env",
    "/usr/bin/env",
    "echo hi",
    "  echo a=b c,d x:y  ",
    "true",
    "false",
    "printenv PATH",
    "cat /proc/self/cmdline",
    "/usr/bin/cat /proc/self/cmdline",
    "readlink /proc/self/cwd",
    "grep -E ^Sig(Blk|Ign|Cgt) /proc/self/status",
    "grep Sig /proc/self/status",
    "id",
    "ls /nonexistent",
    "no-such-command-here",
    "/no/such/path",
    "pwd",
    "echo -n hi",
    "true --version",
    "echo $HOME",
    "echo ~",
    "env | sort",
    "FOO=1 env",
    "python3 -c print(1)",
    "sh -c exit",
    "kill -l",
    "/tmp",
    "uname -a",
]

VARIANTS = [
    {},
    {"user": "root"},
    {"cwd": "/tmp"},
    {"env": {"FOO": "bar", "SHLVL": "3", "A_B": "x y"}},
    {"env": {"PWD": "/home/user"}},
    {"env": {"PWD": "/tmp"}},
    {"env": {"BASH_ENV": "/dev/null"}},
    {"env": {"OLDPWD": "/"}},
    {"env": {"LC_ALL": "C.UTF-8", "LANG": "xx_YY.UTF-8"}},
    {"env": {"LC_ALL": "xx_YY.UTF-8"}},
    # the order of bash's table over many names (none in one bucket with another)
    {"env": {"VAR_%d" % i: "v%d" % i for i in range(40)}},
    # two names in one bucket of bash's table: real bash
    {"env": {"C48": "a", "C264": "b"}},
]


@pytest.fixture(scope="module")
def sandbox():
    srv = Server(None, "--pool", "0", prefix="pd-loginfast-")
    try:
        srv.start()
        sid = srv.create()["id"]
        yield srv, sid
        srv.delete(sid)
    finally:
        srv.finish(check=False)


def both(srv, sid, cmd, **body):
    fast = srv.exec(sid, ["/bin/bash", "-l", "-c", cmd], **body)
    real = srv.exec(sid, ["/bin/bash", "--login", "-c", cmd], **body)
    strip = lambda j: {k: j.get(k) for k in ("exit_code", "signal", "stdout", "stderr")}
    return strip(fast), strip(real)


@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_fast_path_matches_bash(sandbox, variant):
    srv, sid = sandbox
    for cmd in CORPUS:
        fast, real = both(srv, sid, cmd, **VARIANTS[variant])
        assert fast == real, (cmd, VARIANTS[variant])


def _strace_execs(srv, sid, cmd):
    """The execve calls the agent's children make while cmd runs."""
    out = tempfile.mktemp(prefix="pd-loginfast-strace-")
    st = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=execve", "-o", out, "-p",
                           str(srv.agent_pid(sid))], stderr=subprocess.PIPE, text=True)
    try:
        # strace is attached once it has written nothing but the attach line
        # to stderr... -qq silences it, so wait for the tracee's status
        for _ in range(2000):
            with open("/proc/%d/status" % srv.agent_pid(sid)) as f:
                if any(l.startswith("TracerPid:") and l.split()[1] != "0" for l in f):
                    break
            st.poll()
            assert st.returncode is None, st.stderr.read()
            os.sched_yield()
        else:
            pytest.fail("strace did not attach")
        j = srv.exec(sid, ["/bin/bash", "-l", "-c", cmd])
    finally:
        st.send_signal(signal.SIGINT)
        st.wait(timeout=30)
    with open(out) as f:
        text = f.read()
    os.unlink(out)
    return j, [l for l in text.splitlines() if "execve(" in l]


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace (Debian package strace)")
def test_fast_path_skips_bash_and_falls_back(sandbox):
    srv, sid = sandbox
    j, execs = _strace_execs(srv, sid, "echo hi")
    assert j["stdout"] == "hi\n" and j["exit_code"] == 0
    assert any('execve("/usr/bin/echo", ["echo", "hi"]' in l for l in execs), execs
    assert not any('"/bin/bash"' in l for l in execs), execs
    # anything with shell syntax: real bash
    j, execs = _strace_execs(srv, sid, "echo $HOME")
    assert j["stdout"] == "/home/user\n"
    assert any('execve("/bin/bash"' in l for l in execs), execs


def test_profile_edit_counts_at_once(sandbox):
    srv, sid = sandbox
    cmd = ["/bin/bash", "-l", "-c", "printenv FOO"]
    assert srv.exec(sid, cmd)["exit_code"] == 1
    try:
        j = srv.exec(sid, ["/bin/sh", "-c", "echo 'export FOO=from-profile' > ~/.profile"])
        assert j["exit_code"] == 0, j
        j = srv.exec(sid, cmd)
        assert (j["exit_code"], j["stdout"]) == (0, "from-profile\n"), j
        # /etc/profile.d too, and /etc/profile itself (as root)
        srv.exec(sid, ["/bin/rm", "-f", "/home/user/.profile"])
        assert srv.exec(sid, cmd)["exit_code"] == 1
        j = srv.exec(sid, ["/bin/sh", "-c", "echo 'export FOO=from-profile.d' > /etc/profile.d/x.sh"],
                     user="root")
        assert j["exit_code"] == 0, j
        assert srv.exec(sid, cmd)["stdout"] == "from-profile.d\n"
        srv.exec(sid, ["/bin/rm", "-f", "/etc/profile.d/x.sh"], user="root")
        assert srv.exec(sid, cmd)["exit_code"] == 1
        j = srv.exec(sid, ["/bin/sh", "-c", "echo 'export FOO=etc-profile' >> /etc/profile"], user="root")
        assert j["exit_code"] == 0, j
        assert srv.exec(sid, cmd)["stdout"] == "etc-profile\n"
    finally:
        srv.exec(sid, ["/bin/rm", "-f", "/home/user/.profile", "/etc/profile.d/x.sh"], user="root")
