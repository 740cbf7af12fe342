"""A thread killed in the middle of a (brokered) open: children block in
open() of a FIFO nobody writes, in a second thread, and are SIGKILLed; then
fresh opens must still complete at once (a broker left waiting on the dead
request would wedge the sandbox)."""
# mode: batch
# timeout: 40
import threading
home = os.environ.get("HOME", "/tmp")
fifo = os.path.join(home, "pd-fifo")
os.mkfifo(fifo)
kids = []
for i in range(5):
    pid = os.fork()
    if pid == 0:
        threading.Thread(target=lambda: os.open(fifo, os.O_RDONLY), daemon=True).start()
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
time.sleep(0.5)
for k in kids:
    os.kill(k, signal.SIGKILL)
    os.waitpid(k, 0)
# then: time fresh opens in a child (so a hang is measurable)
slow = []
for i in range(20):
    t0 = time.time()
    pid = os.fork()
    if pid == 0:
        os.close(os.open("/etc/hostname", os.O_RDONLY))
        os._exit(0)
    deadline = time.time() + 5
    while time.time() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        slow.append("hung")
        continue
    if time.time() - t0 > 1:
        slow.append(round(time.time() - t0, 2))
if slow:
    escaped("opens wedged after a killed request", slow)
blocked("unaffected", "5 requests killed mid-open; 20 fresh opens each < 1 s")
