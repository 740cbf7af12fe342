"""Threads: start threads (tiny stacks) until the kernel refuses, up to
3000; the pids limit counts threads."""
# mode: batch
# timeout: 40
import threading
threading.stack_size(64 * 1024)
ev = threading.Event()
ts, err = [], None
while len(ts) < 3000:
    t = threading.Thread(target=ev.wait)
    try:
        t.start()
    except RuntimeError as e:
        err = str(e)
        break
    ts.append(t)
ev.set()
for t in ts:
    t.join()
if err is None:
    escaped("no thread limit", "%d threads" % len(ts))
blocked("EAGAIN (pids limit)", "%d threads, then %s" % (len(ts), err))
