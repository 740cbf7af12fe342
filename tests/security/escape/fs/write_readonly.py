"""Write where the sandbox must not: the host's /usr/bin and /etc (a file
named with the run's marker: the runner checks the host afterwards), the
read-only volume, /sys, /dev, /proc/sys. In the container tier root's writes
to /usr and /etc land in the sandbox's overlay ("contained")."""
# mode: batch
# host-check: no-marker-files
m = CTX["marker"]
res = {}
targets = ["/usr/bin/" + m, "/etc/" + m, "/sys/kernel/" + m, "/dev/" + m, "/proc/sys/" + m]
if CTX.get("ro_volume"):
    targets.append(CTX["ro_volume"] + "/" + m)
for p in targets:
    try:
        with open(p, "w") as f:
            f.write("x")
        res[p] = "written"
    except OSError as e:
        res[p] = en(e.errno)
bad = [p for p, v in res.items() if v == "written" and not p.startswith(("/usr/", "/etc/"))]
if bad:
    escaped("wrote a read-only path", bad)
if "written" in res.values():
    blocked("contained", res)       # the runner's host check decides for /usr, /etc
blocked("/".join(sorted(set(res.values()))), res)
