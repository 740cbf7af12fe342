"""Exhaust inodes: create empty files in $HOME until ENOSPC (or the cap the
runner passes), then check the sandbox still works."""
# mode: isolated
# opts: --disk 64M --memory 256M
# timeout: 90
# killed: SIGKILL=escaped:OOM-killed instead of ENOSPC (the writable layer has no inode limit)
home = os.environ.get("HOME", "/tmp")
cap = CTX.get("inode_cap", 300000)
d = os.path.join(home, "pd-inodes")
os.mkdir(d)
n, err = 0, None
t0 = time.time()
try:
    while n < cap and time.time() - t0 < 30:
        os.close(os.open("%s/%d" % (d, n), os.O_CREAT | os.O_WRONLY, 0o600))
        n += 1
except OSError as e:
    err = e.errno
try:
    with open(os.path.join(home, "after"), "w") as f:
        f.write("ok")
    alive = "sandbox still writes"
except OSError as e:
    alive = "after: " + en(e.errno)
if err in (errno.ENOSPC, errno.EDQUOT):
    blocked(en(err), "%d files, then %s; %s" % (n, en(err), alive))
if err is None:
    escaped("no inode limit up to the cap", "%d files in %.0fs without ENOSPC; %s" % (n, time.time() - t0, alive))
error(en(err), "%d files" % n)
