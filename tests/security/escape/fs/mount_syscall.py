"""mount(2): tmpfs over /tmp, a new procfs, a bind mount of / elsewhere,
remount / read-write, umount2 of /proc (to unmask it)."""
# mode: batch
tgt = os.path.join(os.environ.get("HOME", "/tmp"), "pd-mnt")
os.makedirs(tgt, exist_ok=True)
try_syscalls([("mount-tmpfs", NR["mount"], "none", tgt, "tmpfs", 0, 0),
              ("mount-proc", NR["mount"], "proc", tgt, "proc", 0, 0),
              ("mount-bind", NR["mount"], "/", tgt, 0, 0x1000 | 0x4000, 0),      # MS_BIND|MS_REC
              ("remount-rw", NR["mount"], 0, "/", 0, 0x20, 0),                  # MS_REMOUNT
              ("umount-proc", NR["umount2"], "/proc", 2)])
