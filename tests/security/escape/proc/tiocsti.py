"""Terminal injection with a real terminal (run with -t under script):
TIOCSTI on stdin, TIOCSTI with bits above 32 set (0x1_00005412), TIOCLINUX;
also on every other /dev/pts/N the sandbox can open."""
# mode: tty
res = {}
c = ctypes.c_char(b"#")
ttys = [(0, "stdin")]
try:
    for n in os.listdir("/dev/pts"):
        if n.isdigit() and os.path.realpath("/proc/self/fd/0") != "/dev/pts/" + n:
            try:
                ttys.append((os.open("/dev/pts/" + n, os.O_RDWR | os.O_NOCTTY), "pts/" + n))
            except OSError as e:
                res["open pts/" + n] = en(e.errno)
except OSError:
    pass
for fd, name in ttys:
    for what, cmd in (("TIOCSTI", 0x5412), ("TIOCSTI|1<<32", 0x100005412), ("TIOCLINUX", 0x541C)):
        r, e = sc(NR["ioctl"], fd, cmd, ctypes.byref(c))
        res["%s %s" % (what, name)] = "ok" if r == 0 else en(e)
res["isatty"] = os.isatty(0)
if not res["isatty"]:
    error("no terminal", res)
if "ok" in res.values():
    escaped("injected terminal input", res)
v = sorted({x for k, x in res.items() if k.startswith("TIOCSTI")})
blocked("EPERM (paddock seccomp)" if v == ["EPERM"] else "/".join(v), res)
