"""socket(AF_ALG) — family 38, type 5: must be refused by the filter (EPERM),
whether or not the kernel has the family."""
# mode: batch
r, e = sc(NR["socket"], 38, 5, 0)
if r >= 0:
    escaped("AF_ALG socket created", "fd %d" % r)
blocked(label(e, (errno.EPERM,)), "socket=%s" % en(e))
