"""A user-notification listener (SECCOMP_FILTER_FLAG_NEW_LISTENER): the
workload could broker its own syscalls; must be refused (EPERM)."""
# mode: batch
class sock_filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]
class sock_fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(sock_filter))]
insns = (sock_filter * 1)(sock_filter(0x06, 0, 0, 0x7fff0000))
prog = sock_fprog(1, insns)
libc.prctl(38, 1, 0, 0, 0)
r, e = sc(NR["seccomp"], 1, 8, ctypes.byref(prog))          # FLAG_NEW_LISTENER
if r >= 0:
    escaped("got a seccomp listener fd", "fd %d" % r)
r2, e2 = sc(NR["seccomp"], 1, 1, ctypes.byref(prog))        # FLAG_TSYNC (allowed? reported)
blocked(label(e, (errno.EPERM,)), "NEW_LISTENER=%s, TSYNC=%s" % (en(e), "ok" if r2 >= 0 else en(e2)))
