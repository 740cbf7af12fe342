"""Cloud metadata: TCP connects to 169.254.169.254:80, 100.100.100.200:80,
[fd00:ec2::254]:80, 169.254.170.2:80 (ECS), 2 s timeout each."""
# mode: batch
# timeout: 20
import socket
res = {}
for fam, addr in ((socket.AF_INET, "169.254.169.254"), (socket.AF_INET, "100.100.100.200"),
                  (socket.AF_INET, "169.254.170.2"), (socket.AF_INET6, "fd00:ec2::254")):
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect((addr, 80))
        res[addr] = "connected"
    except socket.timeout:
        res[addr] = "timeout"
    except OSError as e:
        res[addr] = en(e.errno)
if "connected" in res.values():
    escaped("reached a metadata endpoint", res)
v = sorted(set(res.values()))
if v == ["EPERM"]:
    blocked("EPERM (paddock seccomp)", res)
blocked("not reachable (%s)" % "/".join(v), res)
