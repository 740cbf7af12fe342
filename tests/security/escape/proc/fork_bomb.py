"""Fork bomb under --pids 64: fork until the kernel says EAGAIN, hold the
children, then reap them; the sandbox must still answer."""
# mode: isolated
# opts: --pids 64
# timeout: 60
r, w = os.pipe()
kids, err = [], None
while len(kids) < 5000:
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    kids.append(pid)
os.close(w)
for k in kids:
    os.waitpid(k, 0)
if err == errno.EAGAIN and len(kids) < 64:
    blocked("EAGAIN (pids limit)", "%d forks, then EAGAIN; all reaped" % len(kids))
if err is None:
    escaped("no pids limit", "%d forks" % len(kids))
blocked(en(err), "%d forks" % len(kids))
