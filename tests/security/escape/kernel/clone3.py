"""clone3 with CLONE_NEWUSER in its struct (flags in memory, where seccomp
cannot look): it must be refused as a whole."""
# mode: batch
args = ctypes.create_string_buffer(88)
ctypes.memmove(args, (0x10000000).to_bytes(8, "little"), 8)
ctypes.memmove(ctypes.addressof(args) + 32, (17).to_bytes(8, "little"), 8)     # exit_signal SIGCHLD
r, e = sc(NR["clone3"], args, 88)
if r == 0:
    os._exit(0)
if r > 0:
    os.waitpid(r, 0)
    escaped("clone3 created a child in a new user namespace", "pid %d" % r)
blocked(label(e), "clone3=%s" % en(e))
