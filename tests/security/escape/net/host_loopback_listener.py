"""Connect to a TCP listener the test opened on the host's 127.0.0.1 (and
::1 with the same port); the runner also checks it accepted nothing."""
# mode: batch
# host-check: listener-untouched
import socket
res = {}
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect((addr, CTX["tcp_port"]))
        s.sendall(b"pd-esc\n")
        res[addr] = "connected"
        s.close()
    except OSError as e:
        res[addr] = en(e.errno) if e.errno else "timeout"
if "connected" in res.values():
    escaped("connected to the host's loopback listener", res)
v = sorted(set(res.values()))
if v == ["EPERM"]:
    blocked("EPERM (paddock seccomp)", res)
blocked("not reachable (%s)" % "/".join(v), res)
