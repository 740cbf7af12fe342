"""The supervised tier's policy against every syscall form (docs/security.md
"`supervised` tier", the table of syscalls and what enforces each rule):

  * `ro` rules that are a literal path or "P/**" are read-only bind mounts:
    every call that would change the tree or a file under them fails with
    EROFS, whoever asks (root inside or user), by path or by fd, whatever
    the fd's history;
  * rules a mount cannot express (globs such as "*.txt") are enforced by the
    supervisor, which performs the calls that change paths itself: EACCES;
  * `deny` rules that are paths are covered by an empty mode-000 file or
    directory; a hard link made before the sandbox started (its other name)
    is refused by the file's identity;
  * connect rules govern sendto/sendmsg/sendmmsg with an address (UDP, TCP
    MSG_FASTOPEN) as they govern connect.

Each attack runs inside the sandbox; a run without the policy (or with the
rule's path rw) shows the same calls succeed, so a failure is the policy's.

    /usr/bin/python3 -m pytest -q tests/security/test_supervised_policy.py
"""
import json
import os
import shutil
import tempfile
import textwrap

import pytest

from pdtest import parse_json_result

SUP = ["--isolation", "supervised"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the supervised tier needs root")


def run_sup(paddock, code, *opts, policy=None, user="user", timeout=120):
    popts = []
    if policy is not None:
        fd, path = tempfile.mkstemp(prefix="policy-", suffix=".json", dir=paddock.state)
        with os.fdopen(fd, "w") as f:
            json.dump(policy, f)
        popts = ["--policy", path]
    r = paddock.run(SUP + popts + ["--json", "-u", user] + list(opts) + ["--", "python3", "-c", textwrap.dedent(code)],
                    timeout=timeout)
    return r, parse_json_result(r.stderr)


def audit_lines(paddock, sandbox_id):
    with open(os.path.join(paddock.state, "audit", sandbox_id + ".jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


def last_json(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("no result line in %r" % stdout)


def make_volume(top):
    """A host directory for -v, its files owned by uid 1000 (the sandbox's
    user) and mode 0666/0777, so root and user alike may change them without
    a policy: f, f.txt, other, a.key (files), d, sub (directories), secret and
    innocent (one file, two names: a hard link made before any sandbox)."""
    data = tempfile.mkdtemp(prefix="data-", dir=top)
    for name in ("f", "f.txt", "other", "a.key"):
        with open(os.path.join(data, name), "w") as f:
            f.write("content of %s\n" % name)
    with open(os.path.join(data, "secret"), "w") as f:
        f.write("TOP SECRET\n")
    os.link(os.path.join(data, "secret"), os.path.join(data, "innocent"))
    os.mkdir(os.path.join(data, "d"))
    os.mkdir(os.path.join(data, "sub"))
    with open(os.path.join(data, "sub", "inner"), "w") as f:
        f.write("inner\n")
    for root, dirs, files in os.walk(data):
        for n in dirs + files + [""]:
            p = os.path.join(root, n)
            os.chown(p, 1000, 1000)
            os.chmod(p, 0o777 if os.path.isdir(p) else 0o666)
    return data


@pytest.fixture
def volumes():
    """make() -> a fresh volume directory (make_volume); all removed after."""
    top = tempfile.mkdtemp(prefix="pd-svpol-", dir="/tmp")
    os.chmod(top, 0o755)
    yield lambda: make_volume(top)
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def volume(volumes):
    return volumes()


# The attack: every call that changes a path or a file, by path and by fd,
# against TARGET (a file) and DIR (a directory) beneath the rule, then what
# the fds opened before (read-only, the only way an ro file opens) allow.
# Prints one JSON object: call -> "ok" or the errno's name.
PROBE = r"""
import ctypes, ctypes.util, errno, json, os, socket, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
T, D, OUT = sys.argv[1], sys.argv[2], sys.argv[3]      # file, directory under the rule; a rw place
res = {}
def do(name, fn):
    try:
        r = fn()
        if isinstance(r, int) and r < 0:
            res[name] = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
        else:
            res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
def sc(nr, *a):
    ctypes.set_errno(0)
    return libc.syscall(ctypes.c_long(nr), *[ctypes.c_char_p(x.encode()) if isinstance(x, str) else
                                             ctypes.c_long(x) if isinstance(x, int) else x for x in a])
AT_FDCWD = -100
st = os.stat(T)
# fd-based forms on an fd opened before (read-only: the only open an ro
# file allows), and on the same file's fd passed in over a unix socket
fd = os.open(T, os.O_RDONLY)
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
socket.send_fds(a, [b"x"], [fd])
_, fds, _, _ = socket.recv_fds(b, 10, 1)
pfd = fds[0]
for tag, f in (("fd", fd), ("passed", pfd)):
    do(tag + "_fchmod", lambda: os.fchmod(f, 0o600))
    do(tag + "_fchown", lambda: os.fchown(f, st.st_uid, st.st_gid))
    do(tag + "_fsetxattr", lambda: os.setxattr(f, "user.pd", b"v"))
    do(tag + "_fremovexattr", lambda: os.removexattr(f, "user.none"))
    do(tag + "_futimens", lambda: os.utime(f, (2, 2)))
    do(tag + "_futimens_now", lambda: os.utime(f))
    do(tag + "_ftruncate", lambda: os.ftruncate(f, 0))
    do(tag + "_fallocate", lambda: sc(285, f, 0, 0, 4096))
    do(tag + "_write", lambda: os.write(f, b"x"))
# an O_PATH fd reopened for writing through /proc/self/fd
op = os.open(T, os.O_PATH)
do("opath_reopen_write", lambda: os.close(os.open("/proc/self/fd/%d" % op, os.O_WRONLY)))
do("opath_fchownat_empty", lambda: sc(260, op, "", st.st_uid, st.st_gid, 0x1000))
with open(T) as fh:
    res["content"] = fh.read()
do("open_write", lambda: os.close(os.open(T, os.O_WRONLY)))
do("creat", lambda: os.close(os.open(D + "/new", os.O_WRONLY | os.O_CREAT, 0o644)))
do("truncate", lambda: os.truncate(T, 0))
do("mknod_fifo", lambda: os.mkfifo(D + "/fifo"))
do("mknodat", lambda: sc(259, AT_FDCWD, D + "/fifo2", stat.S_IFIFO | 0o644, 0))
do("mkdir", lambda: os.mkdir(D + "/sub2"))
do("mkdirat", lambda: sc(258, AT_FDCWD, D + "/sub3", 0o755))
do("symlink", lambda: os.symlink("x", D + "/sym"))
do("symlinkat", lambda: sc(266, "x", AT_FDCWD, D + "/sym2"))
do("link", lambda: os.link(T, D + "/hard"))
do("link_out", lambda: os.link(T, OUT + "/hard-out"))
do("linkat_follow", lambda: sc(265, AT_FDCWD, T, AT_FDCWD, D + "/hard2", 0x400))
do("chmod", lambda: os.chmod(T, 0o600))
do("fchmodat", lambda: sc(268, AT_FDCWD, T, 0o640))
do("chown", lambda: os.chown(T, st.st_uid, st.st_gid))
do("lchown", lambda: os.lchown(T, st.st_uid, st.st_gid))
do("fchownat", lambda: sc(260, AT_FDCWD, T, st.st_uid, st.st_gid, 0))
do("setxattr", lambda: os.setxattr(T, "user.pd", b"v"))
do("lsetxattr", lambda: os.setxattr(T, "user.pd2", b"v", follow_symlinks=False))
do("removexattr", lambda: os.removexattr(T, "user.none"))
do("utime", lambda: os.utime(T, (1, 1)))
do("utime_now", lambda: os.utime(T))
do("utimes", lambda: sc(235, T, None))
do("utimensat", lambda: sc(280, AT_FDCWD, T, None, 0))
def bind_unix():
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(D + "/s.sock")
    finally:
        s.close()
do("bind_unix", bind_unix)
do("rename", lambda: os.rename(T, D + "/renamed"))
do("rename_out", lambda: os.rename(T, OUT + "/renamed-out"))
do("renameat2_exchange", lambda: sc(316, AT_FDCWD, T, AT_FDCWD, OUT + "/x", 2))
do("unlink", lambda: os.unlink(T))
do("rmdir", lambda: os.rmdir(D))
do("unlinkat_dir", lambda: sc(263, AT_FDCWD, D, 0x200))
print(json.dumps(res))
"""

ALL_CALLS = ["open_write", "creat", "truncate", "mknod_fifo", "mknodat", "mkdir", "mkdirat", "symlink",
             "symlinkat", "link", "link_out", "linkat_follow", "rename", "rename_out", "renameat2_exchange",
             "chmod", "fchmodat", "chown", "lchown", "fchownat", "setxattr", "lsetxattr", "removexattr",
             "utime", "utime_now", "utimes", "utimensat", "unlink", "rmdir", "unlinkat_dir", "bind_unix",
             "opath_reopen_write", "opath_fchownat_empty"] + \
            ["%s_%s" % (t, c) for t in ("fd", "passed") for c in
             ("fchmod", "fchown", "fsetxattr", "fremovexattr", "futimens", "futimens_now", "ftruncate",
              "fallocate", "write")]


def probe(paddock, target, dirname, policy, user, vol):
    code = "import sys; sys.argv = ['probe', %r, %r, '/tmp']; exec(%r)" % (target, dirname, PROBE)
    r, j = run_sup(paddock, code, "-v", "%s:/data" % vol, policy=policy, user=user)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return last_json(r.stdout), j


# The calls whose kernel answer on a file that is not writable through
# this fd is not about the policy: a read-only fd cannot be written,
# truncated or allocated (EBADF/EINVAL), xattr removal of a missing name
# (ENODATA).
FD_NOT_WRITABLE = {"fd_ftruncate", "passed_ftruncate", "fd_fallocate", "passed_fallocate", "fd_write",
                   "passed_write"}


@pytest.mark.parametrize("user", ["root", "user"])
def test_ro_rule_is_a_read_only_mount(paddock, volumes, user):
    # Without the rule (the path rw), the same calls succeed: what follows
    # is the policy's doing, not the file's permissions.
    base, _ = probe(paddock, "/data/f", "/data/d", {"paths": [{"glob": "/data/**", "access": "rw"}]}, user,
                    volumes())
    volume = volumes()
    must_work = {"chmod", "chown", "setxattr", "utime", "truncate", "mkdir", "symlink", "fd_fchmod",
                 "fd_futimens", "passed_fchmod", "passed_fsetxattr"}
    assert all(base[c] == "ok" for c in must_work), base
    # reset the volume's files for the run with the rule
    res, j = probe(paddock, "/data/f", "/data/d", {"paths": [{"glob": "/data/**", "access": "ro"}]}, user, volume)
    changed = {c: v for c, v in res.items() if c in ALL_CALLS and v == "ok"}
    assert changed == {}, "calls that changed an ro path: %s (all: %s)" % (changed, res)
    # the kernel refuses them (EROFS), not paddock's brokering; opens for
    # writing are refused by the broker first (EACCES); links and renames
    # out of the mount cross mounts (EXDEV); a read-only fd cannot write.
    for c in ALL_CALLS:
        if c in ("open_write", "creat", "opath_reopen_write"):
            assert res[c] in ("EACCES", "EROFS"), (c, res)
        elif c in ("link_out", "rename_out", "renameat2_exchange"):
            assert res[c] == "EXDEV", (c, res)
        elif c in FD_NOT_WRITABLE:
            assert res[c] in ("EBADF", "EINVAL"), (c, res)
        elif c == "rmdir" or c == "unlinkat_dir":
            assert res[c] in ("EROFS", "ENOTEMPTY"), (c, res)
        else:
            assert res[c] == "EROFS", (c, res)
    assert res["content"] == "content of f\n"
    with open(os.path.join(volume, "f")) as f:
        assert f.read() == "content of f\n"


@pytest.mark.parametrize("user", ["root", "user"])
def test_ro_glob_rule_is_brokered(paddock, volume, user):
    # "*.txt" cannot be a mount: the supervisor performs every call that
    # changes a path and refuses those on a matching path (EACCES), the
    # fd-based ones included; other names in the same directory stay writable.
    policy = {"paths": [{"glob": "/data/*.txt", "access": "ro"}]}
    res, j = probe(paddock, "/data/f.txt", "/data/d", policy, user, volume)
    refused = {"open_write", "truncate", "link", "link_out", "linkat_follow", "rename", "rename_out",
               "renameat2_exchange", "chmod", "fchmodat", "chown", "lchown", "fchownat", "setxattr", "lsetxattr",
               "removexattr", "utime", "utime_now", "utimes", "utimensat", "unlink", "opath_reopen_write",
               "opath_fchownat_empty", "fd_fchmod", "fd_fchown", "fd_fsetxattr", "fd_fremovexattr",
               "fd_futimens", "fd_futimens_now", "passed_fchmod", "passed_fchown", "passed_fsetxattr",
               "passed_fremovexattr", "passed_futimens", "passed_futimens_now"}
    bad = {c: res[c] for c in refused if res[c] != "EACCES"}
    assert bad == {}, "not refused by the policy: %s (all: %s)" % (bad, res)
    # /data/d is not matched: creating there works
    assert res["mkdir"] == "ok" and res["symlink"] == "ok" and res["creat"] == "ok", res
    assert res["content"] == "content of f.txt\n"
    recs = audit_lines(paddock, j["sandbox"])
    denies = {(a["syscall"], a.get("path")) for a in recs if a["event"] == "supervisor.deny"}
    for call in ("truncate", "chmod", "fchmod", "fsetxattr", "unlink", "rename", "link", "utimensat"):
        assert any(s == call and p == "/data/f.txt" for s, p in denies), (call, sorted(denies))


def test_ro_dir_listing_and_reads_work(paddock, volume):
    # ro means no change, not no access (an ro rule used to refuse
    # opening a directory: glibc's __O_TMPFILE includes O_DIRECTORY)
    code = """
        import os
        print(sorted(os.listdir("/data")) == sorted(%r))
        print(open("/data/sub/inner").read().strip())
        os.makedirs("/data/sub", exist_ok=True); print("makedirs-existing-ok")
    """ % sorted(os.listdir(volume))
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume,
                   policy={"paths": [{"glob": "/data/**", "access": "ro"}]})
    assert r.stdout.split() == ["True", "inner", "makedirs-existing-ok"], (r.stdout, r.stderr)


def test_rw_hole_in_ro_mount(paddock, volume):
    # an earlier rw rule beneath a later ro one stays writable (a bind of the
    # original tree over the read-only one)
    policy = {"paths": [{"glob": "/data/sub/**", "access": "rw"}, {"glob": "/data/**", "access": "ro"}]}
    code = """
        import os
        open("/data/sub/new", "w").write("x"); print("hole-writable")
        try:
            os.mkdir("/data/d/x"); print("ro-writable")
        except OSError as e:
            print(os.strerror(e.errno))
        print(sum(1 for l in open("/proc/self/mountinfo") if " /data " in l or " /data/sub " in l))
    """
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume, policy=policy)
    assert r.stdout.split("\n")[:3] == ["hole-writable", "Read-only file system", "3"], (r.stdout, r.stderr)


def test_deny_hard_link_made_before_the_sandbox(paddock, volume):
    # /data/secret and /data/innocent are one file (linked on the host
    # before the sandbox). The rule names /data/secret: the mount hides that
    # name, the supervisor refuses the file under its other name, and a
    # link made inside from the other name is refused when opened too.
    policy = {"paths": [{"glob": "/data/secret", "access": "deny"}]}
    code = """
        import errno, os
        def rd(p):
            try:
                return open(p).read().strip() or "(empty)"
            except OSError as e:
                return errno.errorcode[e.errno]
        print(rd("/data/secret"), rd("/data/innocent"))
        try:
            os.link("/data/innocent", "/data/again"); print(rd("/data/again"))
        except OSError as e:
            print(errno.errorcode[e.errno])
        try:
            os.link("/data/innocent", "/tmp/out"); print(rd("/tmp/out"))
        except OSError as e:
            print(errno.errorcode[e.errno])
        print(os.stat("/data/secret").st_size, oct(os.stat("/data/secret").st_mode & 0o777))
    """
    r, j = run_sup(paddock, code, "-v", "%s:/data" % volume, policy=policy, user="root")
    lines = r.stdout.split("\n")
    assert lines[0] == "EACCES EACCES", (r.stdout, r.stderr)
    assert lines[1] == "EACCES", lines       # the new name is the same file
    assert lines[2] == "EXDEV", lines        # another mount
    assert lines[3] == "0 0o0", lines        # what is seen at the denied name: an empty mode-000 file
    recs = audit_lines(paddock, j["sandbox"])
    assert any(a["event"] == "supervisor.deny" and a.get("path") == "/data/innocent" for a in recs), recs
    # and without the rule, the other name reads the content (the test's own check)
    r, _ = run_sup(paddock, "print(open('/data/innocent').read().strip())", "-v", "%s:/data" % volume,
                   policy={"paths": [{"glob": "/data/other", "access": "deny"}]})
    assert r.stdout.strip() == "TOP SECRET", (r.stdout, r.stderr)


def test_deny_glob_refuses_links_and_renames(paddock, volume):
    # "*.key" is no mount: the supervisor refuses a link or a rename that
    # would give the file another name (EACCES), and any open of it; a name
    # made on the host before (a.lnk) is found at start by the file's
    # identity (the supervisor walks beneath the glob's literal prefix).
    os.link(os.path.join(volume, "a.key"), os.path.join(volume, "a.lnk"))
    policy = {"paths": [{"glob": "/data/*.key", "access": "deny"}]}
    code = """
        import errno, os
        def t(fn):
            try:
                fn(); return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        print(t(lambda: open("/data/a.key").read()), t(lambda: os.link("/data/a.key", "/data/b")),
              t(lambda: os.rename("/data/a.key", "/data/b")), t(lambda: os.link("/data/a.key", "/tmp/b")),
              t(lambda: os.symlink("a.key", "/data/s") or open("/data/s").read()),
              t(lambda: open("/data/new.key", "w")), t(lambda: os.rename("/data/other", "/data/x.key")),
              t(lambda: open("/data/a.lnk").read()), t(lambda: os.link("/data/a.lnk", "/data/c")))
    """
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume, policy=policy, user="root")
    assert r.stdout.split() == ["EACCES"] * 9, (r.stdout, r.stderr)
    assert os.path.exists(os.path.join(volume, "a.key")) and os.path.exists(os.path.join(volume, "other"))


def test_dir_rename_across_a_rule_boundary_is_exdev(paddock, volume):
    # Renaming a directory moves what is beneath it under other rules with
    # no call the supervisor sees per file: EXDEV (within one mount, where
    # the kernel would have done it), and mv copies file by file through the
    # brokered opens.
    policy = {"paths": [{"glob": "/data/**/*.key", "access": "deny"}]}
    code = """
        import errno, os, subprocess
        os.makedirs("/data/k")
        open("/data/k/plain", "w").write("p")
        try:
            os.rename("/data/k", "/data/sub/k"); print("renamed")
        except OSError as e:
            print(errno.errorcode[e.errno])
        os.rename("/data/other", "/data/sub/other"); print("file-renamed")
        print(subprocess.run(["mv", "/data/k", "/data/sub/k"]).returncode, open("/data/sub/k/plain").read())
    """
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume, policy=policy, user="root")
    assert r.stdout.split() == ["EXDEV", "file-renamed", "0", "p"], (r.stdout, r.stderr)


# --- addresses ------------------------------------------------------------------

SENDS = r"""
import errno, json, socket, struct
res = {}
def t(name, fn):
    try:
        res[name] = fn()
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("0.0.0.0", 5000))
rx.settimeout(0.5)
OK, BAD = ("127.0.0.1", 5000), ("127.0.0.2", 5000)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t("sendto_ok", lambda: u.sendto(b"sendto-ok", OK))
t("sendto_bad", lambda: u.sendto(b"sendto-bad", BAD))
t("sendmsg_ok", lambda: u.sendmsg([b"sendmsg-", b"ok"], [], 0, OK))
t("sendmsg_bad", lambda: u.sendmsg([b"sendmsg-bad"], [], 0, BAD))
u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
t("sendto_mapped_bad", lambda: u6.sendto(b"mapped-bad", ("::ffff:127.0.0.2", 5000)))
# sendmmsg: [ok, bad] sends the first and reports 1; [bad] is refused
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
keep = []
def sa(addr):
    b = struct.pack("!HH4s8x", socket.AF_INET, addr[1], socket.inet_aton(addr[0]))
    b = struct.pack("=H", socket.AF_INET) + b[2:]
    buf = ctypes.create_string_buffer(b, len(b)); keep.append(buf); return buf
def mm(dests, tag):
    arr = (mmsghdr * len(dests))()
    for i, d in enumerate(dests):
        data = ctypes.create_string_buffer(b"%s-%d" % (tag, i)); keep.append(data)
        iov = iovec(ctypes.cast(data, ctypes.c_void_p), len(data.value)); keep.append(iov)
        arr[i].hdr = msghdr(ctypes.cast(sa(d), ctypes.c_void_p), 16, ctypes.pointer(iov), 1, None, 0, 0)
    n = libc.sendmmsg(u.fileno(), arr, len(dests), 0)
    return n if n >= 0 else errno.errorcode[ctypes.get_errno()]
res["sendmmsg_ok_bad"] = mm([OK, BAD], b"mm-a")
res["sendmmsg_bad"] = mm([BAD], b"mm-b")
# connected: send() carries no address (never brokered)
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.connect(OK)
t("connected_send", lambda: c.send(b"connected"))
t("connect_bad", lambda: c.connect(BAD))
# TCP Fast Open: sendto(MSG_FASTOPEN) connects to the address it carries
MSG_FASTOPEN = 0x20000000
srv = socket.socket(); srv.bind(("0.0.0.0", 6000)); srv.listen(4)
def tfo(addr):
    s = socket.socket()
    try:
        return s.sendto(b"tfo", MSG_FASTOPEN, addr)
    finally:
        s.close()
t("tfo_bad", lambda: tfo(("127.0.0.2", 6000)))
t("tfo_ok", lambda: tfo(("127.0.0.1", 6000)))
got = []
while True:
    try:
        got.append(rx.recv(100).decode())
    except socket.timeout:
        break
res["received"] = sorted(got)
srv.settimeout(0.5)
acc = []
while True:
    try:
        a, peer = srv.accept(); acc.append(peer[0]); a.close()
    except socket.timeout:
        break
res["tcp_accepted_from"] = sorted(acc)
print(json.dumps(res))
"""


def test_udp_and_fastopen_sends_follow_connect_rules(paddock):
    policy = {"connect": [{"cidr": "127.0.0.1/32", "action": "allow"}]}
    r, j = run_sup(paddock, SENDS, policy=policy, user="root")
    assert r.returncode == 0, (r.stdout, r.stderr)
    res = last_json(r.stdout)
    assert res["sendto_ok"] == 9 and res["sendmsg_ok"] == 10, res
    for k in ("sendto_bad", "sendmsg_bad", "sendto_mapped_bad", "sendmmsg_bad", "connect_bad", "tfo_bad"):
        assert res[k] == "EACCES", (k, res)
    assert res["sendmmsg_ok_bad"] == 1, res
    assert res["connected_send"] == 9, res
    assert res["tfo_ok"] == 3, res
    assert res["received"] == sorted(["sendto-ok", "sendmsg-ok", "mm-a-0", "connected"]), res
    assert res["tcp_accepted_from"] == ["127.0.0.1"], res
    recs = audit_lines(paddock, j["sandbox"])
    denies = {(a["syscall"], a.get("address")) for a in recs if a["event"] == "supervisor.deny"}
    for call in ("sendto", "sendmsg", "sendmmsg"):
        assert (call, "127.0.0.2:5000") in denies, (call, sorted(denies))
    assert ("sendto", "127.0.0.2:6000") in denies, sorted(denies)
    allows = {(a["syscall"], a.get("address")) for a in recs if a["event"] == "supervisor.send"}
    assert ("sendto", "127.0.0.1:5000") in allows and ("sendmmsg", "127.0.0.1:5000") in allows, sorted(allows)


def test_sends_without_connect_rules_are_the_kernels(paddock):
    # The control run: with no connect rule nothing is brokered and every
    # address is reachable (on the sandbox's own loopback).
    r, _ = run_sup(paddock, SENDS, policy={"paths": []}, user="root")
    res = last_json(r.stdout)
    assert res["sendto_bad"] == 10 and res["sendmmsg_bad"] == 1 and res["tfo_bad"] == 3, res


def test_everyday_work_under_a_full_policy(paddock, volume):
    # ro and deny rules, a glob (so the supervisor performs the calls that
    # change paths) and connect rules (so it performs sendmsg): the tools
    # people use still work, sudo included (it passes fds over a socket).
    policy = {"paths": [{"glob": "/etc/shadow", "access": "deny"}, {"glob": "/usr/**", "access": "ro"},
                        {"glob": "/data/*.key", "access": "deny"}],
              "connect": [{"cidr": "127.0.0.0/8", "action": "allow"}]}
    script = textwrap.dedent("""\
        set -e
        cd ~ && mkdir -p proj/src && echo 'print(6*7)' > proj/src/m.py && python3 proj/src/m.py
        mv proj/src/m.py proj/src/n.py && ln -s n.py proj/src/l.py && chmod +x proj/src/n.py && touch -d @0 proj/src/n.py
        cp -r proj proj2 && rm -rf proj && ls proj2/src | tr '\\n' ' ' && echo
        pip --version | cut -d' ' -f1
        python3 -c 'import socket; u=socket.socket(2,2); u.bind(("127.0.0.1",7000)); u.sendto(b"hi",("127.0.0.1",7000)); print(u.recv(9).decode())'
        python3 -c 'import socket; a,b=socket.socketpair(); socket.send_fds(a,[b"m"],[0]); print(len(socket.recv_fds(b,9,1)[1]))'
        sudo id -u
        sudo touch /root/x && sudo rm /root/x && echo sudo-rw
        echo pip-install-ok-check | tee /tmp/t >/dev/null && cat /tmp/t
        """)
    r = paddock.run(SUP + ["--policy", _policy_file(paddock, policy), "-v", "%s:/data" % volume, "--",
                           "bash", "-c", script], timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.split("\n")[:8] == ["42", "l.py n.py ", "pip", "hi", "1", "0", "sudo-rw",
                                        "pip-install-ok-check"], (r.stdout, r.stderr)


def _policy_file(paddock, policy):
    fd, path = tempfile.mkstemp(prefix="policy-", suffix=".json", dir=paddock.state)
    with os.fdopen(fd, "w") as f:
        json.dump(policy, f)
    return path


def test_noexec_rule_is_a_noexec_mount(paddock, volume):
    # noexec on a path is a noexec bind mount: no exec of a file there, no
    # executable mapping of one (the loader's way in), whoever asks.
    with open(os.path.join(volume, "run.sh"), "w") as f:
        f.write("#!/bin/sh\necho ran\n")
    os.chmod(os.path.join(volume, "run.sh"), 0o755)
    code = """
        import errno, mmap, os, subprocess
        try:
            print(subprocess.run(["/data/run.sh"], capture_output=True, text=True).stdout.strip())
        except OSError as e:
            print(errno.errorcode[e.errno])
        f = open("/data/run.sh", "rb")
        try:
            mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE); print("mapped")
        except OSError as e:
            print(errno.errorcode[e.errno])
        print(open("/data/run.sh").read().split()[-1])
    """
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume, policy={"paths": [{"glob": "/data/**",
                                                                               "access": "noexec"}]})
    assert r.stdout.split() == ["EACCES", "EPERM", "ran"], (r.stdout, r.stderr)
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume, policy={"paths": []})
    assert r.stdout.split() == ["ran", "mapped", "ran"], (r.stdout, r.stderr)


def test_ro_root_with_holes_leaves_devices_and_sudo_usable(paddock):
    # "/" "**" ro with /tmp rw: the tree is read-only (a mount), /tmp a hole,
    # /dev/null writable (ro keeps the filesystem as it is: a device write
    # changes nothing in it) and paddock's own /run/paddock works (sudo).
    policy = {"paths": [{"glob": "/tmp/**", "access": "rw"}, {"glob": "/**", "access": "ro"}]}
    script = ("echo x > /tmp/a && cat /tmp/a; echo y > /dev/null && echo devnull-ok; sudo id -u;"
              " sudo mkdir /etc/new 2>&1 | grep -o 'Read-only file system'; touch ~/t 2>&1 | grep -o 'denied\\|Read-only'")
    r = paddock.run(SUP + ["--policy", _policy_file(paddock, policy), "--", "bash", "-c", script])
    assert r.stdout.split("\n")[:5] == ["x", "devnull-ok", "0", "Read-only file system", "denied"], (r.stdout,
                                                                                                     r.stderr)


def test_rule_no_mount_can_express_is_left_to_the_supervisor(paddock, volume):
    # An earlier rw glob beneath a later ro directory: a read-only mount of
    # the directory would refuse what the glob allows, so there is none, and
    # the supervisor enforces both rules on every call (the .txt file stays
    # writable, the rest does not). Same for a rule whose path is missing at
    # creation: mkdir there is refused by the supervisor.
    policy = {"paths": [{"glob": "/data/*.txt", "access": "rw"}, {"glob": "/data/**", "access": "ro"},
                        {"glob": "/opt/later/**", "access": "ro"}]}
    code = """
        import errno, os
        def t(fn):
            try:
                fn(); return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        print(t(lambda: open("/data/f.txt", "a").write("more")), t(lambda: os.chmod("/data/f.txt", 0o600)),
              t(lambda: os.chmod("/data/f", 0o600)), t(lambda: os.mkdir("/data/x")),
              t(lambda: os.mkdir("/opt/later")), t(lambda: open("/data/f", "a")))
        print(sum(1 for l in open("/proc/self/mountinfo") if l.split()[4] == "/data"))
    """
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume, policy=policy, user="root")
    assert r.stdout.split("\n")[:2] == ["ok ok EACCES EACCES EACCES EACCES", "1"], (r.stdout, r.stderr)


def test_fd_from_an_rw_alias_and_from_the_ro_view(paddock, volume):
    # The only way to an fd that writes an ro file is another name for it
    # that is rw: here the same host directory is a second volume. A rule
    # holds on a path (docs): through /alias the file is writable, fds
    # passed from there included; through /data (ro) no fd can change it,
    # one passed over a unix socket included. Policies never change while a
    # sandbox runs, so no fd predates its mounts.
    policy = {"paths": [{"glob": "/data/**", "access": "ro"}]}
    code = """
        import errno, os, socket
        def t(fn):
            try:
                fn(); return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        socket.send_fds(a, [b"x"], [os.open("/alias/f", os.O_RDWR), os.open("/data/f", os.O_RDONLY)])
        _, (rw, ro), _, _ = socket.recv_fds(b, 10, 2)
        print(t(lambda: os.ftruncate(rw, 3)), t(lambda: os.fchmod(rw, 0o640)))
        print(t(lambda: os.fchmod(ro, 0o600)), t(lambda: os.open("/data/f", os.O_RDWR)),
              open("/data/f").read())
    """
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume, "-v", "%s:/alias" % volume, policy=policy,
                   user="root")
    assert r.stdout.split("\n")[:2] == ["ok ok", "EROFS EACCES con"], (r.stdout, r.stderr)


def test_deny_dir_hides_contents_and_their_other_names(paddock, volume):
    # A denied directory is covered by an empty one; a file beneath it with
    # another name outside (a hard link made before the sandbox) is found by
    # the walk at creation and refused under that name too.
    os.link(os.path.join(volume, "sub", "inner"), os.path.join(volume, "inner-elsewhere"))
    policy = {"paths": [{"glob": "/data/sub/**", "access": "deny"}]}
    code = """
        import errno, os
        def rd(p):
            try:
                return open(p).read().strip()
            except OSError as e:
                return errno.errorcode[e.errno]
        try:
            ls = str(os.listdir("/data/sub"))
        except OSError as e:
            ls = errno.errorcode[e.errno]
        print(ls, rd("/data/sub/inner"), rd("/data/inner-elsewhere"), rd("/data/f"), os.stat("/data/sub").st_nlink)
    """
    r, _ = run_sup(paddock, code, "-v", "%s:/data" % volume, policy=policy, user="root")
    # the directory itself: EACCES (the rule matches it); beneath it: nothing
    # (the cover is empty: st_nlink 2); the other name: refused by identity
    assert r.stdout.split("\n")[0] == "EACCES ENOENT EACCES content of f 2", (r.stdout, r.stderr)


def test_unix_datagram_sends_under_connect_rules(paddock):
    # With connect rules every sendmsg and every addressed sendto is the
    # supervisor's, unix sockets included: a named address resolves like a
    # connect (relative to the caller's cwd), abstract ones pass, fds pass.
    policy = {"connect": [{"cidr": "127.0.0.1/32", "action": "allow"}]}
    code = """
        import os, socket
        r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); r.bind("/tmp/ok.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        print(s.sendto(b"abs-path", "/tmp/ok.sock"), r.recv(20).decode())
        os.chdir("/tmp"); print(s.sendto(b"rel-path", "ok.sock"), r.recv(20).decode())
        a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a.bind("\\0pd-abstract")
        print(s.sendto(b"abstract", "\\0pd-abstract"), a.recv(20).decode())
        p, q = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        socket.send_fds(p, [b"fds"], [r.fileno(), a.fileno()])
        msg, fds, _, _ = socket.recv_fds(q, 20, 2)
        print(msg.decode(), len(fds), os.path.samestat(os.fstat(fds[0]), os.fstat(r.fileno())))
    """
    r, j = run_sup(paddock, code, policy=policy)
    assert r.stdout.split("\n")[:4] == ["8 abs-path", "8 rel-path", "8 abstract", "fds 2 True"], (r.stdout, r.stderr)
    recs = [a for a in audit_lines(paddock, j["sandbox"]) if a["event"] == "supervisor.send"]
    assert [a["address"] for a in recs][:3] == ["unix:/tmp/ok.sock", "unix:/tmp/ok.sock", "unix-abstract:pd-abstract"], recs
