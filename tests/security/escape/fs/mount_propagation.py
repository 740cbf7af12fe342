"""Mount propagation: a mount in the sandbox that is a slave or peer of a
host mount would let host mounts (or the sandbox's) cross over. Look at the
optional fields of mountinfo, and try MS_SHARED on /."""
# mode: batch
mi = read_file("/proc/self/mountinfo").decode().splitlines()
prop = [l.split()[4] + " " + " ".join(f for f in l.split()[6:l.split().index("-")]) for l in mi
        if any(f.startswith(("shared:", "master:")) for f in l.split()[6:l.split().index("-")])]
r, e = sc(NR["mount"], 0, "/", 0, 1 << 20, 0)       # MS_SHARED
if r == 0:
    escaped("made / shared", "")
if prop and CTX["tier"] != "process":
    escaped("mounts propagate with the host", prop[:5])
if prop:
    blocked(label(e), "host namespace (process tier): %d propagating mounts, mount(MS_SHARED)=%s" % (len(prop), en(e)))
blocked(label(e), "every mount private; mount(MS_SHARED)=%s" % en(e))
