"""Mount a cgroup hierarchy (v1 memory with release_agent, cgroup2) to get a
writable cgroupfs outside the sandbox's own cgroup."""
# mode: batch
os.makedirs(os.environ.get("HOME", "/tmp") + "/cg", exist_ok=True)
t = os.environ.get("HOME", "/tmp") + "/cg"
try_syscalls([("mount-cgroup-v1", NR["mount"], "cgroup", t, "cgroup", 0, "memory"),
              ("mount-cgroup-rdma", NR["mount"], "cgroup", t, "cgroup", 0, "rdma"),
              ("mount-cgroup2", NR["mount"], "none", t, "cgroup2", 0, 0)])
