"""`..` walks: ../../.. from the working directory, from an fd of /, from
/proc/self/cwd, to the canary's host path; and openat2 with RESOLVE_BENEATH
is not what stops it (the kernel's own root is)."""
# mode: batch
res = {}
rel = "../" * 40 + CTX["canary_file"].lstrip("/")
for base in (os.getcwd(), "/", "/proc/self/cwd", "/proc/self/root", "/proc/1/cwd"):
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        try:
            f = os.open(rel, os.O_RDONLY, dir_fd=fd)
            os.close(f)
            res[base] = "opened"
        finally:
            os.close(fd)
    except OSError as e:
        res[base] = en(e.errno)
if "opened" in res.values():
    escaped("host canary reached by a `..` walk", res)
v = set(res.values())
blocked("not visible (ENOENT)" if v == {"ENOENT"} else "/".join(sorted(v)), res)
