"""`paddock run`: exit statuses, streams, stdin, env, users, tty, --json,
bad input, templates and volumes (DESIGN §4, §8)."""
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time

import pytest

from pdtest import parse_json_result, child_env


# --- output and exit status -------------------------------------------------

def test_echo(paddock):
    r = paddock.run(["--", "echo", "hello", "world"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello world\n"
    assert r.stderr == ""


@pytest.mark.parametrize("code", [0, 3, 255])
def test_exit_code(paddock, code):
    r = paddock.run(["--json", "--", "bash", "-c", "echo before; exit %d" % code])
    assert r.returncode == code, r.stderr
    assert r.stdout == "before\n"
    j = parse_json_result(r.stderr)
    assert j["status"] == code and j["exit_code"] == code
    assert j["reason"] == "exit" and j["signal"] == 0


def test_killed_by_sigterm(paddock):
    r = paddock.run(["--json", "--", "bash", "-c", "echo up; kill -TERM $$; echo not-reached"])
    assert r.returncode == 143, r.stderr
    assert r.stdout == "up\n"
    j = parse_json_result(r.stderr)
    assert j["status"] == 143 and j["reason"] == "signal" and j["signal"] == 15


def test_killed_by_sigkill(paddock):
    r = paddock.run(["--json", "--", "bash", "-c", "echo up; kill -KILL $$; echo not-reached"])
    assert r.returncode == 137, r.stderr
    assert r.stdout == "up\n"
    j = parse_json_result(r.stderr)
    assert j["status"] == 137 and j["reason"] == "signal" and j["signal"] == 9
    assert j["oom_kills"] == 0


def test_command_not_found(paddock):
    before = paddock.leftovers()
    r = paddock.run(["--json", "--", "no-such-command-xyz"])
    assert r.returncode == 127
    assert "paddock:" in r.stderr and "no-such-command-xyz" in r.stderr
    j = parse_json_result(r.stderr)
    assert j["status"] == 127 and j["reason"] == "not-found"
    assert paddock.new_leftovers(before) == {}


def test_not_executable(paddock):
    r = paddock.run(["--json", "--", "/etc/passwd"])
    assert r.returncode == 126
    assert "paddock:" in r.stderr and "/etc/passwd" in r.stderr
    j = parse_json_result(r.stderr)
    assert j["status"] == 126 and j["reason"] == "cannot-execute"


def test_timeout(paddock):
    before = paddock.leftovers()
    t0 = time.monotonic()
    r = paddock.run(["--json", "--timeout", "1", "--", "sleep", "100"], timeout=60)
    elapsed = time.monotonic() - t0
    assert r.returncode == 124, r.stderr
    assert elapsed < 20
    assert "timeout" in r.stderr.splitlines()[0]
    j = parse_json_result(r.stderr)
    assert j["status"] == 124 and j["reason"] == "timeout"
    assert j["wall_ms"] >= 900
    assert paddock.new_leftovers(before) == {}


def test_stdout_stderr_separated_and_ordered(paddock):
    r = paddock.sh('for i in $(seq 5000); do echo out$i; echo err$i >&2; done')
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.splitlines() == ["out%d" % i for i in range(1, 5001)]
    assert r.stderr.splitlines() == ["err%d" % i for i in range(1, 5001)]


def test_large_output_complete(paddock):
    n = 50_000_000
    p = paddock.popen(["--", "bash", "-c", "head -c %d /dev/zero | tr '\\0' 'a'" % n])
    total, bad = 0, 0
    try:
        while True:
            chunk = p.stdout.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
            bad += len(chunk) - chunk.count(b"a")
        err = p.stderr.read()
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 0, err
    assert total == n
    assert bad == 0
    assert err == b""


def test_stdin_small(paddock):
    r = paddock.run(["--", "cat"], input="abc\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "abc\n"


def test_stdin_from_shell_pipe(paddock):
    cmd = "printf 'abc\\n' | %s" % " ".join(shlex.quote(a) for a in paddock.argv(["--", "cat"]))
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60, env=child_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout == "abc\n"


def test_stdin_10mb_sha256(paddock):
    data = os.urandom(10 * 1024 * 1024)
    r = paddock.run(["--", "sha256sum"], input=data, text=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split()[0] == hashlib.sha256(data).hexdigest()


def test_output_streams_while_stdin_is_open(paddock):
    """Output must reach the caller as it is produced, even while stdin stays
    open and idle (an interactive caller waits for a prompt before typing)."""
    import select
    for attempt in range(8):
        p = paddock.popen(["--", "bash", "-c", "echo prompt; read answer; echo got=$answer"],
                          stdin=subprocess.PIPE)
        try:
            ready, _, _ = select.select([p.stdout], [], [], 10)
            first = p.stdout.readline() if ready else b""
            out, err = p.communicate(b"yes\n", timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert first == b"prompt\n", "attempt %d: the prompt was held back until stdin got data" % attempt
        assert out == b"got=yes\n" and p.returncode == 0, (out, err)


def test_stdin_devnull_gives_eof(paddock):
    r = paddock.run(["--", "bash", "-c", "cat; echo done"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"


# --- environment, cwd, user ---------------------------------------------------

def test_env_var(paddock):
    r = paddock.run(["-e", "FOO=bar", "--", "bash", "-c", 'echo "FOO=$FOO"'])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "FOO=bar\n"


def test_env_defaults(paddock):
    r = paddock.run(["--", "bash", "-c", 'echo "$HOME|$USER|$PATH"; pwd'])
    assert r.returncode == 0, r.stderr
    home, user, path = r.stdout.splitlines()[0].split("|")
    assert home == "/home/user"
    assert user == "user"
    assert "/usr/bin" in path.split(":") and "/bin" in path.split(":")
    assert r.stdout.splitlines()[1] == "/home/user"


def test_env_does_not_leak_host(paddock):
    r = paddock.run(["--", "bash", "-c", 'echo "[$PADDOCK_AGENT][$SECRET_HOST_VAR]"'],
                    env={"SECRET_HOST_VAR": "s3cret"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[][]\n"


def test_env_passthrough_key_only(paddock):
    r = paddock.run(["-e", "PASSME", "--", "bash", "-c", 'echo "$PASSME"'], env={"PASSME": "from-host"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "from-host\n"


def test_workdir(paddock):
    r = paddock.run(["-w", "/tmp", "--", "pwd"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "/tmp\n"


def test_root_user(paddock):
    r = paddock.run(["-u", "root", "--", "bash", "-c", 'id -u; id -un; echo $HOME'])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["0", "root", "/root"]


def test_default_user(paddock):
    r = paddock.run(["--", "id"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("uid=1000(user) gid=1000(user)")


# --- terminal -------------------------------------------------------------------

def _script(cmd, timeout=60):
    """Run a shell command under util-linux `script`, which gives it a pty."""
    return subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), stdin=subprocess.DEVNULL)


def test_tty(paddock):
    cmd = " ".join(shlex.quote(a) for a in paddock.argv(["-t", "--", "tty"]))
    r = _script(cmd)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "/dev/pts/0" in r.stdout


def test_tty_size(paddock):
    cmd = "stty rows 37 cols 101; " + " ".join(shlex.quote(a) for a in paddock.argv(["-t", "--", "stty", "size"]))
    r = _script(cmd)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "37 101" in r.stdout


def test_tty_exit_code(paddock):
    cmd = "stty rows 24 cols 80; " + " ".join(shlex.quote(a) for a in paddock.argv(["-t", "--", "bash", "-c", "exit 7"]))
    r = _script(cmd)
    assert r.returncode == 7, r.stdout + r.stderr


def test_tty_without_terminal_refused(paddock):
    r = paddock.run(["-t", "--", "tty"])
    assert r.returncode == 125
    assert r.stderr.startswith("paddock:")


# --- --json -----------------------------------------------------------------------

def test_json_fields(paddock):
    r = paddock.run(["--json", "--", "bash", "-c", "echo hi"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hi\n"
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    j = parse_json_result(r.stderr)
    types = {"status": int, "reason": str, "exit_code": int, "signal": int, "wall_ms": (int, float),
             "peak_memory_bytes": int, "cpu_ms": (int, float), "oom_kills": int, "pids_limit_hits": int,
             "sandbox": str}
    for k, t in types.items():
        assert k in j, k
        assert isinstance(j[k], t) and not isinstance(j[k], bool), (k, j[k])
    assert j["status"] == 0 and j["reason"] == "exit" and j["exit_code"] == 0 and j["signal"] == 0
    assert j["wall_ms"] > 0
    assert j["peak_memory_bytes"] > 0
    assert j["cpu_ms"] >= 0
    assert j["oom_kills"] == 0 and j["pids_limit_hits"] == 0
    assert j["sandbox"] and j["sandbox"].isalnum()


def test_no_json_without_flag(paddock):
    r = paddock.run(["--", "bash", "-c", "exit 2"])
    assert r.returncode == 2
    assert r.stderr == ""


# --- bad input: 125, a reason, and nothing left behind ------------------------------

def _symlink_to_root():
    d = tempfile.mkdtemp(prefix="pd-tpl-")
    link = os.path.join(d, "root-link")
    os.symlink("/", link)
    return d, link


BAD = {
    "unknown-flag": ["--no-such-flag", "--", "true"],
    "memory-unit": ["--memory", "12Q", "--", "true"],
    "memory-missing-value": ["--memory"],
    "pids-zero": ["--pids", "0", "--", "true"],
    "cpus-negative": ["--cpus", "-1", "--", "true"],
    "template-unknown": ["--template", "nosuchname", "--", "true"],
    "template-host-root": ["--template", "/", "--", "true"],
    "template-symlink-root": ["--template", "@SYMLINK@", "--", "true"],
    "isolation-unknown": ["--isolation", "vm", "--", "true"],
    "microvm-template-dir": ["--isolation", "microvm", "--template", "/", "--", "true"],
    "net-host": ["--net", "host", "--", "true"],
    "volume-relative": ["-v", "relative:path", "--", "true"],
    "no-command": [],
    "no-command-after-dashes": ["--"],
    "user-unknown": ["-u", "nobody-here", "--", "true"],
    "workdir-relative": ["-w", "tmp", "--", "true"],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input(paddock, name):
    before = paddock.leftovers()
    args = list(BAD[name])
    tmpd = None
    if "@SYMLINK@" in args:
        tmpd, link = _symlink_to_root()
        args[args.index("@SYMLINK@")] = link
    try:
        r = paddock.run(args)
    finally:
        if tmpd:
            shutil.rmtree(tmpd)
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert lines and lines[0].startswith("paddock: "), r.stderr
    assert len(lines[0]) > len("paddock: ") + 5
    assert r.stdout == ""
    assert paddock.new_leftovers(before) == {}


def test_bad_input_messages_are_specific(paddock):
    r = paddock.run(["--isolation", "vm", "--", "true"])
    assert r.returncode == 125
    assert "'vm'" in r.stderr and "microvm" in r.stderr
    r = paddock.run(["--net", "host", "--", "true"])
    assert r.returncode == 125 and "host" in r.stderr
    r = paddock.run(["--template", "/", "--", "true"])
    assert r.returncode == 125 and "root" in r.stderr
    r = paddock.run(["--memory", "12Q", "--", "true"])
    assert r.returncode == 125 and "--memory" in r.stderr


# --- custom template ------------------------------------------------------------------

def _ldd_paths(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    paths = []
    for line in out.splitlines():
        for tok in line.split():
            if tok.startswith("/"):
                paths.append(tok)
    return paths


@pytest.fixture(scope="module")
def dash_rootfs():
    root = tempfile.mkdtemp(prefix="pd-rootfs-")
    os.chmod(root, 0o755)
    for d in ("bin", "tmp", "etc"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    shutil.copy2("/bin/dash", os.path.join(root, "bin/sh"))
    for lib in _ldd_paths("/bin/dash"):
        real = os.path.realpath(lib)
        dest = os.path.join(root, lib.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if not os.path.exists(dest):
            shutil.copy2(real, dest)
    with open(os.path.join(root, "etc/marker"), "w") as f:
        f.write("custom-template\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_template_dir(paddock, dash_rootfs):
    before = paddock.leftovers()
    r = paddock.run(["--template", dash_rootfs, "-w", "/", "--",
                     "/bin/sh", "-c", 'read m < /etc/marker; echo "$m $((6*7))"; '
                                      'if [ -e /usr/bin/python3 ]; then echo host-usr; fi'])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "custom-template 42\n"
    assert paddock.new_leftovers(before) == {}


def test_template_dir_writes_stay_in_sandbox(paddock, dash_rootfs):
    r = paddock.run(["--template", dash_rootfs, "-u", "root", "-w", "/", "--",
                     "/bin/sh", "-c", 'echo x > /etc/new-file && echo ok'])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    assert not os.path.exists(os.path.join(dash_rootfs, "etc/new-file"))


# --- volumes ----------------------------------------------------------------------

@pytest.fixture
def hostdir():
    d = tempfile.mkdtemp(prefix="pd-vol-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_volume_read_write(paddock, hostdir):
    with open(os.path.join(hostdir, "from-host"), "w") as f:
        f.write("hello from host\n")
    os.chown(hostdir, 1000, 1000)
    r = paddock.run(["-v", "%s:/data" % hostdir, "--", "bash", "-c",
                     "cat /data/from-host && echo inside > /data/from-sandbox && echo written"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello from host\nwritten\n"
    p = os.path.join(hostdir, "from-sandbox")
    with open(p) as f:
        assert f.read() == "inside\n"
    st = os.stat(p)
    assert (st.st_uid, st.st_gid) == (1000, 1000)


def test_volume_readonly(paddock, hostdir):
    with open(os.path.join(hostdir, "f"), "w") as f:
        f.write("ro\n")
    os.chown(hostdir, 1000, 1000)
    r = paddock.run(["-v", "%s:/data:ro" % hostdir, "--", "python3", "-c",
                     "import errno\n"
                     "print(open('/data/f').read(), end='')\n"
                     "try:\n"
                     "    open('/data/new', 'w')\n"
                     "    print('WROTE')\n"
                     "except OSError as e:\n"
                     "    print(errno.errorcode[e.errno])\n"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ro\nEROFS\n"
    assert sorted(os.listdir(hostdir)) == ["f"]


def test_volume_ownership(paddock, hostdir):
    """`user` is the volume's owner (here host uid 1000); host root's files
    are nobody's inside (docs/security.md, Volumes; tests/security/test_volumes.py)."""
    os.chown(hostdir, 1000, 1000)
    for name, uid in (("user-file", 1000), ("root-file", 0)):
        p = os.path.join(hostdir, name)
        with open(p, "w") as f:
            f.write(name)
        os.chown(p, uid, uid)
    r = paddock.run(["-v", "%s:/data" % hostdir, "--", "stat", "-c", "%n %U %G",
                     "/data/user-file", "/data/root-file"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["/data/user-file user user", "/data/root-file nobody nogroup"]
    # user may write its own file, not root's
    r = paddock.run(["-v", "%s:/data" % hostdir, "--", "bash", "-c",
                     "echo a >> /data/user-file && echo ok1; echo b >> /data/root-file || echo denied"])
    assert r.stdout.splitlines() == ["ok1", "denied"], r.stderr
    with open(os.path.join(hostdir, "root-file")) as f:
        assert f.read() == "root-file"


def test_volume_missing_source(paddock):
    before = paddock.leftovers()
    r = paddock.run(["-v", "/nonexistent-pd-%d:/data" % os.getpid(), "--", "true"])
    assert r.returncode == 125
    assert r.stderr.startswith("paddock:")
    assert paddock.new_leftovers(before) == {}


def test_many_inherited_fds_never_reach_the_sandbox(paddock):
    """paddock run started by a process holding ~300 fds without CLOEXEC
    (a server, a test harness): the run works and the command sees only
    0, 1, 2 (regression: fd numbers around 64 broke the agent's fd layout).
    test_process_tier.py has the same check for the process tier."""
    held = []
    try:
        for _ in range(150):
            r, w = os.pipe()
            os.set_inheritable(r, True)
            os.set_inheritable(w, True)
            held += [r, w]
        cmd = paddock.argv(["--", "python3", "-c",
                            "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))"])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=child_env(),
                           close_fds=False)
    finally:
        for fd in held:
            os.close(fd)
    assert r.returncode == 0, r.stderr
    # python's listdir opens one more fd (3) for the directory itself
    assert r.stdout.strip() == "[0, 1, 2, 3]", r.stdout
