"""Memory: allocate and touch 512 MiB under --memory 128M; the kernel's
OOM killer ends this process (the runner reads the run's --json reason), not
the agent or the host."""
# mode: isolated
# opts: --memory 128M
# killed: SIGKILL=blocked:OOM-killed (memory cgroup)
# timeout: 60
chunks = []
try:
    for i in range(512):
        b = bytearray(1 << 20)
        for j in range(0, 1 << 20, 4096):
            b[j] = 1
        chunks.append(b)
except MemoryError:
    blocked("ENOMEM", "%d MiB" % len(chunks))
escaped("no memory limit", "%d MiB allocated" % len(chunks))
