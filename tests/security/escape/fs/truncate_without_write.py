"""Truncate a file one may only read: truncate(path), open(O_RDONLY|O_TRUNC)
(Linux truncates when the caller could write), ftruncate on a read-only fd.
Targets: the read-only volume's canary (container), the host's /etc/passwd
(process tier), the sandbox's python3 binary."""
# mode: batch
# host-check: canary-intact
targets = [p for p in (CTX.get("ro_volume_file"), "/etc/passwd", "/usr/bin/python3") if p]
res = {}
for p in targets:
    if not os.path.exists(p):
        res[p] = "absent"
        continue
    size = os.stat(p).st_size
    r = {}
    try:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.ftruncate(fd, size)
            r["ftruncate-ro"] = "ok"
        except OSError as e:
            r["ftruncate-ro"] = en(e.errno)
        os.close(fd)
    except OSError as e:
        r["open"] = en(e.errno)
    try:
        os.truncate(p, size)          # same size: harmless if it works
        r["truncate"] = "ok"
    except OSError as e:
        r["truncate"] = en(e.errno)
    res[p] = r
bad = [p for p, r in res.items() if isinstance(r, dict) and "ok" in r.values()
       and (p == CTX.get("ro_volume_file") or os.getuid() != 0 or p == "/etc/passwd" and CTX["tier"] == "process")]
if bad:
    escaped("truncate allowed without write access", res)
errs = sorted({v for r in res.values() if isinstance(r, dict) for v in r.values() if v != "ok"})
if any(isinstance(r, dict) and "ok" in r.values() for r in res.values()):
    blocked("contained", res)
blocked("/".join(errs), res)
