"""ptrace / process_vm_readv / pidfd_open the host-side processes by their
host pids (paddock run, the test, the sandbox's ancestors on the host: agent,
supervisor): outside a pid namespace they are visible, inside not."""
# mode: batch
res = {}
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
for name, pid in sorted(CTX["host_pids"].items()):
    if pid in (os.getpid(), CTX["driver_pid"]):
        continue
    r, e = sc(NR["ptrace"], 0x4206, pid, 0, 0)           # PTRACE_SEIZE
    if r == 0:
        sc(NR["ptrace"], 17, pid, 0, 0)
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
    remote = iovec(0x400000, 8)
    r2, e2 = sc(NR["process_vm_readv"], pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    res[name] = "seize=%s readv=%s" % ("ok" if r == 0 else en(e), "ok" if r2 >= 0 else en(e2))
if any("=ok" in v for v in res.values()):
    escaped("attached to a host process", res)
errs = sorted({x.split("=")[1] for v in res.values() for x in v.split()})
blocked("not visible (ESRCH)" if errs == ["ESRCH"] else "/".join(errs), res)
