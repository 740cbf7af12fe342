"""setns() into PID 1's namespaces (host init's in the process tier) and
into the host-side processes' (by host pid) namespaces."""
# mode: batch
res = {}
fds = []
for pid in [1] + sorted(CTX["host_pids"].values()):
    for ns in ("mnt", "pid", "net", "user"):
        try:
            fds.append(("%d/%s" % (pid, ns), os.open("/proc/%d/ns/%s" % (pid, ns), os.O_RDONLY)))
        except OSError as e:
            res["open %d/%s" % (pid, ns)] = en(e.errno)
if not fds:
    v = sorted(set(res.values()))
    blocked("not visible (ENOENT)" if v == ["ENOENT"] else "/".join(v), res)
out = []
for name, fd in fds:
    r, e = sc(NR["setns"], fd, 0)
    out.append((name, r, e))
res.update({n: ("ok" if r == 0 else en(e)) for n, r, e in out})
if any(r == 0 for n, r, e in out if not n.startswith("1/") or CTX["tier"] == "process"):
    escaped("joined a namespace", res)
blocked(label(out[0][2]), res)
