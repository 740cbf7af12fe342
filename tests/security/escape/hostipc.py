"""Host-side SysV IPC and POSIX message queue helpers for the tests (ctypes:
Python has no module for either). Used by runner.py (the escape suite's bait
and host checks) and tests/security/test_process_ipc.py. Not an attack: the
runner loads attacks only from the category directories.
"""
import ctypes
import os

libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
libc.mq_open.restype = ctypes.c_int

IPC_CREAT, IPC_EXCL, IPC_NOWAIT, IPC_RMID = 0o1000, 0o2000, 0o4000, 0
O_RDONLY, O_RDWR, O_CREAT, O_EXCL = os.O_RDONLY, os.O_RDWR, os.O_CREAT, os.O_EXCL


def _check(r, what):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))
    return r


def shm_create(key, data, mode=0o666):
    """A segment of len(data) bytes holding data; returns its id."""
    sid = _check(libc.shmget(key, len(data), IPC_CREAT | IPC_EXCL | mode), "shmget")
    p = libc.shmat(sid, None, 0)
    if p in (None, ctypes.c_void_p(-1).value):
        shm_remove(sid)
        _check(-1, "shmat")
    ctypes.memmove(p, data, len(data))
    libc.shmdt(ctypes.c_void_p(p))
    return sid


def shm_read(sid, n):
    p = libc.shmat(sid, None, 0o10000)          # SHM_RDONLY
    if p in (None, ctypes.c_void_p(-1).value):
        _check(-1, "shmat")
    try:
        return ctypes.string_at(p, n)
    finally:
        libc.shmdt(ctypes.c_void_p(p))


class _Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 128)]


def msg_create(key, text, mode=0o666):
    """A queue holding one message (type 1); returns its id."""
    qid = _check(libc.msgget(key, IPC_CREAT | IPC_EXCL | mode), "msgget")
    m = _Msg(1, text)
    _check(libc.msgsnd(qid, ctypes.byref(m), len(text), IPC_NOWAIT), "msgsnd")
    return qid


def sem_create(key, mode=0o666):
    return _check(libc.semget(key, 1, IPC_CREAT | IPC_EXCL | mode), "semget")


def remove(kind, ident):
    """IPC_RMID; a missing object is not an error."""
    fn = {"shm": libc.shmctl, "msg": libc.msgctl}.get(kind)
    if fn:
        fn(ident, IPC_RMID, None)
    else:
        libc.semctl(ident, 0, IPC_RMID)


def objects(kind):
    """Rows of /proc/sysvipc/<kind> (shm, msg, sem) as dicts of ints (key
    signed, as the kernel prints it)."""
    with open("/proc/sysvipc/" + kind) as f:
        lines = f.read().splitlines()
    names = lines[0].split()
    return [dict(zip(names, map(int, l.split()))) for l in lines[1:] if l.strip()]


def find(kind, key=None, uid=None):
    """Objects with this key, or created by / belonging to this uid."""
    return [o for o in objects(kind)
            if (key is not None and o["key"] == key) or (uid is not None and uid in (o["uid"], o["cuid"]))]


def sweep(key=None, uid=None):
    """Remove (and return) every SysV object with this key or uid."""
    found = []
    for kind in ("shm", "msg", "sem"):
        for o in find(kind, key, uid):
            remove(kind, o[{"shm": "shmid", "msg": "msqid", "sem": "semid"}[kind]])
            found.append((kind, o))
    return found


def mq_create(name, text, mode=0o666):
    """A POSIX queue /name holding one message; returns the host's fd."""
    old = os.umask(0)
    try:
        fd = _check(libc.mq_open(name.encode(), O_RDWR | O_CREAT | O_EXCL, mode, None), "mq_open")
    finally:
        os.umask(old)
    _check(libc.mq_send(fd, text, len(text), 0), "mq_send")
    return fd


def mq_messages(fd):
    """Messages queued on a queue the host holds open (mq_curmsgs)."""
    attr = (ctypes.c_long * 8)()
    _check(libc.mq_getattr(fd, attr), "mq_getattr")
    return attr[3]


def mq_exists(name):
    fd = libc.mq_open(name.encode(), O_RDONLY, 0, None)
    if fd >= 0:
        os.close(fd)
        return True
    return False


def mq_unlink(name):
    libc.mq_unlink(name.encode())
