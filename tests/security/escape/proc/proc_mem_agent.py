"""The agent through /proc: /proc/<agent>/mem, environ, maps, fd/*, and
kill() of it (PID 1 ignores signals it did not ask for)."""
# mode: batch
res = {}
pid = CTX["agent_pid"]
for f in ("mem", "environ", "maps"):
    try:
        fd = os.open("/proc/%d/%s" % (pid, f), os.O_RDONLY)
        try:
            os.read(fd, 16)
            res[f] = "read"
        except OSError as e:
            res[f] = "opened, read " + en(e.errno)
        os.close(fd)
    except OSError as e:
        res[f] = en(e.errno)
# listing /proc/<agent>/fd shows fd numbers only (root inside owns the
# non-dumpable agent's /proc dir); following or reading a link is the escape
try:
    names = os.listdir("/proc/%d/fd" % pid)
    res["fd-list"] = "%d numbers listed" % len(names)
    links = {}
    for n in names:
        try:
            links[n] = os.readlink("/proc/%d/fd/%s" % (pid, n))
        except OSError as e:
            res["fd-readlink"] = en(e.errno)
    if links:
        escaped("read the agent's fd links", links)
except OSError as e:
    res["fd-list"] = en(e.errno)
if "read" in res.values():
    escaped("reached into the agent", res)
v = sorted(set(x for k, x in res.items() if k != "fd-list"))
blocked("/".join(v), res)
