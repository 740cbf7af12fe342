"""Open the host's POSIX message queue (mode 0666, holding a message) and
receive from it; create a queue of this run's own. Queues belong to the ipc
namespace and outlive their creator; the runner checks the host's queue and
looks for the new one after teardown."""
# mode: batch
# host-check: mq-untouched
libc.mq_open.restype = ctypes.c_int
res = {}
ctypes.set_errno(0)
fd = libc.mq_open(CTX["mq_name"].encode(), os.O_RDONLY | os.O_NONBLOCK, 0, None)
e_open = ctypes.get_errno() if fd < 0 else 0
res["open host queue"] = "fd" if fd >= 0 else en(e_open)
if fd >= 0:
    buf = ctypes.create_string_buffer(8192)
    n = libc.mq_receive(fd, buf, 8192, None)
    res["receive"] = buf.raw[:max(n, 0)].decode("latin-1") if n >= 0 else en(ctypes.get_errno())
ctypes.set_errno(0)
own = libc.mq_open(("/" + CTX["marker"]).encode(), os.O_CREAT | os.O_RDWR, 0o600, None)
res["create"] = "fd" if own >= 0 else en(ctypes.get_errno())
host_ns = os.readlink("/proc/self/ns/ipc") == CTX["host_ipc_ns"]
if fd >= 0:
    escaped("opened the host's message queue", res)
if own >= 0 and host_ns:
    escaped("created a message queue in the host's ipc namespace", res)
blocked(label(e_open), res)
