"""/etc/shadow: the host's (hashes of the host's lines are passed in) versus
the sandbox's own. Reading a shadow file is fine if it is the sandbox's."""
# mode: batch
import hashlib
try:
    data = read_file("/etc/shadow").decode("utf-8", "replace")
except OSError as e:
    blocked(en(e.errno), "open /etc/shadow")
host = set(CTX["host_shadow_lines"])
mine = [hashlib.sha256(l.encode()).hexdigest() for l in data.splitlines() if l.split(":")[1:2] not in (["*"], ["!"], ["!*"], [""], ["x"])]
leaked = [h for h in mine if h in host]
if leaked:
    escaped("read the host's password hashes", "%d lines" % len(leaked))
blocked("contained", "the sandbox's own shadow (%d lines, none of the host's)" % len(data.splitlines()))
