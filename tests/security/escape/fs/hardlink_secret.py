"""Hard-link a host file one cannot read (/etc/shadow, the host canary)
into a writable directory, then read it through the link."""
# mode: batch
home = os.environ.get("HOME", "/tmp")
res = {}
for src in ("/etc/shadow", CTX["canary_file"]):
    dst = os.path.join(home, "pd-link-%d" % len(res))
    try:
        os.link(src, dst)
        try:
            read_file(dst, 10)
            res[src] = "linked+read"
        except OSError as e:
            res[src] = "linked, read " + en(e.errno)
    except OSError as e:
        res[src] = en(e.errno)
if res.get(CTX["canary_file"]) == "linked+read" or (res.get("/etc/shadow") == "linked+read" and CTX["tier"] == "process"):
    escaped("read a host file through a hard link", res)
if "linked+read" in res.values():
    blocked("contained", res)
blocked("/".join(sorted(set(res.values()))), res)
