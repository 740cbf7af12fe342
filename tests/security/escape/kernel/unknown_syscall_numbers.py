"""Syscall numbers newer than libseccomp knows (470-520, 1000, 0x3fffffff)
must be ENOSYS from the filter; the 6.10-6.17 additions (mseal 462 ...
file_setattr 469) are reported (harmless arguments)."""
# mode: batch
res = {}
for nr in list(range(470, 521)) + [1000, 0x3ffffffe]:
    r, e = sc(nr, 0, 0, 0, 0, 0, 0)
    if r >= 0 or e != errno.ENOSYS:
        res[nr] = r if r >= 0 else en(e)
recent = {}
for nr in range(462, 470):
    r, e = sc(nr, 0, 0, 0, 0, 0, 0)
    recent[nr] = r if r >= 0 else en(e)
if res:
    escaped("unknown syscall numbers reached the kernel", res)
blocked("ENOSYS (paddock seccomp)", "470-520, 1000, 0x3ffffffe: ENOSYS; 462-469: %s" % recent)
