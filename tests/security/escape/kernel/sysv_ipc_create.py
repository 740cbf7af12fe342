"""Create SysV IPC objects (a segment, a queue, a semaphore set) under a key
of this run. In the host's ipc namespace they would outlive the sandbox and
be handed to whoever gets its uid next; the runner looks for the key on the
host after teardown."""
# mode: batch
# host-check: no-marker-ipc
key = CTX["marker_ipc_key"]
res = {}
for name, fn, args in (("shmget", libc.shmget, (key, 4096, 0o1600)), ("msgget", libc.msgget, (key, 0o1600)),
                       ("semget", libc.semget, (key, 1, 0o1600))):
    ctypes.set_errno(0)
    r = fn(*args)
    res[name] = ("id %d" % r) if r >= 0 else en(ctypes.get_errno())
made = [n for n, v in res.items() if v.startswith("id ")]
if made:
    if os.readlink("/proc/self/ns/ipc") != CTX["host_ipc_ns"]:
        blocked("contained (own ipc namespace)", res)
    escaped("created SysV objects in the host's ipc namespace: %s" % ",".join(made), res)
errs = sorted(set(res.values()))
e = getattr(errno, errs[0]) if len(errs) == 1 and hasattr(errno, errs[0]) else 0
blocked(label(e) if e else "/".join(errs), res)
