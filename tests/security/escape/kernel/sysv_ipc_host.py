"""Open the host's SysV IPC objects by their keys (a shared memory segment
holding a canary, a message queue holding a message, a semaphore set; mode
0666): attach and read the segment, receive the message. SysV IPC belongs to
the ipc namespace; the process tier shares the host's."""
# mode: batch
# host-check: sysv-untouched
libc.shmat.restype = ctypes.c_void_p
key = CTX["sysv_key"]
res, got = {}, {}


def attempt(name, r):
    res[name] = ("id %d" % r) if r >= 0 else en(ctypes.get_errno())
    return r


ctypes.set_errno(0)
sid = attempt("shmget", libc.shmget(key, 0, 0))
if sid >= 0:
    p = libc.shmat(sid, None, 0o10000)                  # SHM_RDONLY
    if p not in (None, ctypes.c_void_p(-1).value):
        got["shm"] = ctypes.string_at(p, 64).rstrip(b"\0").decode("latin-1")
        libc.shmdt(ctypes.c_void_p(p))
ctypes.set_errno(0)
qid = attempt("msgget", libc.msgget(key, 0))
if qid >= 0:
    buf = ctypes.create_string_buffer(256)
    if libc.msgrcv(qid, buf, 200, 0, 0o4000) >= 0:      # IPC_NOWAIT
        got["msg"] = buf.raw[8:64].rstrip(b"\0").decode("latin-1")
ctypes.set_errno(0)
attempt("semget", libc.semget(key, 0, 0))
opened = [n for n, v in res.items() if v.startswith("id ")]
if opened:
    escaped("opened the host's SysV objects: %s" % ",".join(opened), {"res": res, "read": got})
errs = sorted(set(res.values()))
e = getattr(errno, errs[0]) if len(errs) == 1 and hasattr(errno, errs[0]) else 0
blocked(label(e) if e else "/".join(errs), res)
