"""Change a host-root-owned 0644 file in a read-write volume as root inside:
append to it, truncate it, chmod it setuid, chown it, hard-link it, replace
it by a rename, delete it."""
# mode: batch
# host-check: volume-root-files-intact
p = CTX.get("rw_volume_root_file")
if not p:
    blocked("no volumes on this tier")
res = {}


def attempt(name, f):
    try:
        f()
        res[name] = "ok"
    except OSError as e:
        res[name] = en(e.errno)


def append():
    with open(p, "a") as f:
        f.write("appended by the sandbox\n")


attempt("append", append)
attempt("truncate", lambda: os.truncate(p, 0))
attempt("chmod", lambda: os.chmod(p, 0o4777))
attempt("chown", lambda: os.chown(p, 0, 0))
attempt("link", lambda: os.link(p, p + "-" + CTX["marker"]))


def replace():
    tmp = os.path.join(os.path.dirname(p), "new-" + CTX["marker"])
    with open(tmp, "w") as f:
        f.write("replaced by the sandbox\n")
    try:
        os.rename(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


attempt("replace", replace)
attempt("unlink", lambda: os.unlink(p))
if "ok" in res.values():
    escaped("changed a host root file through a volume", res)
blocked("/".join(sorted(set(res.values()))), res)
