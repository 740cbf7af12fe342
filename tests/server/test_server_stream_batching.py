"""`paddock serve`: a busy output stream is read by the agent in coalesced
periods (src/agent/proc.c, "Coalescing") instead of on every write of the
process. These tests hold it to what docs/api.md promises for the output
routes whatever the agent's reading pattern: every byte, at its offset, no
gap while a FOLLOW reader is there (the writer is held back instead), and
the exit after the last byte — with a writer that writes in small pieces
(stdio's 4 KiB) as fast as it can and readers slower than it.

    sudo /usr/bin/python3 -m pytest -q tests/server/test_server_stream_batching.py

Standard library only. Needs root (sandboxes), build/src/paddock and the
agent (PADDOCK_BIN / PADDOCK_AGENT as in tests/pdtest/env.py).
"""
import base64
import hashlib
import json
import os
import socket
import threading

import pytest

from pdtest.server import server_fixture

TIMEOUT = 120
LINES = 2500000         # `seq 1 LINES`: ~18.9 MB, over four times the agent's 4 MiB ring

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

server = server_fixture("--pool", "0", prefix="pd-srv-sb-")


@pytest.fixture(scope="module")
def api(server):
    return server.v1


@pytest.fixture
def sb(api):
    _st, j = api.json("POST", "/sandboxes", {}, expect=201)
    yield j["id"]
    api.json("DELETE", "/sandboxes/%s" % j["id"])


def start_held(api, sb):
    """`seq 1 LINES` held back until go() (one stdin line): readers attach
    first, so the writer never runs without a FOLLOW reader."""
    pid = api.start(sb, {"cmd": ["sh", "-c", "read x; exec seq 1 %d" % LINES], "stdin": True})["pid"]

    def go():
        st, _h, _b = api.request("POST", "/sandboxes/%s/processes/%d/stdin" % (sb, pid), b"go\n",
                                 headers={"Content-Type": "application/octet-stream"})
        assert st == 204, st
    return pid, go


def expected_seq(n):
    return "".join("%d\n" % i for i in range(1, n + 1)).encode()


class SlowChunked:
    """GET path over a raw socket with a small receive buffer, read in small
    pieces: a reader slower than the writer, so the agent's ring fills and
    the writer is held back."""

    def __init__(self, port, key, path, rcvbuf=8192):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(TIMEOUT)
        self.s.connect(("127.0.0.1", port))
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                        "Connection: close\r\n\r\n" % (path, key)).encode())
        self.f = self.s.makefile("rb", buffering=4096)
        self.status = int(self.f.readline().split()[1])
        self.headers = {}
        while True:
            line = self.f.readline().rstrip(b"\r\n")
            if not line:
                break
            k, _, v = line.decode().partition(":")
            self.headers[k.strip().lower()] = v.strip()

    def body(self):
        """Yield the body in pieces of at most 4 KiB (chunked encoding undone)."""
        assert self.headers.get("transfer-encoding") == "chunked", self.headers
        while True:
            n = int(self.f.readline().split(b";")[0], 16)
            if n == 0:
                return
            while n:
                piece = self.f.read(min(n, 4096))
                assert piece, "connection closed inside a chunk"
                n -= len(piece)
                yield piece
            assert self.f.read(2) == b"\r\n"

    def close(self):
        self.f.close()
        self.s.close()


def test_fast_small_writes_slow_raw_reader_every_byte(api, sb):
    """A raw FOLLOW reader slower than the writer gets every byte of a
    stream written in 4 KiB pieces, from offset 0, without a gap."""
    pid, go = start_held(api, sb)
    r = SlowChunked(api.port, api.key, "/api/v1/sandboxes/%s/processes/%d/output?follow=1" % (sb, pid))
    try:
        assert r.status == 200
        assert r.headers.get("x-paddock-offset") == "0" and "x-paddock-gap" not in r.headers, r.headers
        go()
        h = hashlib.sha256()
        got = 0
        for piece in r.body():
            h.update(piece)
            got += len(piece)
    finally:
        r.close()
    want = expected_seq(LINES)
    assert got == len(want)
    assert h.hexdigest() == hashlib.sha256(want).hexdigest()
    st, p = api.json("GET", "/sandboxes/%s/processes/%d" % (sb, pid), expect=200)
    assert p["state"] == "exited" and p["exit_code"] == 0 and p["stdout_bytes"] == len(want), p


def test_fast_small_writes_slow_frames_reader_offsets(api, sb):
    """format=frames read slowly: the offsets of the data frames follow each
    other exactly from 0 (no byte twice, none skipped), no gap frame, and
    the exit frame comes after the last byte."""
    pid, go = start_held(api, sb)
    r = SlowChunked(api.port, api.key,
                    "/api/v1/sandboxes/%s/processes/%d/output?follow=1&format=frames" % (sb, pid))
    nxt, h, frames, exit_frame, rest = 0, hashlib.sha256(), 0, None, b""
    try:
        assert r.status == 200
        go()
        for piece in r.body():
            rest += piece
            *lines, rest = rest.split(b"\n")
            for line in lines:
                j = json.loads(line)
                assert exit_frame is None, "a frame after the exit: %s" % line[:200]
                assert "gap" not in j, j
                if "exit" in j:
                    exit_frame = j["exit"]
                    continue
                assert j["stream"] == "stdout", j
                assert j["offset"] == nxt, (j["offset"], nxt)
                data = base64.b64decode(j["data_b64"])
                assert data
                h.update(data)
                nxt += len(data)
                frames += 1
    finally:
        r.close()
    assert rest == b""
    want = expected_seq(LINES)
    assert nxt == len(want) and h.hexdigest() == hashlib.sha256(want).hexdigest()
    assert exit_frame is not None and exit_frame["exit_code"] == 0, exit_frame
    assert frames > 1


def test_resume_from_an_offset_mid_stream(api, sb):
    """A second FOLLOW reader that starts at an offset the first one has
    passed gets the stream from exactly there, or (docs/api.md: only what is
    still in the ring; the agent may have sent the first reader several MB
    more than it read yet) from where the ring starts, saying so in
    X-Paddock-Gap: either way each byte sits at its offset."""
    pid, go = start_held(api, sb)
    base = "/api/v1/sandboxes/%s/processes/%d/output?follow=1" % (sb, pid)
    first = SlowChunked(api.port, api.key, base)
    want = expected_seq(LINES)
    try:
        assert first.status == 200
        go()
        it = first.body()
        got = b""
        for piece in it:
            got += piece
            if len(got) >= 3 * 1000 * 1000:
                break
        assert got == want[:len(got)]
        off = len(got) - 12345
        second = SlowChunked(api.port, api.key, base + "&from=%d" % off)
        # the first reader goes on in a thread: a FOLLOW reader that stopped
        # would hold the writer back for good
        rest = []
        t = threading.Thread(target=lambda: rest.extend(it), daemon=True)
        t.start()
        try:
            assert second.status == 200
            start = int(second.headers["x-paddock-offset"])
            if start == off:
                assert "x-paddock-gap" not in second.headers, second.headers
            else:
                assert start > off and second.headers.get("x-paddock-gap") == "%d-%d" % (off, start), \
                    second.headers
            h, n = hashlib.sha256(), 0
            for piece in second.body():
                h.update(piece)
                n += len(piece)
            assert n == len(want) - start
            assert h.hexdigest() == hashlib.sha256(want[start:]).hexdigest()
        finally:
            second.close()
            t.join(TIMEOUT)
        assert not t.is_alive()
        assert got + b"".join(rest) == want
    finally:
        first.close()
