"""Bind abstract unix names a host client could connect to: a listening
socket, a socketpair end, and a datagram pair disconnected (connect
AF_UNSPEC) and then named. Abstract names belong to the network namespace;
in the host's, Landlock's scope stops only connecting out, and a host client
connecting to a squatted name would reach the sandbox."""
# mode: batch
import socket
name = "pd-squat-" + CTX["marker"]
res, keep = {}, []


def attempt(what, f):
    try:
        f()
        res[what] = "ok"
    except OSError as e:
        res[what] = en(e.errno)


def listener():
    s = socket.socket(socket.AF_UNIX)
    keep.append(s)
    s.bind("\0" + name + "-l")
    s.listen(8)


def pair_end():
    a, b = socket.socketpair()
    keep.extend((a, b))
    a.bind("\0" + name + "-p")


def dgram_pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    keep.extend((a, b))
    unspec = (ctypes.c_ushort * 8)(0)
    if libc.connect(a.fileno(), unspec, 16) < 0:
        raise OSError(ctypes.get_errno(), "connect AF_UNSPEC")
    a.bind("\0" + name + "-d")


attempt("listener", listener)
attempt("socketpair end", pair_end)
attempt("datagram pair", dgram_pair)
bound = [k for k, v in res.items() if v == "ok"]
if bound:
    if os.readlink("/proc/self/ns/net") != CTX["host_net_ns"]:
        blocked("contained (own network namespace)", res)
    escaped("bound abstract names in the host's network namespace: %s" % ",".join(bound), res)
v = sorted(set(res.values()))
blocked("EPERM (paddock seccomp)" if v == ["EPERM"] else "/".join(v), res)
