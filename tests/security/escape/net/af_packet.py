"""socket(AF_PACKET) — family 17, type 3: must be refused by the filter (EPERM),
whether or not the kernel has the family."""
# mode: batch
r, e = sc(NR["socket"], 17, 3, 0)
if r >= 0:
    escaped("AF_PACKET socket created", "fd %d" % r)
blocked(label(e, (errno.EPERM,)), "socket=%s" % en(e))
