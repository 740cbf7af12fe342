"""Port I/O: iopl(3), ioperm(0x80, 1, 1)."""
# mode: batch
try_syscalls([("iopl", NR["iopl"], 3), ("ioperm", NR["ioperm"], 0x80, 1, 1)])
