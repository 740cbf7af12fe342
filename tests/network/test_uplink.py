"""The default uplink (issue 15): without --net-uplink, a router's traffic
leaves through a user-mode network process (slirp4netns, else pasta) whose
sockets are the host's, TCP through paddock's relay (test_relay.py). Every test here runs paddock inside a stand-in host
(_fakenet.py, FakeNet(uplink=...)): a network namespace whose route leads to
the fake internet, so the uplink process's sockets are that namespace's and
no test traffic leaves the machine. Each test runs once per uplink:
pasta, slirp4netns (every protocol through the process) and relay.

What is checked: egress by name and address through it; the host's
loopback and its own addresses stay closed in every mode (canaries, and
from inside the uplink's own namespace, the uplink process's flags); the
process's privileges; the resolver defaults (the host's resolv.conf,
systemd-resolved's stub, a loopback-only resolver); egress that cannot
work (no program, no resolver, a resolver that never answers) still
creates the sandbox and says why in one line; the process killed in the
middle of a transfer (restarted, connections reset, nothing left); its
supervisor killed; 100 sandboxes at once; a microvm guest; gc.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fakenet import (BULK_PORT, DNS, GATEWAY, HOST_ADDR, HOST_ADDR6, ULA6, WEB, WEB6, FakeNet, hosted,  # noqa: E402,F401
                      host_canaries, net_dir, router_files)
import pdtest  # noqa: E402
from pdtest import PADDOCK_BIN, Paddock, child_env  # noqa: E402

NETD = os.environ.get("PADDOCK_NETD") or os.path.join(os.path.dirname(PADDOCK_BIN), "net", "paddock-netd")
UPLINK = os.environ.get("PADDOCK_UPLINK") or os.path.join(os.path.dirname(PADDOCK_BIN), "net", "paddock-uplink")
KINDS = [k for k in os.environ.get("PADDOCK_TEST_USERMODE", "pasta,slirp4netns,relay").split(",") if k]

# fetch http://NAME/ (or an address) and print one JSON object per target
FETCH = r"""
import json, socket, sys
out = {}
for t in json.loads(sys.argv[1]):
    host, port = (t.rsplit(":", 1) + ["80"])[:2]
    try:
        addr = socket.gethostbyname(host)
    except OSError as e:
        out[t] = "resolve: %s" % e
        continue
    try:
        s = socket.create_connection((addr, int(port)), timeout=3)
        s.sendall(b"GET / HTTP/1.0\r\nHost: " + host.encode() + b"\r\n\r\n")
        data = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
        out[t] = "ok" if b"hello from" in data else "bad answer %r" % data[:80]
    except Exception as e:
        out[t] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""

PROBE = r"""
import json, socket, sys
out = {}
for a, port in json.loads(sys.argv[1]):
    try:
        s = socket.create_connection((a, port), timeout=1.5)
        out["%s:%d" % (a, port)] = "CONNECTED %r" % s.recv(64)
    except Exception as e:
        out["%s:%d" % (a, port)] = type(e).__name__
print(json.dumps(out))
"""


def env(extra=None):
    e = {"PADDOCK_UPLINK": UPLINK}
    if os.access(NETD, os.X_OK):
        e["PADDOCK_NETD"] = NETD
    e.update(extra or {})
    return e


@pytest.fixture(scope="module", params=KINDS)
def fn(request, tmp_path_factory):
    f = FakeNet(tmp_path_factory.mktemp("fakenet-up"), uplink=request.param).start()
    try:
        with hosted(f):
            yield f
    finally:
        f.stop()


@pytest.fixture(scope="module")
def fakenet(fn):
    return fn       # for _fakenet.host_canaries


@pytest.fixture(scope="module")
def pd(state_root, fn):
    p = Paddock(os.path.join(state_root, "uplink-" + fn.mode))
    os.makedirs(p.state, exist_ok=True)
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert router_files(p) == [], "router left behind after gc"


def run(p, fn, net, cmd, extra=(), check=True, timeout=120, env_extra=None):
    r = p.run(list(net) + ["--net-uplink", fn.mode, "--net-resolver", DNS] + list(extra) + ["--"] + cmd,
              timeout=timeout, env=env(env_extra))
    if check:
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


def fetch(p, fn, net, targets, **kw):
    r = run(p, fn, net, ["python3", "-c", FETCH, json.dumps(targets)], **kw)
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def probe(p, fn, net, targets, **kw):
    r = run(p, fn, net, ["python3", "-c", PROBE, json.dumps(targets)], **kw)
    return json.loads(r.stdout.strip().splitlines()[-1])


def uplink_pids(p):
    """(supervisor, uplink process) of p's router, or None for a gone one."""
    try:
        sup = int(open(os.path.join(net_dir(p), "uplink.pid")).read())
        kids = open("/proc/%d/task/%d/children" % (sup, sup)).read().split()
    except (OSError, ValueError):
        return None, None
    # not the TCP relay's gate and worker (test_relay.py)
    procs = []
    for k in kids:
        try:
            if not open("/proc/%s/comm" % k).read().startswith("pd-relay"):
                procs.append(int(k))
        except OSError:
            pass
    return sup, (procs[0] if procs else None)


def status(pid):
    out = {}
    for l in open("/proc/%d/status" % pid):
        k, _, v = l.partition(":")
        out[k] = v.split()
    return out


def wait_for(cond, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)    # an outside process's state: nothing to wait on


def egress(p):
    with open(os.path.join(net_dir(p), "egress")) as f:
        return dict(l.split("=", 1) for l in f.read().splitlines())


def test_open_reaches_the_internet_by_name_through_the_default_uplink(pd, fn):
    res, err = fetch(pd, fn, ["--net", "open"], ["web.example.test", WEB[2], "api.example.test:8080"])
    assert all(v == "ok" for v in res.values()), res
    assert "warning" not in err, err
    eg = egress(pd)
    assert eg["uplink"] == fn.mode and eg["resolvers"] == DNS and eg["problem"] == "", eg
    # policy: the name it allows, nothing else
    res, _ = fetch(pd, fn, ["--net", "policy", "--allow", "web.example.test"], ["web.example.test", WEB[2]])
    assert res == {"web.example.test": "ok", WEB[2]: res[WEB[2]]} and res[WEB[2]] != "ok", res
    # none: nothing
    res, _ = fetch(pd, fn, ["--net", "none"], [WEB[0]])
    assert res[WEB[0]] != "ok", res
    # this stand-in host has no IPv6: neither have the sandboxes
    assert eg["ipv6"] == "0" and "no IPv6 default route" in eg["ipv6_why"], eg
    r = run(pd, fn, ["--net", "open"], ["sh", "-c", "ip -6 addr show dev eth0 scope global"])
    assert r.stdout.strip() == "", r.stdout


def test_the_uplink_process_is_unprivileged(pd, fn):
    fetch(pd, fn, ["--net", "open"], [WEB[0]])
    sup, proc = uplink_pids(pd)
    assert sup and proc, "no uplink process"
    for pid in (sup, proc):
        st = status(pid)
        uid = int(st["Uid"][0])
        assert uid >= 1000000000 and len(set(st["Uid"])) == 1, ("uplink runs as", st["Uid"])
        assert st["NoNewPrivs"] == ["1"], st["NoNewPrivs"]
    assert status(sup)["CapEff"] == ["0000000000000000"], "the supervisor kept capabilities"
    # the process: capabilities only in a user namespace of its own, whose
    # root is that uid; sockets in the (stand-in) host's network namespace
    assert os.readlink("/proc/%d/ns/user" % proc) != os.readlink("/proc/self/ns/user")
    with open("/proc/%d/uid_map" % proc) as f:
        assert f.read().split() == ["0", str(status(proc)["Uid"][0]), "1"]
    host_net = os.stat(fn.host_path)
    net = os.stat("/proc/%d/ns/net" % proc)
    assert (net.st_dev, net.st_ino) == (host_net.st_dev, host_net.st_ino)


def test_host_loopback_and_addresses_stay_closed_in_every_mode(pd, fn, host_canaries):
    canaries, hits = host_canaries
    # the stand-in host's loopback, its own address, and the same port on
    # its gateway (pasta maps the gateway to the host's loopback unless
    # --no-map-gw) and on slirp4netns's gateway (the host, unless
    # --disable-host-loopback)
    any_port = canaries[-1][1]
    targets = [[a, port] for a, port, _ in canaries] + [[GATEWAY, any_port], ["10.0.2.2", any_port]]
    lift = ["--allow", HOST_ADDR, "--allow", "127.0.0.1", "--allow", "198.18.0.0/24", "--allow", "10.0.2.0/24"]
    for net in (["--net", "none"], ["--net", "open"], ["--net", "open"] + lift, ["--net", "policy"] + lift):
        res = probe(pd, fn, net, targets)
        assert not any(v.startswith("CONNECTED") for v in res.values()), (net, res)
    assert hits() == "", "a canary on the host was reached: %s" % hits()
    # and from inside the uplink's own namespace, past the router's rules:
    # the process itself opens neither the host's loopback nor its gateway
    # mapping (root here: nothing in a sandbox is)
    targets = [["127.0.0.1", any_port], [GATEWAY, any_port], ["10.0.2.2", any_port]]
    r = subprocess.run(["nsenter", "--net=" + os.path.join(net_dir(pd), "uplink-net"), sys.executable, "-c",
                        PROBE, json.dumps(targets)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert not any(v.startswith("CONNECTED") for v in res.values()), res
    assert hits() == "", "a canary on the host was reached from the uplink: %s" % hits()


SLOW_ANSWER = r"""
import socket, sys, threading, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7200)); s.listen(8)
print("up", flush=True)
c, _ = s.accept()
c.recv(100)
time.sleep(float(sys.argv[2]))     # the server thinks (a large git clone, a slow API)
c.sendall(b"answer\n")
c.close()
"""


@pytest.mark.uplink_only("slirp4netns", "relay")     # pasta 2023-03 resets such connections (docs/network.md)
def test_a_slow_answer_arrives(pd, fn):
    """A server that is silent for 40 s after the request still answers
    through the default uplink. (pasta 2023-03 resets such a connection
    after ~24 s: the reason slirp4netns is the default; docs/network.md.)"""
    srv = subprocess.Popen(["ip", "netns", "exec", fn.name, sys.executable, "-c", SLOW_ANSWER, WEB[1], "40"],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "up"
        r = run(pd, fn, ["--net", "open"], ["python3", "-c", "import socket\n"
                                            "s = socket.create_connection(('%s', 7200), timeout=120)\n"
                                            "s.sendall(b'question')\nprint(s.makefile().readline().strip())"
                                            % WEB[1]], timeout=180)
        assert r.stdout.strip() == "answer", (r.stdout, r.stderr)
    finally:
        srv.kill()
        srv.wait()


def test_refused_connect_is_refused_not_a_timeout(pd, fn):
    """pasta 2023-03 answers a refused connect with a RST lacking its ACK
    flag (the uplink netns adds it, nft_uplink.c)."""
    r = run(pd, fn, ["--net", "open"], ["python3", "-c", "import socket\ntry:\n"
                                        "    socket.create_connection(('%s', 81), timeout=20)\n"
                                        "except Exception as e:\n    print(type(e).__name__)" % WEB[0]])
    assert r.stdout.strip() == "ConnectionRefusedError", r.stdout


def test_lost_syns_do_not_break_connections(pd, fn):
    """Half the SYNs to a port are lost in the fake internet: the host's
    kernel and the sandbox's both retransmit; the uplink must not turn that
    into a refused or reset connection (pasta 2023-03 did: nft_uplink.c)."""
    fn.exec("nft", "add table inet lossy")
    fn.exec("nft", "add chain inet lossy in { type filter hook input priority 0; }")
    fn.exec("nft", "add rule inet lossy in tcp dport %d tcp flags & (syn|ack) == syn numgen random mod 2 == 0 drop"
            % BULK_PORT)
    try:
        code = ("import socket, collections\nout = collections.Counter()\nfor i in range(12):\n"
                "    try:\n        s = socket.create_connection(('%s', %d), timeout=20); s.sendall(b'1000\\n')\n"
                "        n = 0\n        while True:\n            d = s.recv(65536)\n            if not d: break\n"
                "            n += len(d)\n        out['ok' if n == 1000 else 'short'] += 1\n"
                "    except Exception as e: out[type(e).__name__] += 1\nprint(dict(out))" % (WEB[0], BULK_PORT))
        r = run(pd, fn, ["--net", "open"], ["python3", "-c", code], timeout=400)
        assert r.stdout.strip() == "{'ok': 12}", r.stdout
    finally:
        fn.exec("nft", "delete table inet lossy", check=False)


LONG_READ = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.sendall(b"%d\n" % (1 << 40))
s.settimeout(1)
got, bad = 0, 0
while True:
    try:
        d = s.recv(1 << 16)
    except socket.timeout:
        # quiet: say something, as any protocol with a keep-alive does
        try:
            s.send(b"?")
        except OSError as e:
            print("ERROR", type(e).__name__, got, bad, flush=True)
            break
        continue
    except OSError as e:
        print("ERROR", type(e).__name__, got, bad, flush=True)
        break
    if not d:
        print("EOF", got, bad, flush=True)
        break
    bad += len(d) - d.count(b"x")
    if got < 4 << 20 <= got + len(d):
        print("STREAMING", flush=True)
    got += len(d)
"""


@pytest.mark.uplink_only("pasta", "slirp4netns")    # relayed TCP does not cross the process: test_relay.py
def test_uplink_killed_mid_transfer(pd, fn):
    fetch(pd, fn, ["--net", "open"], [WEB[0]])             # the router and its uplink exist
    sup, old = uplink_pids(pd)
    assert sup and old
    reader = pd.popen(["--net", "open", "--net-uplink", fn.mode, "--net-resolver", DNS, "--", "python3", "-c",
                       LONG_READ, WEB[0], str(BULK_PORT)], env=child_env(env()), text=True)
    try:
        assert reader.stdout.readline().strip() == "STREAMING", reader.stderr.read()
        os.kill(old, signal.SIGKILL)
        # the connection fails: a reset, not a hang and not corrupt data
        line = reader.stdout.readline().split()
        assert line[:2] == ["ERROR", "ConnectionResetError"] and line[3] == "0", line
        assert reader.wait(timeout=60) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    # restarted by its supervisor, and egress works again
    wait_for(lambda: uplink_pids(pd)[1] not in (None, old), "the uplink was not restarted")
    assert uplink_pids(pd)[0] == sup
    wait_for(lambda: egress_ok(pd, fn), "egress did not come back")
    log = open(os.path.join(net_dir(pd), "uplink.log")).read()
    assert "was killed by signal 9" in log and "restarting" in log, log


def egress_ok(pd, fn):
    res, _ = fetch(pd, fn, ["--net", "open"], [WEB[1]])
    return res[WEB[1]] == "ok"


def test_supervisor_killed_takes_the_process_and_comes_back(pd, fn):
    fetch(pd, fn, ["--net", "open"], [WEB[0]])
    sup, proc = uplink_pids(pd)
    os.kill(sup, signal.SIGKILL)
    wait_for(lambda: not os.path.exists("/proc/%d/cmdline" % proc) or
             b"paddock" not in open("/proc/%d/cmdline" % proc, "rb").read() and proc not in live_pids(),
             "the uplink process outlived its supervisor")
    # the next sandbox says egress is down in one line, and revives it:
    # the revived supervisor starts the process again
    r = run(pd, fn, ["--net", "open"], ["true"])
    wait_for(lambda: uplink_pids(pd)[1] is not None, "the supervisor was not revived")
    assert uplink_pids(pd)[0] != sup
    wait_for(lambda: egress_ok(pd, fn), "egress did not come back")


def live_pids():
    return {int(p) for p in os.listdir("/proc") if p.isdigit()}


def test_resolver_that_never_answers(pd, state_root, fn):
    """An upstream that swallows queries: names fail (SERVFAIL, after netd's
    three tries), addresses still work, the audit says why."""
    p = Paddock(os.path.join(state_root, "uplink-blackhole-" + fn.mode))
    os.makedirs(p.state, exist_ok=True)
    hole = "198.51.100.54"
    fn.exec("ip", "addr", "add", hole + "/32", "dev", "lo")
    sink = subprocess.Popen(["ip", "netns", "exec", fn.name, sys.executable, "-c",
                             "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                             "s.bind(('%s',53))\nprint('up',flush=True)\nwhile True: s.recv(512)" % hole],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().strip() == "up"
        r = p.run(["--net", "open", "--net-uplink", fn.mode, "--net-resolver", hole, "--", "python3", "-c",
                   FETCH, json.dumps(["web.example.test", WEB[0]])], timeout=120, env=env())
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout.strip().splitlines()[-1])
        assert res["web.example.test"].startswith("resolve:") and res[WEB[0]] == "ok", res
    finally:
        sink.kill()
        sink.wait()
        fn.exec("ip", "addr", "del", hole + "/32", "dev", "lo", check=False)
        assert p.gc().returncode == 0


@contextlib.contextmanager
def private_files(fn, files, tmp):
    """paddock (and the uplink process it starts) in a mount namespace of
    its own where files {path: text} replace the host's: a helper holds the
    namespace; every paddock command of the block runs inside it (the
    router's pins live there too, so gc must as well)."""
    script = ["set -e"]
    for i, (path, text) in enumerate(files.items()):
        src = os.path.join(str(tmp), "f%d" % i)
        with open(src, "w") as f:
            f.write(text)
        if path.startswith("/run/systemd/"):
            script.append("mountpoint -q /run/systemd/resolve || mount -t tmpfs tmpfs /run/systemd")
            script.append("mkdir -p %s" % os.path.dirname(path))
            script.append("cp %s %s" % (src, path))
        else:
            script.append("mount --bind %s %s" % (src, path))
    script.append("echo ready")
    script.append("exec sleep 100000")
    helper = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", "\n".join(script)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert helper.stdout.readline().strip() == "ready"
        pdtest.NETNS[:] = []
        pdtest.WRAP[:] = ["nsenter", "--mount=/proc/%d/ns/mnt" % helper.pid, "--net=" + fn.host_path]
        yield
    finally:
        pdtest.WRAP[:] = []
        pdtest.NETNS[:] = [fn.host_path]
        helper.kill()
        helper.wait()


def host_dns_on_loopback(fn):
    """The fake internet's zone, served on the stand-in host's loopback."""
    log = os.path.join(fn.tmp, "lo-dns.log")
    ready = os.path.join(fn.tmp, "lo-dns.ready")
    if os.path.exists(ready):
        os.unlink(ready)
    p = subprocess.Popen(["ip", "netns", "exec", fn.host, sys.executable, os.path.join(HERE, "_fakedns.py"),
                          "--listen", "127.0.0.1", "--zone", os.path.join(fn.tmp, "zone.json"), "--log", log,
                          "--ready", ready], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    wait_for(lambda: os.path.exists(ready), "loopback DNS did not start")
    return p


@pytest.mark.parametrize("case", ["resolv.conf", "systemd-resolved", "loopback"])
def test_resolver_defaults_to_the_hosts(state_root, fn, tmp_path, case):
    """No --net-resolver: netd asks what the host asks (its resolv.conf;
    systemd-resolved's stub replaced by the servers it uses; a resolver on
    the host's loopback through the uplink's own DNS forwarder)."""
    p = Paddock(os.path.join(state_root, "uplink-resolv-%s-%s" % (case, fn.mode)))
    os.makedirs(p.state, exist_ok=True)
    files = {"resolv.conf": {"/etc/resolv.conf": "nameserver %s\n" % DNS},
             "systemd-resolved": {"/etc/resolv.conf": "nameserver 127.0.0.53\noptions edns0\n",
                                  "/run/systemd/resolve/resolv.conf": "nameserver %s\n" % DNS},
             "loopback": {"/etc/resolv.conf": "nameserver 127.0.0.1\n"}}[case]
    lo = host_dns_on_loopback(fn) if case == "loopback" else None
    try:
        with private_files(fn, files, tmp_path):
            r = p.run(["--net", "open", "--net-uplink", fn.mode, "--", "python3", "-c", FETCH,
                       json.dumps(["web.example.test"])], timeout=120, env=env())
            try:
                assert r.returncode == 0, r.stderr
                assert json.loads(r.stdout.strip().splitlines()[-1]) == {"web.example.test": "ok"}, r.stdout
                assert "warning" not in r.stderr, r.stderr
                want = {"resolv.conf": DNS, "systemd-resolved": DNS,
                        "loopback": "169.254.53.53" if fn.mode == "pasta" else "10.0.2.3"}[case]
                assert egress(p)["resolvers"] == want, egress(p)
            finally:
                assert p.gc().returncode == 0
    finally:
        if lo:
            lo.kill()
            lo.wait()
    assert router_files(p) == []


def test_no_resolver_still_creates_and_says_why(state_root, fn, tmp_path):
    p = Paddock(os.path.join(state_root, "uplink-noresolv-" + fn.mode))
    os.makedirs(p.state, exist_ok=True)
    with private_files(fn, {"/etc/resolv.conf": "# nothing\n"}, tmp_path):
        try:
            r = p.run(["--net", "open", "--net-uplink", fn.mode, "--", "python3", "-c", FETCH,
                       json.dumps(["web.example.test", WEB[0]])], timeout=120, env=env())
            assert r.returncode == 0, r.stderr
            warn = [l for l in r.stderr.splitlines() if "warning" in l]
            assert len(warn) == 1 and "no upstream DNS resolver" in warn[0] and "--net-resolver" in warn[0], r.stderr
            res = json.loads(r.stdout.strip().splitlines()[-1])
            assert res[WEB[0]] == "ok" and res["web.example.test"].startswith("resolve:"), res
        finally:
            assert p.gc().returncode == 0


def test_no_uplink_program_still_creates_and_says_why(state_root, fn):
    p = Paddock(os.path.join(state_root, "uplink-none-" + fn.mode))
    os.makedirs(p.state, exist_ok=True)
    try:
        r = p.run(["--net", "open", "--net-resolver", DNS, "--", "python3", "-c", FETCH, json.dumps([WEB[0]])],
                  timeout=120, env=env({"PADDOCK_PASTA": "", "PADDOCK_SLIRP4NETNS": ""}))
        assert r.returncode == 0, r.stderr
        warn = [l for l in r.stderr.splitlines() if "warning" in l]
        assert len(warn) == 1 and "neither slirp4netns" in warn[0] and "pasta" in warn[0], r.stderr
        assert json.loads(r.stdout.strip().splitlines()[-1])[WEB[0]] != "ok"
        assert egress(p)["uplink"] == "none"
        # an explicit choice of a missing program is an error
        r = p.run(["--net", "open", "--net-uplink", fn.mode, "--state-dir", p.state + "-x", "--", "true"],
                  env=env({"PADDOCK_PASTA": "", "PADDOCK_SLIRP4NETNS": ""}))
        assert r.returncode == 125 and "not found" in r.stderr, r.stderr
    finally:
        assert p.gc().returncode == 0
        Paddock(p.state + "-x").gc()


def test_uplink_that_cannot_start_still_creates_and_says_why(state_root, fn):
    """The default uplink's supervisor missing (a broken install): the
    router works without an uplink, the sandbox is created, one line says
    why; asked for by name, the same uplink is an error."""
    p = Paddock(os.path.join(state_root, "uplink-nostart-" + fn.mode))
    os.makedirs(p.state, exist_ok=True)
    broken = env({"PADDOCK_UPLINK": "/nonexistent/paddock-uplink",
                  "PADDOCK_SLIRP4NETNS" if fn.mode == "pasta" else "PADDOCK_PASTA": ""})
    try:
        r = p.run(["--net", "open", "--net-resolver", DNS, "--", "python3", "-c", FETCH, json.dumps([WEB[0]])],
                  timeout=120, env=broken)
        assert r.returncode == 0, r.stderr
        warn = [l for l in r.stderr.splitlines() if "warning" in l]
        assert len(warn) == 1 and "could not be started" in warn[0], r.stderr
        assert json.loads(r.stdout.strip().splitlines()[-1])[WEB[0]] != "ok"
        assert egress(p)["uplink"] == "none"
        assert not os.path.exists(os.path.join(net_dir(p), "uplink-net")), "a half-made uplink was left"
        r = p.run(["--net", "open", "--net-uplink", fn.mode, "--state-dir", p.state + "-x", "--", "true"],
                  timeout=120, env=broken)
        assert r.returncode == 125 and "uplink" in r.stderr, r.stderr
    finally:
        assert p.gc().returncode == 0
        assert Paddock(p.state + "-x").gc().returncode == 0
    assert router_files(p) == []


def test_doctor_says_what_the_network_can_do(fn):
    r = subprocess.run(pdtest.netns_prefix() + [PADDOCK_BIN, "doctor"], capture_output=True, text=True,
                       timeout=120, env=child_env(env()))
    assert r.returncode == 0, r.stderr
    lines = {l.split()[0]: l for l in r.stdout.splitlines() if l.startswith("  ") and l.split()}
    assert "came up in a scratch router" in lines["uplink"], r.stdout
    assert lines["open"].split()[1] == "yes:" and lines["policy"].split()[1] == "yes:", r.stdout
    for k in ("namespaces", "cgroups", "seccomp", "landlock", "kvm", "runsc", "resolvers", "ipv6", "process",
              "container", "supervised", "microvm", "gvisor", "none"):
        assert k in lines, (k, r.stdout)
    r = subprocess.run(pdtest.netns_prefix() + [PADDOCK_BIN, "doctor"], capture_output=True, text=True,
                       timeout=120, env=child_env(env({"PADDOCK_PASTA": "", "PADDOCK_SLIRP4NETNS": ""})))
    lines = {l.split()[0]: l for l in r.stdout.splitlines() if l.startswith("  ") and l.split()}
    assert "no egress" in lines["open"] and "neither slirp4netns" in lines["open"], r.stdout


RENDEZVOUS = r"""
import socket, sys, threading
n = int(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7100)); s.listen(256)
print("up", flush=True)
conns = []
while len(conns) < n:
    c, _ = s.accept()
    conns.append(c)
    print("accepted", len(conns), flush=True)
for c in conns:
    c.sendall(b"go\n")
    c.close()
print("released", len(conns), flush=True)
"""

MEET = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], 7100), timeout=600)
f = s.makefile()
print(f.readline().strip())
"""


@pytest.mark.uplink_only("slirp4netns", "relay")     # pasta 2023-03 resets the first ones while they wait
def test_hundred_sandboxes_open_at_once(pd, fn):
    """100 sandboxes with --net open alive at the same time, each holding a
    connection to the fake internet until all 100 do."""
    n = 100
    meet = subprocess.Popen(["ip", "netns", "exec", fn.name, sys.executable, "-c", RENDEZVOUS, WEB[1], str(n)],
                            stdout=subprocess.PIPE, text=True)
    procs = []
    try:
        assert meet.stdout.readline().strip() == "up"
        for i in range(n):
            procs.append(pd.popen(["--net", "open", "--net-uplink", fn.mode, "--net-resolver", DNS, "--",
                                   "python3", "-c", MEET, WEB[1]], env=child_env(env()), text=True))
        outs = [p.communicate(timeout=900) for p in procs]
        # the ones that did not just wait for the others first: they say why
        bad = sorted([(p.returncode, o) for p, o in zip(procs, outs) if p.returncode != 0 or o[0].strip() != "go"],
                     key=lambda b: "TimeoutError" in b[1][1])
        if bad:
            meet.kill()
            heard = meet.stdout.read().split("\n")
            pytest.fail("%d of %d did not meet (the fake internet's end heard: %s); first: %r; uplink.log: %s"
                        % (len(bad), n, [l for l in heard if l][-1:], bad[:3],
                           open(os.path.join(net_dir(pd), "uplink.log")).read()[-3000:]))
        assert [l.split() for l in meet.stdout.read().splitlines()][-1] == ["released", str(n)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        meet.kill()
        meet.wait()
    assert [f for f in router_files(pd) if f.startswith(("sb/", "slots/"))] == []


@pytest.mark.uplink_only("relay")     # one TCG guest is enough: the default uplink
def test_microvm_guest_reaches_the_internet_through_the_default_uplink(pd, fn):
    r = run(pd, fn, ["--net", "open"], ["python3", "-c", FETCH, json.dumps(["web.example.test", WEB[2]])],
            extra=["--isolation", "microvm", "--memory", "256M"], timeout=900)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res == {"web.example.test": "ok", WEB[2]: "ok"}, res


def test_gc_removes_the_uplink(state_root, fn):
    p = Paddock(os.path.join(state_root, "uplink-gc-" + fn.mode))
    os.makedirs(p.state, exist_ok=True)
    run(p, fn, ["--net", "open"], ["true"])
    sup, proc = uplink_pids(p)
    assert sup and proc
    uid = int(status(proc)["Uid"][0])
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert router_files(p) == []
    for pid in (sup, proc):
        wait_for(lambda: pid not in live_pids() or open("/proc/%d/stat" % pid).read().split()[2] == "Z",
                 "uplink process %d outlived gc" % pid)
    with open("/proc/self/mountinfo") as f:
        assert pdtest.instance_of(p.state) not in f.read(), "a pin of the uplink is left"
    owners = [open(os.path.join("/run/paddock/uids", n)).read() for n in os.listdir("/run/paddock/uids")]
    assert not [o for o in owners if o.startswith(p.instance + "/")], "the uplink's uid range is left"
    # (zombies wait for init to reap them: they hold nothing)
    assert not [pid for pid in live_pids() if status_uid(pid) == uid], "a process of the uplink's uid is left"


def status_uid(pid):
    try:
        st = status(pid)
        return None if st["State"][0] == "Z" else int(st["Uid"][0])
    except (OSError, KeyError, ValueError, IndexError):
        return None


FETCH6 = r"""
import json, socket, sys
out = {}
for host, family in json.loads(sys.argv[1]):
    fam = socket.AF_INET6 if family == 6 else socket.AF_INET
    try:
        addr = socket.getaddrinfo(host, 80, fam, socket.SOCK_STREAM)[0][4]
    except OSError as e:
        out["%s/%d" % (host, family)] = "resolve: %s" % e
        continue
    try:
        s = socket.socket(fam)
        s.settimeout(3)
        s.connect(addr)
        s.sendall(b"GET / HTTP/1.0\r\nHost: " + host.encode() + b"\r\n\r\n")
        data = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
        out["%s/%d" % (host, family)] = "ok" if b"hello from" in data else "bad answer %r" % data[:80]
    except Exception as e:
        out["%s/%d" % (host, family)] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


def test_ipv6_egress_when_the_host_has_it(state_root, fn, tmp_path):
    """A stand-in host whose IPv6 works (an address, a default route, a
    gateway that has answered): sandboxes get IPv6 too; the
    host's own IPv6 address and unique local addresses (fd00::/8 and the
    rest of fc00::/7) stay closed."""
    f6 = FakeNet(tmp_path, uplink=fn.mode, ipv6=True).start()
    p = Paddock(os.path.join(state_root, "uplink-ipv6-" + fn.mode))
    os.makedirs(p.state, exist_ok=True)
    canary = subprocess.Popen(["ip", "netns", "exec", f6.host, sys.executable, "-c",
                               "import socket\ns=socket.socket(socket.AF_INET6)\ns.bind(('%s',0))\ns.listen(8)\n"
                               "print(s.getsockname()[1],flush=True)\nc,_=s.accept()\nprint('HIT',flush=True)"
                               % HOST_ADDR6], stdout=subprocess.PIPE, text=True)
    try:
        port = int(canary.stdout.readline())
        with hosted(f6):
            r = p.run(["--net", "open", "--net-uplink", fn.mode, "--net-resolver", DNS, "--", "python3", "-c",
                       FETCH6, json.dumps([[WEB6, 6], ["web6.example.test", 6], ["dual.example.test", 6],
                                           ["dual.example.test", 4], [ULA6, 6], ["ula.example.test", 6]])],
                      timeout=120, env=env())
            assert r.returncode == 0, r.stderr
            res = json.loads(r.stdout.strip().splitlines()[-1])
            assert res[WEB6 + "/6"] == "ok" and res["web6.example.test/6"] == "ok", res
            assert res["dual.example.test/6"] == "ok" and res["dual.example.test/4"] == "ok", res
            assert res[ULA6 + "/6"] != "ok" and res["ula.example.test/6"] != "ok", res
            res = probe(p, f6, ["--net", "open", "--allow", "2001:db8:18::/64"], [[HOST_ADDR6, port]])
            assert not any(v.startswith("CONNECTED") for v in res.values()), res
            assert egress(p)["ipv6"] == "1", egress(p)
            # a microvm guest has IPv4 only (its agent sets no IPv6), and a
            # policy pins AAAA answers like A ones
            res, _ = fetch(p, f6, ["--net", "policy", "--allow", "web6.example.test"], [WEB[0]])
            assert res[WEB[0]] != "ok", res
            r = p.run(["--net", "policy", "--allow", "web6.example.test", "--net-uplink", fn.mode, "--net-resolver",
                       DNS, "--", "python3", "-c", FETCH6, json.dumps([["web6.example.test", 6], [WEB6, 6]])],
                      timeout=120, env=env())
            res = json.loads(r.stdout.strip().splitlines()[-1])
            assert res["web6.example.test/6"] == "ok", res
    finally:
        with hosted(f6):
            assert p.gc().returncode == 0
        canary.kill()
        out = canary.communicate()[0]
        f6.stop()
        pdtest.NETNS[:] = [fn.host_path]
    assert "HIT" not in out, "the host's IPv6 address was reached"
