"""Leave the sandbox's cgroup (and its limits): write our pid to the root
cgroup.procs of every hierarchy, and to a sibling's; then read where we are."""
# mode: batch
import glob
before = read_file("/proc/self/cgroup").decode()
res = {}
for p in glob.glob("/sys/fs/cgroup/*/cgroup.procs") + glob.glob("/sys/fs/cgroup/cgroup.procs"):
    try:
        with open(p, "w") as f:
            f.write(str(os.getpid()))
        res[p] = "written"
    except OSError as e:
        res[p] = en(e.errno)
after = read_file("/proc/self/cgroup").decode()
if after != before:
    escaped("moved to another cgroup", after.replace("\n", " ")[:300])
v = sorted(set(res.values()))
blocked("/".join(v) if v else "no cgroupfs visible", res)
