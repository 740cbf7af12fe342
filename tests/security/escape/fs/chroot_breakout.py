"""The classic chroot breakout: chroot into a subdirectory while keeping a
cwd outside it, walk `..` up, chroot("."), then look for the host canary."""
# mode: batch
import tempfile
d = tempfile.mkdtemp(prefix="pd-chroot-", dir=os.environ.get("HOME", "/tmp"))
os.mkdir(d + "/jail")
os.chdir(d)                       # the cwd stays outside the new root
r, e = sc(NR["chroot"], d + "/jail")
if r != 0:
    blocked(label(e), "chroot: %s" % en(e))
for _ in range(64):
    os.chdir("..")
r2, e2 = sc(NR["chroot"], ".")
try:
    read_file(CTX["canary_file"])
    escaped("host canary read after chroot breakout", CTX["canary_file"])
except OSError as ex:
    blocked("contained", "chroot worked, `..` stopped at the sandbox root (%s)" % en(ex.errno))
