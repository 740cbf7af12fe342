"""Connect rules bypassed by the sends that carry an address: UDP sendto,
sendmsg and sendmmsg to a denied address, and TCP sendto(MSG_FASTOPEN),
which connects to the address it carries. The policy allows 127.0.0.1 only;
the listeners are on the sandbox's own loopback (127.0.0.2 is denied)."""
# mode: isolated
# timeout: 30
# policy: {"connect": [{"cidr": "127.0.0.1/32", "action": "allow"}]}
import socket
if CTX.get("tier") != "supervised":
    error("not applicable: policies are the supervised tier's", CTX.get("tier"))
BAD = ("127.0.0.2", 5353)
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("0.0.0.0", BAD[1]))
rx.settimeout(0.5)
srv = socket.socket()
srv.bind(("0.0.0.0", 6006))
srv.listen(4)
srv.settimeout(0.5)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
res = []
def t(name, fn):
    try:
        fn()
        res.append((name, "ok"))
    except OSError as e:
        res.append((name, en(e.errno)))
t("sendto", lambda: u.sendto(b"x", BAD))
t("sendmsg", lambda: u.sendmsg([b"x"], [], 0, BAD))
def tfo():
    s = socket.socket()
    try:
        s.sendto(b"x", 0x20000000, ("127.0.0.2", 6006))
    finally:
        s.close()
t("sendto_fastopen", tfo)
got = 0
while True:
    try:
        rx.recv(10)
        got += 1
    except socket.timeout:
        break
conns = 0
try:
    srv.accept()
    conns += 1
except socket.timeout:
    pass
detail = ", ".join("%s=%s" % c for c in res) + "; datagrams received %d, connections %d" % (got, conns)
if got or conns or any(r == "ok" for n, r in res):
    escaped("a send reached a denied address", detail)
blocked("EACCES (supervisor)" if all(r == "EACCES" for n, r in res) else "refused", detail)
