"""paddock's own files: the state dir, the runtime dir (agent sockets,
records), the uid registry, other sandboxes' workspaces, the paddock and
agent binaries' host paths."""
# mode: batch
res = {}
for p in (CTX["state_dir"], CTX["runtime_dir"], "/run/paddock/uids", CTX["state_dir"] + "/workspaces", CTX["paddock_bin"]):
    try:
        if os.path.isdir(p):
            res[p] = "listed %d" % len(os.listdir(p))
        else:
            read_file(p, 16)
            res[p] = "read"
    except OSError as e:
        res[p] = en(e.errno)
bad = {p: v for p, v in res.items() if v not in ("ENOENT", "EACCES", "EPERM")}
if bad:
    escaped("reached paddock's state", bad)
v = sorted(set(res.values()))
blocked("not visible (ENOENT)" if v == ["ENOENT"] else "/".join(v), res)
