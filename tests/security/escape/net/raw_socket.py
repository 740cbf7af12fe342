"""Raw IP sockets (AF_INET SOCK_RAW ICMP, IPPROTO_RAW): with CAP_NET_RAW in
its own netns root may open one there (contained: only lo); on the host's
network it must be refused."""
# mode: batch
import socket
res = {}
for name, proto in (("icmp", 1), ("raw", 255)):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, proto)
        try:
            s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("127.0.0.1", 0))
            res[name] = "sent"
        except OSError as e:
            res[name] = "opened, send " + en(e.errno)
    except OSError as e:
        res[name] = en(e.errno)
nifs = interfaces()
opened = [k for k, v in res.items() if not v.startswith("E")]
if opened and nifs != ["lo"]:
    escaped("raw socket on the host's network", "%s, interfaces %s" % (res, nifs))
if opened:
    blocked("contained", "%s; interfaces %s" % (res, nifs))
v = sorted(set(res.values()))
blocked("EPERM (paddock seccomp)" if v == ["EPERM"] and CTX["tier"] == "process" else "/".join(v), res)
