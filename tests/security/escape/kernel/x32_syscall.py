"""An x32-ABI syscall (getpid with bit 30 set) from a 64-bit process, by
machine code in an executable mapping: the filter must kill the process
with SIGSYS (the driver sees the signal)."""
# mode: isolated
# killed: SIGSYS=blocked:killed by SIGSYS (paddock seccomp)
import mmap
code = b"\xb8" + (0x40000000 | 39).to_bytes(4, "little") + b"\x0f\x05\xc3"     # mov eax, x32 getpid; syscall; ret
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
r = f()
escaped("x32 syscall returned", "getpid via x32 = %d" % r)
