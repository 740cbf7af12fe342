"""CPU: two busy processes for 2 s under the sandbox's --cpus 1 (default):
more than ~1.3 CPU-seconds per second means no CPU limit."""
# mode: batch
# timeout: 20
kids = []
for i in range(2):
    pid = os.fork()
    if pid == 0:
        t = time.time() + 2.0
        while time.time() < t:
            pass
        os._exit(0)
    kids.append(pid)
t0 = time.time()
for k in kids:
    os.waitpid(k, 0)
wall = time.time() - t0
cpu = os.times().children_user + os.times().children_system
ratio = cpu / max(wall, 0.01)
detail = "%.2f CPU-s in %.2f s wall (%.2f CPUs)" % (cpu, wall, ratio)
if ratio > 1.3:
    escaped("no CPU limit", detail)
blocked("throttled (cpu cgroup)", detail)
