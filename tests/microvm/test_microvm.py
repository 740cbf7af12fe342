"""The microvm tier (issue 7): a QEMU guest per sandbox whose init is the
paddock agent, started as a copy-on-write clone of a template snapshot.

These tests boot real guests (TCG here: no hardware virtualization), so they
keep VM counts small, except the 20-clone test the issue asks for. They use
their own state dir (the template snapshot is built there on first use) and
`paddock gc` it at the end."""
import glob
import os
import re
import shlex
import shutil
import socket
import subprocess
import threading
import time

import pytest

from pdtest import Paddock, child_env, parse_json_result

GUEST_DIR = os.environ.get("PADDOCK_GUEST_DIR", "/var/cache/paddock/guest")
VM = ["--isolation", "microvm"]
TIMEOUT = 240   # the first run builds the base template and boots it once

if not glob.glob(os.path.join(GUEST_DIR, "boot", "vmlinuz-*")) or not os.path.exists(
        "/usr/bin/qemu-system-x86_64"):
    # Not a hardware gap: scripts/setup.sh installs both, so their absence is a failure.
    raise RuntimeError("no guest kernel or QEMU: run scripts/setup.sh")


@pytest.fixture(scope="module")
def vm(state_root):
    p = Paddock(os.path.join(state_root, "microvm"))
    os.makedirs(p.state, exist_ok=True)
    try:
        # build the template up front, so later timings are about clones
        r = p.run(VM + ["--", "true"], timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        yield p
    finally:
        r = p.gc(timeout=120)
        assert r.returncode == 0, r.stderr
    assert p.leftovers() == {}
    assert not glob.glob(os.path.join(p.state, "vm", "tpl-*"))


def vrun(vm, args, **kw):
    kw.setdefault("timeout", TIMEOUT)
    return vm.run(VM + list(args), **kw)


def record_of(vm, sid):
    rec = {}
    for d in glob.glob(os.path.join("/run/paddock", vm.instance, "sandboxes", sid)) + glob.glob(
            os.path.join("/dev/shm/paddock", vm.instance, "sandboxes", sid)):
        with open(os.path.join(d, "record")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                rec[k] = v
    return rec


def live_sandboxes(vm):
    out = []
    for base in ("/run/paddock", "/dev/shm/paddock"):
        out += glob.glob(os.path.join(base, vm.instance, "sandboxes", "*"))
    return out


# --- exec, exit codes, streams ----------------------------------------------

def test_echo(vm):
    r = vrun(vm, ["--", "echo", "hello", "microvm"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello microvm\n"
    assert r.stderr == ""


@pytest.mark.parametrize("code", [0, 3, 255])
def test_exit_code(vm, code):
    r = vrun(vm, ["--json", "--", "bash", "-c", "echo before; echo err >&2; exit %d" % code])
    assert r.returncode == code, r.stderr
    assert r.stdout == "before\n"
    assert "err\n" in r.stderr
    j = parse_json_result(r.stderr)
    assert j["status"] == code and j["reason"] == "exit"


def test_signal_and_not_found(vm):
    r = vrun(vm, ["--json", "--", "bash", "-c", "kill -KILL $$"])
    assert r.returncode == 137
    assert parse_json_result(r.stderr)["signal"] == 9
    r = vrun(vm, ["--", "no-such-command-xyz"])
    assert r.returncode == 127 and "no-such-command-xyz" in r.stderr


def test_guest_oom_kill_is_reported_as_oom(vm):
    """The guest kernel's OOM killer (the host sees only QEMU): the agent
    tells it from another SIGKILL by the guest's own oom_kill count; run
    says so as on the other tiers. Chunks, so no single allocation is
    refused by overcommit (that would be a MemoryError, not a kill)."""
    r = vrun(vm, ["--json", "--", "python3", "-c", "a = [bytearray(16 << 20) for _ in range(100)]"])
    assert r.returncode == 137, r.stderr
    j = parse_json_result(r.stderr)
    assert (j["reason"], j["signal"]) == ("oom", 9), j
    assert "out of memory: the kernel killed the command (limit 512 MiB)" in r.stderr
    r = vrun(vm, ["--json", "--", "bash", "-c", "kill -KILL $$"])
    assert parse_json_result(r.stderr)["reason"] == "signal"      # a plain SIGKILL stays one


def test_stdin_and_large_output(vm):
    data = "".join("line %d\n" % i for i in range(20000))
    r = vrun(vm, ["--", "bash", "-c", "cat; head -c 3000000 /dev/zero | tr '\\0' x | wc -c"], input=data)
    assert r.returncode == 0, r.stderr
    assert r.stdout == data + "3000000\n"


def test_guest_is_its_own_kernel(vm):
    r = vrun(vm, ["--", "bash", "-c", "uname -r; cat /proc/1/cmdline | tr '\\0' ' '; echo; id -u; hostname"])
    assert r.returncode == 0, r.stderr
    rel = r.stdout.splitlines()[0]
    assert rel != os.uname().release
    assert glob.glob(os.path.join(GUEST_DIR, "boot", "vmlinuz-" + rel))
    assert r.stdout.splitlines()[1].strip() == "/init"
    assert r.stdout.splitlines()[2] == "1000"


def test_python_and_root(vm):
    r = vrun(vm, ["-u", "root", "--", "python3", "-c", "import os, json, sqlite3; print(os.getuid(), json.dumps([1]))"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0 [1]\n"


def test_files_are_writable_and_private(vm):
    r = vrun(vm, ["--", "bash", "-c",
                  "echo data > ~/f && cat ~/f && mkdir -p /tmp/d && echo x > /tmp/d/y && ls /tmp/d"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "data\ny\n"
    # the next sandbox starts from the template, without those files
    r = vrun(vm, ["--", "bash", "-c", "ls ~/f /tmp/d 2>&1; true"])
    assert "No such file" in r.stdout


def test_disk_is_bounded(vm):
    """The writable layer is a tmpfs in guest RAM, capped at half of it:
    filling it is ENOSPC for the writer, and the sandbox lives on."""
    r = vrun(vm, ["--", "bash", "-c", "head -c 2000M /dev/zero > /tmp/big; echo rc=$?; "
                                      "ls -s --block-size=1M /tmp/big"])
    assert r.returncode == 0, r.stderr
    assert "No space left" in r.stderr
    assert "rc=1" in r.stdout
    mb = int(r.stdout.splitlines()[-1].split()[0])
    assert 200 <= mb <= 256, r.stdout


# --- PTY ----------------------------------------------------------------------

def _script(cmd, timeout=TIMEOUT):
    return subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), stdin=subprocess.DEVNULL)


def test_pty(vm):
    cmd = "stty rows 33 cols 99; " + " ".join(
        shlex.quote(a) for a in vm.argv(VM + ["-t", "--", "bash", "-c", "tty; stty size; exit 5"]))
    r = _script(cmd)
    assert r.returncode == 5, r.stdout + r.stderr
    assert "/dev/pts/0" in r.stdout
    assert "33 99" in r.stdout


def test_guest_clock_is_tsc_with_high_resolution_timers(vm):
    """The guest keeps a clocksource with high-resolution timers (under TCG:
    the TSC, trusted with tsc=reliable, and a CPU with arat so the local APIC
    timer runs in one-shot mode; under KVM: kvm-clock). On refined-jiffies the
    guest ticked 250 times a second even when idle and rounded every sleep to
    a jiffy (clock_getres reported 4 ms)."""
    r = vrun(vm, ["--", "sh", "-c", "cat /sys/devices/system/clocksource/clocksource0/current_clocksource; "
                  "python3 -c 'import time; print(time.clock_getres(time.CLOCK_MONOTONIC))'"])
    assert r.returncode == 0, r.stderr
    source, res = r.stdout.split()
    assert source in ("tsc", "kvm-clock"), r.stdout
    assert float(res) == 1e-9, "no high-resolution timers in the guest: %s" % r.stdout


# --- clones -------------------------------------------------------------------

def test_twenty_clones_differ_and_keep_their_writes(vm):
    """20 clones of one template alive at once: every one has its own RNG
    state and its own clock set from the host, and sees only its own files."""
    n = 20
    script = ("echo $ID > /tmp/mark-$ID; python3 -c 'import os; print(os.urandom(16).hex())'; "
              "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; date +%s; "
              "read go; ls /tmp | grep mark- | tr '\\n' ' '; echo")
    procs = []
    try:
        for i in range(n):
            procs.append(subprocess.Popen(
                vm.argv(VM + ["-e", "ID=%d" % i, "--", "bash", "-c", script]), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()))
        firsts = []
        for p in procs:
            lines = [p.stdout.readline() for _ in range(3)]
            assert all(l.endswith("\n") for l in lines), p.stderr.read() if p.poll() is not None else lines
            firsts.append([l.strip() for l in lines])
        # every clone is running now, its mark written
        outs = []
        for p in procs:
            out, err = p.communicate("go\n", timeout=TIMEOUT)
            assert p.returncode == 0, err
            outs.append(out.strip())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    py_rng = [f[0] for f in firsts]
    kern_rng = [f[1] for f in firsts]
    assert len(set(py_rng)) == n, py_rng
    assert len(set(kern_rng)) == n, kern_rng
    import time
    now = time.time()
    for f in firsts:
        assert abs(int(f[2]) - now) < 600, "guest clock not set from the host: %s" % f[2]
    for i, o in enumerate(outs):
        assert o == "mark-%d" % i, (i, o)


def _tpl_mem(vm):
    mems = glob.glob(os.path.join(vm.state, "vm", "tpl-*", "mem"))
    assert len(mems) == 1, mems
    return mems[0]


def test_template_ram_file_is_protected(vm):
    """The template's RAM file: root's, its group only, never written by a
    clone (a guest writing all its memory leaves it as it was)."""
    mem = _tpl_mem(vm)
    st = os.stat(mem)
    assert st.st_uid == 0 and (st.st_mode & 0o777) == 0o660
    assert st.st_gid >= 3700000000
    r = vrun(vm, ["-u", "root", "--", "python3", "-c",
                  "b = bytearray(b'\\xa5') * (200 << 20); print(len(b))"])
    assert r.returncode == 0, r.stderr
    st2 = os.stat(mem)
    assert (st2.st_ctime_ns, st2.st_mtime_ns, st2.st_size) == (st.st_ctime_ns, st.st_mtime_ns, st.st_size)


def test_changed_template_is_not_used(vm):
    """What a clone's QEMU could do if taken over (its group may write the
    RAM file): the next clone must not start from the altered file."""
    mem = _tpl_mem(vm)
    st = os.stat(mem)
    # a clone's QEMU has the file's group, which may write it (QEMU 7.2
    # opens a share=off RAM file read-write): write 256 KiB as it could
    assert st.st_mode & 0o020
    junk = os.urandom(256 << 10)
    fd = os.open(mem, os.O_WRONLY)
    try:
        os.pwrite(fd, junk, 4 << 20)
    finally:
        os.close(fd)
    tampered = os.stat(mem).st_ctime_ns
    r = vrun(vm, ["--", "echo", "fresh"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "fresh\n"
    assert "changed since it was saved" in r.stderr
    # a new template was made, without the junk
    new = _tpl_mem(vm)
    assert os.stat(new).st_ctime_ns != tampered
    with open(new, "rb") as f:
        f.seek(4 << 20)
        assert f.read(len(junk)) != junk


# --- what the guest must not reach --------------------------------------------

def test_host_loopback_canary_unreachable(vm):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    hits = []

    def accept():
        srv.settimeout(1.0)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                hits.append(1)
                c.sendall(b"CANARY\n")
                c.close()
            except OSError:
                pass

    stop = threading.Event()
    t = threading.Thread(target=accept)
    t.start()
    try:
        r = vrun(vm, ["--", "bash", "-c",
                      "ls /sys/class/net; (exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3) 2>&1; "
                      "(exec 3<>/dev/tcp/10.0.2.2/%d) 2>&1; echo done" % (port, port)])
    finally:
        stop.set()
        t.join()
        srv.close()
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "lo"          # no NIC under network none
    assert "CANARY" not in r.stdout and not hits
    assert r.stdout.rstrip().endswith("done")


def test_host_files_invisible(vm, tmp_path):
    canary = tmp_path / "canary-file"
    canary.write_text("SECRET")
    r = vrun(vm, ["-u", "root", "--", "bash", "-c",
                  "cat %s 2>&1; grep -rl SECRET /tmp /root /home 2>/dev/null; ls /dev/vd* /dev/vport*; "
                  "mount | grep -c ' / '" % canary])
    assert "SECRET" not in r.stdout
    assert "No such file" in r.stdout


def test_qemu_is_jailed(vm):
    """Checked on the host side: QEMU runs as its own uid with no
    capabilities, no_new_privs, a seccomp filter, its own namespaces and
    cgroup, and sees only its own files."""
    p = vm.popen(VM + ["--", "bash", "-c", "echo up; read x"], stdin=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "up\n"
        sbs = live_sandboxes(vm)
        assert len(sbs) == 1
        rec = record_of(vm, os.path.basename(sbs[0]))
        pid = int(rec["agent_pid"])
        with open("/proc/%d/comm" % pid) as f:
            assert f.read().startswith("qemu-system")
        status = {}
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                status[k] = v.strip()
        uid = int(status["Uid"].split()[0])
        assert uid >= 1000000000, status["Uid"]
        assert status["Groups"] == ""
        for cap in ("CapPrm", "CapEff", "CapBnd", "CapAmb", "CapInh"):
            assert int(status[cap], 16) == 0, (cap, status[cap])
        assert status["NoNewPrivs"] == "1"
        assert status["Seccomp"] == "2"
        for ns in ("mnt", "pid", "net", "ipc", "uts"):
            assert os.readlink("/proc/%d/ns/%s" % (pid, ns)) != os.readlink("/proc/self/ns/" + ns), ns
        top = sorted(os.listdir("/proc/%d/root/" % pid))
        assert "etc" not in top and "home" not in top and "root" not in top and "var" not in top, top
        assert not os.path.exists("/proc/%d/root/etc/passwd" % pid)
        # its runtime dir is root's: QEMU got listening fds, it cannot plant
        # a symlink where paddock connects
        import stat as st_
        vmdir = os.path.join(sbs[0], "vm")
        d = os.stat(vmdir)
        assert d.st_uid == 0 and (d.st_mode & 0o777) == 0o711, oct(d.st_mode)
        for n in ("qmp.sock", "serial.sock"):
            ls = os.lstat(os.path.join(vmdir, n))
            assert st_.S_ISSOCK(ls.st_mode) and ls.st_uid == 0, n
        with open("/proc/%d/cgroup" % pid) as f:
            cg = f.read()
        assert "paddock-%s" % vm.instance in cg
        # its relay is the only other host process of the sandbox
        relay = int(rec["supervisor_pid"])
        with open("/proc/%d/comm" % relay) as f:
            assert f.read().strip() == "paddock-vm-rela"
        p.stdin.write("x\n")
        p.stdin.flush()
        assert p.wait(timeout=TIMEOUT) == 0
        assert not os.path.exists("/proc/%d" % pid) and not os.path.exists("/proc/%d" % relay)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_no_leftovers_after_runs(vm):
    assert live_sandboxes(vm) == []
    assert vm.leftovers() == {}


# --- a start that fails (issue 20) -------------------------------------------

def test_failed_start_keeps_its_console_log(vm, tmp_path):
    """A guest that cannot start (its kernel finds no init: PADDOCK_VM_APPEND
    adds rdinit=/nonexistent to the template boot's command line) fails with
    an error naming where its console log was kept; the log outlives the
    failed sandbox, and `paddock gc` removes it only past its retention."""
    p = Paddock(str(tmp_path / "state"))
    os.makedirs(os.path.join(p.state, "vm"))
    # vm's boot assets, linked (content-addressed): no base image build here
    src = os.path.join(vm.state, "vm")
    for f in os.listdir(src):
        if f.startswith(("vmlinux-", "initrd-", "rootfs-")):
            os.link(os.path.join(src, f), os.path.join(p.state, "vm", f))
    try:
        r = p.run(VM + ["--", "true"], env={"PADDOCK_VM_APPEND": "rdinit=/nonexistent"}, timeout=TIMEOUT)
        assert r.returncode == 125, (r.returncode, r.stderr)
        m = re.search(r"console log kept in (\S+\.console\.log)\)", r.stderr)
        assert m, r.stderr
        log = m.group(1)
        assert os.path.dirname(log) == os.path.join(p.state, "vm", "failed")
        with open(log, errors="replace") as f:
            text = f.read()
        assert "Kernel panic" in text, text[-2000:]
        # the failed sandbox is gone, with no half-built template; its log stays
        assert p.leftovers() == {}
        assert not glob.glob(os.path.join(p.state, "vm", "tpl-*"))
        r = p.gc()
        assert r.returncode == 0, r.stderr
        assert os.path.exists(log), "gc removed a log younger than its retention"
        old = time.time() - 8 * 86400
        os.utime(log, (old, old))
        r = p.gc()
        assert r.returncode == 0, r.stderr
        assert not os.path.exists(log), "gc kept a log past its retention (7 days)"
    finally:
        p.gc()
        shutil.rmtree(p.state, ignore_errors=True)


def test_bad_guest_command_line_words_are_refused(vm):
    """PADDOCK_VM_APPEND takes plain words only: a quote or a control
    character is refused with a clear error, and nothing is started."""
    before = set(glob.glob(os.path.join(vm.state, "vm", "tpl-*")))
    r = vrun(vm, ["--", "echo", "ok"], env={"PADDOCK_VM_APPEND": 'rdinit=/x "quoted"'})
    assert r.returncode == 125, (r.returncode, r.stderr)
    assert "PADDOCK_VM_APPEND" in r.stderr and r.stdout == ""
    assert set(glob.glob(os.path.join(vm.state, "vm", "tpl-*"))) == before
    assert live_sandboxes(vm) == []
