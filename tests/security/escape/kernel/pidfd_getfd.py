"""Steal descriptors: pidfd_open(agent) + pidfd_getfd(fd 0..9), kcmp, and
process_madvise on the agent."""
# mode: batch
pid = CTX["agent_pid"]
r, e = sc(NR["pidfd_open"], pid, 0)
res = {"pidfd_open": "fd" if r >= 0 else en(e)}
got = []
if r >= 0:
    for n in range(10):
        g, ge = sc(NR["pidfd_getfd"], r, n, 0)
        if g >= 0:
            got.append(n)
        res["pidfd_getfd"] = en(ge) if g < 0 else "ok"
r2, e2 = sc(NR["kcmp"], os.getpid(), pid, 0, 0, 0)
res["kcmp"] = "ok" if r2 >= 0 else en(e2)
if got:
    escaped("took the agent's descriptors", got)
if res["kcmp"] == "ok":
    escaped("kcmp on the agent", res)
blocked(label(e2) if "pidfd_getfd" not in res else label(errno.ENOSYS if res["pidfd_getfd"] == "ENOSYS" else 0), res)
