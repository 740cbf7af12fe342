"""Check-then-use race on a brokered call that changes a path: one thread
flips the path buffer between a file of our own and /etc/host.conf (ro by
the policy's glob, so the supervisor decides) while the main thread calls
truncate() and chmod() on it in a loop for 2 s. A supervisor that checked
one copy of the path and let the kernel reread it would let one through;
this one performs the call on what it resolved."""
# mode: isolated
# timeout: 30
# policy: {"paths": [{"glob": "/etc/*.conf", "access": "ro"}]}
import threading
if CTX.get("tier") != "supervised":
    error("not applicable: policies are the supervised tier's", CTX.get("tier"))
victim = "/etc/host.conf"
before = os.stat(victim)
with open("/tmp/mine.conf", "w") as f:
    f.write("x" * 64)
good, bad = b"/tmp/mine.conf\0", b"/etc/host.conf\0"
buf = ctypes.create_string_buffer(good, 32)
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, bad, len(bad))
        ctypes.memmove(buf, good, len(good))
t = threading.Thread(target=flip, daemon=True)
t.start()
done = refused = 0
end = time.time() + 2
while time.time() < end:
    for nr, a in ((76, 0), (90, 0o600)):            # truncate(buf, 0), chmod(buf, 0600)
        r, e = sc(nr, buf, a)
        if r == 0:
            done += 1
        else:
            refused += 1
    with open("/tmp/mine.conf", "w") as f:
        f.write("x" * 64)
stop = True
t.join()
after = os.stat(victim)
detail = "%d calls done, %d refused; %s size %d -> %d, mode %o -> %o" % (
    done, refused, victim, before.st_size, after.st_size, before.st_mode & 0o7777, after.st_mode & 0o7777)
if after.st_size != before.st_size or after.st_mode != before.st_mode:
    escaped("changed an ro file through the race", detail)
if not refused:
    error("the race never reached the ro path", detail)
blocked("EACCES on every call that resolved to the ro file", detail)
