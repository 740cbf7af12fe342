"""Zombies: an intermediate process makes 100 children that exit at once and
then exits without reaping them; they are reparented (to PID 1 or the
subreaper) and must be reaped, not left to fill the pid table."""
# mode: batch
n = 100
mid = os.fork()
if mid == 0:
    for i in range(n):
        if os.fork() == 0:
            libc.prctl(15, b"pdzmb", 0, 0, 0)     # PR_SET_NAME
            os._exit(0)
    time.sleep(0.2)
    os._exit(0)
os.waitpid(mid, 0)
left = []
for i in range(30):
    time.sleep(0.1)
    left = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                st = read_file("/proc/%s/stat" % p).decode()
                if "(pdzmb)" in st and st.rsplit(")", 1)[1].split()[0] == "Z":
                    left.append(int(p))
            except OSError:
                pass
    if not left:
        break
if left:
    escaped("zombies not reaped", "%d zombies after 3 s" % len(left))
blocked("reaped by the agent", "%d orphaned zombies reaped" % n)
