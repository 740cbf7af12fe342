"""The fake internet the network tests build (tests only; nothing leaves the
machine).

A network namespace "internet" (named pdt-inet-<pid>-<n>, under /run/netns)
holds every address a test talks to, on its loopback interface:

  WEB[0..2]   203.0.113.10, 203.0.113.11, 198.51.100.20: HTTP 80/8080, TLS
              443 (HTTP inside, self-signed for *.example.test), UDP echo 443
              and 5353 (_fakeweb.py); answers "hello from ADDR host=HOST"
  DNS         198.51.100.53: authoritative zone below (_fakedns.py), every
              question logged to dns_log
  BULK        203.0.113.10:9000: sends N bytes for "N\\n" (bandwidth tests)
  METADATA    169.254.169.254 and 100.100.100.200 (HTTP: "hello from ...")
  LAN         192.168.77.10 (HTTP), a private address

paddock reaches it in one of two ways (FakeNet(..., uplink=)):

  "netns"        --net-uplink netns:/run/netns/<name>: the router's veth
                 goes straight into the fake internet.
  "relay",       a user-mode uplink (relay: the default, TCP relayed and
  "pasta",       the rest through slirp4netns). A second namespace, "host"
  "slirp4netns"  (pdt-host-<pid>-<n>), stands in for the host: address
                 HOST_ADDR/24 on a veth to the fake internet (GATEWAY there),
                 its default route through it. paddock itself runs in it
                 (pdtest.NETNS, `nsenter --net`), so the uplink process's
                 sockets are that namespace's: no test traffic leaves the
                 machine.

Either way with --net-resolver 198.51.100.53 (resolver). stop() kills what
start() spawned (by pid) and deletes the namespaces. The module fixture
`fakenet` runs a module's tests once per uplink of $PADDOCK_TEST_UPLINKS
(default "netns,relay": the operator's and the default; add "slirp4netns",
"pasta": test_uplink.py runs every user-mode uplink).
"""
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WEB = ["203.0.113.10", "203.0.113.11", "198.51.100.20"]
DNS = "198.51.100.53"
BULK_PORT = 9000
METADATA = ["169.254.169.254", "100.100.100.200"]
LAN = "192.168.77.10"
HOST_ADDR = "198.18.0.2"        # the stand-in host's address (user-mode uplinks)
GATEWAY = "198.18.0.1"          # its gateway, the fake internet's end of its veth
# FakeNet(..., ipv6=True): the stand-in host's IPv6 and a web server on it
HOST_ADDR6 = "2001:db8:18::2"
GATEWAY6 = "2001:db8:18::1"
WEB6 = "2001:db8:77::10"        # HTTP 80: "hello from WEB6 host=..."
ULA6 = "fd00::77"               # a unique local address in the fake internet (never list)
ZONE = {
    "web.example.test": [["A", WEB[0], 30]],
    "api.example.test": [["A", WEB[1], 30]],
    "other.example.test": [["A", WEB[2], 30]],
    "both.example.test": [["A", WEB[0], 30], ["A", WEB[1], 30]],
    "meta.example.test": [["A", METADATA[0], 30]],
    "lan.example.test": [["A", LAN, 30]],
    "web6.example.test": [["AAAA", WEB6, 30]],
    "dual.example.test": [["A", WEB[2], 30], ["AAAA", WEB6, 30]],
    "ula.example.test": [["AAAA", ULA6, 30]],
}
_seq = itertools.count()


def sh(*argv, check=True):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, timeout=60)


def bulk_server(addr, port):
    """Run inside the netns: for each connection, read a byte count, send it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    import threading

    def one(c):
        with c:
            n = int(c.makefile().readline() or 0)
            chunk = b"x" * 65536
            while n > 0:
                k = min(n, len(chunk))
                c.sendall(chunk[:k])
                n -= k

    while True:
        c, _ = s.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


class FakeNet:
    def __init__(self, tmpdir, uplink="netns", ipv6=False):
        self.tmp = str(tmpdir)
        self.ipv6 = ipv6
        n = next(_seq)
        self.name = "pdt-inet-%d-%d" % (os.getpid(), n)
        self.mode = uplink
        self.host = "pdt-host-%d-%d" % (os.getpid(), n) if uplink != "netns" else None
        self.procs = []
        self.dns_log = os.path.join(self.tmp, "dns-queries.log")

    @property
    def path(self):
        return "/run/netns/" + self.name

    @property
    def host_path(self):
        return "/run/netns/" + self.host if self.host else None

    @property
    def uplink(self):
        return "netns:" + self.path if self.mode == "netns" else self.mode

    resolver = DNS

    def args(self):
        """paddock run options that point the router at this fake internet."""
        return ["--net-uplink", self.uplink, "--net-resolver", DNS]

    def host_exec(self, *argv, check=True):
        """A command in the stand-in host (user-mode uplinks)."""
        return sh("ip", "netns", "exec", self.host, *argv, check=check)

    def _spawn(self, argv, ready):
        p = subprocess.Popen(["ip", "netns", "exec", self.name] + argv, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append(p)
        if ready is None:
            return p
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            if p.poll() is not None:
                raise RuntimeError("fake internet server died: %s" % p.stderr.read().decode())
            if time.monotonic() > deadline:
                raise RuntimeError("fake internet server did not start: %r" % argv)
            time.sleep(0.02)
        return p

    def _wait_port(self, addr, port):
        deadline = time.monotonic() + 20
        code = ("import socket,sys\ns=socket.socket()\ns.settimeout(1)\n"
                "sys.exit(s.connect_ex((%r,%d)))" % (addr, port))
        while time.monotonic() < deadline:
            if sh("ip", "netns", "exec", self.name, sys.executable, "-c", code, check=False).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("port %s:%d did not open" % (addr, port))

    def start(self):
        sh("ip", "netns", "add", self.name)
        try:
            n = self.name
            sh("ip", "-n", n, "link", "set", "lo", "up")
            # on lo: local addresses of the netns (no dummy module needed)
            for a in WEB + [DNS] + METADATA + [LAN]:
                sh("ip", "-n", n, "addr", "add", a + "/32", "dev", "lo")
            cert, key = os.path.join(self.tmp, "cert.pem"), os.path.join(self.tmp, "key.pem")
            sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
               "/CN=example.test", "-addext", "subjectAltName=DNS:*.example.test,DNS:example.test",
               "-keyout", key, "-out", cert)
            zone = os.path.join(self.tmp, "zone.json")
            with open(zone, "w") as f:
                json.dump(ZONE, f)
            r1, r2 = os.path.join(self.tmp, "web.ready"), os.path.join(self.tmp, "dns.ready")
            self._spawn([sys.executable, os.path.join(HERE, "_fakeweb.py"), "--cert", cert, "--key", key,
                         "--ready", r1] + WEB + METADATA + [LAN], r1)
            self._spawn([sys.executable, os.path.join(HERE, "_fakedns.py"), "--listen", DNS, "--zone", zone,
                         "--log", self.dns_log, "--ready", r2], r2)
            self._spawn([sys.executable, os.path.abspath(__file__), "--bulk", WEB[0], str(BULK_PORT)], None)
            self._wait_port(WEB[0], BULK_PORT)
            if self.host:
                h = self.host
                sh("ip", "netns", "add", h)
                sh("ip", "-n", h, "link", "set", "lo", "up")
                sh("ip", "-n", h, "link", "add", "eth0", "type", "veth", "peer", "name", "tohost", "netns", n)
                sh("ip", "-n", h, "addr", "add", HOST_ADDR + "/24", "dev", "eth0")
                sh("ip", "-n", h, "link", "set", "eth0", "up")
                sh("ip", "-n", n, "addr", "add", GATEWAY + "/24", "dev", "tohost")
                sh("ip", "-n", n, "link", "set", "tohost", "up")
                sh("ip", "-n", h, "route", "add", "default", "via", GATEWAY)
                if self.ipv6:
                    self._start_ipv6()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_ipv6(self):
        """IPv6 for the stand-in host: an address and a default route to the
        fake internet, where WEB6 and ULA6 answer HTTP; one packet to the
        gateway, so the host's neighbour table shows IPv6 working (what
        paddock checks: hostnet.c)."""
        h, n = self.host, self.name
        sh("ip", "-n", h, "addr", "add", HOST_ADDR6 + "/64", "dev", "eth0", "nodad")
        sh("ip", "-n", n, "addr", "add", GATEWAY6 + "/64", "dev", "tohost", "nodad")
        sh("ip", "-n", h, "-6", "route", "add", "default", "via", GATEWAY6)
        for a in (WEB6, ULA6):
            sh("ip", "-n", n, "addr", "add", a + "/128", "dev", "lo")
        self._spawn([sys.executable, os.path.abspath(__file__), "--web6", WEB6, ULA6], None)
        self._wait_port6(WEB6, 80)
        self.host_exec(sys.executable, "-c", "import socket\ns = socket.socket(socket.AF_INET6, "
                       "socket.SOCK_DGRAM)\ns.sendto(b'x', ('%s', 9))" % GATEWAY6)

    def _wait_port6(self, addr, port):
        code = ("import socket,sys\ns=socket.socket(socket.AF_INET6)\ns.settimeout(1)\n"
                "sys.exit(s.connect_ex((%r,%d)))" % (addr, port))
        deadline = time.monotonic() + 20
        while sh("ip", "netns", "exec", self.name, sys.executable, "-c", code, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("port [%s]:%d did not open" % (addr, port))
            time.sleep(0.05)

    def exec(self, *argv, check=True):
        """A command inside the fake internet."""
        return sh("ip", "netns", "exec", self.name, *argv, check=check)

    def links(self):
        """Interface names inside the fake internet (paddock's uplink veth
        end shows here while a router exists)."""
        out = self.exec("ip", "-o", "link", "show", check=False).stdout
        return [l.split(":")[1].strip().split("@")[0] for l in out.splitlines() if ":" in l]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []
        if self.host:
            sh("ip", "netns", "del", self.host, check=False)
        sh("ip", "netns", "del", self.name, check=False)


def web6_server(addrs):
    """Run inside the netns: HTTP on port 80 of each IPv6 address."""
    import http.server

    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6
        request_queue_size = 128

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = ("hello from %s host=%s\n" % (self.server.server_address[0], self.headers.get("Host"))).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    servers = [Server((a, 80), Handler) for a in addrs]
    for srv in servers[1:]:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    servers[0].serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--bulk":
        bulk_server(sys.argv[2], int(sys.argv[3]))
    if len(sys.argv) >= 3 and sys.argv[1] == "--web6":
        web6_server(sys.argv[2:])


# ---- pytest fixtures and helpers shared by the tests that use a FakeNet ----


def uplinks():
    return [u for u in os.environ.get("PADDOCK_TEST_UPLINKS", "netns,relay").split(",") if u]


class hosted:
    """Run paddock in fn's stand-in host (a no-op for the netns uplink)."""

    def __init__(self, fn):
        self.fn = fn

    def __enter__(self):
        import pdtest
        if self.fn.host:
            pdtest.NETNS[:] = [self.fn.host_path]
        return self.fn

    def __exit__(self, *exc):
        import pdtest
        pdtest.NETNS.clear()


@pytest.fixture(scope="module", params=uplinks())
def fakenet(request, tmp_path_factory):
    """This module's fake internet (started and stopped with the module),
    once per uplink (netns, and the default user-mode uplink)."""
    fn = FakeNet(tmp_path_factory.mktemp("fakenet"), uplink=request.param).start()
    try:
        with hosted(fn):
            yield fn
    finally:
        fn.stop()


@pytest.fixture(scope="module")
def host_canary():
    """A TCP server on the host's loopback: no sandbox may reach it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    stop = threading.Event()

    def serve():
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = s.accept()
                c.sendall(b"hello from the host loopback")
                c.close()
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield s.getsockname()[1]
    stop.set()
    t.join()
    s.close()


CANARY = r"""
import socket, sys, threading
log = open(sys.argv[1], "a")
def serve(s):
    while True:
        c, peer = s.accept()
        log.write("%s:%d from %s\n" % (s.getsockname()[0], s.getsockname()[1], peer[0])); log.flush()
        c.sendall(b"hello from the host"); c.close()
out = []
for addr in sys.argv[2:]:
    s = socket.socket(); s.bind((addr, 0)); s.listen(16)
    out.append("%s:%d" % (addr, s.getsockname()[1]))
    threading.Thread(target=serve, args=(s,), daemon=True).start()
print(" ".join(out), flush=True)
threading.Event().wait()
"""


@pytest.fixture(scope="module")
def host_canaries(fakenet, tmp_path_factory):
    """Listeners no sandbox may reach, on the host's loopback and on its own
    interface addresses (the stand-in host's under a user-mode uplink):
    yields (targets, hits) where targets are [addr, port] and hits() the
    connections they got."""
    log = str(tmp_path_factory.mktemp("canary") / "hits.log")
    open(log, "w").close()
    if fakenet.host:
        addrs = ["127.0.0.1", HOST_ADDR, "0.0.0.0"]
        argv = ["ip", "netns", "exec", fakenet.host]
    else:
        out = sh("ip", "-o", "-4", "addr", "show", "scope", "global").stdout.split()
        addrs = ["127.0.0.1"] + [w.split("/")[0] for i, w in enumerate(out) if i and out[i - 1] == "inet"][:2]
        argv = []
    p = subprocess.Popen(argv + [sys.executable, "-c", CANARY, log] + addrs, stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    try:
        bound = p.stdout.readline().split()
        assert bound, "canary did not start"
        targets = []
        for b in bound:
            a, port = b.rsplit(":", 1)
            if a == "0.0.0.0":      # bound to every address: try it on the host's own
                a = HOST_ADDR if fakenet.host else addrs[-1]
            targets.append([a, int(port), "tcp"])
        yield targets, lambda: open(log).read()
    finally:
        p.kill()
        p.wait()


def net_dir(p):
    """The router's files of a Paddock (tests/pdtest/cli.py) state dir."""
    from pdtest import runtime_dir
    return os.path.join(runtime_dir(p.state), "net")


def router_files(p):
    """What the router of p's state dir holds, once the teardowns `paddock
    run` left running are done (docs/cli.md)."""
    from pdtest import wait_teardowns
    wait_teardowns(p.state)
    d = net_dir(p)
    if not os.path.isdir(d):
        return []
    left = [n for n in os.listdir(d) if n in ("router", "netd.pid", "netd.sock", "config")]
    for sub in ("sb", "slots"):
        if os.path.isdir(os.path.join(d, sub)):
            left += ["%s/%s" % (sub, n) for n in os.listdir(os.path.join(d, sub))]
    return sorted(left)
