"""paddock-oci linux.sysctl (issue 12, item 5): only sysctls of a namespace
the container owns are written, from inside it; anything that would change
the host's value (vm.*, kernel.core_pattern, net.* in the host's network
namespace) is refused at create, before anything exists. Every test reads
the host's value before and after; the fixture puts back whatever a broken
runtime changed, so a failure never leaves the host altered."""
import os
import subprocess

import pytest

from oci_helpers import make_bundle, rootfs, rt  # noqa: F401
from test_bad_input import refused


def host_sysctl(key):
    with open("/proc/sys/" + key.replace(".", "/")) as f:
        return f.read().strip()


@pytest.fixture
def host_values():
    """Remember host values; restore any a test's container changed."""
    seen = {}

    def read(key):
        v = host_sysctl(key)
        seen.setdefault(key, v)
        return v
    yield read
    changed = {}
    for k, v in seen.items():
        now = host_sysctl(k)
        if now != v:
            changed[k] = now
            with open("/proc/sys/" + k.replace(".", "/"), "w") as f:
                f.write(v)
    assert not changed, "host sysctls changed (restored): %r" % changed


def other(value, a, b):
    return b if value == a else a


def with_sysctl(sysctls, namespaces=None):
    def edit(c):
        c["linux"]["sysctl"] = sysctls
        if namespaces is not None:
            c["linux"]["namespaces"] = namespaces
    return edit


ALL_NS = [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")]
NO_NET = [{"type": t} for t in ("pid", "ipc", "uts", "mount")]
NO_IPC = [{"type": t} for t in ("pid", "network", "uts", "mount")]


def test_not_namespaced_refused(tmp_path, rootfs, rt, host_values):
    swap = host_values("vm.swappiness")
    core = host_values("kernel.core_pattern")
    cases = [
        ({"vm.swappiness": other(swap, "10", "11")}, "'vm.swappiness' is not namespaced"),
        ({"kernel.core_pattern": "|/bin/false paddock-test"}, "'kernel.core_pattern' is not namespaced"),
        ({"vm/swappiness": other(swap, "10", "11")}, "'vm/swappiness' is not namespaced"),
        # One bad key among allowed ones refuses the whole config.
        ({"net.ipv4.ip_forward": "1", "vm.swappiness": other(swap, "10", "11")}, "vm.swappiness"),
        ({"kernel.hostname": "x"}, "'hostname' field"),
    ]
    for i, (sysctls, word) in enumerate(cases):
        b = make_bundle(str(tmp_path), ["true"], name="b%d" % i, rootfs=rootfs, edit=with_sysctl(sysctls))
        refused(rt, "v%d" % i, b, word, "refused")
        assert host_sysctl("vm.swappiness") == swap
        assert host_sysctl("kernel.core_pattern") == core


def test_net_sysctl_in_host_netns_refused(tmp_path, rootfs, rt, host_values):
    ka = host_values("net.ipv4.tcp_keepalive_time")
    val = other(ka, "7201", "7202")
    # No network namespace in the config: the runtime's (host's) one.
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs,
                    edit=with_sysctl({"net.ipv4.tcp_keepalive_time": val}, NO_NET))
    refused(rt, "n1", b, "needs the container's own network namespace")
    # Joining the runtime's own network namespace by path is the same.
    joined = NO_NET + [{"type": "network", "path": "/proc/self/ns/net"}]
    b2 = make_bundle(str(tmp_path), ["true"], name="b2", rootfs=rootfs,
                     edit=with_sysctl({"net.ipv4.tcp_keepalive_time": val}, joined))
    refused(rt, "n2", b2, "needs the container's own network namespace")
    assert host_sysctl("net.ipv4.tcp_keepalive_time") == ka


def test_ipc_sysctl_without_ipc_ns_refused(tmp_path, rootfs, rt, host_values):
    shm = host_values("kernel.shmmax")
    b = make_bundle(str(tmp_path), ["true"], rootfs=rootfs,
                    edit=with_sysctl({"kernel.shmmax": other(shm, "12345678", "12345679")}, NO_IPC))
    refused(rt, "i1", b, "needs the container's own ipc namespace")
    assert host_sysctl("kernel.shmmax") == shm


def test_namespaced_sysctls_applied_inside_only(tmp_path, rootfs, rt, host_values):
    fwd = host_values("net.ipv4.ip_forward")
    shm = host_values("kernel.shmmax")
    want_fwd = other(fwd, "1", "0")
    want_shm = other(shm, "12345678", "12345679")
    b = make_bundle(str(tmp_path), ["sh", "-c", "cat /proc/sys/net/ipv4/ip_forward /proc/sys/kernel/shmmax "
                                    "/proc/sys/kernel/domainname"], rootfs=rootfs,
                    edit=with_sysctl({"net.ipv4.ip_forward": want_fwd, "kernel/shmmax": want_shm,
                                      "kernel.domainname": "paddock.test"}, ALL_NS))
    out = rt("run", "--bundle", b, "a1").stdout.split()
    assert out == [want_fwd, want_shm, "paddock.test"]
    assert host_sysctl("net.ipv4.ip_forward") == fwd
    assert host_sysctl("kernel.shmmax") == shm
    assert not os.path.exists(os.path.join(rt.root, "a1"))


def test_net_sysctl_in_joined_netns(tmp_path, rootfs, rt, host_values):
    """A network namespace joined by path that is not the runtime's own is
    the container's: its sysctls are written there."""
    fwd = host_values("net.ipv4.ip_forward")
    name = "pd-sysctl-%d" % os.getpid()
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        joined = NO_NET + [{"type": "network", "path": "/run/netns/" + name}]
        b = make_bundle(str(tmp_path), ["cat", "/proc/sys/net/ipv4/ip_forward"], rootfs=rootfs,
                        edit=with_sysctl({"net.ipv4.ip_forward": "1"}, joined))
        assert rt("run", "--bundle", b, "j1").stdout.strip() == "1"
        p = subprocess.run(["ip", "netns", "exec", name, "cat", "/proc/sys/net/ipv4/ip_forward"],
                           capture_output=True, text=True, check=True)
        assert p.stdout.strip() == "1"
        assert host_sysctl("net.ipv4.ip_forward") == fwd
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)
