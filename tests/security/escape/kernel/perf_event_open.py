"""perf_event_open of a software counter on this process and a hardware
counter on every process of CPU 0."""
# mode: batch
attr = ctypes.create_string_buffer(128)
ctypes.memmove(attr, (1).to_bytes(4, "little") + (128).to_bytes(4, "little"), 8)   # PERF_TYPE_SOFTWARE, size
hw = ctypes.create_string_buffer(128)
ctypes.memmove(hw, (0).to_bytes(4, "little") + (128).to_bytes(4, "little"), 8)
try_syscalls([("perf self", NR["perf_event_open"], attr, 0, -1, -1, 0),
              ("perf cpu0", NR["perf_event_open"], hw, -1, 0, -1, 0)])
