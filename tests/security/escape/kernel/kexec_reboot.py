"""kexec_load, kexec_file_load and reboot() with a wrong magic (harmless if
it reaches the kernel: EINVAL/EPERM there, ENOSYS from paddock)."""
# mode: batch
try_syscalls([("kexec_load", NR["kexec_load"], 0, 0, 0, 0),
              ("kexec_file_load", NR["kexec_file_load"], -1, -1, 0, 0, 0),
              ("reboot-badmagic", NR["reboot"], 0, 0, 0, 0)])
