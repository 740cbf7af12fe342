"""Kernel pins and the strict Host/SNI proxy of paddock-netd: only addresses
answered for allowed names are reachable (for the rule's ports and
protocol), direct-IP and alternative resolvers are not, HTTP Host and TLS
SNI must name an allowed domain whose answer included the address, live
policy changes apply to new connections, and every decision is audited.
Runs netd in a lab of network namespaces (_netdlab.py)."""
import os
import subprocess

import pytest

from _netdlab import DNS_ADDR, KEY, WEB, lab, sb  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


POLICY = {"mode": "policy", "rules": ["allow:allowed.test:80/tcp", "allow:allowed.test:8080/tcp",
                                      "allow:*.allowed.test:443/tcp"]}


def connects(lab, url, *extra):
    rc, out = lab.curl(url, *extra, timeout=4)
    return rc == 0 and "hello from" in out, out


def test_pinned_address_reachable_only_after_resolution(sb):
    assert sb.add(POLICY) == {"ok": True}
    ok, _ = connects(sb, "http://%s:8080/" % WEB["a"])
    assert not ok, "direct IP before any answer must not connect"
    ok, out = connects(sb, "http://allowed.test:8080/")
    assert ok and WEB["a"] in out
    ok, _ = connects(sb, "http://%s:8080/" % WEB["c"])          # never resolved
    assert not ok
    ok, _ = connects(sb, "http://3325256724:8080/")              # decimal form of .20
    assert not ok


def test_rule_ports_and_protocol(sb):
    """QUIC (UDP 443) and raw UDP to a pinned address: denied unless a rule allows them."""
    assert sb.add(POLICY) == {"ok": True}
    assert sb.dig("www.allowed.test")[0] == "NOERROR"
    code = ("import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(1.5)\n"
            "s.sendto(b'q',('%s',443))\n"
            "try: print(s.recv(100))\nexcept OSError: print('no-answer')\n" % WEB["a"])
    assert sb.py(code)[0] == "no-answer"
    ok, _ = connects(sb, "http://www.allowed.test:8080/")         # 443/tcp only for *.allowed
    assert not ok
    assert sb.update({"mode": "policy", "rules": ["allow:*.allowed.test:443/udp"]}) == {"ok": True}
    assert sb.dig("www.allowed.test")[0] == "NOERROR"
    assert sb.py(code)[0] == "b'echo:q'"


def test_alternative_resolver_and_raw_udp53(sb):
    assert sb.add(POLICY) == {"ok": True}
    out = sb.sh("dig", "@" + DNS_ADDR, "+time=1", "+tries=1", "other.test").stdout
    assert "timed out" in out or "no servers" in out
    out = sb.sh("dig", "@" + DNS_ADDR, "+tcp", "+time=1", "+tries=1", "other.test").stdout
    assert "NOERROR" not in out
    assert sb.queries() == []


def test_strict_http_host(sb):
    assert sb.add(POLICY) == {"ok": True}
    ok, out = connects(sb, "http://allowed.test/")
    assert ok and "host=allowed.test" in out
    # Host names a name the policy does not allow, at an allowed address
    ok, _ = connects(sb, "http://allowed.test/", "-H", "Host: other.test")
    assert not ok
    # Host names an allowed name, but the address was answered for another name
    assert sb.dig("other.test")[0] == "NXDOMAIN"
    ok, _ = connects(sb, "http://%s/" % WEB["c"], "-H", "Host: allowed.test")
    assert not ok
    # no name at all (an IP literal as Host)
    ok, _ = connects(sb, "http://%s/" % WEB["a"])
    assert not ok
    conn = [a for a in sb.audit_lines() if a["event"] == "net.connect"]
    assert conn[0]["decision"] == "allow" and conn[0]["name"] == "allowed.test" and \
        conn[0]["port"] == 80 and conn[0]["rule"] == "allow:allowed.test:80/tcp"
    assert conn[1]["decision"] == "deny" and conn[1]["name"] == "other.test" and \
        conn[1]["reason"] == "name denied"
    assert conn[2]["decision"] == "deny" and conn[2]["addr"] == WEB["c"] and \
        conn[2]["reason"] == "address was not answered for this name"
    assert conn[3]["decision"] == "deny"


def test_strict_tls_sni(sb):
    assert sb.add(POLICY) == {"ok": True}
    ok, out = connects(sb, "https://www.allowed.test/")
    assert ok and WEB["a"] in out
    # SNI of a denied name sent to an allowed name's address (fronting)
    ok, _ = connects(sb, "https://other.test/", "--resolve", "other.test:443:" + WEB["a"])
    assert not ok
    # SNI of an allowed name to an address never answered for it (shared CDN)
    ok, _ = connects(sb, "https://api.allowed.test/", "--resolve",
                     "api.allowed.test:443:" + WEB["c"])
    assert not ok
    # the apex is allowed only on 80 and 8080
    ok, _ = connects(sb, "https://allowed.test/")
    assert not ok
    conn = [a for a in sb.audit_lines() if a["event"] == "net.connect"]
    assert [c["decision"] for c in conn] == ["allow", "deny", "deny", "deny"]
    assert conn[3]["reason"] == "port not allowed for this name"


def test_live_policy_change(sb):
    assert sb.add(POLICY) == {"ok": True}
    assert connects(sb, "http://allowed.test:8080/")[0]
    assert sb.update({"mode": "policy", "rules": ["allow:other.test"]}) == {"ok": True}
    # the old answer's address is no longer reachable, the name no longer resolves
    assert not connects(sb, "http://%s:8080/" % WEB["a"])[0]
    assert sb.dig("allowed.test")[0] == "NXDOMAIN"
    ok, out = connects(sb, "http://other.test:8080/")
    assert ok and WEB["c"] in out
    # a change that keeps a name keeps its cached answer working
    assert sb.update({"mode": "policy", "rules": ["allow:other.test", "allow:evil.test"]}) == {"ok": True}
    assert connects(sb, "http://%s:8080/" % WEB["c"])[0]
    assert any(a["event"] == "net.policy" for a in sb.audit_lines())


def test_open_mode_strict_off_without_domain_rules(sb):
    """Open mode without domain rules: no strict check, names answered, not pinned."""
    assert sb.add({"mode": "open"}) == {"ok": True}
    assert sb.dig("other.test")[0] == "NOERROR"
    answers = [a for a in sb.audit_lines() if a["event"] == "net.answer"]
    assert answers and answers[0]["addr"] == WEB["c"]
    pins = subprocess.run(["ip", "netns", "exec", sb.rtr, "nft", "list", "set", "inet", "paddock",
                           "p4_" + KEY], capture_output=True, text=True).stdout
    assert WEB["c"] not in pins


def test_open_mode_deny_name_via_proxy(sb):
    """Open mode with a domain deny: the proxy refuses that name even at an open address."""
    assert sb.add({"mode": "open", "deny": ["evil.test"]}) == {"ok": True}
    ok, out = connects(sb, "http://other.test/")
    assert ok and WEB["c"] in out
    ok, _ = connects(sb, "http://other.test/", "-H", "Host: evil.test")
    assert not ok
    conn = [a for a in sb.audit_lines() if a["event"] == "net.connect"]
    assert conn[-1]["decision"] == "deny" and conn[-1]["rule"] == "deny:evil.test"


def test_keepalive_cannot_switch_host(sb):
    """Only the first request's Host is checked, so the proxy makes it the
    last one: a second request on the same connection (for a denied name)
    gets no answer."""
    assert sb.add(POLICY) == {"ok": True}
    code = ("import socket\n"
            "s=socket.create_connection(('allowed.test',80),timeout=4)\n"
            "s.sendall(b'GET / HTTP/1.1\\r\\nHost: allowed.test\\r\\nConnection: keep-alive\\r\\n\\r\\n'"
            "+b'GET / HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n')\n"
            "data=b''\n"
            "while True:\n"
            "  d=s.recv(4096)\n"
            "  if not d: break\n"
            "  data+=d\n"
            "print(data.count(b'hello from'), b'host=other.test' in data)\n")
    out, err = sb.py(code)
    assert out == "1 False", (out, err)


def test_request_then_half_close(sb):
    """A client that sends its request and shuts its side still gets the answer."""
    assert sb.add(POLICY) == {"ok": True}
    code = ("import socket\n"
            "s=socket.create_connection(('allowed.test',80),timeout=4)\n"
            "s.sendall(b'GET / HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n')\n"
            "s.shutdown(socket.SHUT_WR)\n"
            "data=b''\n"
            "while True:\n"
            "  d=s.recv(4096)\n"
            "  if not d: break\n"
            "  data+=d\n"
            "print(b'hello from' in data)\n")
    out, err = sb.py(code)
    assert out == "True", (out, err)


def test_remove_with_open_connections(sb):
    """Removing a sandbox while it holds DNS-over-TCP and proxy connections
    (idle, mid-request, relaying) closes them; netd carries on (under ASan a
    use after free would kill it)."""
    assert sb.add(POLICY) == {"ok": True}
    code = ("import socket,sys,time\n"
            "conns=[]\n"
            "conns.append(socket.create_connection(('10.201.0.1',53),timeout=4))\n"
            "conns[-1].sendall(b'\\x00\\x40abc')\n"                       # a partial DNS query
            "conns.append(socket.create_connection(('allowed.test',80),timeout=4))\n"
            "conns[-1].sendall(b'GET / HTTP/1.1\\r\\nHost: allowed')\n"  # a partial request
            "r=socket.create_connection(('allowed.test',80),timeout=4)\n"
            "r.sendall(b'GET /bytes/100000000 HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n')\n"
            "r.recv(1000)\n"                                              # relaying
            "print('ready',flush=True)\n"
            "sys.stdin.readline()\n"
            "dead=0\n"
            "for c in conns+[r]:\n"
            "  try:\n"
            "    c.settimeout(4)\n"
            "    while c.recv(65536): pass\n"
            "    dead+=1\n"
            "  except OSError: dead+=1\n"
            "print(dead)\n")
    p = subprocess.Popen(["ip", "netns", "exec", sb.sbx, "python3", "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        assert sb.call({"op": "remove", "id": KEY}) == {"ok": True}
        assert sb.netd_alive()
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "3"
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    assert sb.add(POLICY) == {"ok": True}       # the fixture removes it again
    assert sb.netd_alive()


def test_close_record_counts_bytes(sb):
    """An allowed proxied connection ends with a "close" audit line: name,
    address, bytes each way, duration."""
    import time
    assert sb.add(POLICY) == {"ok": True}
    ok, out = connects(sb, "http://allowed.test/")
    assert ok
    deadline = time.monotonic() + 10
    while True:
        close = [a for a in sb.audit_lines() if a["event"] == "net.close"]
        if close or time.monotonic() > deadline:
            break
        time.sleep(0.02)        # netd writes it when both sides have closed
    assert len(close) == 1, sb.audit_lines()
    c = close[0]
    assert c["name"] == "allowed.test" and c["addr"] == WEB["a"] and c["port"] == 80
    assert c["bytes_out"] > 30 and c["bytes_in"] > len("hello from") and c["duration_ms"] >= 0
