"""io_uring_setup: its submitted operations would bypass seccomp."""
# mode: batch
params = ctypes.create_string_buffer(120)
try_syscalls([("io_uring_setup", NR["io_uring_setup"], 8, params),
              ("io_uring_enter", 426, 0, 0, 0, 0, 0, 0),
              ("io_uring_register", 427, 0, 0, 0, 0)])
