"""A WebSocket echo service for tests/server/test_server_ports_ws.py, run
inside a sandbox: python3 ws_echo_server.py PORT. Standard library only.

- Handshake (RFC 6455): Upgrade: websocket and a Connection holding
  "upgrade", else 400; no Sec-WebSocket-Key: 400; Sec-WebSocket-Version other
  than 13: 426 with Sec-WebSocket-Version: 13. Path /refuse-chunked: 403 with
  a chunked body. Refusals keep the connection open (HTTP/1.1 keep-alive).
  Path /garbage: a line that is not HTTP; /huge-head: a 101 with 64 KiB of
  headers.
- After its 101 it sends at once one text message: JSON of the request line
  and headers as it saw them.
- Messages are echoed (text as text, binary as binary, fragments joined).
  Text commands: "close-me" (close frame 1000, then the socket), "flood:N"
  (N bytes in binary messages of 1 MiB, then text "flood-done"), "stall"
  (stop reading for good), "stats" (JSON: open connections, flood bytes sent).
"""
import base64
import hashlib
import json
import socketserver
import struct
import sys
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
lock = threading.Lock()
stats = {"active": 0, "flood_sent": 0}


def recv_exact(sock, n):
    parts = []
    while n:
        b = sock.recv(min(n, 1 << 20))
        if not b:
            raise EOFError
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def frame(opcode, payload):
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def send_frame(sock, opcode, payload):
    sock.sendall(frame(opcode, payload))


def recv_frame(sock):
    b0, b1 = recv_exact(sock, 2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", recv_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(sock, 8))[0]
    if not b1 & 0x80:
        raise ValueError("client frame not masked")
    mask = recv_exact(sock, 4)
    data = bytearray(recv_exact(sock, n))
    if n:
        # unmask 8 bytes at a time
        m8 = int.from_bytes(mask * 2, "little")
        full = n - n % 8
        if full:
            words = memoryview(data)[:full].cast("Q")
            for i in range(len(words)):
                words[i] ^= m8
        for i in range(full, n):
            data[i] ^= mask[i % 4]
    return bool(b0 & 0x80), b0 & 0x0F, bytes(data)


class Handler(socketserver.BaseRequestHandler):
    def answer(self, status, headers, body=b"", chunked=False):
        lines = ["HTTP/1.1 %s" % status] + ["%s: %s" % kv for kv in headers]
        if chunked:
            lines.append("Transfer-Encoding: chunked")
            half = len(body) // 2
            data = b""
            for part in (body[:half], body[half:]):
                if part:
                    data += b"%x\r\n%s\r\n" % (len(part), part)
            data += b"0\r\n\r\n"
        else:
            lines.append("Content-Length: %d" % len(body))
            data = body
        self.request.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)

    def handle(self):
        sock = self.request
        while True:         # keep-alive across refused requests
            head = b""
            while b"\r\n\r\n" not in head:
                b = sock.recv(65536)
                if not b:
                    return
                head += b
            text, _, rest = head.partition(b"\r\n\r\n")
            lines = text.decode("latin-1").split("\r\n")
            method, path, version = lines[0].split(" ", 2)
            hdrs = []
            for line in lines[1:]:
                k, _, v = line.partition(":")
                hdrs.append([k, v.strip()])
            low = {k.lower(): v for k, v in hdrs}
            conn_tokens = [t.strip().lower() for t in low.get("connection", "").split(",")]
            if path.startswith("/garbage"):
                sock.sendall(b"SSH-2.0-not-http\r\n\r\n")
                return
            if path.startswith("/huge-head"):
                sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nX-Big: " + b"x" * (64 << 10) + b"\r\n\r\n")
                return
            if path.startswith("/refuse-chunked"):
                self.answer("403 Forbidden", [("Content-Type", "text/plain")], b"refused in chunks", chunked=True)
                continue
            if low.get("upgrade", "").lower() != "websocket" or "upgrade" not in conn_tokens:
                self.answer("400 Bad Request", [("Content-Type", "text/plain")], b"not a websocket request")
                continue
            key = low.get("sec-websocket-key")
            if not key:
                self.answer("400 Bad Request", [("Content-Type", "text/plain")], b"missing Sec-WebSocket-Key")
                continue
            if low.get("sec-websocket-version") != "13":
                self.answer("426 Upgrade Required", [("Sec-WebSocket-Version", "13"), ("Content-Type", "text/plain")],
                            b"unsupported version")
                continue
            accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
            resp = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
                    "Sec-WebSocket-Accept: " + accept, "X-Echo-Path: " + path]
            proto = low.get("sec-websocket-protocol")
            if proto:
                resp.append("Sec-WebSocket-Protocol: " + proto.split(",")[0].strip())
            hello = json.dumps({"method": method, "path": path, "version": version, "headers": hdrs,
                                "early": rest.decode("latin-1")}).encode()
            # the head and the first message in one write: the proxy must
            # pass on bytes that follow the 101 head
            sock.sendall(("\r\n".join(resp) + "\r\n\r\n").encode() + frame(1, hello))
            self.websocket(sock, rest)
            return

    def websocket(self, sock, rest):
        if rest:
            return      # a client may not send frames before the 101
        with lock:
            stats["active"] += 1
        try:
            msg, op = [], 0
            while True:
                try:
                    fin, opcode, data = recv_frame(sock)
                except (EOFError, OSError):
                    return
                if opcode == 8:
                    send_frame(sock, 8, data[:2])
                    return
                if opcode == 9:
                    send_frame(sock, 10, data)
                    continue
                if opcode in (1, 2):
                    op, msg = opcode, [data]
                elif opcode == 0:
                    msg.append(data)
                if not fin:
                    continue
                data = b"".join(msg)
                if op == 1 and data == b"close-me":
                    send_frame(sock, 8, struct.pack("!H", 1000) + b"bye")
                    return
                if op == 1 and data == b"stall":
                    threading.Event().wait()
                if op == 1 and data == b"stats":
                    with lock:
                        send_frame(sock, 1, json.dumps(stats).encode())
                    continue
                if op == 1 and data.startswith(b"flood:"):
                    left = int(data[6:])
                    chunk = b"\x5a" * (1 << 20)
                    while left:
                        n = min(left, len(chunk))
                        send_frame(sock, 2, chunk[:n])
                        left -= n
                        with lock:
                            stats["flood_sent"] += n
                    send_frame(sock, 1, b"flood-done")
                    continue
                send_frame(sock, op, data)
        finally:
            with lock:
                stats["active"] -= 1


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
