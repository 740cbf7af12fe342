"""Runs paddock's escape suite: every attack under tests/security/escape/<category>/
in a sandbox of every tier, and returns one result per (tier, attack).

Used by tests/security/test_escape_suite.py (which asserts the results
against its expectations and writes build/security-results.json) and by
scripts/gen-security-matrix.py (which turns that file into
docs/security-matrix.md).

How attacks run:
  * "batch" attacks of one tier run in ONE sandbox (`paddock run -u root`):
    driver.py reads a bundle (attack sources + host context) on stdin and runs
    each attack as its own process, one after another, printing one JSON line
    per attack.
  * "isolated" attacks (fork bomb, OOM, disk and inode fill, survivors,
    kill(-1), x32 / int 0x80) get a sandbox each, with their own options.
  * "tty" attacks run with -t under `script -qec`.
Every attack is _lib.py + its own file, run with `python3 -c SRC CTX`, where
CTX is a JSON object of host-side facts (canary paths and hashes, ports,
host pids). Header comments of an attack file say how to run it:
    # mode: batch | isolated | tty
    # opts: paddock run options (isolated only)
    # killed: SIGSYS=blocked:how; SIGKILL=...   (what a kill by the kernel means)
    # timeout: seconds
    # host-check: a check the runner does on the host after the sandbox ended
    # policy: a supervised-tier policy (JSON, isolated only; the other tiers
    #         run the attack without one)
"""
import functools
import glob
import hashlib
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid

import hostipc
from pdtest import procs_with

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TIERS = ["container", "process", "supervised", "microvm"]
CATEGORIES = ["fs", "proc", "kernel", "net", "supervised"]
DEFAULT_TIMEOUT = 30
VOLUME_OWNER = 4242        # the volumes' owner: a host account, in no sandbox's range


class Attack:
    def __init__(self, path):
        self.path = path
        self.category = os.path.basename(os.path.dirname(path))
        self.name = "%s/%s" % (self.category, os.path.basename(path)[:-3])
        with open(path) as f:
            self.body = f.read()
        m = re.match(r'\s*"""(.*?)"""', self.body, re.S)
        self.doc = " ".join(m.group(1).split()) if m else ""
        meta = dict(re.findall(r"^# ([a-z-]+): (.*)$", self.body, re.M))
        self.mode = meta.get("mode", "batch").strip()
        self.opts = shlex.split(meta.get("opts", ""))
        self.timeout = int(meta.get("timeout", DEFAULT_TIMEOUT))
        self.host_checks = meta.get("host-check", "").split()
        self.policy = json.loads(meta["policy"]) if "policy" in meta else None
        self.killed = {}
        for part in meta.get("killed", "").split(";"):
            if "=" in part:
                sig, what = part.strip().split("=", 1)
                outcome, how = what.split(":", 1)
                self.killed[sig] = (outcome, how)

    def source(self):
        with open(os.path.join(HERE, "_lib.py")) as f:
            return f.read() + "\n" + self.body


def load_attacks():
    out = []
    for cat in CATEGORIES:
        for p in sorted(glob.glob(os.path.join(HERE, cat, "*.py"))):
            if not os.path.basename(p).startswith("_"):
                out.append(Attack(p))
    return out


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def _ppid(pid):
    try:
        return int(_read("/proc/%d/stat" % pid).rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


def _comm(pid):
    return _read("/proc/%d/comm" % pid).strip() or "?"


def _host_uid(pid):
    for l in _read("/proc/%d/status" % pid).splitlines():
        if l.startswith("Uid:"):
            return int(l.split()[1])
    return None


class Host:
    """Host-side bait and canaries, shared by every run of a session."""

    def __init__(self, state_dir, paddock_bin, runtime_dir):
        self.state_dir = state_dir
        self.paddock_bin = paddock_bin
        self.runtime_dir = runtime_dir
        self.dir = tempfile.mkdtemp(prefix="pd-esc-host-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.canary = os.path.join(self.dir, "canary")
        with open(self.canary, "w") as f:
            f.write("paddock escape canary %s\n" % uuid.uuid4())
        os.chmod(self.canary, 0o644)
        with open(self.canary, "rb") as f:
            self.canary_sha = _sha(f.read())
        # Both volumes belong to a host account (VOLUME_OWNER, `user`
        # inside), with host root's bait in them (docs/security.md, Volumes).
        # The read-only volume's 0666 canary is the account's: only the
        # read-only mount keeps root inside from writing it.
        self.ro_dir = os.path.join(self.dir, "ro")
        os.mkdir(self.ro_dir)
        os.chown(self.ro_dir, VOLUME_OWNER, VOLUME_OWNER)
        self.ro_file = os.path.join(self.ro_dir, "ro-canary")
        with open(self.ro_file, "w") as f:
            f.write("read-only volume canary\n")
        os.chmod(self.ro_file, 0o666)
        os.chown(self.ro_file, VOLUME_OWNER, VOLUME_OWNER)
        self.ro_secret = os.path.join(self.ro_dir, "root-secret")
        self.rw_dir = os.path.join(self.dir, "rw")
        os.mkdir(self.rw_dir)
        os.chown(self.rw_dir, VOLUME_OWNER, VOLUME_OWNER)
        self.rw_secret = os.path.join(self.rw_dir, "root-secret")
        self.rw_root_file = os.path.join(self.rw_dir, "root-file")
        self.volume_bait = {}
        for path, mode in ((self.ro_secret, 0o600), (self.rw_secret, 0o600), (self.rw_root_file, 0o644)):
            with open(path, "w") as f:
                f.write("host root's %s\n" % os.path.basename(path))
            os.chmod(path, mode)
            self.volume_bait[path] = (_read(path), mode)
        self.bait_fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)     # inheritable: the leak bait
        os.set_inheritable(self.bait_fd, True)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(16)
        self.tcp.setblocking(False)
        self.port = self.tcp.getsockname()[1]
        self.tcp6 = None
        try:
            self.tcp6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            self.tcp6.bind(("::1", self.port))
            self.tcp6.listen(16)
            self.tcp6.setblocking(False)
        except OSError:
            self.tcp6 = None
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.abstract_name = "pd-esc-" + uuid.uuid4().hex
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen(16)
        self.abstract.setblocking(False)
        self.unix_path = os.path.join(self.dir, "host.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)
        self.unix.listen(16)
        self.unix.setblocking(False)
        # The host's ipc namespace: SysV objects and a POSIX queue anyone may
        # open (mode 0666), each holding a canary or a message.
        self.pid = os.getpid()
        self.ipc_ns = os.readlink("/proc/self/ns/ipc")
        self.net_ns = os.readlink("/proc/self/ns/net")
        self.sysv = []
        while True:
            self.sysv_key = int.from_bytes(os.urandom(4), "little") & 0x7fffffff
            if self.sysv_key and not hostipc.find("shm", key=self.sysv_key) and \
                    not hostipc.find("msg", key=self.sysv_key) and not hostipc.find("sem", key=self.sysv_key):
                break
        self.shm_canary = ("paddock escape shm canary %s" % uuid.uuid4()).encode()
        self.mq_name = "/pd-esc-" + uuid.uuid4().hex
        self.mq_fd = -1
        try:
            self.shm_id = hostipc.shm_create(self.sysv_key, self.shm_canary)
            self.sysv.append(("shm", self.shm_id))
            self.sysv.append(("msg", hostipc.msg_create(self.sysv_key, b"paddock escape message")))
            self.sysv.append(("sem", hostipc.sem_create(self.sysv_key)))
            self.mq_fd = hostipc.mq_create(self.mq_name, b"paddock escape message")
        except OSError:
            self._close_ipc()
            raise
        self.shadow_lines = [_sha(l.encode()) for l in _read("/etc/shadow").splitlines()
                             if l.split(":")[1:2] not in (["*"], ["!"], ["!*"], [""], ["x"])]
        self.root_names = sorted(os.listdir("/root")) if os.path.isdir("/root") else []
        self.root_files = {}
        for n in self.root_names:
            p = os.path.join("/root", n)
            if os.path.isfile(p) and os.path.getsize(p) < (1 << 20):
                with open(p, "rb") as f:
                    self.root_files[p] = _sha(f.read())
        for p in glob.glob("/root/.ssh/*"):
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    self.root_files[p] = _sha(f.read())
        root_dev = os.stat("/").st_dev
        self.disk_dev = [os.major(root_dev), os.minor(root_dev)]
        self.disk_name = "vda"
        for d in glob.glob("/sys/dev/block/%d:%d" % tuple(self.disk_dev)):
            self.disk_name = os.path.basename(os.path.realpath(d))
        self.proc_sys = {p: _read(p) for p in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname",
                                               "/proc/sys/kernel/modprobe")}

    def close(self):
        for s in (self.tcp, self.tcp6, self.udp, self.abstract, self.unix):
            if s:
                s.close()
        os.close(self.bait_fd)
        self._close_ipc()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _close_ipc(self):
        for kind, ident in self.sysv:
            hostipc.remove(kind, ident)
        self.sysv = []
        if self.mq_fd >= 0:
            os.close(self.mq_fd)
            self.mq_fd = -1
        hostipc.mq_unlink(self.mq_name)

    @staticmethod
    def marker_ipc_key(marker):
        """The SysV key an attack of the run marked `marker` uses."""
        return 0x50000000 | int(marker[-7:], 16)

    def context(self, tier, marker, host_pids):
        return {
            "tier": tier, "marker": marker, "canary_file": self.canary, "canary_dir": self.dir,
            "canary_sha256": self.canary_sha, "host_shadow_lines": self.shadow_lines,
            "host_root_names": self.root_names, "host_root_files": self.root_files,
            "host_home_names": sorted(os.listdir("/home")) if os.path.isdir("/home") else [],
            "state_dir": os.path.realpath(self.state_dir), "runtime_dir": self.runtime_dir,
            "paddock_bin": os.path.realpath(self.paddock_bin), "host_disk_dev": self.disk_dev,
            "host_disk_name": self.disk_name, "tcp_port": self.port, "udp_port": self.udp.getsockname()[1],
            "abstract_name": self.abstract_name, "unix_socket": self.unix_path,
            "ro_volume": "/ro" if tier not in ("process", "microvm") else None,
            "ro_volume_file": "/ro/ro-canary" if tier not in ("process", "microvm") else None,
            "ro_volume_secret": "/ro/root-secret" if tier not in ("process", "microvm") else None,
            "rw_volume": "/rw" if tier not in ("process", "microvm") else None,
            "rw_volume_secret": "/rw/root-secret" if tier not in ("process", "microvm") else None,
            "rw_volume_root_file": "/rw/root-file" if tier not in ("process", "microvm") else None,
            "host_pids": host_pids, "fill_cap_mb": 512 if tier != "process" else 96,
            "inode_cap": 300000 if tier != "process" else 20000,
            "host_ipc_ns": self.ipc_ns, "host_net_ns": self.net_ns, "sysv_key": self.sysv_key,
            "marker_ipc_key": self.marker_ipc_key(marker), "mq_name": self.mq_name,
        }

    # --- host-side checks after a run: name -> failure message or None
    def check(self, name, marker):
        if name == "listener-untouched":
            for s in (self.tcp, self.tcp6):
                if s is None:
                    continue
                try:
                    c, a = s.accept()
                    c.close()
                    return "the host listener accepted a connection from %s" % (a,)
                except (BlockingIOError, socket.timeout):
                    pass
            return None
        if name == "udp-untouched":
            try:
                d, a = self.udp.recvfrom(100)
                return "the host UDP socket received %r from %s" % (d, a)
            except BlockingIOError:
                return None
        if name in ("abstract-untouched", "unix-untouched"):
            s = self.abstract if name == "abstract-untouched" else self.unix
            try:
                c, a = s.accept()
                c.close()
                return "the host %s socket accepted a connection" % name.split("-")[0]
            except BlockingIOError:
                return None
        if name == "canary-intact":
            with open(self.canary, "rb") as f:
                if _sha(f.read()) != self.canary_sha:
                    return "the host canary changed"
            if _read(self.ro_file) != "read-only volume canary\n":
                return "the read-only volume's file changed on the host"
            return None
        if name == "volume-root-files-intact":
            bad = []
            for path, (text, mode) in self.volume_bait.items():
                try:
                    st = os.lstat(path)
                except OSError:
                    bad.append(path + " (gone)")
                    continue
                if _read(path) != text or (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (0, 0, mode):
                    bad.append(path)
            bad += glob.glob(os.path.join(self.rw_dir, "*-" + marker))
            return "host root's files in the volumes changed: %s" % bad if bad else None
        if name.startswith("volume-no-host-root:"):
            return volume_host_root(self.rw_dir, marker + "-" + name.split(":", 1)[1])
        if name == "no-marker-files":
            found = [p for p in ("/usr/bin/" + marker, "/etc/" + marker, "/tmp/" + marker) if os.path.lexists(p)]
            for p in found:
                try:
                    os.unlink(p)
                except OSError:
                    pass
            return "created on the host: %s" % found if found else None
        if name == "no-marker-cgroups":
            found = glob.glob("/sys/fs/cgroup/*/" + marker) + glob.glob("/sys/fs/cgroup/" + marker)
            return "cgroups created on the host: %s" % found if found else None
        if name == "proc-sys-unchanged":
            changed = [p for p, v in self.proc_sys.items() if _read(p) != v]
            return "host values changed: %s" % changed if changed else None
        if name == "no-marker-processes":
            deadline = time.time() + 5
            left = procs_with(marker)
            while left and time.time() < deadline:
                time.sleep(0.1)
                left = procs_with(marker)
            if left:
                desc = ["%d %s uid=%s" % (p, _comm(p), _host_uid(p)) for p in left]
                for p in left:              # ours to clean up: the attack's survivors
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                return "still running on the host after teardown: %s" % desc
            return None
        if name == "sysv-untouched":
            shm = hostipc.find("shm", key=self.sysv_key)
            msg = hostipc.find("msg", key=self.sysv_key)
            if not shm or not msg or not hostipc.find("sem", key=self.sysv_key):
                return "a host SysV object is gone"
            if shm[0]["lpid"] != self.pid or shm[0]["nattch"]:
                return "the host segment was attached by pid %d" % shm[0]["lpid"]
            if hostipc.shm_read(self.shm_id, len(self.shm_canary)) != self.shm_canary:
                return "the host segment's canary changed"
            if msg[0]["qnum"] != 1 or msg[0]["lrpid"]:
                return "the host queue's message was received by pid %d" % msg[0]["lrpid"]
            return None
        if name == "no-marker-ipc":
            found = hostipc.sweep(key=self.marker_ipc_key(marker))       # removed: ours to clean up
            return "SysV objects left on the host: %s" % [k for k, o in found] if found else None
        if name == "mq-untouched":
            left = hostipc.mq_exists("/" + marker)
            if left:
                hostipc.mq_unlink("/" + marker)
                return "a queue /%s was left on the host" % marker
            if hostipc.mq_messages(self.mq_fd) != 1:
                return "the host queue's message was received"
            return None
        if name == "victim-alive":
            return None                      # checked per run (the victim is per run)
        raise ValueError("unknown host check %s" % name)


def volume_host_root(d, prefix):
    """What the sandbox left in a volume (files named prefix*) that host
    root would honour: an owner or group 0, a v2 security.capability, or a
    v3 one with root id 0. None when there is none."""
    bad = []
    for p in sorted(glob.glob(os.path.join(d, prefix + "*"))):
        st = os.lstat(p)
        if st.st_uid == 0 or st.st_gid == 0:
            bad.append("%s owned by %d:%d mode %o" % (os.path.basename(p), st.st_uid, st.st_gid, st.st_mode))
        try:
            cap = os.getxattr(p, "security.capability", follow_symlinks=False)
        except OSError:
            cap = None
        if cap:
            magic = int.from_bytes(cap[:4], "little") & 0xff000000
            rootid = int.from_bytes(cap[20:24], "little") if len(cap) >= 24 else None
            if magic != 0x03000000 or rootid == 0:
                bad.append("%s has a host-effective capability %s" % (os.path.basename(p), cap.hex()))
    return "host-root files in the read-write volume: %s" % bad if bad else None


def _env(extra=None):
    env = dict(os.environ)
    env.pop("PADDOCK_STATE_DIR", None)
    env.pop("PADDOCK_LANDLOCK_ABI_MAX", None)
    if extra:
        env.update(extra)
    return env


class Runner:
    def __init__(self, paddock_bin, agent_bin, state_dir, runtime_dir, log=None):
        self.bin = paddock_bin
        self.agent = agent_bin
        self.state = state_dir
        self.host = Host(state_dir, paddock_bin, runtime_dir)
        self.log = log or (lambda *a: None)
        with open(os.path.join(HERE, "driver.py")) as f:
            self.driver = f.read()

    def close(self):
        self.host.close()

    def argv(self, tier, opts):
        return [self.bin, "run", "--isolation", tier, "--state-dir", self.state] + list(opts)

    def env(self):
        return _env({"PADDOCK_AGENT": self.agent})

    def availability(self, tier):
        """(True, "") when `paddock run --isolation TIER -- true` works."""
        try:
            r = subprocess.run(self.argv(tier, ["--", "true"]), capture_output=True, text=True, timeout=60,
                               env=self.env(), stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False, "`paddock run --isolation %s -- true` timed out" % tier
        if r.returncode == 0:
            return True, ""
        return False, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]

    # ------------------------------------------------------------------ runs
    def _victim(self, uid):
        return subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                                 "sleep", "600"], stdin=subprocess.DEVNULL)

    def run_driver(self, tier, attacks, opts=(), timeout=240):
        """One sandbox running `attacks` through driver.py. Returns
        (results by name, run info)."""
        tag = "pddrv" + uuid.uuid4().hex[:12]
        marker = "pdmark" + uuid.uuid4().hex[:12]
        # microvm: no volumes on that tier yet (its guest has its own disk)
        vol = (["-v", "%s:/ro:ro" % self.host.ro_dir, "-v", "%s:/rw" % self.host.rw_dir]
               if tier not in ("process", "microvm") else [])
        argv = self.argv(tier, ["-u", "root", "--json"] + vol + list(opts) +
                         ["--", "python3", "-c", self.driver, tag])
        t0 = time.time()
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.env(), pass_fds=(self.host.bait_fd,))
        victim = None
        info = {"argv_opts": list(opts), "tier": tier}
        try:
            drv = []
            deadline = time.time() + 30
            # a microvm's driver runs in its guest: no host process to find
            while tier != "microvm" and not drv and time.time() < deadline and p.poll() is None:
                drv = [d for d in procs_with(tag) if _comm(d).startswith("python")]
                time.sleep(0.02)
            host_pids = {"test": os.getpid(), "paddock-run": p.pid}
            uid = 65534
            if drv:
                d = drv[0]
                uid = _host_uid(d)
                a, n = _ppid(d), 0
                while a > 1 and a != os.getpid() and n < 8:
                    host_pids["ancestor%d-%s" % (n, _comm(a))] = a
                    a, n = _ppid(a), n + 1
            victim = self._victim(uid if uid is not None else 65534)
            host_pids["victim"] = victim.pid
            info["sandbox_host_uid"] = uid
            ctx = self.host.context(tier, marker, host_pids)
            bundle = {"ctx": ctx, "attacks": [{"name": a.name, "src": a.source(), "timeout": a.timeout}
                                              for a in attacks]}
            try:
                p.stdin.write(json.dumps(bundle).encode())
            except BrokenPipeError:
                pass
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass
            p.stdin = None
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                info["timed_out"] = True
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        info["secs"] = round(time.time() - t0, 1)
        info["rc"] = p.returncode
        err = err.decode("utf-8", "replace")
        info["stderr"] = err[-1500:]
        try:
            info["json"] = json.loads([l for l in err.splitlines() if l.strip()][-1])
        except (IndexError, ValueError):
            info["json"] = None
        res = {}
        ended = False
        for line in out.decode("utf-8", "replace").splitlines():
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("driver") == "end":
                ended = True
            if "attack" in j:
                res[j["attack"]] = j
        info["driver_ended"] = ended
        victim_alive = victim is not None and victim.poll() is None
        if victim is not None:
            victim.kill()
            victim.wait()
        # interpret kills and host checks
        for a in attacks:
            r = res.get(a.name)
            j = info.get("json") or {}
            if r is None and len(attacks) == 1 and j.get("signal"):
                # the kernel ended the whole command (the OOM killer may pick the driver)
                r = res[a.name] = {"attack": a.name, "outcome": "killed", "detail": "run reason %s" % j.get("reason"),
                                   "how": "killed by %s" % signal.Signals(j["signal"]).name}
            if r is None:
                r = res[a.name] = {"attack": a.name, "outcome": "error", "how": "no result from the driver",
                                   "detail": "run rc=%s stderr=%s" % (p.returncode, err[-300:])}
            if r["outcome"] == "killed":
                sig = r["how"].split()[-1]
                if r.get("timed_out"):
                    r.update(outcome="error", how="timed out after %ss" % a.timeout)
                elif sig in a.killed:
                    r["outcome"], r["how"] = a.killed[sig]
                else:
                    r["outcome"] = "error"
            for chk in a.host_checks:
                msg = ("the host victim (pid under the sandbox's host uid) was killed" if not victim_alive else None) \
                    if chk == "victim-alive" else self.host.check(chk, marker)
                if msg:
                    r["outcome"], r["how"] = "escaped", "host check: " + msg
                    r["detail"] = (r.get("detail") or "") + " [%s]" % chk
        return res, info

    def run_tty(self, tier, attack):
        marker = "pdmark" + uuid.uuid4().hex[:12]
        ctx = self.host.context(tier, marker, {"test": os.getpid()})
        ctx["agent_pid"] = 1
        ctx["driver_pid"] = 0
        cmd = "stty rows 24 cols 80; " + " ".join(shlex.quote(x) for x in self.argv(
            tier, ["-u", "root", "-t", "--", "python3", "-c", attack.source(), json.dumps(ctx)]))
        try:
            r = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True,
                               timeout=attack.timeout + 30, env=self.env(), stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {"attack": attack.name, "outcome": "error", "how": "timed out", "detail": ""}
        text = r.stdout.replace("\r", "").replace("^@", "").replace("^D", "")
        for line in reversed(text.splitlines()):
            i = line.find('{"outcome"')
            if i >= 0:
                try:
                    j = json.loads(line[i:])
                    j["attack"] = attack.name
                    return j
                except ValueError:
                    pass
        return {"attack": attack.name, "outcome": "error", "how": "no result line",
                "detail": (r.stdout + r.stderr)[-400:]}

    def run_tier(self, tier, attacks):
        results, runs = {}, []
        batch = [a for a in attacks if a.mode == "batch"]
        if batch:
            res, info = self.run_driver(tier, batch)
            info["kind"] = "batch"
            runs.append(info)
            results.update(res)
            self.log("%s batch: %d attacks in %.1fs" % (tier, len(batch), info["secs"]))
        for a in attacks:
            if a.mode == "isolated":
                opts = list(a.opts)
                if a.policy is not None and tier == "supervised":
                    path = os.path.join(self.host.dir, "policy-%s.json" % uuid.uuid4().hex[:8])
                    with open(path, "w") as f:
                        json.dump(a.policy, f)
                    opts += ["--policy", path]
                res, info = self.run_driver(tier, [a], opts=opts, timeout=a.timeout + 60)
                info["kind"] = a.name
                runs.append(info)
                r = res[a.name]
                j = info.get("json") or {}
                r["run"] = {"rc": info["rc"], "reason": j.get("reason"), "oom_kills": j.get("oom_kills"),
                            "pids_limit_hits": j.get("pids_limit_hits"), "driver_ended": info["driver_ended"]}
                if r["outcome"] == "blocked" and not info["driver_ended"] and a.name != "proc/kill_all":
                    r["outcome"], r["how"] = "error", "the sandbox did not survive: " + r["how"]
                if a.name == "proc/kill_all" and not info["driver_ended"] and r["outcome"] == "blocked":
                    r["outcome"], r["how"] = "error", "the sandbox's own driver/agent died (rc %s)" % info["rc"]
                if a.name == "proc/oom" and r["outcome"] == "blocked" and r["how"].startswith("OOM"):
                    if not (j.get("oom_kills") or j.get("reason") == "oom"):
                        r["detail"] = (r.get("detail") or "") + " (SIGKILL without an OOM record)"
                self.log("%s %s: %s (%.1fs)" % (tier, a.name, r["outcome"], info["secs"]))
                results[a.name] = r
            elif a.mode == "tty":
                results[a.name] = self.run_tty(tier, a)
        return results, runs


# The i386 entry from 64-bit code, as kernel/int80.py does it: mov eax, 20
# (getpid on i386); int 0x80; ret. Unfiltered, in a throwaway host process.
_INT80_PROBE = r"""
import ctypes, mmap, os
code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
r = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
os._exit(0 if r == os.getpid() else 3)
"""


@functools.lru_cache(maxsize=None)
def host_ia32_entry():
    """Whether the host kernel takes i386 syscalls through `int 0x80` from a
    64-bit process: (True, False or None when the probe says neither, reason).

    Decided by trying it (as tests/unit/test-seccomp.c does): neither
    CONFIG_IA32_EMULATION nor the ia32_emulation= boot parameter settles it
    (a paravirtualized guest can have both on and still fault on int 0x80).
    Without the entry the CPU's #GP arrives as SIGSEGV before any syscall,
    so seccomp never sees it: blocked all the same. Both facts go in the
    reason."""
    import gzip
    config = "no /proc/config.gz"
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if line.startswith("CONFIG_IA32_EMULATION=") or line.startswith("# CONFIG_IA32_EMULATION is"):
                    config = line.strip().lstrip("# ")
                    break
            else:
                config = "CONFIG_IA32_EMULATION absent"
    except OSError:
        pass
    param = [w for w in _read("/proc/cmdline").split() if w.startswith("ia32_emulation=")]
    facts = "%s, %s" % (config, param[0] if param else "no ia32_emulation= boot parameter")
    p = subprocess.run([sys.executable, "-c", _INT80_PROBE], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    if p.returncode == 0:
        return True, "int 0x80 in a host process returned getpid (%s)" % facts
    if p.returncode == -signal.SIGSEGV:
        return False, "int 0x80 in a host process: SIGSEGV, the kernel has no i386 entry (%s)" % facts
    return None, "int 0x80 probe in a host process: exit %s, inconclusive (%s)" % (p.returncode, facts)


def machine_facts():
    import ctypes
    facts = {"kernel": os.uname().release, "date": time.strftime("%Y-%m-%d %H:%M:%S %z")}
    ia32, why = host_ia32_entry()
    facts["ia32_entry"] = {"present": ia32, "why": why}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        facts["landlock_abi"] = int(libc.syscall(ctypes.c_long(444), None, ctypes.c_ulong(0), ctypes.c_ulong(1)))
    except OSError:
        facts["landlock_abi"] = None
    fs = {}
    for l in _read("/proc/self/mounts").splitlines():
        dev, mnt, typ = l.split()[:3]
        if mnt.startswith("/sys/fs/cgroup"):
            fs[mnt] = typ
    v2 = [m for m, t in fs.items() if t == "cgroup2"]
    v1 = sorted(os.path.basename(m) for m, t in fs.items() if t == "cgroup")
    if fs.get("/sys/fs/cgroup") == "cgroup2":
        layout = "v2 (unified)"
    elif v1:
        layout = "v1 (hybrid): %s; cgroup2 at %s" % (", ".join(v1), ", ".join(v2) or "none")
    else:
        layout = "none"
    facts["cgroup"] = layout
    facts["cpus"] = os.cpu_count()
    return facts
