"""Check-then-use race on a brokered open: one thread flips the path buffer
between a readable file and /etc/shadow (unreadable to uid 1000) while the
main thread opens it in a loop for 2 s. A broker that checks one copy of the
path and opens another would hand out shadow; the kernel never does."""
# mode: batch
# timeout: 30
import threading
uid = drop_to_user()
if uid == 0:
    error("cannot drop root", "")
try:
    shadow = os.stat("/etc/shadow")
except OSError as e:
    blocked("not visible", "stat /etc/shadow: %s" % en(e.errno))
good, bad = b"/etc/hostname\0", b"/etc/shadow\0\0\0"
buf = ctypes.create_string_buffer(good, 32)
stop = False
flips = [0]
def flip():
    while not stop:
        ctypes.memmove(buf, bad, len(bad))
        ctypes.memmove(buf, good, len(good))
        flips[0] += 1
t = threading.Thread(target=flip, daemon=True)
t.start()
opens = denied = hits = 0
end = time.time() + 2
while time.time() < end:
    r, e = sc(257, -100, buf, 0, 0)          # openat
    if r >= 0:
        opens += 1
        st = os.fstat(r)
        if (st.st_dev, st.st_ino) == (shadow.st_dev, shadow.st_ino):
            hits += 1
        os.close(r)
    else:
        denied += 1
stop = True
t.join()
detail = "%d opens, %d denied, %d flips, %d of them /etc/shadow" % (opens, denied, flips[0], hits)
if hits:
    escaped("opened /etc/shadow through the race", detail)
blocked("EACCES on every /etc/shadow open", detail)
