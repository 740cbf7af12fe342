"""socket(AF_VSOCK) — family 40, type 1: must be refused by the filter (EPERM),
whether or not the kernel has the family."""
# mode: batch
r, e = sc(NR["socket"], 40, 1, 0)
if r >= 0:
    escaped("AF_VSOCK socket created", "fd %d" % r)
blocked(label(e, (errno.EPERM,)), "socket=%s" % en(e))
