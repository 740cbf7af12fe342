"""ioctl commands with bits above 32 set, without a terminal: TIOCSTI |
1<<32 (0x1_00005412) and TIOCLINUX | 0xffffffff00000000 must be denied by
the filter (EPERM), not pass it and reach the tty layer (ENOTTY)."""
# mode: batch
c = ctypes.c_char(b"x")
fd = os.open("/dev/null", os.O_RDWR)
try_syscalls([("TIOCSTI|1<<32", NR["ioctl"], fd, 0x100005412, ctypes.byref(c)),
              ("TIOCSTI|hi", NR["ioctl"], fd, 0xffffffff00005412, ctypes.byref(c)),
              ("TIOCLINUX|hi", NR["ioctl"], fd, 0xdead00000000541C, ctypes.byref(c))], paddock_errnos=(errno.EPERM,))
