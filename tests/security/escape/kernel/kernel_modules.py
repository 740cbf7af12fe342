"""Load or remove kernel modules: init_module (an empty image),
finit_module (on /dev/null), delete_module("loop")."""
# mode: batch
fd = os.open("/dev/null", os.O_RDONLY)
img = ctypes.create_string_buffer(64)
try_syscalls([("init_module", NR["init_module"], img, 64, ""),
              ("finit_module", NR["finit_module"], fd, "", 0),
              ("delete_module", NR["delete_module"], "pd_no_such_module", 0x800)])
