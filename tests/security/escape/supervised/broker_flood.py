"""A flood of brokered calls: 4 processes x 4 threads open/close files and
connect to 127.0.0.1:1 as fast as they can for 3 s; afterwards one open
must still take < 1 s (the broker is not a denial-of-service lever)."""
# mode: batch
# timeout: 40
import socket, threading
def worker(stop):
    while time.time() < stop:
        try:
            os.close(os.open("/etc/hostname", os.O_RDONLY))
        except OSError:
            pass
        try:
            s = socket.socket()
            s.settimeout(0.2)
            s.connect(("127.0.0.1", 1))
        except OSError:
            pass
        finally:
            try:
                s.close()
            except Exception:
                pass
r, w = os.pipe()
kids = []
stop = time.time() + 3
for i in range(4):
    pid = os.fork()
    if pid == 0:
        ts = [threading.Thread(target=worker, args=(stop,)) for _ in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
t0 = time.time()
os.close(os.open("/etc/hostname", os.O_RDONLY))
lat = time.time() - t0
if lat > 1:
    escaped("broker starved after the flood", "%.2f s for one open" % lat)
blocked("survived", "flood of 3 s from 16 threads; next open %.1f ms" % (lat * 1000))
