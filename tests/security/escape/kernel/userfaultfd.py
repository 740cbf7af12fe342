"""userfaultfd(2) (the usual tool to widen kernel race windows) and
/dev/userfaultfd."""
# mode: batch
r, e = sc(NR["userfaultfd"], 0x80800)          # O_CLOEXEC|O_NONBLOCK
if r >= 0:
    escaped("userfaultfd created", "fd %d" % r)
fd, e2 = try_open("/dev/userfaultfd", os.O_RDWR)
if fd >= 0:
    escaped("/dev/userfaultfd opened", "")
blocked(label(e), "userfaultfd=%s /dev/userfaultfd=%s" % (en(e), en(e2)))
