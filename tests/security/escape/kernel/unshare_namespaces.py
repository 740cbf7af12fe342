"""unshare() of every namespace type one at a time (user, mount, pid, net,
uts, ipc, cgroup, time)."""
# mode: batch
flags = dict(user=0x10000000, mnt=0x20000, pid=0x20000000, net=0x40000000, uts=0x4000000, ipc=0x8000000, cgroup=0x2000000, time=0x80)
try_syscalls([("unshare-" + n, NR["unshare"], f) for n, f in flags.items()], paddock_errnos=(errno.EOPNOTSUPP,))
