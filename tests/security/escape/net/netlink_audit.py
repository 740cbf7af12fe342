"""Netlink families beyond NETLINK_ROUTE: AUDIT (9), KOBJECT_UEVENT (15),
NETFILTER (12), SOCK_DIAG (4), GENERIC (16): EPERM from the filter."""
# mode: batch
try_syscalls([("NETLINK_%s" % n, NR["socket"], 16, 3, p) for n, p in
              (("AUDIT", 9), ("KOBJECT_UEVENT", 15), ("NETFILTER", 12), ("SOCK_DIAG", 4), ("GENERIC", 16))],
             paddock_errnos=(errno.EPERM,))
