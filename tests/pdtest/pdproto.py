"""A small client for the paddock agent protocol (src/proto/proto.h), for tests."""
import os
import re
import socket
import struct
import subprocess
import tempfile

from . import cheader
from .env import PADDOCK_AGENT

# Every number comes from src/proto/proto.h, read when this module is
# imported: a frame type or attribute added there needs no edit here.
# tests/integration/agent/test_proto_header.py checks the reading against
# the C compiler.
PROTO_H = "src/proto/proto.h"
_ENUMS = cheader.enums(PROTO_H)
_DEFS = cheader.defines(PROTO_H)

HDR = struct.Struct(">IHHII")
assert HDR.size == _DEFS["PD_FRAME_HDR_LEN"]
VERSION = _DEFS["PD_PROTO_VERSION"]
FRAME_MAX = _DEFS["PD_FRAME_MAX"]
F_END = cheader.enum_values(PROTO_H, "pd_frame_flags", "PD_F_")["END"]

T = cheader.enum_values(PROTO_H, "pd_frame_type", "PD_T_")
TN = {v: k for k, v in T.items()}
A = cheader.enum_values(PROTO_H, "pd_attr_tag", "PD_A_")
AN = {v: k for k, v in A.items()}


def attr_kind(comment):
    """An attribute's kind, the first word of its comment in proto.h:
    "u32", "u64", "string" or "nested"."""
    words = re.split(r"[\s:,]+", comment.strip(), maxsplit=1)
    return words[0] if words and words[0] in ("u32", "u64", "string", "nested") else None


KIND = {e.name[len("PD_A_"):]: attr_kind(e.comment) for e in _ENUMS["pd_attr_tag"]}
U64 = {n for n, k in KIND.items() if k == "u64"}
STR = {n for n, k in KIND.items() if k == "string"}
NESTED = {n for n, k in KIND.items() if k == "nested"}
_STREAMS = cheader.enum_values(PROTO_H, "pd_stream", "PD_STREAM_")
STDOUT, STDERR, PTY = _STREAMS["STDOUT"], _STREAMS["STDERR"], _STREAMS["PTY"]


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

    def hello(self, version=VERSION):
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
    return PADDOCK_AGENT


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
