# Prepended by the runner to every attack before it is run inside the sandbox.
# Not an attack itself (its name starts with "_").  The attack gets one
# argument: a JSON object with the host-side facts (canary paths, pids,
# ports, the tier's name); see runner.py, `host_context`.
import ctypes, errno, json, os, signal, sys, time

CTX = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# x86_64 syscall numbers used by the attacks
NR = dict(read=0, ioctl=16, socket=41, clone=56, kill=62, ptrace=101, syslog=103, setuid=105,
          capget=125, capset=126, personality=135, iopl=172, ioperm=173, chroot=161, acct=163,
          settimeofday=164, mount=165, umount2=166, swapon=167, swapoff=168, reboot=169,
          sethostname=170, init_module=175, delete_module=176, pivot_root=155, keyctl=250,
          add_key=248, request_key=249, unshare=272, kexec_load=246, open_by_handle_at=304,
          name_to_handle_at=303, setns=308, process_vm_readv=310, kcmp=312, finit_module=313,
          seccomp=317, bpf=321, userfaultfd=323, perf_event_open=298, kexec_file_load=320,
          clock_settime=227, pidfd_open=434, pidfd_getfd=438, clone3=435, io_uring_setup=425,
          open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433,
          mount_setattr=442, process_madvise=440, quotactl=179)


def arg(a):
    if isinstance(a, int):
        return ctypes.c_ulong(a & 0xffffffffffffffff)
    if isinstance(a, str):
        return ctypes.c_char_p(a.encode())
    return a


def sc(nr, *args):
    """A raw syscall: (return value, errno)."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[arg(a) for a in args])
    return r, (ctypes.get_errno() if r < 0 else 0)


def en(e):
    if e == errno.EOPNOTSUPP:
        return "EOPNOTSUPP"        # == ENOTSUP on Linux
    return errno.errorcode.get(e, str(e)) if e else "ok"


def emit(outcome, how, detail=""):
    print(json.dumps({"outcome": outcome, "how": how, "detail": str(detail)[:600]}), flush=True)
    sys.exit(0)


def blocked(how, detail=""):
    emit("blocked", how, detail)


def escaped(how, detail=""):
    emit("escaped", how, detail)


def error(how, detail=""):
    emit("error", how, detail)


# What each errno means when the syscall was certainly implemented by this kernel
def label(e, paddock_errnos=(errno.ENOSYS,)):
    """'ENOSYS (paddock seccomp)' for paddock's own errnos, 'EPERM (kernel)' else."""
    name = en(e)
    if e in paddock_errnos:
        return "%s (paddock seccomp)" % name
    if e in (errno.ENOENT, errno.ESRCH):
        return "not visible (%s)" % name
    return "%s (kernel)" % name


def try_syscalls(calls, paddock_errnos=(errno.ENOSYS,)):
    """calls: [(name, nr, args...)]. Escaped if any returned >= 0; else blocked,
    'how' naming paddock's errno when every call got it, else the first other."""
    res = []
    for name, nr, *a in calls:
        r, e = sc(nr, *a)
        res.append((name, r, e))
    detail = ", ".join("%s=%s" % (n, (r if r >= 0 else en(e))) for n, r, e in res)
    ok = [n for n, r, e in res if r >= 0]
    if ok:
        escaped("%s succeeded" % ",".join(ok), detail)
    hows = [label(e, paddock_errnos) for n, r, e in res]
    if all(h == hows[0] for h in hows):
        blocked(hows[0], detail)
    other = [h for h in hows if "paddock" not in h]
    blocked(other[0] if other else hows[0], detail)


def try_open(path, flags=os.O_RDONLY):
    try:
        fd = os.open(path, flags)
        return fd, 0
    except OSError as e:
        return -1, e.errno


def read_file(path, n=1 << 20):
    with open(path, "rb") as f:
        return f.read(n)


def interfaces():
    """Network interface names: netlink (if_nameindex), else /proc/self/net/dev."""
    import socket
    try:
        return sorted(n for _, n in socket.if_nameindex())
    except OSError:
        return sorted(l.split(":")[0].strip() for l in read_file("/proc/self/net/dev").decode().splitlines()[2:])


def drop_to_user():
    """root inside (container tier) -> uid/gid 1000 when it can; returns the uid."""
    if os.getuid() == 0:
        try:
            os.setgroups([])
            os.setresgid(1000, 1000, 1000)
            os.setresuid(1000, 1000, 1000)
        except OSError:
            pass
    return os.getuid()
