"""The release_agent escape: find a writable release_agent or a cgroup dir
where one can mkdir and set notify_on_release, under /sys/fs/cgroup."""
# mode: batch
# host-check: no-marker-cgroups
import glob
res = {}
for ra in glob.glob("/sys/fs/cgroup/*/release_agent") + glob.glob("/sys/fs/cgroup/release_agent"):
    try:
        with open(ra, "a") as f:
            pass
        res[ra] = "writable"
    except OSError as e:
        res[ra] = en(e.errno)
for d in glob.glob("/sys/fs/cgroup/*/") + ["/sys/fs/cgroup/"]:
    p = d + CTX["marker"]
    try:
        os.mkdir(p)
        res[p] = "mkdir"
        try:
            with open(p + "/notify_on_release", "w") as f:
                f.write("1")
            res[p] = "mkdir+notify_on_release"
        except OSError:
            pass
        os.rmdir(p)
    except OSError as e:
        res.setdefault("mkdir", set()).add(en(e.errno))
res = {k: (sorted(v) if isinstance(v, set) else v) for k, v in res.items()}
bad = [k for k, v in res.items() if v in ("writable", "mkdir", "mkdir+notify_on_release")]
if bad:
    escaped("writable cgroupfs", bad)
errs = set()
for v in res.values():
    errs.update(v if isinstance(v, list) else [v])
blocked("/".join(sorted(errs)) or "no cgroupfs visible", res)
