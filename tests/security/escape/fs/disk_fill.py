"""Fill the writable layer: write 1 MiB blocks to $HOME until the kernel says
ENOSPC (or the cap the runner passes is reached), then check the sandbox
still works (delete, write a small file)."""
# mode: isolated
# opts: --disk 64M --memory 256M
# timeout: 60
home = os.environ.get("HOME", "/tmp")
cap = CTX.get("fill_cap_mb", 512)
blk = b"\xa5" * (1 << 20)
n, err = 0, None
p = os.path.join(home, "pd-fill")
# unbuffered: a short write at the end (free space that is not a whole
# number of blocks) must not leave bytes for close() to fail on
with open(p, "wb", buffering=0) as f:
    try:
        while n < cap:
            f.write(blk)
            f.flush()
            n += 1
        os.fsync(f.fileno())
    except OSError as e:
        err = e.errno
try:
    os.unlink(p)
except OSError:
    pass
try:
    with open(os.path.join(home, "after"), "w") as f:
        f.write("ok")
    alive = "sandbox still writes"
except OSError as e:
    alive = "after: " + en(e.errno)
if err in (errno.ENOSPC, errno.EDQUOT):
    blocked(en(err), "%d MiB written, then %s; %s" % (n, en(err), alive))
if err is None:
    escaped("no limit up to the cap", "%d MiB written without ENOSPC" % n)
error(en(err), "%d MiB" % n)
