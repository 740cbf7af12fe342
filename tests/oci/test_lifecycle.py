"""paddock-oci lifecycle on busybox bundles: create/start/state/kill/delete/
run, pid file, exit status, console socket, exec, ps, pause/resume, list,
features, spec, hooks and the config fields (docs/oci.md)."""
import array
import json
import os
import shutil
import socket
import tempfile
import subprocess
import threading

from oci_helpers import OCI, TIMEOUT, cgroup_dirs, make_bundle, rootfs, rt  # noqa: F401


def wait_status(rt, cid, want, timeout=10):
    """Poll `state` with a deadline (the runtime has no event to wait on)."""
    import time
    end = time.monotonic() + timeout
    while True:
        s = rt.state(cid)["status"]
        if s == want or time.monotonic() > end:
            return s
        time.sleep(0.02)


def test_run_exit_status_and_output(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["sh", "-c", "echo out-$(hostname); echo err >&2; exit 3"], rootfs=rootfs)
    p = rt("run", "--bundle", b, "r1", check=False)
    assert p.returncode == 3, p.stderr
    assert p.stdout == "out-paddock-test\n"
    assert "err" in p.stderr
    assert not os.path.exists(os.path.join(rt.root, "r1"))


def test_run_killed_by_signal_is_128_plus(tmp_path, rootfs, rt):
    # Without a pid namespace (an init ignores its own SIGKILL from inside).
    b = make_bundle(str(tmp_path), ["sh", "-c", "kill -9 $$"], rootfs=rootfs,
                    edit=lambda c: c["linux"].update(namespaces=[{"type": t} for t in ("mount", "uts", "ipc")]))
    assert rt("run", "--bundle", b, "r2", check=False).returncode == 137


def test_create_start_state_kill_delete(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done"],
                    rootfs=rootfs, edit=lambda c: c.update(annotations={"org.example/k": "v"}))
    pidfile = str(tmp_path / "pid")
    rt.create("c1", b, "--pid-file", pidfile)
    st = rt.state("c1")
    pid = int(open(pidfile).read())
    assert st["ociVersion"].startswith("1.")
    assert st["id"] == "c1" and st["status"] == "created" and st["pid"] == pid
    assert st["bundle"] == b and st["annotations"] == {"org.example/k": "v"}
    # The pid is the container's init, waiting on exec.fifo: not yet exec'd.
    assert os.path.exists("/proc/%d" % pid)
    rt("start", "c1")
    assert rt.state("c1")["status"] == "running"
    # start returns once the init is released; its exec follows at once.
    import time
    end = time.monotonic() + 10
    while open("/proc/%d/comm" % pid).read().strip() != "sh" and time.monotonic() < end:
        time.sleep(0.01)
    assert open("/proc/%d/comm" % pid).read().strip() == "sh"
    # start twice is refused.
    p = rt("start", "c1", check=False)
    assert p.returncode != 0 and "not created" in p.stderr
    # delete of a running container needs --force.
    p = rt("delete", "c1", check=False)
    assert p.returncode != 0 and "--force" in p.stderr
    rt("kill", "c1", "TERM")
    assert wait_status(rt, "c1", "stopped") == "stopped"
    assert rt.state("c1")["pid"] == 0
    p = rt("kill", "c1", "KILL", check=False)
    assert p.returncode != 0 and "not running" in p.stderr
    rt("delete", "c1")
    assert not os.path.exists(os.path.join(rt.root, "c1"))
    assert not cgroup_dirs("/paddock-oci/c1")
    p = rt("state", "c1", check=False)
    assert p.returncode != 0 and "does not exist" in p.stderr


def test_delete_created_kills_init(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs)
    rt.create("c2", b)
    pid = rt.state("c2")["pid"]
    rt("delete", "c2")
    assert not os.path.exists("/proc/%d/cmdline" % pid) or \
        open("/proc/%d/stat" % pid).read().split(")")[1].split()[0] in ("Z", "X")


def test_console_socket_gets_pty_master(tmp_path, rootfs, rt):
    sock_path = str(tmp_path / "console.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    got = {}

    def accept():
        conn, _ = srv.accept()
        msg, fds, _, _ = socket.recv_fds(conn, 1024, 1)
        got["name"], got["fd"] = msg.decode(), fds[0]
        conn.close()

    t = threading.Thread(target=accept)
    t.start()
    b = make_bundle(str(tmp_path), ["sh", "-c", "tty; echo done"], rootfs=rootfs,
                    edit=lambda c: c["process"].update(terminal=True))
    try:
        rt.create("t1", b, "--console-socket", sock_path)
        t.join(TIMEOUT)
        assert got["name"].startswith("/dev/pts/")
        rt("start", "t1")
        out = b""
        with os.fdopen(got["fd"], "rb", buffering=0) as master:
            while b"done" not in out:
                try:
                    chunk = master.read(4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
        assert b"/dev/pts/0" in out
    finally:
        srv.close()


def test_terminal_without_console_socket_is_refused(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["sh"], rootfs=rootfs, edit=lambda c: c["process"].update(terminal=True))
    p = rt.create("t2", b, check=False)
    assert p.returncode != 0 and "--console-socket" in p.stderr
    assert not os.path.exists(os.path.join(rt.root, "t2"))


def test_exec_ps_pause_resume_list(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["sleep", "600"], rootfs=rootfs)
    rt.create("e1", b)
    rt("start", "e1")
    init = rt.state("e1")["pid"]
    p = rt("exec", "e1", "sh", "-c", "echo pid1=$(cat /proc/1/comm); exit 5", check=False)
    assert p.returncode == 5 and p.stdout == "pid1=sleep\n"
    proc = tmp_path / "process.json"
    proc.write_text(json.dumps({"args": ["sh", "-c", "id -u; pwd"], "cwd": "/tmp", "env": ["PATH=/bin"],
                                "user": {"uid": 1000, "gid": 1000}}))
    p = rt("exec", "--process", str(proc), "e1")
    assert p.stdout == "1000\n/tmp\n"
    pidfile = str(tmp_path / "exec.pid")
    rt("exec", "--detach", "--pid-file", pidfile, "e1", "sleep", "300", files=True)
    epid = int(open(pidfile).read())
    pids = json.loads(rt("ps", "--format", "json", "e1").stdout)
    assert init in pids and epid in pids
    table = rt("ps", "e1").stdout
    assert "PID" in table.splitlines()[0] and str(init) in table
    rt("pause", "e1")
    assert rt.state("e1")["status"] == "paused"
    p = rt("exec", "e1", "true", check=False)
    assert p.returncode != 0 and "paused" in p.stderr
    rt("resume", "e1")
    assert rt.state("e1")["status"] == "running"
    lst = json.loads(rt("list", "--format", "json").stdout)
    assert [x["id"] for x in lst] == ["e1"] and lst[0]["status"] == "running"
    assert rt("list", "-q").stdout == "e1\n"
    rt("kill", "--all", "e1", "KILL")
    assert wait_status(rt, "e1", "stopped") == "stopped"
    rt("delete", "e1")
    assert not os.path.exists("/proc/%d/cmdline" % epid) or \
        open("/proc/%d/stat" % epid).read().split(")")[1].split()[0] in ("Z", "X")


def test_exec_missing_command_is_clear(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["sleep", "600"], rootfs=rootfs)
    rt.create("e2", b)
    rt("start", "e2")
    p = rt("exec", "e2", "no-such-program", check=False)
    assert p.returncode != 0 and "not found" in p.stderr


def test_features_and_spec(tmp_path):
    f = json.loads(subprocess.run([OCI, "features"], capture_output=True, text=True, check=True).stdout)
    assert f["ociVersionMax"].startswith("1.") and "user" in f["linux"]["namespaces"]
    assert "run.oci.paddock.isolation" in f["annotations"]
    subprocess.run([OCI, "spec", "--bundle", str(tmp_path)], check=True)
    cfg = json.load(open(tmp_path / "config.json"))
    assert cfg["ociVersion"].startswith("1.") and cfg["root"]["path"] == "rootfs"
    p = subprocess.run([OCI, "spec", "--bundle", str(tmp_path)], capture_output=True, text=True)
    assert p.returncode != 0 and "already exists" in p.stderr


def test_config_fields_user_caps_rlimits_readonly_masked(tmp_path, rootfs, rt):
    script = ("id; grep CapEff /proc/self/status; ulimit -n; "
              "touch /x 2>/dev/null && echo rootfs-writable || echo rootfs-ro; "
              "wc -c < /proc/keys; echo 1 > /proc/sys/kernel/ns_last_pid 2>/dev/null || echo sys-ro; "
              "cat /proc/self/oom_score_adj")

    def edit(c):
        c["process"]["user"] = {"uid": 1000, "gid": 1000, "additionalGids": [10]}
        # A non-root user keeps capabilities across exec only as ambient ones.
        c["process"]["capabilities"] = {k: ["CAP_KILL"] for k in
                                        ("bounding", "effective", "permitted", "inheritable", "ambient")}
        c["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": 512, "soft": 256}]
        c["process"]["oomScoreAdj"] = 500
        c["root"]["readonly"] = True
    b = make_bundle(str(tmp_path), ["sh", "-c", script], rootfs=rootfs, edit=edit)
    out = rt("run", "--bundle", b, "f1").stdout.splitlines()
    assert out[0] == "uid=1000(user) gid=1000(user) groups=10(wheel)"
    assert out[1].split()[1] == "0000000000000020"
    assert out[2] == "256"
    assert out[3] == "rootfs-ro"
    assert out[4].strip() == "0"
    assert out[5] == "sys-ro"
    assert out[6] == "500"


def test_resources_memory_pids_in_cgroup(tmp_path, rootfs, rt):
    def edit(c):
        c["linux"]["resources"] = {"memory": {"limit": 64 << 20}, "pids": {"limit": 77}}
        c["linux"]["cgroupsPath"] = "/paddock-oci/res1"
    b = make_bundle(str(tmp_path), ["sleep", "600"], rootfs=rootfs, edit=edit)
    rt.create("res1", b)
    mem = [d for d in cgroup_dirs("/paddock-oci/res1") if "/memory/" in d or d.startswith("/sys/fs/cgroup/paddock")]
    assert mem, cgroup_dirs("/paddock-oci/res1")
    d = mem[0]
    limit = open(os.path.join(d, "memory.limit_in_bytes" if os.path.exists(os.path.join(d, "memory.limit_in_bytes"))
                              else "memory.max")).read().strip()
    assert int(limit) == 64 << 20
    pid = str(rt.state("res1")["pid"])
    assert pid in open(os.path.join(d, "cgroup.procs")).read().split()


def test_user_namespace_with_mappings(tmp_path, rt):
    # The mapped root must be able to reach the bundle: a world-searchable dir.
    pub = tempfile.mkdtemp(prefix="pd-oci-userns-")
    os.chmod(pub, 0o755)
    try:
        userns_run(pub, rt)
    finally:
        shutil.rmtree(pub)


def userns_run(pub, rt):
    b = make_bundle(pub, ["sh", "-c", "id -u; cat /proc/self/uid_map; ls /dev/null"],
                    edit=lambda c: (c["linux"]["namespaces"].append({"type": "user"}),
                                    c["linux"].update(uidMappings=[{"containerID": 0, "hostID": 200000, "size": 65536}],
                                                      gidMappings=[{"containerID": 0, "hostID": 200000, "size": 65536}])))
    out = rt("run", "--bundle", b, "u1").stdout.split()
    assert out[0] == "0"
    assert out[1:4] == ["0", "200000", "65536"]
    assert out[4] == "/dev/null"


def test_seccomp_from_config_and_default(tmp_path, rootfs, rt):
    def edit(c):
        c["linux"]["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
                                 "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                                               "errnoRet": 1}]}
    b = make_bundle(str(tmp_path), ["sh", "-c", "mkdir /tmp/x 2>&1; echo rc=$?"], rootfs=rootfs, edit=edit)
    out = rt("run", "--bundle", b, "s1").stdout
    assert "Operation not permitted" in out and "rc=1" in out
    # No profile in the config: paddock's default, which refuses new namespaces.
    b2 = make_bundle(str(tmp_path), ["sh", "-c", "unshare -n true 2>&1; echo rc=$?"], name="b2", rootfs=rootfs)
    out = rt("run", "--bundle", b2, "s2").stdout
    assert "rc=0" not in out


def test_hooks_get_state_on_stdin(tmp_path, rootfs, rt):
    log = tmp_path / "hooks.log"
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/sh\necho \"$1 $(cat)\" >> %s\n" % log)
    hook.chmod(0o755)

    def edit(c):
        c["hooks"] = {k: [{"path": str(hook), "args": ["hook.sh", k]}]
                      for k in ("createRuntime", "poststart", "poststop")}
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs, edit=edit)
    rt.create("h1", b)
    rt("start", "h1")
    wait_status(rt, "h1", "stopped")
    rt("delete", "h1")
    lines = log.read_text().splitlines()
    assert [l.split()[0] for l in lines] == ["createRuntime", "poststart", "poststop"]
    st = json.loads(lines[0].split(" ", 1)[1])
    assert st["id"] == "h1" and st["pid"] > 0 and st["bundle"] == b


def test_failing_hook_fails_create_and_leaves_nothing(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs,
                    edit=lambda c: c.update(hooks={"createRuntime": [{"path": "/bin/false"}]}))
    p = rt.create("h2", b, check=False)
    assert p.returncode != 0 and "hook createRuntime" in p.stderr
    assert not os.path.exists(os.path.join(rt.root, "h2"))


def test_supervised_isolation_audits_and_is_reaped(rt):
    # Supervised needs a user namespace: the bundle must be reachable by
    # the mapped root (a world-searchable dir).
    pub = tempfile.mkdtemp(prefix="pd-oci-sv-")
    os.chmod(pub, 0o755)
    try:
        def edit(c):
            c["annotations"] = {"run.oci.paddock.isolation": "supervised"}
            c["linux"]["namespaces"].append({"type": "user"})
            c["linux"]["uidMappings"] = [{"containerID": 0, "hostID": 300000, "size": 65536}]
            c["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 300000, "size": 65536}]
            c["process"]["noNewPrivileges"] = False
        b = make_bundle(pub, ["sh", "-c", "cat /etc/passwd >/dev/null; exec sleep 600"], edit=edit)
        p = rt.create("sv1", b)
        assert "noNewPrivileges forced on" in p.stderr
        st = json.load(open(os.path.join(rt.root, "sv1", "state.json")))
        sup = st["supervisor"]
        assert open("/proc/%d/comm" % sup).read().strip().startswith("paddock-superv")
        rt("start", "sv1")
        # An exec'd process gets a supervisor of its own, same audit trail.
        assert rt("exec", "sv1", "sh", "-c", "cat /etc/group >/dev/null; echo ok").stdout == "ok\n"
        rt("kill", "sv1", "KILL")
        import time
        end = time.monotonic() + 10
        while rt.state("sv1")["status"] != "stopped" and time.monotonic() < end:
            time.sleep(0.02)
        events = [json.loads(l) for l in open(os.path.join(rt.root, "sv1", "audit.jsonl"))]
        assert any(e["event"] == "supervisor.exec" and e.get("path") == "/bin/sh" and e.get("pid") == 1 for e in events), events
        assert any(e["event"] == "supervisor.open" and e.get("path") == "/etc/passwd" for e in events), events
        assert any(e["event"] == "supervisor.open" and e.get("path") == "/etc/group" and e.get("pid", 0) > 1
                   for e in events), events
        rt("delete", "sv1")
        assert not os.path.exists("/proc/%d/comm" % sup) or \
            open("/proc/%d/stat" % sup).read().split(")")[1].split()[0] in ("Z", "X")
    finally:
        shutil.rmtree(pub)


def test_supervised_without_user_namespace_is_refused(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs,
                    edit=lambda c: c.update(annotations={"run.oci.paddock.isolation": "supervised"}))
    p = rt.create("sv2", b, check=False)
    assert p.returncode != 0 and "needs a new user namespace" in p.stderr
    assert not os.path.exists(os.path.join(rt.root, "sv2"))


def test_create_container_and_start_container_hooks(tmp_path, rootfs, rt):
    log = tmp_path / "cc.log"

    def edit(c):
        # createContainer: in the container's mount namespace before
        # pivot_root (host paths still resolve); startContainer: inside the
        # container, before the workload's exec.
        c["hooks"] = {"createContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "cat > %s" % log]}],
                      "startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "cat > /dev/shm/state"]}]}
    b = make_bundle(str(tmp_path), ["sh", "-c", "cat /dev/shm/state"], rootfs=rootfs, edit=edit)
    out = rt("run", "--bundle", b, "cc1").stdout
    assert json.loads(out)["id"] == "cc1"
    assert json.loads(log.read_text())["id"] == "cc1"


def test_run_foreground_terminal_relays_the_pty(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["sh"], rootfs=rootfs, edit=lambda c: c["process"].update(terminal=True))
    p = rt("run", "--bundle", b, "tt1", input="tty; echo typed-$((6*7)); exit 9\n", check=False)
    assert p.returncode == 9, p.stderr
    out = p.stdout.replace("\r", "")
    assert "/dev/pts/0" in out and "typed-42" in out
