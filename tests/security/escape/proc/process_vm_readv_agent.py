"""process_vm_readv / process_vm_writev of the agent's memory (PID 1 and the
agent's pid), at the address of its stack (from /proc/<pid>/stat if readable,
else a guess)."""
# mode: batch
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(64)
res = {}
for pid in sorted({1, CTX["agent_pid"]}):
    addr = 0x400000
    try:
        addr = int(read_file("/proc/%d/stat" % pid).decode().rsplit(")", 1)[1].split()[25]) or addr
    except (OSError, IndexError, ValueError):
        pass
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
    remote = iovec(addr, 64)
    r, e = sc(NR["process_vm_readv"], pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    res["readv %d" % pid] = "read %d" % r if r >= 0 else en(e)
if any(v.startswith("read") for v in res.values()):
    escaped("read the agent's memory", res)
v = sorted(set(res.values()))
blocked("/".join(v), res)
