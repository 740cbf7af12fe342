"""The `supervised` tier (DESIGN §1, docs/security.md "`supervised` tier"):
the container tier plus a seccomp user-notification supervisor that brokers
opens and connects under the caller's credentials, audits execs, applies a
per-sandbox path/address policy and writes every decision to the audit log.

    /usr/bin/python3 -m pytest -q tests/integration/test_supervised_tier.py
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time

import pytest

from pdtest import child_env, parse_json_result, runtime_dir

SUP = ["--isolation", "supervised"]


def run_sup(paddock, script, *opts, policy=None, lang="bash", **kw):
    popts = []
    if policy is not None:
        fd, path = tempfile.mkstemp(prefix="policy-", suffix=".json", dir=paddock.state)
        with os.fdopen(fd, "w") as f:
            json.dump(policy, f)
        popts = ["--policy", path]
    cmd = ["bash", "-c", script] if lang == "bash" else ["python3", "-c", textwrap.dedent(script)]
    r = paddock.run(SUP + popts + ["--json"] + list(opts) + ["--"] + cmd, **kw)
    return r, parse_json_result(r.stderr)


def audit_lines(paddock, sandbox_id):
    path = os.path.join(paddock.state, "audit", sandbox_id + ".jsonl")
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


# --- commands work ----------------------------------------------------------

def test_commands_work(paddock, no_leak):
    r, j = run_sup(paddock, "echo hello; echo a b c | tr a-z A-Z | wc -w; python3 -c 'print(6*7)';"
                            " pip --version | cut -d' ' -f1; ls / > /dev/null && echo listed")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:5] == ["hello", "3", "42", "pip", "listed"], r.stdout


def test_redirections_and_process_substitution(paddock):
    # /dev/fd/N and /dev/stdin resolve through magic links: brokered specially.
    r, _ = run_sup(paddock, "cat <(echo from-procsub); echo via-stdin | cat /dev/stdin;"
                            " echo x > /tmp/f && cat /tmp/f && echo y >> /tmp/f && wc -l < /tmp/f;"
                            " cat /proc/self/status | grep -c '^Uid:'")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["from-procsub", "via-stdin", "x", "2", "1"], r.stdout


def test_proc_self_means_the_caller(paddock):
    # /proc/self and /proc/thread-self name the reader: brokered opens must
    # resolve them (directly, or reached through a symlink such as /proc/net
    # -> self/net, /proc/mounts -> self/mounts, /dev/fd -> /proc/self/fd) as
    # the caller's pid in its pid namespace, never the supervisor's.
    script = textwrap.dedent("""\
        cat /proc/net/dev | grep -c 'lo:'
        cat /proc/mounts | grep -c ' / '
        bash -c 'cat <(echo hi)'
        echo from-stdin | python3 -c "print(open('/dev/stdin').read().strip())"
        grep -c '^Uid:' /proc/self/status
        cat /proc/self/fd/0 <<< via-proc-self-fd
        cat /proc/thread-self/fd/0 <<< via-thread-self-fd
        (cd /proc && head -1 self/status | cut -f1 && grep -c 'lo:' net/dev)
        ln -s ../proc/self/mounts /tmp/mtab && grep -c ' / ' /tmp/mtab
        python3 -c "print(open('/proc/thread-self/status').read().count('Pid:'))"
        """)
    # (stdin is a pipe made inside: paddock's own stdin pipe belongs to a uid
    # the sandbox does not map, so reopening it fails in the container tier too)
    r, j = run_sup(paddock, script)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.split("\n")[:11] == ["1", "1", "hi", "from-stdin", "1", "via-proc-self-fd",
                                         "via-thread-self-fd", "Name:", "1", "1", "3"], (r.stdout, r.stderr)
    recs = [a for a in audit_lines(paddock, j["sandbox"]) if a["event"] == "supervisor.open"]
    # the record names the caller's own /proc/PID (its pid in the sandbox)
    for name in ("net/dev", "mounts", "status"):
        mine = [a for a in recs if a.get("path") == "/proc/%d/%s" % (a["pid"], name)]
        assert mine and all(a["decision"] == "allow" for a in mine), (name, [a for a in recs if "/proc" in
                                                                          a.get("path", "")])
    bad = [a for a in recs if a["decision"] != "allow" and
           any(n in a.get("path", a.get("requested", "")) for n in ("/net", "mounts", "/status", "/fd/", "/stdin"))]
    assert not bad, bad


def test_proc_magic_links_of_others_stay_refused(paddock):
    # Another process's fd, cwd, exe: magic links the broker does not follow.
    r, _ = run_sup(paddock, "sleep 30 & p=$!; cat /proc/$p/fd/0 >/dev/null 2>&1 && echo fd-read || echo fd-refused;"
                            " cat /proc/self/cwd/etc/hostname >/dev/null 2>&1 && echo cwd-read || echo cwd-refused;"
                            " kill $p")
    assert r.stdout.split() == ["fd-refused", "cwd-refused"], (r.stdout, r.stderr)


# --- credentials --------------------------------------------------------------

def test_user_cannot_read_root_0600_file(paddock):
    r, j = run_sup(paddock, textwrap.dedent("""\
        sudo sh -c 'echo s3cret > /tmp/rootonly; chmod 600 /tmp/rootonly'
        python3 -c '
        import errno
        try:
            open("/tmp/rootonly").read(); print("READ")
        except OSError as e:
            print("errno", errno.errorcode[e.errno])'
        sudo cat /tmp/rootonly
        """))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["errno EACCES", "s3cret"], r.stdout
    recs = [a for a in audit_lines(paddock, j["sandbox"]) if a.get("path") == "/tmp/rootonly"]
    assert any(a["uid"] == 1000 and a.get("errno") == 13 and a["decision"] == "error" for a in recs), recs
    assert any(a["uid"] == 0 and a["decision"] == "allow" for a in recs), recs


def test_shadow_root_only(paddock):
    r, _ = run_sup(paddock, "cat /etc/shadow >/dev/null 2>&1 && echo user-read || echo user-denied")
    assert r.stdout.strip() == "user-denied", (r.stdout, r.stderr)
    r, _ = run_sup(paddock, "cat /etc/shadow | head -1 | cut -d: -f1", "-u", "root")
    assert r.stdout.strip() == "root", (r.stdout, r.stderr)


def test_chrooted_caller_opens_in_its_own_root(paddock):
    # The supervisor skips the per-call check of the caller's root until some
    # process of the sandbox calls chroot (notified, then continued). After a
    # chroot made by another thread of the process (threads share their root
    # through CLONE_FS), absolute opens resolve in the new root, never in the
    # sandbox's; the audit names the file as the sandbox sees it.
    r, j = run_sup(paddock, """
        import errno, os, threading
        os.makedirs("/tmp/jail/etc", exist_ok=True)
        with open("/tmp/jail/etc/marker", "w") as f:
            f.write("in-jail")
        print(open("/etc/hostname").read() != "")
        t = threading.Thread(target=os.chroot, args=("/tmp/jail",))
        t.start(); t.join()
        print(open("/etc/marker").read())
        for p in ("/etc/passwd", "/etc/hostname"):
            try:
                open(p).read(); print("escaped", p)
            except OSError as e:
                print(errno.errorcode[e.errno])
        """, "-u", "root", lang="python")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "in-jail", "ENOENT", "ENOENT"], (r.stdout, r.stderr)
    recs = audit_lines(paddock, j["sandbox"])
    assert any(a.get("path") == "/tmp/jail/etc/marker" and a["decision"] == "allow" for a in recs), recs


def test_directory_opens_follow_glob_rules(paddock):
    # Read-only O_DIRECTORY opens (find's, by path and relative to a dirfd)
    # are opened and decided in one step: a glob rule (left to the
    # supervisor: no mount can express it) still refuses them, and every one
    # is in the audit with its resolved path.
    policy = {"paths": [{"glob": "/usr/*/doc", "access": "deny"},
                        {"glob": "/usr/*/misc", "access": "ro"}]}
    r, j = run_sup(paddock, """
        import errno, os
        def try_open(path, dirfd=None):
            try:
                os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dirfd))
                return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        top = os.open("/usr/share", os.O_RDONLY | os.O_DIRECTORY)
        print(try_open("/usr/share/doc"), try_open("doc", top), try_open("/usr/share/dict"),
              try_open("dict", top), try_open("/usr/share/misc"), try_open("/usr/share/../share/doc"))
        print(try_open("/etc/hostname"), try_open("/usr/share/no-such-dir"))
        """, policy=policy, lang="python")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["EACCES", "EACCES", "ok", "ok", "ok", "EACCES", "ENOTDIR", "ENOENT"], \
        (r.stdout, r.stderr)
    recs = [a for a in audit_lines(paddock, j["sandbox"]) if a.get("event") in ("supervisor.open", "supervisor.deny")]
    denied = [a for a in recs if a.get("path") == "/usr/share/doc"]
    assert len(denied) == 3 and all(a["decision"] == "deny" and a["event"] == "supervisor.deny" for a in denied), denied
    assert len([a for a in recs if a.get("path") == "/usr/share/dict" and a["decision"] == "allow"]) == 2, recs


# --- audit --------------------------------------------------------------------

def test_audit_records_resolved_open_and_exec(paddock):
    r, j = run_sup(paddock, "mkdir -p ~/.ssh && echo KEY > ~/.ssh/id_rsa && ln -s .ssh/id_rsa ~/link"
                            " && cat ~/link > /dev/null && /bin/true one two")
    assert r.returncode == 0, r.stderr
    recs = audit_lines(paddock, j["sandbox"])
    opens = [a for a in recs if a["event"] == "supervisor.open" and a.get("path") == "/home/user/.ssh/id_rsa"]
    # created by the redirection (O_CREAT), then read through the symlink: both
    # recorded under the resolved path
    assert len(opens) >= 2 and all(a["decision"] == "allow" and a["uid"] == 1000 for a in opens), opens
    execs = [a for a in recs if a["event"] == "supervisor.exec" and a["argv"] == ["/bin/true", "one", "two"]]
    assert execs and execs[0]["path"] == "/bin/true", [a for a in recs if a["event"] == "supervisor.exec"]
    assert all(a["sandbox"] == j["sandbox"] and a["ts"].endswith("Z") for a in recs)


# --- policy -------------------------------------------------------------------

@pytest.fixture
def hostdir():
    """A host directory for -v (world-readable files), removed after; root
    owns it, so the tests mount it :ro (a root-owned rw volume is refused)."""
    d = tempfile.mkdtemp(prefix="pd-sv-vol-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_deny_rule(paddock, hostdir):
    # A glob rule ("private/*": no mount can express it) is the supervisor's:
    # EACCES on the path and through a symlink. (The sandbox cannot put a
    # file under a deny rule itself any more: creating, renaming and linking
    # there are refused too; the file comes from a volume.)
    os.mkdir(os.path.join(hostdir, "private"))
    for name, text in (("private/x", "s\n"), ("public", "pub\n")):
        with open(os.path.join(hostdir, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(hostdir, name), 0o644)
    policy = {"paths": [{"glob": "/srv/private/*", "access": "deny"},
                        {"glob": "/etc/*.conf", "access": "ro"}]}
    r, j = run_sup(paddock, textwrap.dedent("""\
        cat /srv/private/x 2>&1 | grep -o 'Permission denied'
        ln -s /srv/private/x ~/sneaky; cat ~/sneaky 2>&1 | grep -o 'Permission denied'
        cat /srv/public
        sudo sh -c 'echo >> /etc/host.conf' 2>&1 | grep -o 'Permission denied'
        head -c0 /etc/host.conf && echo ro-read-ok
        """), "-v", "%s:/srv:ro" % hostdir, policy=policy)
    assert r.stdout.split("\n")[:5] == ["Permission denied", "Permission denied", "pub",
                                        "Permission denied", "ro-read-ok"], (r.stdout, r.stderr)
    recs = audit_lines(paddock, j["sandbox"])
    denies = [a for a in recs if a["event"] == "supervisor.deny"]
    assert {a.get("path") for a in denies} >= {"/srv/private/x", "/etc/host.conf"}, denies
    assert all(a["errno"] == 13 for a in denies)


def test_bad_policy_refused(paddock, no_leak):
    path = os.path.join(paddock.state, "bad-policy.json")
    with open(path, "w") as f:
        json.dump({"paths": [{"glob": "relative", "access": "rw"}]}, f)
    r = paddock.run(SUP + ["--policy", path, "--", "true"])
    assert r.returncode == 125
    assert "must be absolute" in r.stderr, r.stderr


def test_symlink_race_never_yields_denied_content(paddock, hostdir):
    # One thread swaps a symlink between a harmless file and a denied one
    # (and /etc/shadow); another opens it in a loop as `user`.
    # (a glob, so that the supervisor decides: a literal path would be
    # covered by a mount, which hides the content from any race anyway)
    with open(os.path.join(hostdir, "secret"), "w") as f:
        f.write("SECRET\n")
    os.chmod(os.path.join(hostdir, "secret"), 0o644)
    policy = {"paths": [{"glob": "/srv/secre?", "access": "deny"}]}
    code = """
        import os, threading
        open("/tmp/harmless", "w").write("harmless\\n")
        stop = False
        def swap():
            i = 0
            while not stop:
                i += 1
                tgt = ("/srv/secret", "/etc/shadow", "/tmp/harmless")[i % 3]
                os.symlink(tgt, "/tmp/l.new"); os.rename("/tmp/l.new", "/tmp/link")
        os.symlink("/tmp/harmless", "/tmp/link")
        t = threading.Thread(target=swap); t.start()
        ok = bad = denied = 0
        for _ in range(3000):
            try:
                with open("/tmp/link") as f:
                    data = f.read()
            except OSError:
                denied += 1
                continue
            if data == "harmless\\n":
                ok += 1
            else:
                bad += 1
        stop = True; t.join()
        print(ok, bad, denied)
    """
    r, _ = run_sup(paddock, code, "-v", "%s:/srv:ro" % hostdir, policy=policy, lang="python", timeout=120)
    assert r.returncode == 0, r.stderr
    ok, bad, denied = map(int, r.stdout.split())
    assert bad == 0 and ok > 0 and denied > 0, r.stdout


# --- connect ------------------------------------------------------------------

def test_connect_loopback_and_unix(paddock):
    code = """
        import socket, threading, os
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
        port = s.getsockname()[1]
        threading.Thread(target=lambda: s.accept()[0].sendall(b"tcp-ok"), daemon=True).start()
        c = socket.create_connection(("127.0.0.1", port)); print(c.recv(10).decode())
        u = socket.socket(socket.AF_UNIX); u.bind("/tmp/u.sock"); u.listen(1)
        threading.Thread(target=lambda: u.accept()[0].sendall(b"unix-ok"), daemon=True).start()
        os.chdir("/tmp")
        v = socket.socket(socket.AF_UNIX); v.connect("u.sock"); print(v.recv(10).decode())
        try:
            socket.create_connection(("127.0.0.1", 1), timeout=5)
        except OSError as e:
            print("refused", e.errno)
    """
    r, j = run_sup(paddock, code, lang="python")
    assert r.stdout.split("\n")[:3] == ["tcp-ok", "unix-ok", "refused 111"], (r.stdout, r.stderr)
    recs = [a for a in audit_lines(paddock, j["sandbox"]) if a["event"] == "supervisor.connect"]
    addrs = {a["address"] for a in recs}
    assert "unix:/tmp/u.sock" in addrs and "127.0.0.1:1" in addrs, addrs


def test_connect_rules(paddock):
    policy = {"connect": [{"cidr": "127.0.0.0/8", "ports": "1000-65535", "action": "allow"}]}
    code = """
        import socket
        for port in (80, 5000):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError as e:
                print(port, e.errno)
    """
    r, j = run_sup(paddock, code, policy=policy, lang="python")
    assert r.stdout.split("\n")[:2] == ["80 13", "5000 111"], (r.stdout, r.stderr)


# --- failure and teardown -----------------------------------------------------

def _sandbox_record(paddock):
    for _ in range(200):
        for rec in glob.glob(os.path.join(runtime_dir(paddock.state), "sandboxes", "*", "record")):
            kv = dict(l.split("=", 1) for l in open(rec).read().splitlines() if "=" in l)
            if "supervisor_pid" in kv:
                return kv
        time.sleep(0.05)
    raise AssertionError("no supervised sandbox record")


def test_supervisor_death_fails_closed(fresh_paddock):
    code = textwrap.dedent("""\
        import sys, time, errno
        open("/etc/hostname").read(); print("before", flush=True)
        sys.stdin.readline()
        try:
            open("/etc/hostname").read(); print("after: read")
        except OSError as e:
            print("after:", errno.errorcode[e.errno])
    """)
    p = fresh_paddock.popen(SUP + ["--", "python3", "-c", code], stdin=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "before\n"
        kv = _sandbox_record(fresh_paddock)
        pid = int(kv["supervisor_pid"])
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert out == "after: ENOSYS\n", (out, err)


def test_teardown_leaves_no_supervisor(paddock, no_leak):
    r, j = run_sup(paddock, "true")
    assert r.returncode == 0
    sid = j["sandbox"]
    left = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            cmd = open(d + "/cmdline", "rb").read()
        except OSError:
            continue
        if b"paddock-supervisor" in cmd and sid.encode() in cmd:
            left.append(d)
    assert left == []


# --- overhead (printed, not asserted) -----------------------------------------

def test_overhead_vs_container(paddock, capsys):
    job = "find /usr -type f -print0 2>/dev/null | head -z -n 20000 | xargs -0 cat > /dev/null"
    cpu = "python3 -c 'sum(i*i for i in range(3000000))'"
    res = {}
    for name, script in (("io", job), ("cpu", cpu)):
        for tier in ("container", "supervised"):
            best = None
            for _ in range(3):
                t0 = time.monotonic()
                r = paddock.run(["--isolation", tier, "--", "bash", "-c", script], timeout=300)
                dt = time.monotonic() - t0
                assert r.returncode == 0, r.stderr
                best = dt if best is None else min(best, dt)
            res[(name, tier)] = best
    with capsys.disabled():
        for name in ("io", "cpu"):
            c, s = res[(name, "container")], res[(name, "supervised")]
            print("\nsupervised overhead %-3s: container %.3fs supervised %.3fs ratio %.2fx" % (name, c, s, s / c))


def test_policy_flag_only_for_supervised(paddock, no_leak):
    path = os.path.join(paddock.state, "p.json")
    with open(path, "w") as f:
        json.dump({"paths": []}, f)
    r = paddock.run(["--policy", path, "--", "true"])
    assert r.returncode == 125 and "supervised" in r.stderr, r.stderr
