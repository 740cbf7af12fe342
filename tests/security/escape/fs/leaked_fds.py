"""Descriptors leaked into the sandbox: the test starts paddock holding an
inheritable fd of the host canary directory (and its other fds); anything
but 0, 1, 2 here is a leak. Each extra fd's target is reported."""
# mode: batch
extra = {}
for fd in range(3, 4096):
    try:
        os.fstat(fd)
    except OSError:
        continue
    try:
        extra[fd] = os.readlink("/proc/self/fd/%d" % fd)
    except OSError as e:
        extra[fd] = "?" + en(e.errno)
if extra:
    escaped("inherited descriptors", extra)
blocked("no leaked fds", "only 0, 1, 2")
