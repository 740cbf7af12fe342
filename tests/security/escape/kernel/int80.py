"""The i386 entry: `int 0x80` with eax=20 (getpid on i386) from a 64-bit
process: the filter must kill the process with SIGSYS; on a kernel without
the i386 entry the CPU faults first (SIGSEGV), which the suite expects only
where a host probe finds no entry."""
# mode: isolated
# killed: SIGSYS=blocked:killed by SIGSYS (paddock seccomp); SIGSEGV=blocked:SIGSEGV (kernel without i386 entry)
import mmap
code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"              # mov eax, 20; int 0x80; ret
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
r = f()
escaped("i386 syscall returned", "getpid via int 0x80 = %d" % r)
