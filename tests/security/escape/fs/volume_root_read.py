"""Read host root's 0600 files through the sandbox's volumes, as root
inside: one in a read-only volume owned by host root (no host account is
mapped there) and one in a read-write volume owned by a host account
(`user` is that account, root inside is not host root)."""
# mode: batch
paths = [p for p in (CTX.get("ro_volume_secret"), CTX.get("rw_volume_secret")) if p]
if not paths:
    blocked("no volumes on this tier")
res = {}
for p in paths:
    try:
        with open(p) as f:
            f.read()
        res[p] = "read"
    except OSError as e:
        res[p] = en(e.errno)
if "read" in res.values():
    escaped("read host root's 0600 file through a volume", res)
blocked("/".join(sorted(set(res.values()))), res)
