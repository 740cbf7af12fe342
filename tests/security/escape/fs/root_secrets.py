"""Host secrets in root's home: list /root, read /root/.ssh/*, .npmrc,
.gitconfig, /home/*/.ssh; escaped when what is seen is the host's (the runner
passes hashes of the host's /root listing and files, never their content)."""
# mode: batch
import hashlib
seen = {}
host_names = set(CTX["host_root_names"])
try:
    names = set(os.listdir("/root"))
except OSError as e:
    names = None
    seen["/root"] = en(e.errno)
if names is not None and host_names and names == host_names:
    escaped("the host's /root is listed", sorted(names)[:10])
hits = []
for p, h in CTX["host_root_files"].items():
    try:
        if hashlib.sha256(read_file(p)).hexdigest() == h:
            hits.append(p)
    except OSError as e:
        seen[p] = en(e.errno)
for d in ["/root/.ssh"] + ["/home/%s/.ssh" % u for u in CTX.get("host_home_names", [])]:
    try:
        seen[d] = os.listdir(d)
    except OSError as e:
        seen[d] = en(e.errno)
if hits:
    escaped("read host files in /root", hits)
errs = set(v for v in seen.values() if isinstance(v, str))
if names is not None:
    blocked("contained", "own /root: %s; %s" % (sorted(names), seen))
blocked("/".join(sorted(errs)) or "contained", seen)
