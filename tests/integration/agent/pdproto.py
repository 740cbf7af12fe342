"""A small client for the paddock agent protocol (src/proto/proto.h), for tests."""
import os
import socket
import struct
import subprocess
import tempfile

HDR = struct.Struct(">IHHII")
F_END = 1

T = dict(HELLO=1, REPLY=2, ERROR=3, LIST=10, SPAWN=11, SIGNAL=12, STDIN_CLOSE=13, RESIZE=14,
         ATTACH=15, DETACH=16, PING=17, FILE_STAT=20, FILE_LIST=21, FILE_MKDIR=22,
         FILE_MOVE=23, FILE_REMOVE=24, FILE_READ=25, FILE_WRITE=26, WATCH=27, UNWATCH=28,
         TUNNEL_OPEN=30, TUNNEL_CLOSE=31, SHUTDOWN=32, DATA=40, STDIN=41, OUTPUT=50, GAP=51,
         EXIT=52, WATCH_EVENT=53)
TN = {v: k for k, v in T.items()}
A = dict(VERSION=1, CLIENT=2, AGENT=3, MESSAGE=4, ARG=10, ENV=11, CWD=12, UID=13, GID=14,
         GROUPS=15, PTY_ROWS=16, PTY_COLS=17, STDIN=18, TAG=19, TIMEOUT_MS=20, PID=21,
         SIGNO=22, GROUP=23, STREAM=24, OFFSET=25, FOLLOW=26, EXIT_CODE=27, REASON=28,
         STATE=29, PROC=30, END_OUT=31, END_ERR=32, START_OUT=33, START_ERR=34, PATH=40,
         PATH2=41, MODE=42, PARENTS=43, DEPTH=44, LENGTH=45, SIZE=46, APPEND=47, ENTRY=48,
         NAME=49, FTYPE=50, MTIME_NS=51, LINK=52, RECURSIVE=53, EVENT=54, PORT=55,
         TIME_NS=56, EXEC_ERRNO=57)
AN = {v: k for k, v in A.items()}
U64 = {"TIMEOUT_MS", "OFFSET", "END_OUT", "END_ERR", "START_OUT", "START_ERR", "LENGTH",
       "SIZE", "MTIME_NS", "TIME_NS"}
STR = {"CLIENT", "AGENT", "MESSAGE", "ARG", "ENV", "CWD", "TAG", "REASON", "STATE", "PATH",
       "PATH2", "NAME", "LINK"}
NESTED = {"PROC", "ENTRY"}
STDOUT, STDERR, PTY = 1, 2, 3


def attr(tag, data):
    if isinstance(tag, str):
        tag = A[tag]
    pad = (-len(data)) % 4
    return struct.pack(">HHI", tag, 0, len(data)) + data + b"\0" * pad


def enc(attrs):
    """attrs: list of (name, value); value str/bytes/int."""
    out = b""
    for name, v in attrs:
        if isinstance(v, str):
            v = v.encode()
        elif isinstance(v, bool) or isinstance(v, int):
            v = struct.pack(">Q" if name in U64 else ">I", int(v))
        out += attr(name, v)
    return out


def dec(payload):
    """-> dict name -> list of values (decoded by type)."""
    d = {}
    i = 0
    while i + 8 <= len(payload):
        tag, _, ln = struct.unpack_from(">HHI", payload, i)
        raw = payload[i + 8:i + 8 + ln]
        i += 8 + ln + ((-ln) % 4)
        name = AN.get(tag, str(tag))
        if name in NESTED:
            v = dec(raw)
        elif name in STR:
            v = raw.decode(errors="replace")
        elif len(raw) == 8:
            v = struct.unpack(">Q", raw)[0]
        elif len(raw) == 4:
            v = struct.unpack(">I", raw)[0]
        else:
            v = raw
        d.setdefault(name, []).append(v)
    return d


def one(d, k, default=None):
    return d.get(k, [default])[0]


class Frame:
    def __init__(self, typ, flags, fid, aux, payload):
        self.type, self.flags, self.id, self.aux, self.payload = typ, flags, fid, aux, payload

    @property
    def name(self):
        return TN.get(self.type, str(self.type))

    @property
    def attrs(self):
        return dec(self.payload)

    def __repr__(self):
        return f"<{self.name} id={self.id} aux={self.aux} len={len(self.payload)}>"


class Conn:
    def __init__(self, path, timeout=20):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        self.next_id = 1
        self.pending = []   # frames read but not consumed

    def close(self):
        self.s.close()

    def send_raw(self, typ, fid=0, payload=b"", flags=0, aux=0):
        self.s.sendall(HDR.pack(len(payload), typ, flags, fid, aux) + payload)

    def frame_bytes(self, typ, fid, attrs=(), flags=0, aux=0, raw=None):
        p = raw if raw is not None else enc(attrs)
        return HDR.pack(len(p), T[typ] if isinstance(typ, str) else typ, flags, fid, aux) + p

    def req(self, typ, attrs=(), raw=None, fid=None):
        """Send a request; return its id."""
        if fid is None:
            fid = self.next_id
            self.next_id += 1
        self.s.sendall(self.frame_bytes(typ, fid, attrs, raw=raw))
        return fid

    def _read_frame(self):
        while len(self.buf) < 16 or len(self.buf) < 16 + HDR.unpack_from(self.buf)[0]:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError("agent closed the connection")
            self.buf += chunk
        ln, typ, flags, fid, aux = HDR.unpack_from(self.buf)
        f = Frame(typ, flags, fid, aux, self.buf[16:16 + ln])
        self.buf = self.buf[16 + ln:]
        return f

    def recv(self, pred=lambda f: True):
        for i, f in enumerate(self.pending):
            if pred(f):
                del self.pending[i]
                return f
        while True:
            f = self._read_frame()
            if pred(f):
                return f
            self.pending.append(f)

    def reply(self, fid):
        return self.recv(lambda f: f.id == fid and f.type in (T["REPLY"], T["ERROR"], T["HELLO"]))

    def call(self, typ, attrs=(), raw=None):
        f = self.reply(self.req(typ, attrs, raw))
        return f

    def ok(self, typ, attrs=()):
        f = self.call(typ, attrs)
        assert f.type in (T["REPLY"], T["HELLO"]), f"{typ} failed: {f.aux} {f.attrs}"
        return f.attrs

    def hello(self, version=1):
        return self.call("HELLO", [("VERSION", version), ("CLIENT", "pytest")])

    def spawn(self, argv, env=None, **kw):
        attrs = [("ARG", a) for a in argv]
        env = env if env is not None else ["PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"]
        attrs += [("ENV", e) for e in env]
        attrs += list(kw.items())
        return self.call("SPAWN", attrs)

    def spawn_ok(self, argv, **kw):
        f = self.spawn(argv, **kw)
        assert f.type == T["REPLY"], f.attrs
        return one(f.attrs, "PID")

    def collect(self, pid, streams=(STDOUT, STDERR), offset=0, attach=True):
        """Attach with FOLLOW (unless the SPAWN carried FOLLOW already:
        attach=False); return ({stream: bytes}, exit attrs)."""
        out = {s: b"" for s in streams}
        for s in streams if attach else ():
            self.ok("ATTACH", [("PID", pid), ("STREAM", s), ("OFFSET", offset), ("FOLLOW", 1)])
        while True:
            f = self.recv(lambda f: f.id == pid and f.type in (T["OUTPUT"], T["EXIT"], T["GAP"]))
            if f.type == T["EXIT"]:
                return out, f.attrs
            if f.type == T["OUTPUT"]:
                off = struct.unpack_from(">Q", f.payload)[0]
                assert off == offset + len(out[f.aux]) or offset, (off, len(out[f.aux]))
                out[f.aux] += f.payload[8:]


def agent_path():
    p = os.environ.get("PADDOCK_AGENT")
    if p:
        return p
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return os.path.join(root, "build", "src", "agent", "paddock-agent")


class Agent:
    """paddock-agent as an ordinary process with a listening socket."""

    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="pd-agent-")
        self.path = os.path.join(self.dir, "agent.sock")
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(self.path)
        ls.listen(64)
        fd = ls.fileno()
        self.proc = subprocess.Popen([agent_path(), "--listen-fd", str(fd), *extra],
                                     pass_fds=[fd], stderr=subprocess.PIPE)
        ls.close()

    def conn(self, hello=True):
        c = Conn(self.path)
        if hello:
            f = c.hello()
            assert f.type == T["HELLO"], f.attrs
        return c

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        subprocess.run(["rm", "-rf", self.dir])
