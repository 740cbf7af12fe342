"""bpf(BPF_MAP_CREATE) and bpf(BPF_PROG_LOAD) of a socket filter."""
# mode: batch
attr = ctypes.create_string_buffer(128)
ctypes.memmove(attr, (2).to_bytes(4, "little") + (4).to_bytes(4, "little") + (4).to_bytes(4, "little") + (1).to_bytes(4, "little"), 16)
insns = ctypes.create_string_buffer(b"\xb7\x00\x00\x00\x00\x00\x00\x00\x95\x00\x00\x00\x00\x00\x00\x00")
lic = ctypes.create_string_buffer(b"GPL")
prog = ctypes.create_string_buffer(128)
ctypes.memmove(prog, (1).to_bytes(4, "little") + (2).to_bytes(4, "little") + ctypes.addressof(insns).to_bytes(8, "little")
               + ctypes.addressof(lic).to_bytes(8, "little"), 24)
try_syscalls([("BPF_MAP_CREATE", NR["bpf"], 0, attr, 72), ("BPF_PROG_LOAD", NR["bpf"], 5, prog, 128)])
