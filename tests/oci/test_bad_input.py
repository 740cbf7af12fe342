"""paddock-oci bad input (issue 8, "Bad input"): each case is a clear error,
and nothing is created outside the bundle and the runtime root, nothing
leaked (the rt fixture checks the root and the cgroups; these tests check
the host side of each case)."""
import json
import os

from oci_helpers import make_bundle, make_rootfs, rootfs, rt  # noqa: F401


# Mount points of paddock's own sandbox instances (paddock run/serve, other
# tests or users on the host) come and go while these tests run; paddock-oci
# makes none of them.
OTHER_INSTANCES = ("/pd-srv-run-", "/dev/shm/paddock/", "/run/paddock/", "/tmp/pd-state-", "/tmp/paddock-test-state")


def host_mounts():
    with open("/proc/self/mountinfo") as f:
        return sorted(m for m in (l.split()[4] for l in f) if not any(o in m for o in OTHER_INSTANCES))


def refused(rt, cid, bundle, *words):
    before = host_mounts()
    p = rt.create(cid, bundle, check=False)
    assert p.returncode != 0, p.stdout
    for w in words:
        assert w in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(rt.root, cid))
    assert host_mounts() == before
    return p


def test_malformed_config(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs)
    with open(os.path.join(b, "config.json"), "w") as f:
        f.write('{"ociVersion": "1.0.2", "process": ')
    refused(rt, "m1", b, "malformed JSON")


def test_missing_config(tmp_path, rt):
    os.makedirs(tmp_path / "empty")
    refused(rt, "m2", str(tmp_path / "empty"), "config.json", "No such file")


def test_wrong_types_and_versions(tmp_path, rootfs, rt):
    cases = [
        (lambda c: c.update(ociVersion="2.0.0"), "ociVersion"),
        (lambda c: c["process"].update(args=[]), "process.args"),
        (lambda c: c["process"].update(cwd="relative"), "process.cwd"),
        (lambda c: c["mounts"].append({"destination": "rel", "type": "tmpfs"}), "destination"),
        (lambda c: c["process"].update(rlimits=[{"type": "RLIMIT_BOGUS", "soft": 1, "hard": 1}]), "rlimit"),
        (lambda c: c["linux"]["namespaces"].append({"type": "user"}), "uidMappings"),
        (lambda c: c.update(annotations={"run.oci.paddock.isolation": "vm"}), "or 'microvm'"),
        (lambda c: c["linux"].update(cgroupsPath="/x/../../escape"), "contains '..'"),
        (lambda c: c["linux"].update(sysctl={"../../etc": "1"}), "bad sysctl"),
    ]
    for i, (edit, word) in enumerate(cases):
        b = make_bundle(str(tmp_path), ["true"], name="b%d" % i, rootfs=rootfs, edit=edit)
        refused(rt, "w%d" % i, b, word)


def test_unknown_namespace_type(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs,
                    edit=lambda c: c["linux"]["namespaces"].append({"type": "bogus"}))
    refused(rt, "n1", b, "unknown namespace type 'bogus'")


def test_mount_destination_symlink_out_of_rootfs(tmp_path, rt):
    # Own rootfs: the escaping symlinks live in it.
    for i, target in enumerate(["/etc", "../../../../../../../etc"]):
        b = make_bundle(str(tmp_path), ["true"], name="b%d" % i,
                        edit=lambda c: c["mounts"].append({"destination": "/evil", "type": "tmpfs",
                                                           "source": "tmpfs"}))
        os.symlink(target, os.path.join(b, "rootfs", "evil"))
        etc_before = sorted(os.listdir("/etc"))
        refused(rt, "s%d" % i, b, "/evil", "outside the container's rootfs")
        assert sorted(os.listdir("/etc")) == etc_before


def test_bind_destination_through_symlinked_parent(tmp_path, rt):
    b = make_bundle(str(tmp_path), ["true"],
                    edit=lambda c: c["mounts"].append({"destination": "/up/x", "type": "bind",
                                                       "source": "/tmp", "options": ["bind"]}))
    os.symlink("/", os.path.join(b, "rootfs", "up"))
    refused(rt, "s9", b, "outside the container's rootfs")
    assert not os.path.exists("/x")


def test_rootfs_dev_symlink_to_host(tmp_path, rt):
    b = make_bundle(str(tmp_path), ["true"])
    os.rmdir(os.path.join(b, "rootfs", "dev"))
    os.symlink("/dev", os.path.join(b, "rootfs", "dev"))
    devs_before = sorted(os.listdir("/dev"))
    refused(rt, "d1", b, "/dev")
    # Without a /dev mount in the config as well.
    b2 = make_bundle(str(tmp_path), ["true"], name="b2",
                     edit=lambda c: c.update(mounts=[m for m in c["mounts"] if not m["destination"].startswith("/dev")]))
    os.rmdir(os.path.join(b2, "rootfs", "dev"))
    os.symlink("/dev", os.path.join(b2, "rootfs", "dev"))
    refused(rt, "d2", b2, "/dev is a symlink")
    assert sorted(os.listdir("/dev")) == devs_before


def test_duplicate_id(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["sleep", "60"], rootfs=rootfs)
    rt.create("dup", b)
    st = rt.state("dup")
    p = rt.create("dup", b, check=False)
    assert p.returncode != 0 and "already exists" in p.stderr
    assert rt.state("dup") == st        # the first one is untouched
    rt("delete", "dup")


def test_invalid_ids(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs)
    for bad in ("../escape", "a/b", "..", ""):
        p = rt("create", "--bundle", b, bad, check=False, files=True)
        assert p.returncode != 0 and ("invalid container id" in p.stderr or "id missing" in p.stderr), p.stderr
    assert not os.path.exists(os.path.join(os.path.dirname(rt.root), "escape"))


def test_state_kill_delete_unknown_id(rt):
    for verb in (["state"], ["kill"], ["delete"], ["start"], ["pause"], ["exec"]):
        p = rt(*(verb + ["nosuch"] + (["true"] if verb == ["exec"] else [])), check=False)
        assert p.returncode != 0 and "does not exist" in p.stderr, (verb, p.stderr)
    # delete --force of a missing container is not an error (runc's rule).
    assert rt("delete", "--force", "nosuch").returncode == 0


def test_kill_stopped_and_bad_signal(tmp_path, rootfs, rt):
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs)
    rt.create("k1", b)
    p = rt("kill", "k1", "SIGNOPE", check=False)
    assert p.returncode != 0 and "unknown signal" in p.stderr
    rt("start", "k1")
    import time
    end = time.monotonic() + 10
    while rt.state("k1")["status"] != "stopped" and time.monotonic() < end:
        time.sleep(0.02)
    p = rt("kill", "k1", "TERM", check=False)
    assert p.returncode != 0 and "not running" in p.stderr
    rt("delete", "k1")


def test_failed_setup_leaves_no_cgroup(tmp_path, rootfs, rt):
    # The init fails after its cgroup exists (exec of a missing program).
    b = make_bundle(str(tmp_path), ["/no/such/program"], rootfs=rootfs)
    refused(rt, "f1", b, "/no/such/program")


def test_errors_reach_the_json_log(tmp_path, rootfs, rt):
    """conmon and containerd's shim read the last error line of --log."""
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs,
                    edit=lambda c: c["linux"]["namespaces"].append({"type": "bogus"}))
    log = str(tmp_path / "log.json")
    p = rt("--log", log, "--log-format", "json", "create", "--bundle", b, "lg1", check=False, files=True)
    assert p.returncode != 0
    lines = [json.loads(l) for l in open(log)]
    assert lines[-1]["level"] == "error" and "unknown namespace type 'bogus'" in lines[-1]["msg"]
    assert "time" in lines[-1]
    # Informational lines go to the log only, never to the engine's stderr.
    b2 = make_bundle(str(tmp_path), ["true"], name="b2", rootfs=rootfs)
    p = rt("--log", log, "--log-format", "json", "run", "--bundle", b2, "lg2")
    assert p.stderr == ""
    assert any(json.loads(l)["level"] == "info" and "default filter" in json.loads(l)["msg"] for l in open(log))
