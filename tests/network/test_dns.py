"""paddock-netd's resolver: only allowed names resolve (NXDOMAIN otherwise,
nothing sent upstream), answers are filtered and pinned, every decision is
audited, hostile queries change nothing. Runs netd in a lab of network
namespaces (_netdlab.py)."""
import os
import re
import socket
import struct
import subprocess

import pytest

from _netdlab import GW, KEY, WEB, Lab, lab, netd_bin, sb  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


POLICY = {"mode": "policy", "rules": ["allow:allowed.test", "allow:*.allowed.test:80-8080/tcp"]}


def test_allowed_name_resolves_and_is_pinned(sb):
    assert sb.add(POLICY) == {"ok": True}
    status, ans = sb.dig("allowed.test")
    assert status == "NOERROR" and ans == [("A", WEB["a"])]
    assert "allowed.test" in sb.queries()
    pins = subprocess.run(["ip", "netns", "exec", sb.rtr, "nft", "list", "set", "inet", "paddock",
                           "p4_" + KEY], capture_output=True, text=True).stdout
    assert WEB["a"] in pins
    audit = sb.audit_lines()
    assert any(a["event"] == "net.dns" and a["decision"] == "allow" and a["name"] == "allowed.test"
               and a["rule"] == "allow:allowed.test" for a in audit)
    assert any(a["event"] == "net.pin" and a["decision"] == "allow" and a["addr"] == WEB["a"]
               and a["ttl"] == 300 for a in audit)
    # the shape of the server's own audit lines (src/server/core/audit_log.c):
    # ts in RFC 3339 UTC with milliseconds, sandbox, key, event first
    for a in audit:
        assert list(a)[:4] == ["ts", "sandbox", "key", "event"], a
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", a["ts"]), a
        assert a["sandbox"] == KEY and a["key"] == "netd" and a["event"].startswith("net."), a
        assert "kind" not in a, a


def test_wildcard_and_cname_chain(sb):
    assert sb.add(POLICY) == {"ok": True}
    status, ans = sb.dig("cdn.allowed.test")
    assert status == "NOERROR"
    assert ("CNAME", "edge.cdn.test.") in ans and ("A", WEB["b"]) in ans
    # the apex of a wildcard is not covered by it, but allowed.test is named
    assert sb.dig("www.allowed.test")[0] == "NOERROR"
    assert sb.dig("a.b.allowed.test")[0] == "NXDOMAIN"  # allowed, upstream says NXDOMAIN
    assert "a.b.allowed.test" in sb.queries()


def test_disallowed_names_nxdomain_and_never_forwarded(sb):
    """DNS exfiltration: a name outside the policy never leaves netd."""
    assert sb.add(POLICY) == {"ok": True}
    secret = "c2VjcmV0LWRhdGE.exfil.evil.test"
    for name in (secret, "other.test", "allowed.test.evil.test", "xallowed.test"):
        status, ans = sb.dig(name)
        assert status == "NXDOMAIN" and ans == [], name
        status, _ = sb.dig(name, tcp=True)
        assert status == "NXDOMAIN", name
        status, _ = sb.dig(name, "TXT")
        assert status == "NXDOMAIN", name
    assert not [q for q in sb.queries() if "evil" in q or "other" in q or q == "xallowed.test"]
    denies = [a for a in sb.audit_lines() if a["event"] == "net.dns" and a["decision"] == "deny"]
    assert any(a["name"] == secret.lower() and a["reason"] == "no rule allows the name"
               for a in denies)


def test_ip_literal_names(sb):
    """IP-literal forms asked as names: decimal, octal, hex, mapped, trailing dot."""
    assert sb.add({"mode": "open"}) == {"ok": True}
    for name in ("3325256724", "0306.0063.0144.024", "0xc6.0x33.0x64.0x14", "198.51.100.20.",
                 "198.51.100.20", "::ffff:198.51.100.20", "198.51.100.20.in.1"):
        status, ans = sb.dig(name)
        assert status == "NXDOMAIN" and ans == [], name
    assert sb.queries() == []


def test_dns_over_tcp(sb):
    assert sb.add(POLICY) == {"ok": True}
    status, ans = sb.dig("api.allowed.test", tcp=True)
    assert status == "NOERROR" and ans == [("A", WEB["a"])]
    status, ans = sb.dig("api.allowed.test", "AAAA", tcp=True)
    assert status == "NOERROR" and ans == [("AAAA", "2001:db8::10")]


def test_rebinding_addresses_dropped(sb):
    """Addresses the policy may not pin are removed from the answer."""
    assert sb.add(POLICY) == {"ok": True}
    status, ans = sb.dig("private.allowed.test")       # wildcard: 10.0.0.5 dropped
    assert status == "NOERROR" and ans == [("A", WEB["a"])]
    status, ans = sb.dig("meta.allowed.test")           # metadata never from DNS
    assert status == "NOERROR" and ans == []
    status, ans = sb.dig("loop.allowed.test")
    assert ans == []
    pins = [a for a in sb.audit_lines() if a["event"] == "net.pin"]
    assert {"addr": "10.0.0.5", "reason": "private"}.items() <= \
        next(a for a in pins if a["addr"] == "10.0.0.5").items()
    assert next(a for a in pins if a["addr"] == "169.254.169.254")["reason"] == "metadata"


def test_metadata_names_denied_in_open_mode(sb):
    assert sb.add({"mode": "open"}) == {"ok": True}
    assert sb.dig("metadata.google.internal")[0] == "NXDOMAIN"
    assert sb.dig("other.test")[0] == "NOERROR"
    assert sb.queries() == ["other.test"]
    assert any(a.get("reason") == "metadata name" for a in sb.audit_lines())


def test_deny_rules_in_open_mode(sb):
    assert sb.add({"mode": "open", "deny": ["evil.test", "*.evil.test"]}) == {"ok": True}
    assert sb.dig("evil.test")[0] == "NXDOMAIN"
    assert sb.dig("x.evil.test")[0] == "NXDOMAIN"
    assert sb.dig("other.test")[0] == "NOERROR"
    deny = [a for a in sb.audit_lines() if a["decision"] == "deny"]
    assert deny[0]["rule"] == "deny:evil.test" and deny[1]["rule"] == "deny:*.evil.test"


def test_unknown_source_gets_nothing(sb):
    """A source that is not a registered sandbox gets no answer."""
    assert sb.add(POLICY) == {"ok": True}
    subprocess.run(["ip", "-n", sb.sbx, "addr", "add", "10.201.0.3/30", "dev", "eth0"], check=True)
    try:
        out = sb.sh("dig", "@" + GW, "-b", "10.201.0.3", "+time=1", "+tries=1", "allowed.test").stdout
        assert "timed out" in out or "no servers" in out
    finally:
        subprocess.run(["ip", "-n", sb.sbx, "addr", "del", "10.201.0.3/30", "dev", "eth0"])


def hostile_packets():
    hdr = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    yield b""                                                      # empty
    yield b"\x00" * 5                                              # short header
    yield hdr                                                      # no question
    yield hdr + b"\xc0\x0c\x00\x01\x00\x01"                        # pointer to itself
    yield hdr + b"\x3f" + b"a" * 10                                # label past the end
    yield hdr + (b"\x3f" + b"a" * 63) * 5 + b"\x00\x00\x01\x00\x01"  # name > 255
    yield hdr + b"\x40abc\x00\x00\x01\x00\x01"                      # extended label type
    yield struct.pack("!HHHHHH", 1, 0x0100, 2, 0, 0, 0) + b"\x00\x00\x01\x00\x01" * 2
    yield struct.pack("!HHHHHH", 1, 0x8100, 1, 0, 0, 0) + b"\x00\x00\x01\x00\x01"  # a response
    yield struct.pack("!HHHHHH", 1, 0x2900, 1, 0, 0, 0) + b"\x00\x00\x01\x00\x01"  # UPDATE
    yield hdr + b"\x07allowed\x04test\x00\x00\x01"                  # truncated qtype/class
    yield hdr + b"\x07all\x00wed\x04test\x00\x00\x01\x00\x01"       # NUL in a label
    yield os.urandom(512)


def test_hostile_queries(sb):
    assert sb.add(POLICY) == {"ok": True}
    code = ("import socket,sys,struct\n"
            "pk=[bytes.fromhex(h) for h in sys.argv[1:]]\n"
            "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(0.3)\n"
            "got=[]\n"
            "for p in pk:\n"
            "  s.sendto(p,('%s',53))\n"
            "  try: got.append(s.recv(4096)[3]&15)\n"
            "  except OSError: got.append(None)\n"
            "t=socket.create_connection(('%s',53),timeout=2)\n"
            "t.sendall(struct.pack('!H',65535)+b'x'*100);t.settimeout(2)\n"
            "try: print(got, t.recv(10))\n"
            "except OSError as e: print(got, e)\n" % (GW, GW))
    pk = [p.hex() for p in hostile_packets()]
    r = sb.sh("python3", "-c", code, *pk)
    assert r.returncode == 0, r.stderr
    rcodes = eval(r.stdout.split("] ")[0] + "]")
    assert rcodes[7] == 1 and rcodes[9] == 4       # FORMERR, NOTIMP
    assert all(c in (None, 1, 3, 4) for c in rcodes)  # never an answer
    assert sb.queries() == []
    # still serving
    assert sb.dig("allowed.test")[0] == "NOERROR"


def test_bad_control_requests_change_nothing(sb):
    assert sb.add(POLICY) == {"ok": True}
    bad = [
        {"op": "add", "id": KEY, "addrs": ["10.201.0.6"], "audit": sb.audit, "policy": POLICY},
        {"op": "add", "id": "Bad!", "addrs": ["10.201.0.6"], "audit": sb.audit, "policy": POLICY},
        {"op": "add", "id": "sb2", "addrs": ["10.201.0.2"], "audit": sb.audit, "policy": POLICY},
        {"op": "add", "id": "sb2", "addrs": ["nope"], "audit": sb.audit, "policy": POLICY},
        {"op": "add", "id": "sb2", "addrs": ["10.201.0.6"], "audit": "rel", "policy": POLICY},
        {"op": "add", "id": "sb2", "addrs": ["10.201.0.6"], "audit": sb.audit,
         "policy": {"mode": "policy", "rules": ["allow:0177.0.0.1"]}},
        {"op": "update", "id": KEY, "policy": {"mode": "bogus"}},
        {"op": "update", "id": "nosuch", "policy": POLICY},
        {"op": "frobnicate"},
    ]
    for req in bad:
        rep = sb.call(req)
        assert rep["ok"] is False and rep["error"], req
    assert sb.call({"op": "remove", "id": "sb2"}) == {"ok": True}
    assert sb.dig("allowed.test")[0] == "NOERROR"       # the old policy still applies
    assert sb.dig("other.test")[0] == "NXDOMAIN"


def test_audit_flood_is_bounded(sb):
    """A query flood cannot fill the disk: past the burst, lines are counted
    and summarised in one "suppressed" line."""
    assert sb.add(POLICY) == {"ok": True}
    code = ("import socket,struct\n"
            "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(2)\n"
            "q=struct.pack('!HHHHHH',7,0x100,1,0,0,0)+b'\\x04deny\\x04test\\x00\\x00\\x01\\x00\\x01'\n"
            "n=0\n"
            "for b in range(100):\n"          # bursts of 50: fast, within socket buffers
            "  for i in range(50): s.sendto(q,('%s',53))\n"
            "  for i in range(50):\n"
            "    try: s.recv(512); n+=1\n"
            "    except OSError: pass\n"
            "print(n)\n" % GW)
    out, err = sb.py(code, timeout=120)
    assert int(out) == 5000, err
    assert sb.dig("other.test")[0] == "NXDOMAIN"
    lines = sb.audit_lines()
    dns = [a for a in lines if a["event"] == "net.dns"]
    supp = [a for a in lines if a["event"] == "net.suppressed"]
    assert 2000 <= len(dns) < 4500
    assert supp and sum(a["count"] for a in supp) + len(dns) == 5001


def test_policy_change_while_a_query_is_upstream(sb):
    """The answer follows the policy in force when it arrives: a name denied
    meanwhile gets NXDOMAIN, nothing pinned."""
    import time
    assert sb.add(POLICY) == {"ok": True}
    dig = subprocess.Popen(["ip", "netns", "exec", sb.sbx, "dig", "@" + GW, "+time=6", "+tries=1",
                            "+noedns", "slow.allowed.test"], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while "slow.allowed.test" not in sb.queries():     # netd has forwarded it
            assert time.monotonic() < deadline, "query never reached the upstream"
            time.sleep(0.02)
        assert sb.update({"mode": "policy", "rules": ["allow:other.test"]}) == {"ok": True}
        out = dig.communicate(timeout=15)[0]
    finally:
        if dig.poll() is None:
            dig.kill()
            dig.wait()
    assert "status: NXDOMAIN" in out, out
    assert any(a.get("reason") == "denied by a policy change" for a in sb.audit_lines())
    pins = subprocess.run(["ip", "netns", "exec", sb.rtr, "nft", "list", "set", "inet", "paddock",
                           "p4_" + KEY], capture_output=True, text=True).stdout
    assert WEB["b"] not in pins


def test_dns_over_tcp_pipelined(sb):
    """Several queries in one TCP write all get answers, in order."""
    assert sb.add(POLICY) == {"ok": True}
    code = ("import socket,struct\n"
            "def q(i,name):\n"
            "  m=struct.pack('!HHHHHH',i,0x100,1,0,0,0)\n"
            "  for l in name.split('.'): m+=bytes([len(l)])+l.encode()\n"
            "  m+=b'\\x00\\x00\\x01\\x00\\x01'\n"
            "  return struct.pack('!H',len(m))+m\n"
            "s=socket.create_connection(('%s',53),timeout=5)\n"
            "s.sendall(q(1,'allowed.test')+q(2,'other.test')+q(3,'api.allowed.test'))\n"
            "buf=b''\n"
            "out=[]\n"
            "while len(out)<3:\n"
            "  d=s.recv(4096)\n"
            "  if not d: break\n"
            "  buf+=d\n"
            "  while len(buf)>=2 and len(buf)>=2+struct.unpack('!H',buf[:2])[0]:\n"
            "    n=struct.unpack('!H',buf[:2])[0]; m=buf[2:2+n]; buf=buf[2+n:]\n"
            "    out.append((struct.unpack('!H',m[:2])[0], m[3]&15, struct.unpack('!H',m[6:8])[0]))\n"
            "print(out)\n" % GW)
    out, err = sb.py(code)
    assert out == "[(1, 0, 1), (2, 3, 0), (3, 0, 1)]", (out, err)


def test_netd_keeps_only_cap_net_admin(lab):
    """netd parses hostile input: it runs with CAP_NET_ADMIN alone (needed to
    pin), cannot regain more (bounding set, no_new_privs)."""
    with open("/proc/%d/status" % lab.netd.pid) as f:
        st = dict(l.split(":", 1) for l in f if ":" in l)
    cap_net_admin = 1 << 12
    assert int(st["CapEff"], 16) == cap_net_admin, st["CapEff"]
    assert int(st["CapPrm"], 16) == cap_net_admin
    assert int(st["CapBnd"], 16) == cap_net_admin
    assert int(st["CapAmb"], 16) == 0
    assert st["NoNewPrivs"].strip() == "1"


def test_answers_cached_per_sandbox(sb):
    """A repeated question is answered from the sandbox's cache (not asked
    upstream again), still filtered, pinned and audited, with its TTL
    counting down; a denied name is never served from it."""
    assert sb.add(POLICY) == {"ok": True}
    assert sb.dig("private.allowed.test") == ("NOERROR", [("A", WEB["a"])])
    assert sb.dig("private.allowed.test") == ("NOERROR", [("A", WEB["a"])])
    assert sb.queries().count("private.allowed.test") == 1
    pins = [a for a in sb.audit_lines() if a["event"] == "net.pin" and a["addr"] == WEB["a"]]
    assert len(pins) == 2 and pins[1]["ttl"] <= pins[0]["ttl"]
    assert len([a for a in sb.audit_lines() if a["event"] == "net.pin" and a["addr"] == "10.0.0.5"]) == 2
    assert sb.update({"mode": "policy", "rules": ["allow:other.test"]}) == {"ok": True}
    assert sb.dig("private.allowed.test")[0] == "NXDOMAIN"


def test_control_socket_garbage(sb):
    """Garbage on the control socket: the connection is dropped or the request
    refused; netd and the sandboxes it serves carry on."""
    import json as _json
    assert sb.add(POLICY) == {"ok": True}
    frames = [struct.pack("!I", 0), struct.pack("!I", 0xffffffff), struct.pack("!I", 5) + b"{{{{{",
              struct.pack("!I", 4) + b"null", struct.pack("!I", 2) + b"[]",
              struct.pack("!I", 30) + _json.dumps({"op": "add", "id": 7}).encode().ljust(30)]
    for f in frames:
        c = socket.socket(socket.AF_UNIX)
        c.settimeout(5)
        c.connect(sb.sock)
        c.sendall(f)
        try:
            hdr = c.recv(4)
            if hdr:
                body = c.recv(struct.unpack("!I", hdr)[0])
                assert _json.loads(body)["ok"] is False, body
        except (ConnectionResetError, socket.timeout):
            pass
        c.close()
    assert sb.netd_alive()
    assert sb.dig("allowed.test")[0] == "NOERROR"


def test_pin_limit(tmp_path):
    """Pinned addresses per sandbox are bounded (--max-pins): past the limit
    a name that needs a new pin gets SERVFAIL (audited); names already pinned
    keep resolving; a policy change starts the count again."""
    lb = Lab(tmp_path, netd_args=["--max-pins", "2"])
    try:
        lb.start()
        assert lb.add({"mode": "policy", "rules": ["allow:*.allowed.test", "allow:allowed.test"]}) == {"ok": True}
        assert lb.dig("allowed.test") == ("NOERROR", [("A", WEB["a"])])
        assert lb.dig("cdn.allowed.test")[0] == "NOERROR"            # second pin (edge.cdn.test)
        assert lb.dig("www.allowed.test")[0] == "SERVFAIL"           # a third would pass the limit
        assert lb.dig("allowed.test")[0] == "NOERROR"                # already pinned: no new pin
        assert any(a["event"] == "net.dns" and a["decision"] == "deny" and a["name"] == "www.allowed.test"
                   and a["reason"].startswith("pin limit") for a in lb.audit_lines())
        assert lb.update({"mode": "policy", "rules": ["allow:www.allowed.test"]}) == {"ok": True}
        assert lb.dig("www.allowed.test") == ("NOERROR", [("A", WEB["a"])])
        assert lb.netd_alive()
    finally:
        lb.stop()
    r = subprocess.run([netd_bin(), "--control", "/nonexistent/x", "--max-pins", "0"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--max-pins" in r.stderr


def test_slow_upstream_answer_after_a_retry(sb):
    """An upstream slower than netd's retry (1.5 s): the first try's socket
    stays open, so its answer is used."""
    assert sb.add(POLICY) == {"ok": True}
    out = sb.sh("dig", "@" + GW, "+time=8", "+tries=1", "+noedns", "slower.allowed.test").stdout
    assert "status: NOERROR" in out and WEB["b"] in out, out
    assert sb.queries().count("slower.allowed.test") >= 2        # it did retry


def test_answer_with_more_addresses_than_a_pin_batch(sb):
    """One name, 70 addresses (netd reads the first 64), two rules granting
    it (two pins per address): the 32 addresses whose pins fit in the batch
    are answered, the rest left out of the answer (not answered unreachable)
    and audited."""
    assert sb.add({"mode": "policy", "rules": ["allow:*.allowed.test:80/tcp",
                                               "allow:*.allowed.test:443/tcp"]}) == {"ok": True}
    status, ans = sb.dig("many.allowed.test", tcp=True)
    assert status == "NOERROR" and len(ans) == 32, ans
    dropped = [a for a in sb.audit_lines() if a["event"] == "net.pin" and a["decision"] == "deny"]
    assert len(dropped) == 32 and all(a["reason"] == "too many addresses in one answer" for a in dropped)
    pins = subprocess.run(["ip", "netns", "exec", sb.rtr, "nft", "list", "set", "inet", "paddock",
                           "p4_" + KEY], capture_output=True, text=True).stdout
    assert all(a + " . tcp . 443" in pins for _, a in ans), pins[:500]
