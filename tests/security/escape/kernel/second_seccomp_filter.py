"""Stack a second seccomp filter that allows everything: allowed (filters
only restrict), and mount(2) must still be ENOSYS afterwards."""
# mode: batch
class sock_filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]
class sock_fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(sock_filter))]
prog_insns = (sock_filter * 1)(sock_filter(0x06, 0, 0, 0x7fff0000))     # RET ALLOW
prog = sock_fprog(1, prog_insns)
libc.prctl(38, 1, 0, 0, 0)        # PR_SET_NO_NEW_PRIVS
r, e = sc(NR["seccomp"], 1, 0, ctypes.byref(prog))          # SECCOMP_SET_MODE_FILTER
r2, e2 = sc(NR["mount"], "none", "/tmp", "tmpfs", 0, 0)
nf = [l for l in read_file("/proc/self/status").decode().splitlines() if l.startswith("Seccomp_filters")]
detail = "install=%s, then mount=%s, %s" % ("ok" if r == 0 else en(e), "ok" if r2 == 0 else en(e2), nf)
if r2 == 0 or e2 != errno.ENOSYS:
    escaped("a stacked filter loosened paddock's", detail)
blocked("ENOSYS (paddock seccomp)" if r == 0 else label(e, (errno.EPERM,)), detail)
