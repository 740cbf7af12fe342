"""Read a canary file the test created in a host temp dir (0755 dir, 0644
file: the host's permissions would let anyone read it), by its host path."""
# mode: batch
import hashlib
path = CTX["canary_file"]
try:
    data = read_file(path)
except OSError as e:
    if e.errno == errno.ENOENT:
        blocked("not visible (ENOENT)", path)
    blocked(en(e.errno), path)
if hashlib.sha256(data).hexdigest() == CTX["canary_sha256"]:
    escaped("read the host canary", path)
blocked("contained", "a file of that name exists inside but is not the host's")
